package ddbtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A Probe stands in for a *dynamodb.Client as ddbsession's Config.Client,
// and for an engine in front of which another front stands.
var (
	_ ddbsession.Client = (*ddbtest.Probe)(nil)
	_ ddbtest.Engine    = (*ddbtest.Probe)(nil)
)

func pkKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

// A Probe counts every call by operation, and passes each to the engine.
func TestProbeCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)
	table := createTable(t, client)
	p := ddbtest.NewProbe(client)
	for _, pk := range []string{"a", "b"} {
		if _, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: pkKey(pk)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: pkKey("a"), ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("GetItem of what the Probe put: %v, %v", got, err)
	}
	if n := p.Count("PutItem"); n != 2 {
		t.Errorf("Count(PutItem) = %d, want 2", n)
	}
	if n := p.Total(); n != 3 {
		t.Errorf("Total = %d, want 3", n)
	}
	if diff := cmp.Diff(map[string]int{"PutItem": 2, "GetItem": 1}, p.Take()); diff != "" {
		t.Errorf("Take (-want +got):\n%s", diff)
	}
	// Take forgets what it took, and answers an empty map, not nil, which
	// cmp.Diff tells apart from an empty want.
	if diff := cmp.Diff(map[string]int{}, p.Take()); diff != "" {
		t.Errorf("Take again (-want +got):\n%s", diff)
	}
	if _, err := p.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: pkKey("b")}); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if n := p.Total(); n != 0 {
		t.Errorf("Total after Reset = %d, want 0", n)
	}
}

// The hooks run in their documented order, and each does what it says:
// Fail and Answer keep a call from the engine, After sees the engine's
// answer and may lose it.
func TestProbeHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)
	table := createTable(t, client)
	exists := func(pk string) bool {
		t.Helper()
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: pkKey(pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	p := ddbtest.NewProbe(client)
	put := func(pk string) error {
		_, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: pkKey(pk)})
		return err
	}

	var order []string
	var beforeSaw bool
	p.Fail = func(_ context.Context, op string, _ any) error { order = append(order, "Fail "+op); return nil }
	p.Before = func(_ context.Context, op string, in any) {
		order = append(order, "Before "+op)
		beforeSaw = exists(in.(*dynamodb.PutItemInput).Item["pk"].(*types.AttributeValueMemberS).Value)
	}
	p.Answer = func(_ context.Context, op string, _ any) (any, bool) {
		order = append(order, "Answer "+op)
		return nil, false
	}
	p.After = func(_ context.Context, op string, _, out any, err error) error {
		order = append(order, "After "+op)
		if _, ok := out.(*dynamodb.PutItemOutput); !ok || err != nil {
			t.Errorf("After saw %T, %v; want the engine's answer", out, err)
		}
		return nil
	}
	if err := put("ordered"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Fail PutItem", "Before PutItem", "Answer PutItem", "After PutItem"}, order); diff != "" {
		t.Errorf("the hooks' order (-want +got):\n%s", diff)
	}
	if beforeSaw || !exists("ordered") {
		t.Errorf("the item existed at Before: %v, after the call: %v; want false, true", beforeSaw, exists("ordered"))
	}

	down := errors.New("down")
	p.Before, p.Answer, p.After = nil, nil, nil
	p.Fail = func(context.Context, string, any) error { return down }
	if err := put("failed"); !errors.Is(err, down) || exists("failed") {
		t.Errorf("a failed put: %v, the item written %v; want the hook's error, nothing written", err, exists("failed"))
	}

	p.Fail = nil
	canned := &dynamodb.GetItemOutput{Item: pkKey("canned")}
	p.Answer = func(_ context.Context, op string, _ any) (any, bool) { return canned, op == "GetItem" }
	if out, err := p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: pkKey("nothing")}); out != canned || err != nil {
		t.Errorf("an answered GetItem: %v, %v; want the canned answer", out, err)
	}

	p.Answer = nil
	lost := errors.New("the answer was lost")
	p.After = func(_ context.Context, _ string, _, _ any, err error) error {
		if err != nil {
			return nil
		}
		return lost
	}
	if err := put("lost"); !errors.Is(err, lost) || !exists("lost") {
		t.Errorf("a put whose answer was lost: %v, the item written %v; want the hook's error, the item written", err, exists("lost"))
	}

	// Every call counts, those the hooks took included.
	if diff := cmp.Diff(map[string]int{"PutItem": 3, "GetItem": 1}, p.Take()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A Probe that records reads records each read's partition keys, failed
// reads included, and the read units the engine reports, which it asks
// for where the caller did not; one that does not record adds nothing to
// a call.
func TestProbeRecordsReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)
	table := createTable(t, client)
	p := ddbtest.NewProbe(client)
	for _, pk := range []string{"a", "b"} {
		if _, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: pkKey(pk)}); err != nil {
			t.Fatal(err)
		}
	}
	get := &dynamodb.GetItemInput{TableName: &table, Key: pkKey("a"), ConsistentRead: aws.Bool(true)}
	out, err := p.GetItem(ctx, get)
	if err != nil {
		t.Fatal(err)
	}
	if out.ConsumedCapacity != nil || len(p.TakeReads()) != 0 {
		t.Errorf("a Probe that does not record reads asked for capacity (%v) or recorded a read", out.ConsumedCapacity)
	}

	p.RecordReads = true
	if _, err := p.GetItem(ctx, get); err != nil {
		t.Fatal(err)
	}
	if get.ReturnConsumedCapacity != "" {
		t.Errorf("the Probe changed the caller's input: ReturnConsumedCapacity %q", get.ReturnConsumedCapacity)
	}
	batch := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{pkKey("b"), pkKey("a")}, ConsistentRead: aws.Bool(true)},
	}}
	if _, err := p.BatchGetItem(ctx, batch); err != nil {
		t.Fatal(err)
	}
	down := errors.New("down")
	p.Fail = func(context.Context, string, any) error { return down }
	if _, err := p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: pkKey("c")}); !errors.Is(err, down) {
		t.Fatalf("a failed GetItem: %v", err)
	}
	reads := p.TakeReads()
	if len(reads) != 3 {
		t.Fatalf("reads %+v, want 3", reads)
	}
	wantPKs := []struct {
		op  string
		pks []string
	}{{"GetItem", []string{"a"}}, {"BatchGetItem", []string{"b", "a"}}, {"GetItem", []string{"c"}}}
	for i, want := range wantPKs {
		if reads[i].Op != want.op || !cmp.Equal(reads[i].PKs, want.pks) {
			t.Errorf("read %d: %s of %q, want %s of %q", i, reads[i].Op, reads[i].PKs, want.op, want.pks)
		}
	}
	// Engines differ in the figure (moto reports a fixed one): each
	// successful read reports some, the failed one none.
	if reads[0].Units <= 0 || reads[1].Units <= 0 || reads[2].Units != 0 {
		t.Errorf("units %v, %v, %v; want some for each read that reached the engine, none for the failed one", reads[0].Units, reads[1].Units, reads[2].Units)
	}
	if again := p.TakeReads(); len(again) != 0 {
		t.Errorf("TakeReads again: %+v, want none", again)
	}
}

// ReadPKs reads the partition keys of reads only.
func TestReadPKs(t *testing.T) {
	t.Parallel()
	if pks, ok := ddbtest.ReadPKs(&dynamodb.GetItemInput{Key: pkKey("a")}); !ok || !cmp.Equal(pks, []string{"a"}) {
		t.Errorf("ReadPKs of a GetItem = %q, %v", pks, ok)
	}
	if pks, ok := ddbtest.ReadPKs(&dynamodb.PutItemInput{Item: pkKey("a")}); ok || pks != nil {
		t.Errorf("ReadPKs of a PutItem = %q, %v; want nil, false", pks, ok)
	}
}
