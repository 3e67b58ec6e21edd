package ddbtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestEngineConditionalWritesAreAtomic holds the engine to what the
// library's race tests rest on: of racing conditional writes of one item,
// whose condition only one of them can meet, exactly one succeeds
// (DynamoDB's Developer Guide, "Condition expressions": a conditional write
// succeeds only if the condition holds, atomically with the write). Each
// kind of write is raced 16 at a time, 30 times: a PutItem and an
// UpdateItem of an item not there yet (attribute_not_exists), and
// UpdateItems of one that is (an attribute added once; a compare-and-set).
// moto 5.2.1 lets two racing conditional UpdateItems win now and then (its
// PutItem holds); a session limit's slots write and UpdateData's write are
// conditional UpdateItems, so TestSessionLimitRacingLogins and
// TestSessionDataManyRacingWriters fail there too (docs/development.md, "A
// second engine: moto").
func TestEngineConditionalWritesAreAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: &table, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, client, table)
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, tc := range []struct {
		name  string
		setup bool // the item exists, with v = 0, before the race
		write func(key map[string]types.AttributeValue) error
	}{
		{"PutItem of a new item", false, func(key map[string]types.AttributeValue) error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key, ConditionExpression: aws.String("attribute_not_exists(pk)")})
			return err
		}},
		{"UpdateItem of a new item", false, func(key map[string]types.AttributeValue) error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
				UpdateExpression: aws.String("SET v = :one"), ConditionExpression: aws.String("attribute_not_exists(v)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}})
			return err
		}},
		{"UpdateItem of an item there, adding an attribute", true, func(key map[string]types.AttributeValue) error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
				UpdateExpression: aws.String("SET w = :one"), ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(w)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}})
			return err
		}},
		{"UpdateItem of an item there", true, func(key map[string]types.AttributeValue) error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
				UpdateExpression: aws.String("SET v = :one"), ConditionExpression: aws.String("v = :zero"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":zero": n("0"), ":one": n("1")}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 30 {
				key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s %d", tc.name, round)}}
				if tc.setup {
					if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{"pk": key["pk"], "v": n("0")}}); err != nil {
						t.Fatal(err)
					}
				}
				var won, refused atomic.Int32
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						var failed *types.ConditionalCheckFailedException
						switch err := tc.write(key); {
						case err == nil:
							won.Add(1)
						case errors.As(err, &failed):
							refused.Add(1)
						default:
							t.Error(err)
						}
					})
				}
				wg.Wait()
				if won.Load() != 1 || refused.Load() != 15 {
					t.Fatalf("round %d: %d of 16 racing conditional writes succeeded and %d were refused, want 1 and 15", round, won.Load(), refused.Load())
				}
			}
		})
	}
}
