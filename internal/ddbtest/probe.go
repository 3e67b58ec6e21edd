package ddbtest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Probe is the one fake client of this project's tests: it stands in front
// of an engine to count the calls made through it, by operation, and, for
// fault paths only, to act on chosen calls through its hooks. Everything a
// hook does not take goes to the engine: the tests run against a real one,
// and a Probe adds only what no engine does on demand.
//
// The hooks, each optional, see each call's operation ("GetItem") and
// input (*dynamodb.GetItemInput), in this order:
//
//   - Fail answers the call with an error instead of the engine: an outage;
//   - Before runs before the call reaches the engine, and may block it
//     there: a pause at a named point, for a race;
//   - Answer answers the call with a canned output (ok true) instead of
//     the engine: unprocessed keys, a TTL the engine lacks, a replayed read;
//   - After runs once the engine answered, and may replace the answer
//     with an error (an applied write whose answer is lost) or change the
//     output in place.
//
// A call is counted whatever its hooks do, failed ones included. A Probe
// reads its hooks under its lock as each call starts: set them between a
// test's steps, while no call they could act on is in flight. A hook that
// must change while calls run (one that acts on the first call only) keeps
// its own state: an atomic.Bool, a sync.Once.
type Probe struct {
	Fail   func(ctx context.Context, op string, in any) error
	Before func(ctx context.Context, op string, in any)
	Answer func(ctx context.Context, op string, in any) (out any, ok bool)
	After  func(ctx context.Context, op string, in, out any, err error) error

	// RecordReads makes the Probe record each GetItem and BatchGetItem for
	// [Probe.TakeReads], and ask the engine for the read units each
	// consumed where the caller asked for none: what a test of which
	// items a request reads, and what they cost, needs. Off, a Probe adds
	// no work to a call but its count (a test that counts allocations
	// runs through one).
	RecordReads bool

	next Engine

	mu    sync.Mutex
	calls map[string]int
	reads []*Read
}

// A Read is one GetItem or BatchGetItem made through a Probe that records
// reads.
type Read struct {
	Op string
	// PKs are the partition keys ("pk") it asked for, in the order asked.
	PKs []string
	// Units are the read units the engine reported it consumed; 0 for a
	// read that failed.
	Units float64
}

// NewProbe returns a Probe in front of next. A Probe in front of nil
// panics at any call its hooks do not take: for a test that must make
// none.
func NewProbe(next Engine) *Probe {
	return &Probe{next: next, calls: map[string]int{}}
}

// Engine returns the engine behind the Probe, for a hook that calls it
// past the Probe, uncounted: the SDK's retry of a write whose answer was
// lost, a read of what a call is about to change.
func (p *Probe) Engine() Engine { return p.next }

// Count returns how many calls of op were made since the last Take or
// Reset.
func (p *Probe) Count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

// Total returns how many calls of every operation were made since the
// last Take or Reset.
func (p *Probe) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

// Calls returns the calls of each operation made since the last Take or
// Reset, never nil, and forgets nothing.
func (p *Probe) Calls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// Reset forgets the calls counted so far; the reads recorded stay, for
// TakeReads.
func (p *Probe) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.calls)
}

// Take returns the calls of each operation counted since the last Take or
// Reset, never nil, and forgets them: what a test compares whole with the
// calls a step should make.
func (p *Probe) Take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls := p.calls
	p.calls = map[string]int{}
	return calls
}

// TakeReads returns the reads recorded since the last TakeReads, in the
// order they were made, and forgets them.
func (p *Probe) TakeReads() []Read {
	p.mu.Lock()
	defer p.mu.Unlock()
	reads := make([]Read, len(p.reads))
	for i, r := range p.reads {
		reads[i] = *r
	}
	p.reads = nil
	return reads
}

// ReadPKs returns the partition keys ("pk") that a GetItem's or a
// BatchGetItem's input asks for, in the order asked (a batch's tables in
// the order of their names), and false for any other input.
func ReadPKs(in any) ([]string, bool) {
	var keys []map[string]types.AttributeValue
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		keys = []map[string]types.AttributeValue{in.Key}
	case *dynamodb.BatchGetItemInput:
		for _, table := range slices.Sorted(maps.Keys(in.RequestItems)) {
			keys = append(keys, in.RequestItems[table].Keys...)
		}
	default:
		return nil, false
	}
	var pks []string
	for _, k := range keys {
		if pk, ok := k["pk"].(*types.AttributeValueMemberS); ok {
			pks = append(pks, pk.Value)
		}
	}
	return pks, true
}

// call is every operation's way through the probe: count, hooks, engine.
// send makes the call to the engine with the input it is given: in, or,
// for a read the Probe measures, a copy that asks for its read units.
func call[I, O any](p *Probe, ctx context.Context, op string, in *I, send func(*I) (*O, error)) (*O, error) {
	p.mu.Lock()
	p.calls[op]++
	fail, before, answer, after := p.Fail, p.Before, p.Answer, p.After
	var read *Read
	if p.RecordReads {
		if pks, ok := ReadPKs(in); ok {
			read = &Read{Op: op, PKs: pks}
			p.reads = append(p.reads, read)
		}
	}
	p.mu.Unlock()
	if fail != nil {
		if err := fail(ctx, op, in); err != nil {
			return nil, err
		}
	}
	if before != nil {
		before(ctx, op, in)
	}
	if answer != nil {
		if out, ok := answer(ctx, op, in); ok {
			return out.(*O), nil
		}
	}
	sent := in
	if read != nil {
		sent = measured(in)
	}
	out, err := send(sent)
	if read != nil && err == nil {
		p.mu.Lock()
		read.Units += reportedReadUnits(out)
		p.mu.Unlock()
	}
	if after != nil {
		if lost := after(ctx, op, in, out, err); lost != nil {
			return nil, lost
		}
	}
	return out, err
}

// measured returns a copy of a read's input that asks for the read units
// it consumes, or the input itself if it asks for them already.
func measured[I any](in *I) *I {
	switch in := any(in).(type) {
	case *dynamodb.GetItemInput:
		if !wantsCapacity(in.ReturnConsumedCapacity) {
			c := *in
			c.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			return any(&c).(*I)
		}
	case *dynamodb.BatchGetItemInput:
		if !wantsCapacity(in.ReturnConsumedCapacity) {
			c := *in
			c.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			return any(&c).(*I)
		}
	}
	return in
}

// reportedReadUnits returns the read units that a read's output reports.
func reportedReadUnits(out any) float64 {
	var units float64
	switch out := out.(type) {
	case *dynamodb.GetItemOutput:
		if out.ConsumedCapacity != nil {
			units += aws.ToFloat64(out.ConsumedCapacity.CapacityUnits)
		}
	case *dynamodb.BatchGetItemOutput:
		for _, cc := range out.ConsumedCapacity {
			units += aws.ToFloat64(cc.CapacityUnits)
		}
	}
	return units
}

func (p *Probe) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...opt) (*dynamodb.GetItemOutput, error) {
	return call(p, ctx, "GetItem", in, func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return p.next.GetItem(ctx, in, o...) })
}

func (p *Probe) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...opt) (*dynamodb.BatchGetItemOutput, error) {
	return call(p, ctx, "BatchGetItem", in, func(in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
		return p.next.BatchGetItem(ctx, in, o...)
	})
}

func (p *Probe) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...opt) (*dynamodb.PutItemOutput, error) {
	return call(p, ctx, "PutItem", in, func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return p.next.PutItem(ctx, in, o...) })
}

func (p *Probe) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...opt) (*dynamodb.UpdateItemOutput, error) {
	return call(p, ctx, "UpdateItem", in, func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return p.next.UpdateItem(ctx, in, o...)
	})
}

func (p *Probe) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...opt) (*dynamodb.DeleteItemOutput, error) {
	return call(p, ctx, "DeleteItem", in, func(in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
		return p.next.DeleteItem(ctx, in, o...)
	})
}

func (p *Probe) Query(ctx context.Context, in *dynamodb.QueryInput, o ...opt) (*dynamodb.QueryOutput, error) {
	return call(p, ctx, "Query", in, func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) { return p.next.Query(ctx, in, o...) })
}

// scanner is an engine that can Scan, as the CLI's sweep and count do:
// *dynamodb.Client and TTLClient, not Partitions or Region.
type scanner interface {
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Scan is the engine's Scan, for an engine that has one; on any other it
// panics.
func (p *Probe) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...opt) (*dynamodb.ScanOutput, error) {
	return call(p, ctx, "Scan", in, func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return p.next.(scanner).Scan(ctx, in, o...)
	})
}

func (p *Probe) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...opt) (*dynamodb.CreateTableOutput, error) {
	return call(p, ctx, "CreateTable", in, func(in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
		return p.next.CreateTable(ctx, in, o...)
	})
}

func (p *Probe) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...opt) (*dynamodb.DescribeTableOutput, error) {
	return call(p, ctx, "DescribeTable", in, func(in *dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
		return p.next.DescribeTable(ctx, in, o...)
	})
}

func (p *Probe) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, o ...opt) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return call(p, ctx, "UpdateTimeToLive", in, func(in *dynamodb.UpdateTimeToLiveInput) (*dynamodb.UpdateTimeToLiveOutput, error) {
		return p.next.UpdateTimeToLive(ctx, in, o...)
	})
}

func (p *Probe) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, o ...opt) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return call(p, ctx, "DescribeTimeToLive", in, func(in *dynamodb.DescribeTimeToLiveInput) (*dynamodb.DescribeTimeToLiveOutput, error) {
		return p.next.DescribeTimeToLive(ctx, in, o...)
	})
}
