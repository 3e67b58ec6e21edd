package ddbsession_test

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// probe wraps a real client (or none) to count the calls a Manager makes, and
// for fault paths only, to fail or intercept chosen operations. Everything it
// does not intercept goes to the real engine.
type probe struct {
	next ddbsession.Client

	mu    sync.Mutex
	calls map[string]int
	// fail, if set, answers an operation instead of the engine.
	fail func(ctx context.Context, op string) error
	// before, if set, runs before an operation reaches the engine.
	before func(ctx context.Context, op string, in any)
}

func newProbe(next ddbsession.Client) *probe { return &probe{next: next, calls: map[string]int{}} }

// count returns how many calls of op were made, and resets nothing.
func (p *probe) count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

// total returns the number of calls of every operation.
func (p *probe) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.calls)
}

func (p *probe) enter(ctx context.Context, op string, in any) error {
	p.mu.Lock()
	p.calls[op]++
	fail, before := p.fail, p.before
	p.mu.Unlock()
	if fail != nil {
		if err := fail(ctx, op); err != nil {
			return err
		}
	}
	if before != nil {
		before(ctx, op, in)
	}
	return nil
}

type opts = func(*dynamodb.Options)

func (p *probe) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...opts) (*dynamodb.GetItemOutput, error) {
	if err := p.enter(ctx, "GetItem", in); err != nil {
		return nil, err
	}
	return p.next.GetItem(ctx, in, o...)
}

func (p *probe) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...opts) (*dynamodb.PutItemOutput, error) {
	if err := p.enter(ctx, "PutItem", in); err != nil {
		return nil, err
	}
	return p.next.PutItem(ctx, in, o...)
}

func (p *probe) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...opts) (*dynamodb.UpdateItemOutput, error) {
	if err := p.enter(ctx, "UpdateItem", in); err != nil {
		return nil, err
	}
	return p.next.UpdateItem(ctx, in, o...)
}

func (p *probe) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...opts) (*dynamodb.DeleteItemOutput, error) {
	if err := p.enter(ctx, "DeleteItem", in); err != nil {
		return nil, err
	}
	return p.next.DeleteItem(ctx, in, o...)
}

func (p *probe) Query(ctx context.Context, in *dynamodb.QueryInput, o ...opts) (*dynamodb.QueryOutput, error) {
	if err := p.enter(ctx, "Query", in); err != nil {
		return nil, err
	}
	return p.next.Query(ctx, in, o...)
}

func (p *probe) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...opts) (*dynamodb.CreateTableOutput, error) {
	if err := p.enter(ctx, "CreateTable", in); err != nil {
		return nil, err
	}
	return p.next.CreateTable(ctx, in, o...)
}

func (p *probe) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...opts) (*dynamodb.DescribeTableOutput, error) {
	if err := p.enter(ctx, "DescribeTable", in); err != nil {
		return nil, err
	}
	return p.next.DescribeTable(ctx, in, o...)
}

func (p *probe) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, o ...opts) (*dynamodb.UpdateTimeToLiveOutput, error) {
	if err := p.enter(ctx, "UpdateTimeToLive", in); err != nil {
		return nil, err
	}
	return p.next.UpdateTimeToLive(ctx, in, o...)
}

func (p *probe) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, o ...opts) (*dynamodb.DescribeTimeToLiveOutput, error) {
	if err := p.enter(ctx, "DescribeTimeToLive", in); err != nil {
		return nil, err
	}
	return p.next.DescribeTimeToLive(ctx, in, o...)
}

func (p *probe) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...opts) (*dynamodb.BatchGetItemOutput, error) {
	if err := p.enter(ctx, "BatchGetItem", in); err != nil {
		return nil, err
	}
	return p.next.BatchGetItem(ctx, in, o...)
}
