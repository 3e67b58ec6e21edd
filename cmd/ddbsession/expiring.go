package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file is "sessions expiring": the sessions about to expire, from
// the expiry index.

var sessionsExpiringCommand = &command{
	path:    "sessions expiring",
	summary: "the sessions that expire in a window, soonest first (expiry index)",
	help: `Lists the sessions whose expiry falls within -within from now, or between
-from and -to (both included; at most 24 hours), soonest first: for notices
before sessions expire, or to warm a cache. It needs the expiry index that
the table's layout records (the apps' Layout.ExpiryIndex), and queries each
hour of the window's shards of it (Layout.ExpiryIndexShards) in parallel: 8
Queries an hour by default, 200 for 24 hours.

The index is eventually consistent, and holds the sessions alone: a session
refreshed a moment ago may show at its old expiry, and one that RevokeAll or
RevokeEveryone ended is listed until it expires. A two-step login waiting
for its second factor is not a session yet, and is not listed.

Output: a table of EXPIRES (UTC), ID, USER, DEVICE (browser and system) and LAST
REFRESHED. With -json: {"table", "from", "to", "sessions": [{"id", "user":
{"pk", "sk"}, "userAgent", "createdAt", "refreshedAt", "expiresAt",
"methods", "deviceBound"}]}, times in RFC 3339.

Example:
  ddbsession sessions expiring -table app -within 15m
  ddbsession sessions expiring -table app -from 2026-12-01T12:00:00Z -to 2026-12-01T18:00:00Z -json`,
	flags: func(fs *flag.FlagSet, o *options) {
		fs.DurationVar(&o.within, "within", 0, "the sessions that expire within this `duration` of -from (at most 24h)")
		fs.Var(&o.from, "from", "the window's `start`, an RFC 3339 time such as 2026-12-01T12:00:00Z; default now")
		fs.Var(&o.to, "to", "the window's `end`, an RFC 3339 time, instead of -within")
	},
	run: runSessionsExpiring,
}

// maxExpiringWindow bounds a window's hours, and so the index partitions
// that one listing reads.
const maxExpiringWindow = 24 * time.Hour

// maxParallelQueries bounds how many index partitions are read at once.
const maxParallelQueries = 16

// timeFlag is a flag of an RFC 3339 time.
type timeFlag struct {
	t   time.Time
	set bool
}

func (f *timeFlag) String() string {
	if !f.set {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return errors.New("not an RFC 3339 time, such as 2026-12-01T12:00:00Z")
	}
	f.t, f.set = t, true
	return nil
}

// window is the window that the flags name, at now.
func (o *options) window(now time.Time) (from, to time.Time, err error) {
	from = now
	if o.from.set {
		from = o.from.t
	}
	switch {
	case o.to.set && o.within != 0:
		return from, to, errors.New("-within and -to are both set: give one")
	case o.to.set:
		to = o.to.t
	case o.within > 0:
		to = from.Add(o.within)
	case o.within < 0:
		return from, to, fmt.Errorf("-within %v: must be positive", o.within)
	default:
		return from, to, errors.New("give -within DURATION (such as -within 15m), or -to (and -from)")
	}
	if to.Before(from) || to.Sub(from) > maxExpiringWindow {
		return from, to, fmt.Errorf("window %s to %s: must be ordered and at most %v", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), maxExpiringWindow)
	}
	return from, to, nil
}

// expiringJSON is the JSON of sessions expiring.
type expiringJSON struct {
	Table    string                `json:"table"`
	From     time.Time             `json:"from"`
	To       time.Time             `json:"to"`
	Sessions []expiringSessionJSON `json:"sessions"`
}

// expiringSessionJSON is a session as sessions list has it, with its
// user.
type expiringSessionJSON struct {
	User userJSON `json:"user"`
	sessionJSON
}

func runSessionsExpiring(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	from, to, err := o.window(e.now())
	if err != nil {
		return e.usageError(c, err)
	}
	client, _, code := e.open(ctx, c, o)
	if client == nil {
		return code
	}
	if o.items.ExpiryIndex == "" {
		// The table does not fit the command: exit 5, as for any table
		// that does not fit, not a usage error that no flag can fix.
		fmt.Fprintf(e.stderr, "ddbsession %s: it reads the expiry index, and table %q records a layout without one (the apps' Config.Layout.ExpiryIndex): "+
			"'ddbsession table check -table %s -expiry-index NAME' says what adding one takes\n", c.path, o.table, shellQuote(o.table))
		return exitSchema
	}
	found, err := queryExpiring(ctx, client, o, from, to)
	if isValidation(err) || indexMissing(ctx, client, o.table, err) {
		fmt.Fprintf(e.stderr, "ddbsession %s: table %q has no expiry index %q that the layout can read: 'ddbsession table check' with the same flags says what to do (%v)\n",
			c.path, o.table, o.items.ExpiryIndex, err)
		return exitSchema
	}
	if err != nil {
		return e.fail(c, o, err)
	}
	out := expiringJSON{Table: o.table, From: from.UTC(), To: to.UTC(), Sessions: []expiringSessionJSON{}}
	for _, s := range found {
		out.Sessions = append(out.Sessions, expiringSessionJSON{User: userJSON{PK: s.UserPK, SK: s.UserSK}, sessionJSON: sessionJSONOf(s)})
	}
	if o.json {
		writeJSON(e.stdout, out)
		return exitOK
	}
	if len(found) == 0 {
		fmt.Fprintf(e.stdout, "no session expires between %s and %s\n", showTime(from), showTime(to))
		return exitOK
	}
	terminal := e.isTerminal(e.stdout)
	var rows [][]string
	for _, s := range out.Sessions {
		device := deviceName(s.UserAgent)
		if terminal {
			device = truncate(device, deviceWidth)
		}
		user := userString(ddbsession.UserKey{PK: s.User.PK, SK: s.User.SK})
		rows = append(rows, []string{showTime(s.ExpiresAt), s.ID, user, device, showTime(s.RefreshedAt)})
	}
	writeTable(e.stdout, []string{"EXPIRES", "ID", "USER", "DEVICE", "LAST REFRESHED"}, rows)
	return exitOK
}

// queryExpiring reads the sessions whose expiry is in [from, to] from the
// expiry index: each hour's shards, in parallel. They come soonest first,
// each once.
func queryExpiring(ctx context.Context, client Client, o *options, from, to time.Time) ([]item.Session, error) {
	l := &o.items
	// Expiries are whole seconds: the first one in the window is from
	// rounded up, or a session that expired a fraction before from, and is
	// already rejected, would be listed.
	first := from.Unix()
	if from.After(time.Unix(first, 0)) {
		first++
	}
	var buckets []string
	for hour := from.UTC().Truncate(time.Hour); !hour.After(to); hour = hour.Add(time.Hour) {
		for shard := range l.ExpiryIndexShards {
			buckets = append(buckets, item.Bucket(hour, shard))
		}
	}
	var (
		mu    sync.Mutex
		byID  = map[string]item.Session{}
		errs  []error
		wg    sync.WaitGroup
		limit = make(chan struct{}, maxParallelQueries)
	)
	for _, bucket := range buckets {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			found, err := queryBucket(ctx, client, o, bucket, first, to.Unix())
			mu.Lock()
			defer mu.Unlock()
			for _, s := range found {
				// A session refreshed while the queries ran may be read in
				// its old bucket and in its new one: the later refresh is
				// the truer.
				if prev, ok := byID[s.ID]; !ok || s.RefreshedAt.After(prev.RefreshedAt) {
					byID[s.ID] = s
				}
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		// One is enough: the others are most likely the same answer to
		// the same query of another shard.
		return nil, errs[0]
	}
	sessions := slices.Collect(maps.Values(byID))
	slices.SortFunc(sessions, func(a, b item.Session) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	return sessions, nil
}

// queryBucket reads one partition of the expiry index, every page: the
// sessions whose expiry in epoch seconds is in [from, to], decoded as
// session items (the index projects what the decoder needs). Items it
// cannot decode, and pending logins, are left out.
func queryBucket(ctx context.Context, client Client, o *options, bucket string, from, to int64) ([]item.Session, error) {
	l := &o.items
	pages := dynamodb.NewQueryPaginator(client, &dynamodb.QueryInput{
		TableName:                &o.table,
		IndexName:                &l.ExpiryIndex,
		KeyConditionExpression:   aws.String("#bucket = :bucket AND #ttl BETWEEN :from AND :to"),
		ExpressionAttributeNames: map[string]string{"#bucket": item.AttrExpiryBucket, "#ttl": l.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":bucket": item.Str(bucket), ":from": item.Num(from), ":to": item.Num(to),
		},
	})
	var found []item.Session
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return found, fmt.Errorf("query the expiry index %q of table %q: %w", l.ExpiryIndex, o.table, err)
		}
		for _, av := range page.Items {
			// An expiry index made before v0.2.0 projects no userGen and
			// credGen: this lists expiries, and judges no session, so it
			// reads the stamp's absence as zeros.
			for _, attr := range []string{item.AttrUserGen, item.AttrCredGen} {
				if _, ok := av[attr]; !ok {
					av[attr] = item.Num(0)
				}
			}
			if s, err := l.Decode(av, item.KindSession); err == nil && !s.Pending {
				found = append(found, s)
			}
		}
	}
	return found, nil
}

// indexMissing reports whether err, a ResourceNotFoundException, is about
// the index rather than the table: a Query of an index the table lacks may
// get either that or a ValidationException (API_Query's errors: "a
// nonexistent table or index"). The table is there if DescribeTable finds it.
func indexMissing(ctx context.Context, client Client, table string, err error) bool {
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		return false
	}
	_, err = client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	return err == nil
}

// isValidation reports whether err is DynamoDB's ValidationException, its
// answer to a Query of an index the table lacks.
func isValidation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}
