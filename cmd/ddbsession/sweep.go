package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file is "sweep": TTL's work, for a table whose TTL is off or
// lagging, paced.

var sweepCommand = &command{
	path:    "sweep",
	summary: "delete the library's expired items (TTL's work), paced",
	help: `Deletes the expired items of the library's own kinds, as TTL would, once
their TTL attribute is -grace in the past: session items of every format
the library reads (two-step logins waiting for their second factor
included), per-user index items, end records (MREC), the records of a
two-step login's tries, a session limit's voids, the users' security
history (events, and each hour's failed sign-ins) and remembered devices,
and scsstore's scs sessions and tombstones. It works in the layout the
table records. For a table whose TTL is off or lagging (TTL deletes up to
48 hours late), and for global tables in multi-Region strong consistency
(MRSC), which have no TTL at all.

It scans the table, reads each item with the library's own format, and
deletes an expired one with a DeleteItem whose condition says it is still
expired and of its kind, so that a session refreshed after the scan read it
is kept (counted as "kept"). It never deletes user items, a user's
revocation or slots item, the global revocation item, the table's layout
record, or anything else it does not recognise as one of the kinds above
under that kind's key (items of a format version it does not know
included).

Pacing: deletes are paced on the write units DynamoDB reports for each
(-max-wcu per second), the scan on the read units it reports for each page
(-max-rcu); 0 lifts a limit. -segments N scans N parts of the table at once,
each deleting its own items one at a time.

Cost: the scan reads the whole table, eventually consistently: about one
read unit per 8 KB. Each delete is a write unit per KB of the item (a
session item is one); one whose condition fails is billed too. The cost is
the same at any pace; the pace keeps room for the app's own traffic.

Progress: a bar on a terminal, a line every 10 s otherwise, none with -json.
Output: a summary. With -json: {"table", "dryRun", "expiredBefore",
"scanned", "expired", "deleted", "kept", "deletedByKind": {"session",
"session-index", "session-ended", "session-try", "session-void",
"session-history", "session-device", "scs-session", "scs-destroyed"},
"readUnits", "writeUnits", "elapsedSeconds"}.

Example:
  ddbsession sweep -table app -max-wcu 50
  ddbsession sweep -table app -dry-run -json`,
	flags: func(fs *flag.FlagSet, o *options) {
		fs.Float64Var(&o.maxWCU, "max-wcu", 100, "write `units` per second for the deletes; 0: no limit")
		fs.Float64Var(&o.maxRCU, "max-rcu", 400, "read `units` per second for the scan; 0: no limit")
		fs.IntVar(&o.segments, "segments", 1, "`parts` of the table to scan, and delete from, at once")
		fs.DurationVar(&o.grace, "grace", 5*time.Minute, "delete items expired at least this `duration` ago, a margin for clocks and replication")
		fs.BoolVar(&o.dryRun, "dry-run", false, "count what it would delete, and delete nothing")
		fs.StringVar(&o.scsPrefix, "scs-prefix", item.DefaultSCSPrefix, "scsstore's Config.Prefix, for its `prefix` of scs items")
	},
	run: runSweep,
}

// Kinds that the sweep deletes, by the kind attribute's value.
var sweptKinds = []string{item.KindSession, item.KindIndex, item.KindEnded, item.KindTry, item.KindVoid, item.KindHistory, item.KindDevice, item.KindSCS, item.KindSCSDestroyed}

// sweepReport is the sweep's summary.
type sweepReport struct {
	Table          string           `json:"table"`
	DryRun         bool             `json:"dryRun"`
	ExpiredBefore  time.Time        `json:"expiredBefore"`
	Scanned        int64            `json:"scanned"`
	Expired        int64            `json:"expired"`
	Deleted        int64            `json:"deleted"`
	Kept           int64            `json:"kept"`
	DeletedByKind  map[string]int64 `json:"deletedByKind"`
	ReadUnits      float64          `json:"readUnits"`
	WriteUnits     float64          `json:"writeUnits"`
	ElapsedSeconds float64          `json:"elapsedSeconds"`
}

// sweeper is one sweep's state.
type sweeper struct {
	e        *env
	o        *options
	client   Client
	scs      item.SCSLayout
	cutoff   int64 // epoch seconds: items expired at or before it go
	writes   *pacer
	progress *progress

	expired, deleted, kept atomic.Int64
	writeMilli             atomic.Int64
	mu                     sync.Mutex
	byKind                 map[string]int64
}

func runSweep(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, desc, code := e.open(ctx, c, o)
	if client == nil {
		return code
	}
	count, size := tableSize(desc)
	began := e.now()
	sw := &sweeper{
		e: e, o: o, client: client,
		scs:    item.SCSLayout{Layout: o.items, Prefix: o.scsPrefix},
		cutoff: began.Add(-o.grace).Unix(),
		writes: newPacer(o.maxWCU, e),
		byKind: map[string]int64{},
	}
	for _, k := range sweptKinds {
		sw.byKind[k] = 0
	}
	kinds := make([]string, len(sweptKinds))
	values := map[string]types.AttributeValue{":cutoff": item.Num(sw.cutoff)}
	for i, k := range sweptKinds {
		kinds[i] = fmt.Sprintf(":k%d", i)
		values[kinds[i]] = item.Str(k)
	}
	sc := &scanner{
		client: client,
		in: dynamodb.ScanInput{
			TableName: &o.table,
			// The filter spares the transfer of what cannot be swept; the
			// decoder decides, and the delete's condition again.
			FilterExpression:          aws.String("#ttl <= :cutoff AND #kind IN (" + strings.Join(kinds, ", ") + ")"),
			ExpressionAttributeNames:  map[string]string{"#ttl": o.items.TTLAttribute, "#kind": item.AttrKind},
			ExpressionAttributeValues: values,
			Limit:                     limitOrNil(pageLimit(o.maxRCU, o.segments, avg(size, count))),
		},
		segments:  o.segments,
		reads:     newPacer(o.maxRCU, e),
		itemBytes: avg(size, count),
	}
	sc.page = func(ctx context.Context, out *dynamodb.ScanOutput) error {
		return sw.page(ctx, out)
	}
	if !o.json {
		what := "deleting"
		if o.dryRun {
			what = "counting (dry run)"
		}
		fmt.Fprintf(e.stderr, "sweep of table %q: %s items expired before %s, at most %s write and %s read units a second\n",
			o.table, what, showTime(time.Unix(sw.cutoff+1, 0)), limit(o.maxWCU), limit(o.maxRCU))
	}
	prog := e.newProgress(o, "sweep", count, func() (int64, string) {
		return sc.scanned.Load(), fmt.Sprintf("%s expired, %s deleted", thousands(sw.expired.Load()), thousands(sw.deleted.Load()))
	})
	sw.progress = prog
	err := sc.run(ctx)
	prog.done()
	report := sweepReport{
		Table: o.table, DryRun: o.dryRun, ExpiredBefore: time.Unix(sw.cutoff+1, 0).UTC(),
		Scanned: sc.scanned.Load(), Expired: sw.expired.Load(), Deleted: sw.deleted.Load(), Kept: sw.kept.Load(),
		DeletedByKind: sw.byKind, ReadUnits: sc.readUnits(), WriteUnits: float64(sw.writeMilli.Load()) / 1000,
		ElapsedSeconds: seconds(e.now().Sub(began)),
	}
	if o.json {
		writeJSON(e.stdout, report)
	} else {
		printSweep(e, report)
	}
	if err != nil {
		return e.fail(c, o, err)
	}
	return exitOK
}

// page deletes the expired items of one page, one at a time.
func (sw *sweeper) page(ctx context.Context, out *dynamodb.ScanOutput) error {
	for _, av := range out.Items {
		it, ok := recognise(&sw.o.items, &sw.scs, av)
		if !ok || it.expires > sw.cutoff {
			continue
		}
		sw.expired.Add(1)
		if !sw.o.dryRun {
			if err := sw.delete(ctx, it); err != nil {
				return err
			}
		}
		sw.progress.update()
	}
	sw.progress.update()
	return nil
}

// sweepable is an item that the sweep may delete.
type sweepable struct {
	key     map[string]types.AttributeValue
	kind    string
	expires int64 // epoch seconds
}

// recognise reads av with the library's format, for layout l and scs
// items of scs, and reports whether it is an item of a kind the sweep
// deletes, under the key that its kind has: a session item under the
// session prefix, an index item under its user's index partition and ID,
// an end record or a try's record beside its session, a void under a
// session's key, a history or device item under a user's index partition,
// an scs item or tombstone under the scs prefix.
func recognise(l *item.Layout, scs *item.SCSLayout, av map[string]types.AttributeValue) (sweepable, bool) {
	pk, _ := av[l.PartitionKey].(*types.AttributeValueMemberS)
	kind, _ := av[item.AttrKind].(*types.AttributeValueMemberS)
	if pk == nil || kind == nil {
		return sweepable{}, false
	}
	var key map[string]types.AttributeValue
	var expires int64
	switch kind.Value {
	case item.KindSession:
		// Of every version the decoder knows: a session, a device-bound
		// one, and a two-step login's pending one, which TTL deletes
		// alike. A later version fails to decode, and stays.
		s, err := l.Decode(av, item.KindSession)
		if err != nil || !strings.HasPrefix(pk.Value, l.SessionPrefix) {
			return sweepable{}, false
		}
		key, expires = l.SessionKey(pk.Value), s.ExpiresAt.Unix()
	case item.KindIndex:
		s, err := l.Decode(av, item.KindIndex)
		if err != nil || !strings.HasPrefix(pk.Value, l.UserSessionsPrefix) {
			return sweepable{}, false
		}
		key, expires = l.IndexKey(s), s.ExpiresAt.Unix()
	case item.KindEnded:
		ended, err := item.DecodeEnd(av)
		ttl, ok := expiry(l, av)
		session := sessionPKOf(l, pk.Value)
		if err != nil || !ended || !ok || session == "" {
			return sweepable{}, false
		}
		key, expires = l.EndKey(session), ttl
	case item.KindTry:
		// A try's record has no decoder: it is its key, its version, its
		// kind and its expiry alone. Its number ends its key.
		ttl, ok := expiry(l, av)
		session := sessionPKOf(l, pk.Value)
		n, err := strconv.Atoi(lastField(itemKey(l, av)))
		if !ok || !isVersion(av, item.StateFormat) || session == "" || err != nil || n < 1 {
			return sweepable{}, false
		}
		key, expires = l.TryKey(session, n), ttl
	case item.KindVoid:
		// A session limit's void has no decoder either: the session's key,
		// the version, the kind and the expiry.
		ttl, ok := expiry(l, av)
		key = l.SessionKey(pk.Value)
		if !ok || !isVersion(av, item.StateFormat) || !strings.HasPrefix(pk.Value, l.SessionPrefix) || itemKey(l, av) != itemKey(l, key) {
			return sweepable{}, false
		}
		expires = ttl
	case item.KindHistory:
		// An event, or an hour's failed sign-ins: its sort key is its
		// cursor's, and its TTL the retention after the last write.
		e, err := l.DecodeHistory(av)
		if err != nil || !strings.HasPrefix(pk.Value, l.UserSessionsPrefix) {
			return sweepable{}, false
		}
		key, expires = l.Key(pk.Value, item.HistorySort+e.Cursor), e.Expires.Unix()
	case item.KindDevice:
		ttl, err := l.DeviceExpires(av)
		sk, _ := av[l.SortKey].(*types.AttributeValueMemberS)
		if err != nil || sk == nil || !strings.HasPrefix(pk.Value, l.UserSessionsPrefix) || !strings.HasPrefix(sk.Value, item.DeviceSort) {
			return sweepable{}, false
		}
		key, expires = l.Key(pk.Value, sk.Value), ttl.Unix()
	case item.KindSCS:
		s, err := scs.Decode(av)
		if err != nil || !strings.HasPrefix(pk.Value, scs.Prefix) {
			return sweepable{}, false
		}
		key, expires = scs.Key(pk.Value), s.ExpiresAt.Unix()
	case item.KindSCSDestroyed:
		// A tombstone has no decoder: it is an scs item that Destroy left
		// with its version, its kind and its expiry alone.
		ttl, ok := expiry(l, av)
		if !ok || !isVersion(av, item.StateFormat) || !strings.HasPrefix(pk.Value, scs.Prefix) {
			return sweepable{}, false
		}
		key, expires = scs.Key(pk.Value), ttl
	default:
		return sweepable{}, false
	}
	if !sameKey(av, key) {
		return sweepable{}, false
	}
	return sweepable{key: key, kind: kind.Value, expires: expires}, true
}

// expiry reads av's TTL attribute, in epoch seconds.
func expiry(l *item.Layout, av map[string]types.AttributeValue) (int64, bool) {
	ttl, ok, err := item.GetNum(av, l.TTLAttribute)
	return ttl, ok && err == nil
}

// isVersion reports whether av is of format version v.
func isVersion(av map[string]types.AttributeValue, v int64) bool {
	got, ok, err := item.GetNum(av, item.AttrVersion)
	return ok && err == nil && got == v
}

// sessionPKOf is the partition key of the session that an item beside it
// (an end record, a try's record) is kept under pk for: the session prefix
// and the token's digest, which holds no "#". "" for a pk under no
// session.
func sessionPKOf(l *item.Layout, pk string) string {
	rest, ok := strings.CutPrefix(pk, l.SessionPrefix)
	if !ok {
		return ""
	}
	digest, _, _ := strings.Cut(rest, "#")
	return l.SessionPrefix + digest
}

// lastField is what follows the last "#" of s.
func lastField(s string) string { return s[strings.LastIndex(s, "#")+1:] }

// itemKey is av's key as one string: its partition key, and its sort
// key after a NUL.
func itemKey(l *item.Layout, av map[string]types.AttributeValue) string {
	pk, _ := av[l.PartitionKey].(*types.AttributeValueMemberS)
	if pk == nil {
		return ""
	}
	if l.HashOnly {
		return pk.Value
	}
	sk, _ := av[l.SortKey].(*types.AttributeValueMemberS)
	if sk == nil {
		return pk.Value
	}
	return pk.Value + "\x00" + sk.Value
}

// sameKey reports whether av holds key's String attributes.
func sameKey(av, key map[string]types.AttributeValue) bool {
	for name, want := range key {
		got, _ := av[name].(*types.AttributeValueMemberS)
		if got == nil || got.Value != want.(*types.AttributeValueMemberS).Value {
			return false
		}
	}
	return true
}

// delete deletes it on the condition that it is still of its kind and
// expired, paced on the write units DynamoDB reports.
func (sw *sweeper) delete(ctx context.Context, it sweepable) error {
	// A delete is billed a unit per KB of the item, at least one; one
	// whose condition fails is billed but reports nothing, and keeps the
	// estimate.
	const estimate = 1
	if err := sw.writes.take(ctx, estimate); err != nil {
		return err
	}
	out, err := sw.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &sw.o.table,
		Key:                       it.key,
		ConditionExpression:       aws.String("#kind = :kind AND #ttl <= :cutoff"),
		ExpressionAttributeNames:  map[string]string{"#kind": item.AttrKind, "#ttl": sw.o.items.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": item.Str(it.kind), ":cutoff": item.Num(sw.cutoff)},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	consumed := float64(estimate)
	if err == nil && out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil {
		consumed = *out.ConsumedCapacity.CapacityUnits
	}
	sw.writes.settle(estimate, consumed)
	sw.writeMilli.Add(int64(consumed * 1000))
	var changed *types.ConditionalCheckFailedException
	var conflict *types.ReplicatedWriteConflictException
	switch {
	case errors.As(err, &changed), errors.As(err, &conflict):
		// Refreshed since the scan read it (or, in an MRSC table, being
		// written in another Region): it stays, for a later sweep to
		// judge.
		sw.kept.Add(1)
		return nil
	case err != nil:
		return fmt.Errorf("delete an expired %s item: %w", it.kind, err)
	}
	sw.deleted.Add(1)
	sw.mu.Lock()
	sw.byKind[it.kind]++
	sw.mu.Unlock()
	return nil
}

func printSweep(e *env, r sweepReport) {
	title := "sweep of table %q done\n"
	if r.DryRun {
		title = "sweep of table %q done (dry run: nothing deleted)\n"
	}
	fmt.Fprintf(e.stdout, title, r.Table)
	writeFields(e.stdout,
		"scanned", thousands(r.Scanned),
		"expired", thousands(r.Expired),
		"deleted", fmt.Sprintf("%s (sessions %s, index items %s, end records %s, login tries %s, voids %s, history items %s, devices %s, scs sessions %s, scs tombstones %s)", thousands(r.Deleted),
			thousands(r.DeletedByKind[item.KindSession]), thousands(r.DeletedByKind[item.KindIndex]),
			thousands(r.DeletedByKind[item.KindEnded]), thousands(r.DeletedByKind[item.KindTry]), thousands(r.DeletedByKind[item.KindVoid]),
			thousands(r.DeletedByKind[item.KindHistory]), thousands(r.DeletedByKind[item.KindDevice]),
			thousands(r.DeletedByKind[item.KindSCS]), thousands(r.DeletedByKind[item.KindSCSDestroyed])),
		"kept", thousands(r.Kept)+" (changed since the scan read them)",
		"read units", units(r.ReadUnits),
		"write units", units(r.WriteUnits),
		"elapsed", (time.Duration(r.ElapsedSeconds*1000) * time.Millisecond).String(),
	)
}

// tableSize returns DescribeTable's item count and size in bytes, which
// DynamoDB updates about every six hours.
func tableSize(desc *types.TableDescription) (count, bytes int64) {
	return aws.ToInt64(desc.ItemCount), aws.ToInt64(desc.TableSizeBytes)
}

// avg is the average item's size, 0 if unknown.
func avg(bytes, count int64) float64 {
	if count == 0 {
		return 0
	}
	return float64(bytes) / float64(count)
}

func limitOrNil(n int32) *int32 {
	if n == 0 {
		return nil
	}
	return &n
}

// limit shows a rate flag.
func limit(rate float64) string {
	if rate == 0 {
		return "unlimited"
	}
	return units(rate)
}
