package ddbtest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The simulation keeps MREC's rules: a write is seen in its own Region at
// once and in the other once delivered; of two concurrent writes of one
// item, the later wins in both Regions, whole; a later write brings back
// an item that an earlier one in the other Region deleted.
func TestRegionsReplicateLastWriterWins(t *testing.T) {
	ctx := context.Background()
	g := ddbtest.NewRegions(t, ddbtest.Client(t), ddbtest.SecondClient(t))
	table := g.TableName(t)
	for _, r := range []*ddbtest.Region{g.A, g.B} {
		_, err := r.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            &table,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		if err != nil {
			t.Fatal(err)
		}
		ddbtest.WaitActive(t, r, table)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}
	get := func(r *ddbtest.Region) map[string]types.AttributeValue {
		t.Helper()
		out, err := r.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	put := func(r *ddbtest.Region, v string) {
		t.Helper()
		_, err := r.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"pk": key["pk"], "v": &types.AttributeValueMemberS{Value: v},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	value := func(item map[string]types.AttributeValue) string {
		if item == nil {
			return "<none>"
		}
		return item["v"].(*types.AttributeValueMemberS).Value
	}

	put(g.A, "a")
	if got := get(g.B); got != nil {
		t.Errorf("B sees %q before the lag", value(got))
	}
	g.Settle()
	if got := value(get(g.B)); got != "a" {
		t.Errorf("B after the lag: %q, want a", got)
	}

	put(g.A, "a2")
	put(g.B, "b2") // later, before A's write arrived
	g.Settle()
	for _, r := range []*ddbtest.Region{g.A, g.B} {
		if got := value(get(r)); got != "b2" {
			t.Errorf("Region %s after concurrent writes: %q, want the later b2", r.Name, got)
		}
	}

	if _, err := g.A.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key}); err != nil {
		t.Fatal(err)
	}
	_, err := g.B.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
		UpdateExpression:          aws.String("SET v = :v"),
		ConditionExpression:       aws.String("attribute_exists(pk)"), // holds on B's replica
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "back"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Settle()
	for _, r := range []*ddbtest.Region{g.A, g.B} {
		if got := value(get(r)); got != "back" {
			t.Errorf("Region %s after a delete in A and a later update in B: %q, want the update's item back", r.Name, got)
		}
	}
}

// Deliver delivers the writes it is asked for and leaves the others on
// their way: a test chooses what has arrived where.
func TestRegionsDeliverSome(t *testing.T) {
	ctx := context.Background()
	g := ddbtest.NewRegions(t, ddbtest.Client(t), ddbtest.SecondClient(t))
	table := g.TableName(t)
	for _, r := range []*ddbtest.Region{g.A, g.B} {
		_, err := r.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            &table,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		if err != nil {
			t.Fatal(err)
		}
		ddbtest.WaitActive(t, r, table)
	}
	for _, pk := range []string{"x", "y"} {
		if _, err := g.A.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.Pending(); n != 2 {
		t.Fatalf("%d writes on their way, want 2", n)
	}
	n := g.Deliver(func(to *ddbtest.Region, key map[string]types.AttributeValue) bool {
		return to == g.B && key["pk"].(*types.AttributeValueMemberS).Value == "x"
	})
	if n != 1 || g.Pending() != 1 {
		t.Fatalf("Deliver of x: %d delivered, %d left; want 1 and 1", n, g.Pending())
	}
	for pk, want := range map[string]bool{"x": true, "y": false} {
		out, err := g.B.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Item != nil; got != want {
			t.Errorf("B has %s: %v, want %v", pk, got, want)
		}
	}
}
