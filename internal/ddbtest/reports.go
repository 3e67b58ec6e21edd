package ddbtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Reports is how an engine reports the capacity that a call consumed (its
// ConsumedCapacity), as [ProbeReports] finds it. DynamoDB reports what it
// bills, from item sizes (the Developer Guide, "DynamoDB read and write
// operations"); dynalite does too, but for a Query that finds nothing;
// moto reports a fixed figure per operation, whatever the item (0.5 for
// any GetItem or UpdateItem, 1 for any PutItem or DeleteItem, a unit a key
// for a BatchGetItem). A test asserts the bill [Partitions] computes from
// the items' sizes on every engine, and the engine's own reports only
// where they are DynamoDB's: see [Reports.Mismatches].
type Reports struct {
	// BySize: the engine reports each item call's units as DynamoDB
	// bills them, from the items' sizes and the read's consistency.
	BySize bool
	// EmptyQueries: it reports a Query that finds nothing as DynamoDB
	// bills it, for the partition it searched (dynalite reports 0).
	EmptyQueries bool
}

// probeItemSize is the size of the probe's item: 2 read units strongly
// consistent, 1 eventually consistent, 5 write units.
const probeItemSize = 5000

// ProbeReports finds how engine reports capacity, on a table of its own
// (deleted when t ends): through a front that bills as DynamoDB does, it
// writes an item of 5,000 bytes, reads it strongly and eventually
// consistently, alone and in a BatchGetItem, updates and deletes it, and
// queries an empty partition. The engine reports by size if it reports
// each of those item calls as DynamoDB bills it: 5 write units, 2 and 1
// read units, 2 read units, 5 and 5 write units.
func ProbeReports(t testing.TB, engine Engine) Reports {
	t.Helper()
	ctx := context.Background()
	table := TableName(t, Client(t))
	s := types.ScalarAttributeTypeS
	if _, err := engine.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: &table, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: s}, {AttributeName: aws.String("sk"), AttributeType: s}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
	}); err != nil {
		t.Fatalf("ddbtest: the capacity probe's table: %v", err)
	}
	WaitActive(t, engine, table)
	front := NewPartitions(engine, 0, time.Time{})
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	key := map[string]types.AttributeValue{"pk": str("probe"), "sk": str("probe")}
	item := map[string]types.AttributeValue{"pk": str("probe"), "sk": str("probe"), "pad": str(strings.Repeat("x", probeItemSize-len("pkprobeskprobepad")))}
	calls := []struct {
		op       string
		reported float64 // DynamoDB's bill
		call     func() error
	}{
		{"PutItem", 5, func() error {
			_, err := front.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item})
			return err
		}},
		{"GetItem, strongly consistent", 2, func() error {
			_, err := front.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
			return err
		}},
		{"GetItem, eventually consistent", 1, func() error {
			_, err := front.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key})
			return err
		}},
		{"BatchGetItem", 2, func() error {
			_, err := front.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				table: {Keys: []map[string]types.AttributeValue{key}, ConsistentRead: aws.Bool(true)},
			}})
			return err
		}},
		{"UpdateItem", 5, func() error {
			_, err := front.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
				UpdateExpression: aws.String("SET #v = :v"), ExpressionAttributeNames: map[string]string{"#v": "v"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": str("v")}})
			return err
		}},
		{"DeleteItem", 5, func() error {
			_, err := front.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key})
			return err
		}},
		{"Query of an empty partition", 1, func() error {
			_, err := front.Query(ctx, &dynamodb.QueryInput{TableName: &table, ConsistentRead: aws.Bool(true),
				KeyConditionExpression: aws.String("pk = :pk"), ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("nobody")}})
			return err
		}},
	}
	r := Reports{BySize: true}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("ddbtest: the capacity probe's %s: %v", c.op, err)
		}
		log := front.Take().Log
		if len(log) != 1 || log[0].ReadUnits+log[0].WriteUnits != c.reported {
			t.Fatalf("ddbtest: the capacity probe's %s was billed %+v, want %v units", c.op, log, c.reported)
		}
		agrees := log[0].Reported != nil && *log[0].Reported == c.reported
		if c.op == "Query of an empty partition" {
			r.EmptyQueries = agrees
		} else if !agrees {
			r.BySize = false
		}
	}
	return r
}

// Mismatches compares each call of usages with what the engine reported
// for it, where the engine reports by size, and describes each call where
// the two differ. Left out are the calls the engine reported nothing for
// (a conditional write whose condition failed, whose error carries no
// report, among them), an empty Query where the engine does not report
// those, and the indexes of calls it reported no index figures for. An
// engine that does not report by size is not compared: there the bill,
// from the items' sizes, is the only figure, and Mismatches returns nil.
func (r Reports) Mismatches(usages ...Usage) []string {
	if !r.BySize {
		return nil
	}
	var out []string
	for _, u := range usages {
		for _, c := range u.Log {
			if c.Reported == nil || c.ConditionFailed || (c.Op == "Query" && c.Items == 0 && !r.EmptyQueries) {
				continue
			}
			if table := c.ReadUnits + c.WriteUnits; *c.Reported != table {
				out = append(out, fmt.Sprintf("%s on %s: the engine reported %v units, the bill from the items' sizes is %v", c.Op, c.Table, *c.Reported, table))
			}
			if index := c.IndexReadUnits + c.IndexWriteUnits; c.ReportedIndexes != nil && *c.ReportedIndexes != index {
				out = append(out, fmt.Sprintf("%s on %s: the engine reported %v index units, the bill from the items' sizes is %v", c.Op, c.Table, *c.ReportedIndexes, index))
			}
		}
	}
	return out
}
