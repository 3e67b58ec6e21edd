package ddbtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's throughput limits of one partition, which no setting raises:
// read and write units per second.
const (
	PartitionReadUnits  = 3000
	PartitionWriteUnits = 1000
)

// Engine is what [Partitions] fronts: the item calls of a DynamoDB client
// and the table calls that a Manager's CreateTable makes. *dynamodb.Client
// and [TTLClient] are engines.
type Engine interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// Partitions is a client in front of an engine that bills every item call
// as DynamoDB does and holds each partition key to DynamoDB's per-partition
// throughput, on a virtual clock that the test advances: what no local
// engine does, and what decides whether a design that funnels many
// requests through one item survives DynamoDB.
//
// # Billing
//
// Units are computed from item sizes, as DynamoDB computes an item's size
// (see [ItemSize]), and never taken from the engine:
//
//   - GetItem: the item's size in 4 KB, at least 1 (a missing item costs 1);
//     BatchGetItem: the same for each key, item by item. Eventually
//     consistent reads cost half.
//   - Query: the size of every item the key condition reads, before any
//     filter, added up and then rounded up to 4 KB, at least 1 per page
//     (DynamoDB bills a Query that finds nothing for the partition it
//     searched); a Query of a global secondary index reads its index
//     entries, eventually consistently.
//   - PutItem, UpdateItem, DeleteItem: the larger of the item before and
//     after, in 1 KB, at least 1; a write whose condition fails is billed
//     for the item as it was (DynamoDB bills the larger of that and the
//     item the write would have made, which for an update only applying it
//     tells). Each global secondary index costs a write of its entry's size
//     (the table's key, the index's key and the projected attributes) where
//     the write puts or removes the entry, two where it moves the entry to
//     another index key, one where it changes a projected attribute only.
//
// The sizes of a write's item before and after, of the items a filtered
// Query skipped and of items read with a projection come from reads of the
// engine's own that are neither billed nor counted. A concurrent write of
// the same item between them can make one write's bill that of its
// neighbour's item.
//
// Each call's bill, and what the engine itself reported for it (the front
// asks each call for ReturnConsumedCapacity INDEXES, and hands the
// caller's own choice back), is in [Usage.Log]: a test can compare the
// two wherever the engine reports as DynamoDB bills, which [ProbeReports]
// tells, with [Reports.Mismatches].
//
// # Partition limits
//
// DynamoDB serves each partition at most [PartitionReadUnits] read units
// and [PartitionWriteUnits] write units a second, reads and writes counted
// apart. Burst capacity (up to 300 seconds of a table's unused provisioned
// capacity) and adaptive capacity (which moves a table's capacity to its
// hot partitions, and isolates a hot item on a partition of its own) lift
// a table's limits, never a partition's: burst capacity does not relieve
// a throttled partition, and a partition that holds a single hot item is
// still capped at 3,000 and 1,000 (the DynamoDB Developer Guide, "Burst
// and adaptive capacity"; AWS re:Post, "How does DynamoDB handle spiky
// workloads"). Adaptive capacity's split for heat may also spread one
// partition key's items over partitions by sort key, but only after
// sustained traffic, and never splits one item.
//
// The front so holds each partition key (of the table, and of each global
// secondary index, whose partitions have the same limits) to those limits
// divided by the scale the test chooses, in two token buckets: each holds
// at most one second's units, refills continuously at the limit as the
// virtual clock moves, and never lends more. A partition key's items are
// held together: the worst case, where DynamoDB has not split them. A call
// is let through if the bucket of every partition key it touches holds
// the least the call can cost there (a unit per item read or written,
// half for an eventually consistent read); its bill, known once it is
// made, is then taken from the buckets, which may go below empty and then
// refill before the next call.
//
// A call that does not fit is answered as DynamoDB answers it, with a
// *types.ProvisionedThroughputExceededException whose ThrottlingReasons
// say TableReadKeyRangeThroughputExceeded,
// TableWriteKeyRangeThroughputExceeded or
// IndexWriteKeyRangeThroughputExceeded, without reaching the engine; a
// BatchGetItem reads the keys that fit and returns the others in
// UnprocessedKeys, and fails with the exception only when none fits. The
// front sits above the SDK's retryer, so no retry hides a throttle: the
// caller sees each one, and [Usage] counts each one.
//
// # Time
//
// The clock moves only when the test calls [Partitions.Advance]: a busy
// machine that takes a minute over a virtual second throttles exactly as a
// fast one. Pass [Partitions.Now] as the code under test's clock to keep
// both on it.
type Partitions struct {
	next        Engine
	read, write float64 // units a second per partition key; 0: no limit

	mu      sync.Mutex
	now     time.Time
	buckets map[partition]*bucket
	schemas map[string]*schema
	usage   Usage
}

// NewPartitions returns a front of next whose clock starts at start, and
// which holds each partition key to DynamoDB's limits divided by scale
// (100: 30 read and 10 write units a second). A scale of 0 bills and
// counts without limits.
func NewPartitions(next Engine, scale float64, start time.Time) *Partitions {
	p := &Partitions{next: next, now: start, buckets: map[partition]*bucket{}, schemas: map[string]*schema{}}
	if scale > 0 {
		p.read, p.write = PartitionReadUnits/scale, PartitionWriteUnits/scale
	}
	p.usage = newUsage()
	return p
}

// Now is the virtual clock.
func (p *Partitions) Now() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.now
}

// Advance moves the virtual clock on by d, refilling every bucket.
func (p *Partitions) Advance(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = p.now.Add(d)
}

// Usage is what the front billed and refused.
type Usage struct {
	// Calls counts the calls by operation, throttled ones included.
	Calls map[string]int
	// Units billed, as DynamoDB bills them: the table's, and its indexes'.
	ReadUnits, WriteUnits, IndexReadUnits, IndexWriteUnits float64
	// Throttled counts the calls refused whole, Unprocessed the keys a
	// BatchGetItem left unprocessed; ThrottledKeys both, by partition key
	// ("<table> <partition key>", or "<table>/<index> <partition key>").
	Throttled, Unprocessed int
	ThrottledKeys          map[string]int
	// Keys is what each partition key was billed.
	Keys map[string]KeyUsage
	// Log is every call, in the order their bills were made.
	Log []Call
}

// KeyUsage is what one partition key was billed.
type KeyUsage struct{ ReadUnits, WriteUnits float64 }

// Call is one call's bill.
type Call struct {
	Op    string
	Table string
	// The bill, as DynamoDB makes it, computed from item sizes.
	ReadUnits, WriteUnits, IndexReadUnits, IndexWriteUnits float64
	// Reported and ReportedIndexes are what the engine reported for the
	// table and for its indexes; nil where it reported nothing.
	Reported, ReportedIndexes *float64
	// Items is how many items a read read (a Query's before its filter).
	Items           int
	Throttled       bool // refused whole
	ConditionFailed bool
}

func newUsage() Usage {
	return Usage{Calls: map[string]int{}, ThrottledKeys: map[string]int{}, Keys: map[string]KeyUsage{}}
}

// Usage returns what the front has billed and refused so far.
func (p *Partitions) Usage() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.usage
	u.Calls, u.ThrottledKeys, u.Keys, u.Log = clone(u.Calls), clone(u.ThrottledKeys), clone(u.Keys), slices.Clone(u.Log)
	return u
}

// Take returns what the front has billed and refused since the last Take,
// and starts counting anew. The buckets keep their levels.
func (p *Partitions) Take() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.usage
	p.usage = newUsage()
	return u
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// partition is one bucket's key: a partition key of a table or of one of
// its indexes, for reads or for writes.
type partition struct {
	table, index, key string
	write             bool
}

func (pt partition) String() string {
	if pt.index != "" {
		return pt.table + "/" + pt.index + " " + pt.key
	}
	return pt.table + " " + pt.key
}

// bucket is one partition key's units for reads or for writes.
type bucket struct {
	units float64
	at    time.Time
}

// bucket returns pt's bucket, refilled to now. p.mu must be held.
func (p *Partitions) bucket(pt partition) *bucket {
	rate := p.read
	if pt.write {
		rate = p.write
	}
	b := p.buckets[pt]
	if b == nil {
		b = &bucket{units: rate, at: p.now}
		p.buckets[pt] = b
	}
	if elapsed := p.now.Sub(b.at).Seconds(); elapsed > 0 {
		b.units = math.Min(rate, b.units+elapsed*rate)
		b.at = p.now
	}
	return b
}

// reserve takes need[i] units from the bucket of each of parts, if every
// one of them holds that much, and reports whether it did; otherwise it
// returns the first partition short of its need. p.mu must be held.
func (p *Partitions) reserve(parts []partition, need []float64) (short *partition) {
	if p.read > 0 {
		for i, pt := range parts {
			if p.bucket(pt).units < need[i] {
				return &parts[i]
			}
		}
	}
	for i, pt := range parts {
		p.bucket(pt).units -= need[i]
	}
	return nil
}

// charge takes units more from pt's bucket (fewer, for a negative count)
// and bills them to pt. p.mu must be held.
func (p *Partitions) charge(pt partition, units, billed float64) {
	p.bucket(pt).units -= units
	k := p.usage.Keys[pt.String()]
	if pt.write {
		k.WriteUnits += billed
	} else {
		k.ReadUnits += billed
	}
	p.usage.Keys[pt.String()] = k
}

// throttled counts a call refused whole for want of pt's units, and
// returns its answer. p.mu must be held.
func (p *Partitions) throttled(op string, pt partition) error {
	p.usage.Throttled++
	p.usage.ThrottledKeys[pt.String()]++
	p.usage.Log = append(p.usage.Log, Call{Op: op, Table: pt.table, Throttled: true})
	resource, operation := "Table", "Read"
	if pt.index != "" {
		resource = "Index"
	}
	if pt.write {
		operation = "Write"
	}
	return &types.ProvisionedThroughputExceededException{
		Message: aws.String("Throughput exceeds the current throughput limit for your account or table (" + resource + " partition key " + pt.key + ")"),
		ThrottlingReasons: []types.ThrottlingReason{{
			Reason:   aws.String(resource + operation + "KeyRangeThroughputExceeded"),
			Resource: aws.String(resourceARN(pt)),
		}},
	}
}

// resourceARN is the ARN of the table or index of pt.
func resourceARN(pt partition) string {
	if pt.index == "" {
		return TableARN(pt.table)
	}
	return IndexARN(pt.table, pt.index)
}

// record adds a call's bill to the usage. p.mu must be held.
func (p *Partitions) record(c Call) {
	p.usage.Log = append(p.usage.Log, c)
	p.usage.ReadUnits += c.ReadUnits
	p.usage.WriteUnits += c.WriteUnits
	p.usage.IndexReadUnits += c.IndexReadUnits
	p.usage.IndexWriteUnits += c.IndexWriteUnits
}

func (p *Partitions) count(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.usage.Calls[op]++
}

// schema is what the front needs of a table: its key, and its global
// secondary indexes.
type schema struct {
	hash, sort string
	indexes    []index
}

// index is a global secondary index: its key, and what it projects.
type index struct {
	name, hash, sort string
	all              bool            // ProjectionType ALL
	include          map[string]bool // the non-key attributes of INCLUDE
}

// schema describes table, once.
func (p *Partitions) schema(ctx context.Context, table *string) (*schema, error) {
	name := aws.ToString(table)
	p.mu.Lock()
	s := p.schemas[name]
	p.mu.Unlock()
	if s != nil {
		return s, nil
	}
	out, err := p.next.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: table})
	if err != nil {
		return nil, err
	}
	s = &schema{}
	s.hash, s.sort = keyNames(out.Table.KeySchema)
	for _, g := range out.Table.GlobalSecondaryIndexes {
		ix := index{name: aws.ToString(g.IndexName), include: map[string]bool{}}
		ix.hash, ix.sort = keyNames(g.KeySchema)
		if g.Projection != nil {
			ix.all = g.Projection.ProjectionType == types.ProjectionTypeAll
			for _, a := range g.Projection.NonKeyAttributes {
				ix.include[a] = true
			}
		}
		s.indexes = append(s.indexes, ix)
	}
	p.mu.Lock()
	p.schemas[name] = s
	p.mu.Unlock()
	return s, nil
}

func keyNames(elems []types.KeySchemaElement) (hash, sort string) {
	for _, e := range elems {
		if e.KeyType == types.KeyTypeHash {
			hash = aws.ToString(e.AttributeName)
		} else {
			sort = aws.ToString(e.AttributeName)
		}
	}
	return hash, sort
}

// key is av's primary key under s.
func (s *schema) key(av map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{s.hash: av[s.hash]}
	if s.sort != "" {
		k[s.sort] = av[s.sort]
	}
	return k
}

// entry is av's entry in index ix, or nil if av has none there.
func (s *schema) entry(ix index, av map[string]types.AttributeValue) map[string]types.AttributeValue {
	if av == nil || av[ix.hash] == nil || (ix.sort != "" && av[ix.sort] == nil) {
		return nil
	}
	e := map[string]types.AttributeValue{}
	for name, v := range av {
		if ix.all || ix.include[name] || name == s.hash || name == s.sort || name == ix.hash || name == ix.sort {
			e[name] = v
		}
	}
	return e
}

// valueText renders an attribute value for a partition key's name, and
// for comparing values.
func valueText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B:%x", v.Value)
	case nil:
		return "?"
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// sameValues reports whether a and b hold equal values under names.
func sameValues(a, b map[string]types.AttributeValue, names ...string) bool {
	for _, n := range names {
		if n != "" && valueText(a[n]) != valueText(b[n]) {
			return false
		}
	}
	return true
}

// readUnits is what reading size bytes costs: in 4 KB, at least 1, half
// for an eventually consistent read.
func readUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// writeUnits is what writing size bytes costs: in 1 KB, at least 1.
func writeUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// readFactor is the least a read of one item costs.
func readFactor(consistent bool) float64 {
	if consistent {
		return 1
	}
	return 0.5
}

// fullItem reads the item under key, unbilled; nil if there is none or
// the read fails.
func (p *Partitions) fullItem(ctx context.Context, table *string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := p.next.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil
	}
	return out.Item
}

// reported is what a ConsumedCapacity says of the table and its indexes.
func reported(cc *types.ConsumedCapacity) (table, indexes *float64) {
	if cc == nil {
		return nil, nil
	}
	table = cc.CapacityUnits
	if cc.Table != nil {
		table = cc.Table.CapacityUnits
	}
	if len(cc.GlobalSecondaryIndexes) > 0 {
		var sum float64
		for _, c := range cc.GlobalSecondaryIndexes {
			sum += aws.ToFloat64(c.CapacityUnits)
		}
		indexes = &sum
	}
	return table, indexes
}

// wantsCapacity reports whether the caller asked for ConsumedCapacity.
func wantsCapacity(r types.ReturnConsumedCapacity) bool {
	return r == types.ReturnConsumedCapacityTotal || r == types.ReturnConsumedCapacityIndexes
}

func (p *Partitions) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	p.count("GetItem")
	s, err := p.schema(ctx, in.TableName)
	if err != nil {
		return p.next.GetItem(ctx, in, optFns...)
	}
	consistent := aws.ToBool(in.ConsistentRead)
	pt := partition{table: aws.ToString(in.TableName), key: valueText(in.Key[s.hash])}
	least := readFactor(consistent)
	p.mu.Lock()
	if short := p.reserve([]partition{pt}, []float64{least}); short != nil {
		defer p.mu.Unlock()
		return nil, p.throttled("GetItem", *short)
	}
	p.mu.Unlock()
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	out, err := p.next.GetItem(ctx, &cp, optFns...)
	c := Call{Op: "GetItem", Table: pt.table}
	if err == nil {
		full := out.Item
		if full != nil && (in.ProjectionExpression != nil || len(in.AttributesToGet) > 0) {
			full = p.fullItem(ctx, in.TableName, in.Key)
		}
		if full != nil {
			c.Items = 1
		}
		c.ReadUnits = readUnits(ItemSize(full), consistent)
		c.Reported, c.ReportedIndexes = reported(out.ConsumedCapacity)
		if !wantsCapacity(in.ReturnConsumedCapacity) {
			out.ConsumedCapacity = nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charge(pt, c.ReadUnits-least, c.ReadUnits)
	if err == nil {
		p.record(c)
	}
	return out, err
}

func (p *Partitions) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	p.count("BatchGetItem")
	type asked struct {
		table string
		s     *schema
		key   map[string]types.AttributeValue
		pt    partition
		least float64
		ka    types.KeysAndAttributes
		units float64 // the bill, once read
		found bool
	}
	var keys []*asked
	for _, table := range slices.Sorted(mapKeys(in.RequestItems)) {
		ka := in.RequestItems[table]
		s, err := p.schema(ctx, aws.String(table))
		if err != nil {
			return p.next.BatchGetItem(ctx, in, optFns...)
		}
		for _, k := range ka.Keys {
			keys = append(keys, &asked{table: table, s: s, key: k, pt: partition{table: table, key: valueText(k[s.hash])}, least: readFactor(aws.ToBool(ka.ConsistentRead)), ka: ka})
		}
	}
	add := func(into map[string]types.KeysAndAttributes, table string, ka types.KeysAndAttributes, key ...map[string]types.AttributeValue) {
		both, ok := into[table]
		if !ok {
			both = ka
			both.Keys = nil
		}
		both.Keys = append(both.Keys, key...)
		into[table] = both
	}
	processed := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{}, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes}
	unprocessed := map[string]types.KeysAndAttributes{}
	var let, short []*asked
	p.mu.Lock()
	for _, k := range keys {
		if p.reserve([]partition{k.pt}, []float64{k.least}) != nil {
			short = append(short, k)
			add(unprocessed, k.table, k.ka, k.key)
		} else {
			let = append(let, k)
			add(processed.RequestItems, k.table, k.ka, k.key)
		}
	}
	if len(let) == 0 && len(short) > 0 {
		defer p.mu.Unlock()
		return nil, p.throttled("BatchGetItem", short[0].pt)
	}
	for _, k := range short {
		p.usage.Unprocessed++
		p.usage.ThrottledKeys[k.pt.String()]++
	}
	p.mu.Unlock()
	out, err := p.next.BatchGetItem(ctx, processed, optFns...)
	if err == nil {
		// Each key let through is billed by the item it found, or 1 for
		// none; a key the engine itself left unprocessed costs nothing.
		for _, k := range let {
			if slices.ContainsFunc(out.UnprocessedKeys[k.table].Keys, func(u map[string]types.AttributeValue) bool { return sameKey(k.s, u, k.key) }) {
				continue
			}
			var found map[string]types.AttributeValue
			if i := slices.IndexFunc(out.Responses[k.table], func(av map[string]types.AttributeValue) bool { return sameKey(k.s, av, k.key) }); i >= 0 {
				found = out.Responses[k.table][i]
				if k.ka.ProjectionExpression != nil || len(k.ka.AttributesToGet) > 0 {
					found = p.fullItem(ctx, aws.String(k.table), k.key)
				}
			}
			k.units, k.found = readUnits(ItemSize(found), k.least == 1), found != nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	bill := map[string]*Call{}
	for _, k := range let {
		p.charge(k.pt, k.units-k.least, k.units)
		if err != nil {
			continue
		}
		c := bill[k.table]
		if c == nil {
			c = &Call{Op: "BatchGetItem", Table: k.table}
			bill[k.table] = c
		}
		c.ReadUnits += k.units
		if k.found {
			c.Items++
		}
	}
	if err != nil {
		return out, err
	}
	for _, cc := range out.ConsumedCapacity {
		if c := bill[aws.ToString(cc.TableName)]; c != nil {
			c.Reported, c.ReportedIndexes = reported(&cc)
		}
	}
	for _, table := range slices.Sorted(mapKeys(bill)) {
		p.record(*bill[table])
	}
	if !wantsCapacity(in.ReturnConsumedCapacity) {
		out.ConsumedCapacity = nil
	}
	for _, table := range slices.Sorted(mapKeys(unprocessed)) {
		if out.UnprocessedKeys == nil {
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{}
		}
		add(out.UnprocessedKeys, table, unprocessed[table], unprocessed[table].Keys...)
	}
	return out, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sameKey reports whether av is the item under key in s.
func sameKey(s *schema, av, key map[string]types.AttributeValue) bool {
	return sameValues(av, key, s.hash, s.sort)
}

func (p *Partitions) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	p.count("Query")
	s, err := p.schema(ctx, in.TableName)
	if err != nil {
		return p.next.Query(ctx, in, optFns...)
	}
	hash, consistent := s.hash, aws.ToBool(in.ConsistentRead)
	ix := aws.ToString(in.IndexName)
	for _, i := range s.indexes {
		if i.name == ix {
			hash, consistent = i.hash, false // a global secondary index reads eventually consistently
		}
	}
	pt := partition{table: aws.ToString(in.TableName), index: ix, key: valueText(queryPartition(in, hash))}
	least := readFactor(consistent)
	p.mu.Lock()
	if short := p.reserve([]partition{pt}, []float64{least}); short != nil {
		defer p.mu.Unlock()
		return nil, p.throttled("Query", *short)
	}
	p.mu.Unlock()
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	out, err := p.next.Query(ctx, &cp, optFns...)
	c := Call{Op: "Query", Table: pt.table}
	if err == nil {
		read := out.Items
		if in.FilterExpression != nil || in.ProjectionExpression != nil || len(in.AttributesToGet) > 0 || in.Select == types.SelectCount {
			// What the key condition read, unfiltered and whole.
			bare := *in
			bare.FilterExpression, bare.ProjectionExpression, bare.AttributesToGet, bare.Select = nil, nil, nil, ""
			bare.ReturnConsumedCapacity = ""
			bare.ExpressionAttributeNames, bare.ExpressionAttributeValues = usedBy(in.KeyConditionExpression, in.ExpressionAttributeNames), usedBy(in.KeyConditionExpression, in.ExpressionAttributeValues)
			if all, err := p.next.Query(ctx, &bare, optFns...); err == nil {
				read = all.Items
			}
		}
		size := 0
		for _, av := range read {
			size += ItemSize(av)
		}
		c.Items = len(read)
		units := readUnits(size, consistent)
		if ix != "" {
			c.IndexReadUnits = units
		} else {
			c.ReadUnits = units
		}
		c.Reported, c.ReportedIndexes = reported(out.ConsumedCapacity)
		if ix != "" && out.ConsumedCapacity != nil && out.ConsumedCapacity.GlobalSecondaryIndexes == nil {
			c.Reported, c.ReportedIndexes = nil, out.ConsumedCapacity.CapacityUnits
		}
		if !wantsCapacity(in.ReturnConsumedCapacity) {
			out.ConsumedCapacity = nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	units := c.ReadUnits + c.IndexReadUnits
	p.charge(pt, units-least, units)
	if err == nil {
		p.record(c)
	}
	return out, err
}

// keyEquals finds "name = :value" (or the other way round) in a key
// condition.
var keyEquals = regexp.MustCompile(`([#\w.]+)\s*=\s*(:\w+)|(:\w+)\s*=\s*([#\w.]+)`)

// queryPartition is the partition key value that a Query's key condition
// names for attribute hash; nil if it names none the front can read.
func queryPartition(in *dynamodb.QueryInput, hash string) types.AttributeValue {
	for _, m := range keyEquals.FindAllStringSubmatch(aws.ToString(in.KeyConditionExpression), -1) {
		name, value := m[1], m[2]
		if name == "" {
			name, value = m[4], m[3]
		}
		if n, ok := in.ExpressionAttributeNames[name]; ok {
			name = n
		}
		if name == hash {
			return in.ExpressionAttributeValues[value]
		}
	}
	return nil
}

// usedBy is the entries of m whose names (#name or :value) expr uses.
func usedBy[V any](expr *string, m map[string]V) map[string]V {
	used := map[string]V{}
	for k, v := range m {
		if regexp.MustCompile(regexp.QuoteMeta(k) + `\b`).MatchString(aws.ToString(expr)) {
			used[k] = v
		}
	}
	if len(used) == 0 {
		return nil
	}
	return used
}

// itemWrite is one item write's way through the front: the item before it is
// read, the write let through or refused, the item after it read, and
// the bill made from both.
func (p *Partitions) itemWrite(ctx context.Context, op string, table *string, key, put map[string]types.AttributeValue, call func() (*types.ConsumedCapacity, error)) error {
	p.count(op)
	s, err := p.schema(ctx, table)
	if err != nil {
		_, err := call()
		return err
	}
	if put != nil {
		key = s.key(put)
	}
	before := p.fullItem(ctx, table, key)
	name := aws.ToString(table)
	pt := partition{table: name, key: valueText(key[s.hash]), write: true}
	parts, need := []partition{pt}, []float64{1}
	for _, ix := range s.indexes {
		for _, e := range []map[string]types.AttributeValue{s.entry(ix, before), s.entry(ix, put)} {
			if ipt := (partition{table: name, index: ix.name, key: valueText(e[ix.hash]), write: true}); e != nil && !slices.Contains(parts, ipt) {
				parts, need = append(parts, ipt), append(need, 1)
			}
		}
	}
	p.mu.Lock()
	if short := p.reserve(parts, need); short != nil {
		defer p.mu.Unlock()
		return p.throttled(op, *short)
	}
	p.mu.Unlock()
	cc, err := call()
	var failed *types.ConditionalCheckFailedException
	c := Call{Op: op, Table: name, ConditionFailed: errors.As(err, &failed)}
	c.Reported, c.ReportedIndexes = reported(cc)
	after := before
	switch {
	case err == nil && op == "PutItem":
		after = put
	case err == nil && op == "UpdateItem":
		after = p.fullItem(ctx, table, key)
	case err == nil:
		after = nil
	}
	bills := map[partition]float64{}
	if err == nil || c.ConditionFailed {
		size := max(ItemSize(before), ItemSize(after))
		if c.ConditionFailed && put != nil {
			size = max(size, ItemSize(put))
		}
		c.WriteUnits = writeUnits(size)
		bills[pt] = c.WriteUnits
	}
	if err == nil {
		for _, ix := range s.indexes {
			old, next := s.entry(ix, before), s.entry(ix, after)
			oldPT := partition{table: name, index: ix.name, key: valueText(old[ix.hash]), write: true}
			nextPT := partition{table: name, index: ix.name, key: valueText(next[ix.hash]), write: true}
			switch {
			case old == nil && next == nil:
			case old == nil:
				bills[nextPT] += writeUnits(ItemSize(next))
			case next == nil:
				bills[oldPT] += writeUnits(ItemSize(old))
			case !sameValues(old, next, ix.hash, ix.sort):
				bills[oldPT] += writeUnits(ItemSize(old)) // the old entry's delete
				bills[nextPT] += writeUnits(ItemSize(next))
			case !sameEntry(old, next):
				bills[nextPT] += writeUnits(max(ItemSize(old), ItemSize(next)))
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pt := range parts {
		p.charge(pt, -need[i], 0)
	}
	for pt, units := range bills {
		p.charge(pt, units, units)
		if pt.index != "" {
			c.IndexWriteUnits += units
		}
	}
	if err == nil || c.ConditionFailed {
		p.record(c)
	}
	return err
}

// sameEntry reports whether two index entries hold the same attributes.
func sameEntry(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for name, v := range a {
		if w, ok := b[name]; !ok || !sameAttribute(v, w) {
			return false
		}
	}
	return true
}

func sameAttribute(a, b types.AttributeValue) bool { return reflect.DeepEqual(a, b) }

func (p *Partitions) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	var out *dynamodb.PutItemOutput
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	err := p.itemWrite(ctx, "PutItem", in.TableName, nil, in.Item, func() (_ *types.ConsumedCapacity, err error) {
		if out, err = p.next.PutItem(ctx, &cp, optFns...); err != nil {
			return nil, err
		}
		return out.ConsumedCapacity, nil
	})
	if err != nil {
		return nil, err
	}
	if !wantsCapacity(in.ReturnConsumedCapacity) {
		out.ConsumedCapacity = nil
	}
	return out, nil
}

func (p *Partitions) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	err := p.itemWrite(ctx, "UpdateItem", in.TableName, in.Key, nil, func() (_ *types.ConsumedCapacity, err error) {
		if out, err = p.next.UpdateItem(ctx, &cp, optFns...); err != nil {
			return nil, err
		}
		return out.ConsumedCapacity, nil
	})
	if err != nil {
		return nil, err
	}
	if !wantsCapacity(in.ReturnConsumedCapacity) {
		out.ConsumedCapacity = nil
	}
	return out, nil
}

func (p *Partitions) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	var out *dynamodb.DeleteItemOutput
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	err := p.itemWrite(ctx, "DeleteItem", in.TableName, in.Key, nil, func() (_ *types.ConsumedCapacity, err error) {
		if out, err = p.next.DeleteItem(ctx, &cp, optFns...); err != nil {
			return nil, err
		}
		return out.ConsumedCapacity, nil
	})
	if err != nil {
		return nil, err
	}
	if !wantsCapacity(in.ReturnConsumedCapacity) {
		out.ConsumedCapacity = nil
	}
	return out, nil
}

// The table calls pass through, unbilled and unlimited; CreateTable
// forgets what the front knew of a table of that name.

func (p *Partitions) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	p.mu.Lock()
	delete(p.schemas, aws.ToString(in.TableName))
	p.mu.Unlock()
	return p.next.CreateTable(ctx, in, optFns...)
}

func (p *Partitions) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return p.next.DescribeTable(ctx, in, optFns...)
}

func (p *Partitions) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return p.next.UpdateTimeToLive(ctx, in, optFns...)
}

func (p *Partitions) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return p.next.DescribeTimeToLive(ctx, in, optFns...)
}

// ItemSize is an item's size as DynamoDB computes it for billing: each
// attribute's name (UTF-8 bytes) and value. A String is its UTF-8 bytes, a
// Binary its bytes; a Number takes a byte per two significant digits and
// one more (and one for a minus sign, and one where the digits do not fall
// in whole pairs of the exponent's); a Null or Boolean one byte; a List or
// Map three bytes, one per element, and its elements (a Map's with their
// names); a set its elements.
func ItemSize(av map[string]types.AttributeValue) int {
	n := 0
	for name, v := range av {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + ItemSize(v.Value)
	}
	return 1 // Null, Boolean
}

// numberSize is a Number's size: DynamoDB keeps its significant digits in
// pairs aligned on the decimal exponent, a byte a pair, after a byte of
// exponent (the model dynalite follows too).
func numberSize(s string) int {
	s = strings.TrimSpace(s)
	negative := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	mantissa, exp, _ := strings.Cut(strings.ToLower(s), "e")
	e := 0
	fmt.Sscan(exp, &e)
	whole, frac, _ := strings.Cut(mantissa, ".")
	digits := whole + frac
	point := len(whole) // the decimal point sits after this many digits
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	digits = strings.Trim(digits, "0")
	if digits == "" {
		return 1 // zero
	}
	// The exponent of the first significant digit, as in d.ddd × 10^e.
	e += point - lead - 1
	n := 1 + (len(digits)+1)/2
	if len(digits)%2 == 0 && e%2 == 0 {
		n++
	}
	if negative {
		n++
	}
	return n
}
