package ddbtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Regions simulates a DynamoDB global table in multi-Region eventual
// consistency (MREC) across two Regions, as AWS documents it (How DynamoDB
// global tables work, in the Developer Guide):
//
//   - each Region has a replica of its own, here a table on an engine of
//     its own, and its strongly consistent reads and its conditional writes
//     see that replica alone;
//   - every write is replicated to the other Region asynchronously, item by
//     item, with no order between items;
//   - concurrent writes of one item are settled per item by "last writer
//     wins": a replicated write is applied, whole (the item as the write
//     left it, or its deletion), only if it is newer than the replica's
//     last write of that item.
//
// Replication runs on the test's time, not the machine's: a write waits on
// its way to the other Region until the test delivers it ([Regions.Settle]
// for all, [Regions.Deliver] for some), so "within the replication lag" is
// any moment before delivery, and no test needs real work to fit a real
// window.
//
// Each Region's client stands in front of its engine: it applies a write,
// reads the item back at once (writes in a Region are serialized, so the
// image is the write's), stamps it with the simulation's write clock, and
// queues its replication. DynamoDB keeps the write time as a hidden system
// attribute; here it is a counter that only increases, shared by both
// Regions, so that "newer" needs no clock of its own.
type Regions struct {
	A, B *Region

	mu      sync.Mutex
	clock   int64         // the write clock: the last write's stamp
	pending []replication // on their way, in the order written
}

// NewRegions returns two Regions on two engines. The tables' key
// attributes are pk and, if they have one, sk; each Region creates its
// replica itself (CreateTable through its client).
func NewRegions(t testing.TB, a, b *dynamodb.Client) *Regions {
	t.Helper()
	g := &Regions{}
	g.A = &Region{Name: "A", engine: a, regions: g, last: map[string]int64{}}
	g.B = &Region{Name: "B", engine: b, regions: g, last: map[string]int64{}}
	g.A.other, g.B.other = g.B, g.A
	return g
}

// Settle delivers every write on its way to the other Region, in the order
// they were made: the replication lag has passed.
func (g *Regions) Settle() {
	g.Deliver(func(*Region, map[string]types.AttributeValue) bool { return true })
}

// Deliver delivers the writes on their way whose destination and item key
// match says, in the order they were made, and leaves the others on their
// way. It returns how many it delivered (and the destination applied or,
// last writer wins, dropped).
func (g *Regions) Deliver(match func(to *Region, key map[string]types.AttributeValue) bool) int {
	g.mu.Lock()
	var now, later []replication
	for _, rep := range g.pending {
		if match(rep.to, rep.key) {
			now = append(now, rep)
		} else {
			later = append(later, rep)
		}
	}
	g.pending = later
	g.mu.Unlock()
	for _, rep := range now {
		rep.to.apply(rep)
	}
	return len(now)
}

// Pending returns how many writes are on their way.
func (g *Regions) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// TableName returns a table name unique to t, for a replica in each Region
// (each creates its own), and deletes both when t ends.
func (g *Regions) TableName(t testing.TB) string {
	t.Helper()
	name := TableName(t, g.A.engine)
	t.Cleanup(func() {
		_, _ = g.B.engine.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}

// Region is one Region's replica, and a client for it that replicates its
// writes. It has the method set of ddbsession.Client, with the table
// methods besides.
type Region struct {
	Name    string
	engine  *dynamodb.Client
	regions *Regions
	other   *Region

	mu   sync.Mutex       // serializes this replica's writes, local and replicated
	last map[string]int64 // item -> write clock of its last write here
}

// Engine is the Region's engine, for reads and writes that bypass the
// simulation (a test's look at a replica).
func (r *Region) Engine() *dynamodb.Client { return r.engine }

// replication is one write on its way to the other Region.
type replication struct {
	to    *Region
	table string
	key   map[string]types.AttributeValue
	image map[string]types.AttributeValue // nil: the item was deleted
	clock int64
}

// write applies a local write, and queues the item as it left it for the
// other Region.
func (r *Region) write(ctx context.Context, table string, key map[string]types.AttributeValue, apply func() error) error {
	key = copyKey(key) // the caller's map is the caller's
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := apply(); err != nil {
		return err
	}
	out, err := r.engine.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("ddbtest: Region %s: read back the write: %w", r.Name, err)
	}
	g := r.regions
	g.mu.Lock()
	g.clock++
	rep := replication{to: r.other, table: table, key: key, image: out.Item, clock: g.clock}
	g.pending = append(g.pending, rep)
	g.mu.Unlock()
	r.last[itemID(table, key)] = rep.clock
	return nil
}

// apply applies a replicated write, unless this replica has written the
// item since: last writer wins.
func (r *Region) apply(rep replication) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := itemID(rep.table, rep.key)
	if rep.clock <= r.last[id] {
		return
	}
	r.last[id] = rep.clock
	ctx := context.Background()
	var err error
	if rep.image == nil {
		_, err = r.engine.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &rep.table, Key: rep.key})
	} else {
		_, err = r.engine.PutItem(ctx, &dynamodb.PutItemInput{TableName: &rep.table, Item: rep.image})
	}
	if err != nil && !errors.As(err, new(*types.ResourceNotFoundException)) {
		panic(fmt.Sprintf("ddbtest: Region %s: apply a replicated write: %v", r.Name, err))
	}
}

// copyKey copies a key of String attributes.
func copyKey(key map[string]types.AttributeValue) map[string]types.AttributeValue {
	c := make(map[string]types.AttributeValue, len(key))
	for name, v := range key {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			v = &types.AttributeValueMemberS{Value: s.Value}
		}
		c[name] = v
	}
	return c
}

// itemID names an item of a table by its key's values.
func itemID(table string, key map[string]types.AttributeValue) string {
	id := table
	for _, name := range []string{"pk", "sk"} {
		if v, ok := key[name].(*types.AttributeValueMemberS); ok {
			id += "\x00" + v.Value
		}
	}
	return id
}

// keyOf is the key of an item in a table keyed by pk and, if present, sk.
func keyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{"pk": item["pk"]}
	if sk, ok := item["sk"]; ok {
		key["sk"] = sk
	}
	return key
}

type opt = func(*dynamodb.Options)

func (r *Region) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...opt) (*dynamodb.PutItemOutput, error) {
	var out *dynamodb.PutItemOutput
	err := r.write(ctx, *in.TableName, keyOf(in.Item), func() (err error) {
		out, err = r.engine.PutItem(ctx, in, o...)
		return err
	})
	return out, err
}

func (r *Region) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...opt) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	err := r.write(ctx, *in.TableName, in.Key, func() (err error) {
		out, err = r.engine.UpdateItem(ctx, in, o...)
		return err
	})
	return out, err
}

func (r *Region) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...opt) (*dynamodb.DeleteItemOutput, error) {
	var out *dynamodb.DeleteItemOutput
	err := r.write(ctx, *in.TableName, in.Key, func() (err error) {
		out, err = r.engine.DeleteItem(ctx, in, o...)
		return err
	})
	return out, err
}

func (r *Region) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...opt) (*dynamodb.GetItemOutput, error) {
	return r.engine.GetItem(ctx, in, o...)
}

func (r *Region) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...opt) (*dynamodb.BatchGetItemOutput, error) {
	return r.engine.BatchGetItem(ctx, in, o...)
}

func (r *Region) Query(ctx context.Context, in *dynamodb.QueryInput, o ...opt) (*dynamodb.QueryOutput, error) {
	return r.engine.Query(ctx, in, o...)
}

func (r *Region) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...opt) (*dynamodb.CreateTableOutput, error) {
	return r.engine.CreateTable(ctx, in, o...)
}

// DescribeTable describes the replica as DynamoDB describes a global table
// in MREC: with its replicas' Regions and its consistency mode.
func (r *Region) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...opt) (*dynamodb.DescribeTableOutput, error) {
	out, err := r.engine.DescribeTable(ctx, in, o...)
	if err == nil && out.Table != nil {
		out.Table.MultiRegionConsistency = types.MultiRegionConsistencyEventual
		out.Table.Replicas = []types.ReplicaDescription{{RegionName: aws.String(r.Name)}, {RegionName: aws.String(r.other.Name)}}
	}
	return out, err
}

func (r *Region) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, o ...opt) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return r.engine.UpdateTimeToLive(ctx, in, o...)
}

func (r *Region) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, o ...opt) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return r.engine.DescribeTimeToLive(ctx, in, o...)
}
