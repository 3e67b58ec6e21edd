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

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file is "count": live sessions and their users, by a paced
// parallel Scan that says what it costs first.

var countCommand = &command{
	path:    "count",
	summary: "live sessions and users with sessions, by a paced scan (asks first)",
	help: `Counts the live sessions (session items that have not expired) and the users
that have at least one, by a parallel Scan of the whole table (-segments
parts at once), paced on the read units DynamoDB reports (-max-rcu per
second; 0: no limit). Sessions that RevokeAll or RevokeEveryone ended count
until they expire: telling them apart would take a read of each user. A
two-step login waiting for its second factor (a pending session) is not a
session yet, and does not count.

Cost: before it starts, it says what the scan will read, from
DescribeTable's size of the table (which DynamoDB updates about every six
hours): about one read unit per 8 KB, the scan's reads being eventually
consistent, half the cost of strongly consistent ones. Then it asks, unless
-yes; without -yes and without a terminal on stdin it refuses (exit 4).

Progress: a bar on a terminal, a line every 10 s otherwise, none with -json.
Output: the counts. With -json: {"table", "liveSessions",
"usersWithSessions", "scanned", "readUnits", "elapsedSeconds", "asOf"}.

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
	UsersWithSessions int64     `json:"usersWithSessions"`
	Scanned           int64     `json:"scanned"`
	ReadUnits         float64   `json:"readUnits"`
	ElapsedSeconds    float64   `json:"elapsedSeconds"`
	AsOf              time.Time `json:"asOf"`
}

func runCount(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, err := e.connect(ctx, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	count, size, err := tableSize(ctx, client, o.table)
	if err != nil {
		return e.fail(c, o, err)
	}
	if !o.yes {
		fmt.Fprint(e.stderr, costEstimate(o, count, size))
		yes := func(answer string) bool { a := strings.ToLower(answer); return a == "y" || a == "yes" }
		if code, ok := e.confirm(c, "Go on? [y/N] ", yes); !ok {
			return code
		}
	}
	began := e.now()
	l := &o.items
	// The projection carries what the decoder needs of a session item.
	names := map[string]string{"#pk": l.PartitionKey, "#ttl": l.TTLAttribute, "#kind": item.AttrKind}
	projection := []string{"#pk", "#ttl"}
	if !l.HashOnly {
		names["#sk"] = l.SortKey
		projection = append(projection, "#sk")
	}
	for i, a := range item.Projection() {
		ref := fmt.Sprintf("#p%d", i)
		names[ref] = a
		projection = append(projection, ref)
	}
	var (
		live  atomic.Int64
		mu    sync.Mutex
		users = map[string]struct{}{}
	)
	scs := item.SCSLayout{Layout: *l, Prefix: item.DefaultSCSPrefix} // unused: sessions only
	sc := &scanner{
		client: client,
		in: dynamodb.ScanInput{
			TableName:                &o.table,
			FilterExpression:         aws.String("#kind = :session AND #ttl > :now"),
			ProjectionExpression:     aws.String(strings.Join(projection, ", ")),
			ExpressionAttributeNames: names,
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":session": item.Str(item.KindSession), ":now": item.Num(began.Unix()),
			},
			Limit: limitOrNil(pageLimit(o.maxRCU, o.segments, avg(size, count))),
		},
		segments:  o.segments,
		reads:     newPacer(o.maxRCU, e),
		itemBytes: avg(size, count),
	}
	prog := e.newProgress(o, "count", count, func() (int64, string) {
		return sc.scanned.Load(), fmt.Sprintf("%s live sessions", thousands(live.Load()))
	})
	sc.page = func(ctx context.Context, out *dynamodb.ScanOutput) error {
		for _, av := range out.Items {
			it, ok := recognise(l, &scs, av)
			if !ok || it.kind != item.KindSession || it.expires <= began.Unix() {
				continue
			}
			s, _ := l.Decode(av, item.KindSession)
			if s.Pending {
				// A two-step login waiting for its second factor: no one
				// is signed in by it, and RequireSession refuses it.
				continue
			}
			live.Add(1)
			mu.Lock()
			users[s.UserPK+"\x00"+s.UserSK] = struct{}{}
			mu.Unlock()
		}
		prog.update()
		return nil
	}
	err = sc.run(ctx)
	prog.done()
	if err != nil {
		return e.fail(c, o, err)
	}
	report := countReport{
		Table: o.table, LiveSessions: live.Load(), UsersWithSessions: int64(len(users)),
		Scanned: sc.scanned.Load(), ReadUnits: sc.readUnits(),
		ElapsedSeconds: seconds(e.now().Sub(began)), AsOf: began.UTC().Truncate(time.Second),
	}
	if o.json {
		writeJSON(e.stdout, report)
		return exitOK
	}
	writeFields(e.stdout,
		"live sessions", thousands(report.LiveSessions),
		"users with sessions", thousands(report.UsersWithSessions),
		"items scanned", thousands(report.Scanned),
		"read units", units(report.ReadUnits),
		"elapsed", (time.Duration(report.ElapsedSeconds*1000) * time.Millisecond).String(),
		"as of", showTime(report.AsOf),
	)
	return exitOK
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
