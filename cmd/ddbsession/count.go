package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file is "count": live sessions and their users, by a paced
// parallel Scan that says what it costs first.

var countCommand = &command{
	path:    "count",
	summary: "live sessions and users with sessions, by a paced scan (asks first)",
	help: `Counts the live sessions (session items that have not expired, and that no
revocation ended) and the users that have at least one, by a parallel Scan
of the whole table (-segments parts at once), paced on the read units
DynamoDB reports (-max-rcu per second; 0: no limit). Each session is judged
by the library's own rule, in the layout the table records: the sessions
that a RevokeAll, a RevokeEveryone, a user item made anew, a changed
credential version or (MREC) an end record ended are counted apart, as
revoked: they stay until they expire. A two-step login waiting for its
second factor (a pending session) is not a session yet, and does not count.

The same scan reads what decides it: the user items' sessions and
credential versions, in MREC the users' revocation items and end records,
and the global revocation item; nothing is read twice. A session whose user
item the scan does not find (none, or one with neither version) counts as
live: the scan cannot tell it from a user kept elsewhere (Config.LoadUser),
whom the app's loader judges. In MREC, so does a session whose login read
a RevokeAll still on its way to this Region. What the scan found is kept in
memory until it ends: a few hundred bytes a user (and, in MREC, a session).

Cost: before it starts, it says what the scan will read, from
DescribeTable's size of the table (which DynamoDB updates about every six
hours): about one read unit per 8 KB, the scan's reads being eventually
consistent, half the cost of strongly consistent ones. Then it asks, unless
-yes; without -yes and without a terminal on stdin it refuses (exit 4).

Progress: a bar on a terminal, a line every 10 s otherwise, none with -json.
Output: the counts. With -json: {"table", "liveSessions",
"revokedSessions", "usersWithSessions", "scanned", "readUnits",
"elapsedSeconds", "asOf"}.

Example:
  ddbsession count -table app -max-rcu 200 -segments 8
  ddbsession count -table app -yes -json`,
	flags: func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.maxRCU, "max-rcu", 400, "read `units` per second for the scan; 0: no limit")
		fs.IntVar(&o.segments, "segments", 4, "`parts` of the table to scan at once")
		fs.BoolVar(&o.yes, "yes", false, "do not ask: start the scan at once")
	},
	run: runCount,
}

// countReport is count's output.
type countReport struct {
	Table             string    `json:"table"`
	LiveSessions      int64     `json:"liveSessions"`
	RevokedSessions   int64     `json:"revokedSessions"`
	UsersWithSessions int64     `json:"usersWithSessions"`
	Scanned           int64     `json:"scanned"`
	ReadUnits         float64   `json:"readUnits"`
	ElapsedSeconds    float64   `json:"elapsedSeconds"`
	AsOf              time.Time `json:"asOf"`
}

func runCount(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, desc, code := e.open(ctx, c, o)
	if client == nil {
		return code
	}
	count, size := tableSize(desc)
	if !o.yes {
		fmt.Fprint(e.stderr, costEstimate(o, count, size))
		yes := func(answer string) bool { a := strings.ToLower(answer); return a == "y" || a == "yes" }
		if code, ok := e.confirm(c, "Go on? [y/N] ", yes); !ok {
			return code
		}
	}
	began := e.now()
	cs := newCensus(&o.items, began)
	in := countScan(o, began)
	in.Limit = limitOrNil(pageLimit(o.maxRCU, o.segments, avg(size, count)))
	sc := &scanner{
		client:    client,
		in:        in,
		segments:  o.segments,
		reads:     newPacer(o.maxRCU, e),
		itemBytes: avg(size, count),
	}
	prog := e.newProgress(o, "count", count, func() (int64, string) {
		return sc.scanned.Load(), fmt.Sprintf("%s unexpired sessions", thousands(cs.sessions.Load()))
	})
	sc.page = func(ctx context.Context, out *dynamodb.ScanOutput) error {
		for _, av := range out.Items {
			cs.add(av)
		}
		prog.update()
		return nil
	}
	err := sc.run(ctx)
	prog.done()
	if err != nil {
		return e.fail(c, o, err)
	}
	live, revoked, users, unreadable := cs.reckon()
	if cs.strays > 0 {
		fmt.Fprintf(e.stderr, "warning: table %q holds %s users' revocation items, which only an app with Config.Layout.MREC writes,\n"+
			"and its layout record says it is not MREC: if its apps set MREC, the record is wrong, and sessions\n"+
			"count as revoked that are not (docs/item-format.md#the-layout-record)\n", o.table, thousands(cs.strays))
	}
	if unreadable > 0 {
		fmt.Fprintf(e.stderr, "warning: table %q holds %s user items whose versions the library cannot read (not Numbers):\n"+
			"their sessions count as revoked, since every request of theirs fails\n", o.table, thousands(unreadable))
	}
	report := countReport{
		Table: o.table, LiveSessions: live, RevokedSessions: revoked, UsersWithSessions: users,
		Scanned: sc.scanned.Load(), ReadUnits: sc.readUnits(),
		ElapsedSeconds: seconds(e.now().Sub(began)), AsOf: began.UTC().Truncate(time.Second),
	}
	if o.json {
		writeJSON(e.stdout, report)
		return exitOK
	}
	writeFields(e.stdout,
		"live sessions", thousands(report.LiveSessions),
		"revoked sessions", thousands(report.RevokedSessions)+" (a revocation ended them; they stay until they expire)",
		"users with sessions", thousands(report.UsersWithSessions),
		"items scanned", thousands(report.Scanned),
		"read units", units(report.ReadUnits),
		"elapsed", (time.Duration(report.ElapsedSeconds*1000) * time.Millisecond).String(),
		"as of", showTime(report.AsOf),
	)
	return exitOK
}

// countScan is the Scan of count: the unexpired session items, and the
// items that say whether a revocation ended them. The filter spares their
// transfer alone: a Scan is billed for what it reads, filtered or not.
func countScan(o *options, now time.Time) dynamodb.ScanInput {
	l := &o.items
	names := map[string]string{
		"#pk": l.PartitionKey, "#ttl": l.TTLAttribute, "#kind": item.AttrKind,
		"#version": l.VersionAttribute, "#credential": l.CredentialAttribute,
	}
	values := map[string]types.AttributeValue{
		":session": item.Str(item.KindSession), ":now": item.Num(now.Unix()), ":global": item.Str(item.KindGlobal),
		":revocation": item.Str(item.KindRevocation),
	}
	// User items are the items with a sessions or a credential version:
	// the scan cannot tell the app's other items from them, and files
	// them by key, for the sessions that name them. Revocation items in
	// one Region too: only MREC writes them, so that one met there says
	// the record is not the apps' layout.
	filter := "(#kind = :session AND #ttl > :now) OR #kind = :global OR #kind = :revocation" +
		" OR attribute_exists(#version) OR attribute_exists(#credential)"
	if l.MREC {
		filter += " OR #kind = :ended"
		values[":ended"] = item.Str(item.KindEnded)
	}
	// The projection carries what the decoder needs of a session item,
	// and what the stamp's and the global generation's decoders need.
	projection := []string{"#pk", "#ttl", "#version", "#credential"}
	if !l.HashOnly {
		names["#sk"] = l.SortKey
		projection = append(projection, "#sk")
	}
	for i, a := range item.Projection() {
		ref := fmt.Sprintf("#p%d", i)
		names[ref] = a
		projection = append(projection, ref)
	}
	return dynamodb.ScanInput{
		TableName:                 &o.table,
		FilterExpression:          &filter,
		ProjectionExpression:      aws.String(strings.Join(projection, ", ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
}

// census is what count's scan finds: the unexpired sessions, grouped by
// what decides whether they stand, and what does decide it, for
// decide.Judge, the library's one rule, to judge each group once the scan
// has ended: the scan meets a session and its user's items in no set
// order.
type census struct {
	l   *item.Layout
	now int64 // epoch seconds

	sessions atomic.Int64 // unexpired sessions met so far, for the progress

	mu     sync.Mutex
	groups map[sessionGroup]int64
	// users are the user items and (MREC) revocation items met, by key
	// (itemKey), each with only what item.Layout.UserStamp reads of it.
	users  map[string]map[string]types.AttributeValue
	ended  map[string]bool // sessions with an end record (MREC), by partition key
	global int64           // the global revocation generation
	strays int64           // revocation items met without MREC
}

// sessionGroup is what decides whether a session stands, but for what
// its user's items and the global item say: its user, the stamp it
// copied at its login, and in MREC the session itself, whose end record
// ends it.
type sessionGroup struct {
	userPK, userSK string
	stamp          item.Stamp
	legacy         bool
	sessionPK      string // MREC only
}

func newCensus(l *item.Layout, now time.Time) *census {
	return &census{l: l, now: now.Unix(), groups: map[sessionGroup]int64{}, users: map[string]map[string]types.AttributeValue{}, ended: map[string]bool{}}
}

// add takes one item of the scan.
func (cs *census) add(av map[string]types.AttributeValue) {
	l := cs.l
	pk, _ := av[l.PartitionKey].(*types.AttributeValueMemberS)
	if pk == nil {
		return
	}
	kind, _ := av[item.AttrKind].(*types.AttributeValueMemberS)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case kind != nil && kind.Value == item.KindSession:
		// A pending session is a two-step login waiting for its second
		// factor: no one is signed in by it, and RequireSession refuses it.
		s, err := l.Decode(av, item.KindSession)
		if err != nil || s.Pending || s.ExpiresAt.Unix() <= cs.now ||
			!strings.HasPrefix(pk.Value, l.SessionPrefix) || !sameKey(av, l.SessionKey(pk.Value)) {
			return
		}
		g := sessionGroup{userPK: s.UserPK, userSK: s.UserSK, stamp: s.Stamp, legacy: s.Legacy}
		if l.MREC {
			g.sessionPK = s.SessionPK
		}
		cs.groups[g]++
		cs.sessions.Add(1)
	case kind != nil && kind.Value == item.KindGlobal:
		if gen, err := item.DecodeGlobal(av); err == nil && sameKey(av, l.GlobalKey()) {
			cs.global = max(cs.global, gen)
		}
	case kind != nil && kind.Value == item.KindRevocation:
		if !l.MREC {
			cs.strays++
		} else {
			cs.users[itemKey(l, av)] = only(av, item.AttrKind, item.AttrVersion, item.AttrGen)
		}
	case l.MREC && kind != nil && kind.Value == item.KindEnded:
		session := sessionPKOf(l, pk.Value)
		if ended, err := item.DecodeEnd(av); err == nil && ended && session != "" && sameKey(av, l.EndKey(session)) {
			cs.ended[session] = true
		}
	default:
		// A user item, or an item of the app's that has the attribute of
		// one: only those a session names are read.
		cs.users[itemKey(l, av)] = only(av, l.VersionAttribute, l.CredentialAttribute)
	}
}

// only is av's attributes names alone: what is kept of it until the scan
// ends.
func only(av map[string]types.AttributeValue, names ...string) map[string]types.AttributeValue {
	kept := make(map[string]types.AttributeValue, len(names))
	for _, n := range names {
		if v, ok := av[n]; ok {
			kept[n] = v
		}
	}
	return kept
}

// reckon counts the live sessions, those a revocation ended, and the
// users with a live session, once the scan has ended; and the users whose
// items the library cannot read, whose sessions it refuses.
func (cs *census) reckon() (live, revoked, users, unreadable int64) {
	l := cs.l
	type userFacts struct {
		found bool
		stamp item.Stamp
		err   error
	}
	known := map[string]userFacts{}
	withLive := map[string]bool{}
	for g, n := range cs.groups {
		key := itemKey(l, l.Key(g.userPK, g.userSK))
		u, ok := known[key]
		if !ok {
			user := cs.users[key]
			var revocation map[string]types.AttributeValue
			if l.MREC {
				revocation = cs.users[itemKey(l, l.RevocationKey(g.userPK, g.userSK))]
			}
			u.found = user != nil
			u.stamp, u.err = l.UserStamp(user, revocation)
			known[key] = u
		}
		verdict := decide.Revoked // the library fails on a user it cannot read: no request stands
		if u.err == nil {
			verdict = decide.Judge(item.Session{Stamp: g.stamp, Legacy: g.legacy}, cs.ended[g.sessionPK], u.found, u.stamp, cs.global, l.MREC)
		}
		// A user not in the table may be the app's loader's (users kept
		// elsewhere, Config.LoadUser), which the command cannot ask: its
		// sessions count as live. In MREC, a login that read a RevokeAll
		// still on its way here lives once it has come.
		switch verdict {
		case decide.Stands, decide.UserMissing, decide.NotHereYet:
			live += n
			withLive[key] = true
		default:
			revoked += n
		}
	}
	for _, u := range known {
		if u.err != nil {
			unreadable++
		}
	}
	return live, revoked, int64(len(withLive)), unreadable
}

// costEstimate says what a scan of the table costs, from DescribeTable's
// figures: count items of size bytes.
func costEstimate(o *options, count, size int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "count scans all of table %q: ", o.table)
	if size == 0 {
		b.WriteString("DescribeTable calls it empty (its figures are updated about every six hours),\n" +
			"so the cost is not known: at least half a read unit per call, one per 8 KB read.\n")
		return b.String()
	}
	strong := math.Ceil(float64(size) / 4096)
	eventual := strong / 2
	fmt.Fprintf(&b, "about %s items, %s (DescribeTable's figures, updated about every six hours).\n",
		thousands(count), bytesString(size))
	fmt.Fprintf(&b, "Its reads are eventually consistent: about %s read units, half the %s of strongly consistent reads",
		thousands(int64(math.Ceil(eventual))), thousands(int64(strong)))
	if o.maxRCU > 0 {
		d := time.Duration(eventual / o.maxRCU * float64(time.Second)).Round(time.Second)
		fmt.Fprintf(&b, ";\nat -max-rcu %s, about %v", units(o.maxRCU), d)
	}
	b.WriteString(".\n")
	return b.String()
}

// bytesString shows a size in bytes.
func bytesString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
