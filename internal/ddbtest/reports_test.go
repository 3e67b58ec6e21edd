package ddbtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// restated is the test engine with its capacity reports restated: each
// item call goes through a front of its own, and reports what figure
// makes of that front's bill for it (per table, for a BatchGetItem), so
// that an engine reporting as DynamoDB does, or as moto does, can be had
// on any engine.
type restated struct {
	*ddbtest.Partitions // the table calls, and the item calls' bills
	figure              func(op string, bill ddbtest.Call, keys int) (table float64, indexes *float64)
}

// dynamoDBFigures reports the bill, as DynamoDB does.
func dynamoDBFigures(_ string, bill ddbtest.Call, _ int) (float64, *float64) {
	table := bill.ReadUnits + bill.WriteUnits
	if index := bill.IndexReadUnits + bill.IndexWriteUnits; index > 0 {
		return table, &index
	}
	return table, nil
}

// dynaliteFigures reports the bill but for a Query that finds nothing,
// reported as 0, as dynalite does.
func dynaliteFigures(op string, bill ddbtest.Call, keys int) (float64, *float64) {
	if op == "Query" && bill.Items == 0 {
		return 0, nil
	}
	return dynamoDBFigures(op, bill, keys)
}

// motoFigures reports moto 5.2.1's fixed figures (moto/dynamodb/responses.py:
// include_consumed_capacity, get_item, update_item, batch_get_item),
// whatever the items' sizes and the read's consistency.
func motoFigures(op string, _ ddbtest.Call, keys int) (float64, *float64) {
	switch op {
	case "GetItem", "UpdateItem":
		return 0.5, nil
	case "BatchGetItem":
		return float64(keys), nil
	}
	return 1, nil // PutItem, DeleteItem, Query
}

func newRestated(t *testing.T, figure func(string, ddbtest.Call, int) (float64, *float64)) restated {
	return restated{ddbtest.NewPartitions(ddbtest.Client(t), 0, epoch), figure}
}

// consumed is what r reports for a call of op whose bill is the last in
// the front's log, if the caller asked.
func (r restated) consumed(asked types.ReturnConsumedCapacity, op string, table *string, keys int) *types.ConsumedCapacity {
	log := r.Take().Log
	if asked == "" || asked == types.ReturnConsumedCapacityNone || len(log) == 0 {
		return nil
	}
	units, indexes := r.figure(op, log[len(log)-1], keys)
	cc := &types.ConsumedCapacity{TableName: table, CapacityUnits: aws.Float64(units)}
	if asked == types.ReturnConsumedCapacityIndexes {
		cc.Table = &types.Capacity{CapacityUnits: aws.Float64(units)}
		if indexes != nil {
			cc.CapacityUnits = aws.Float64(units + *indexes)
			cc.GlobalSecondaryIndexes = map[string]types.Capacity{"byBucket": {CapacityUnits: indexes}}
		}
	}
	return cc
}

func (r restated) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := r.Partitions.GetItem(ctx, in, o...)
	if err == nil {
		out.ConsumedCapacity = r.consumed(in.ReturnConsumedCapacity, "GetItem", in.TableName, 1)
	}
	return out, err
}

func (r restated) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := r.Partitions.BatchGetItem(ctx, in, o...)
	if err != nil {
		return out, err
	}
	out.ConsumedCapacity = nil
	for _, bill := range r.Take().Log { // one a table
		if in.ReturnConsumedCapacity == "" || in.ReturnConsumedCapacity == types.ReturnConsumedCapacityNone {
			break
		}
		units, _ := r.figure("BatchGetItem", bill, len(in.RequestItems[bill.Table].Keys))
		out.ConsumedCapacity = append(out.ConsumedCapacity, types.ConsumedCapacity{TableName: aws.String(bill.Table), CapacityUnits: aws.Float64(units), Table: &types.Capacity{CapacityUnits: aws.Float64(units)}})
	}
	return out, nil
}

func (r restated) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := r.Partitions.PutItem(ctx, in, o...)
	if err == nil {
		out.ConsumedCapacity = r.consumed(in.ReturnConsumedCapacity, "PutItem", in.TableName, 1)
	}
	return out, err
}

func (r restated) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := r.Partitions.UpdateItem(ctx, in, o...)
	if err == nil {
		out.ConsumedCapacity = r.consumed(in.ReturnConsumedCapacity, "UpdateItem", in.TableName, 1)
	}
	return out, err
}

func (r restated) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := r.Partitions.DeleteItem(ctx, in, o...)
	if err == nil {
		out.ConsumedCapacity = r.consumed(in.ReturnConsumedCapacity, "DeleteItem", in.TableName, 1)
	}
	return out, err
}

func (r restated) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := r.Partitions.Query(ctx, in, o...)
	if err == nil {
		out.ConsumedCapacity = r.consumed(in.ReturnConsumedCapacity, "Query", in.TableName, 1)
	}
	return out, err
}

// The probe tells apart an engine that reports as DynamoDB does, one that
// does but for empty Queries (dynalite) and one that reports fixed figures
// (moto), on any engine; and Mismatches holds each one's reports to the
// bill where the probe says they are DynamoDB's, finds nothing to hold an
// engine of fixed figures to, and, told that such an engine reports by
// size, finds its reports wrong: the comparison is not idle.
func TestProbeReports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		figure func(string, ddbtest.Call, int) (float64, *float64)
		want   ddbtest.Reports
	}{
		{"DynamoDB's figures", dynamoDBFigures, ddbtest.Reports{BySize: true, EmptyQueries: true}},
		{"dynalite's figures", dynaliteFigures, ddbtest.Reports{BySize: true}},
		{"moto's fixed figures", motoFigures, ddbtest.Reports{EmptyQueries: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			engine := newRestated(t, tc.figure)
			got := ddbtest.ProbeReports(t, engine)
			if got != tc.want {
				t.Fatalf("the probe found %+v, want %+v", got, tc.want)
			}
			u := reportsWorkload(t, engine)
			if len(u.Log) != 7 {
				t.Fatalf("the workload's log %+v, want 7 calls", u.Log)
			}
			if m := got.Mismatches(u); len(m) != 0 {
				t.Errorf("mismatches where the probe says there are none: %q", m)
			}
			asDynamoDB := ddbtest.Reports{BySize: true, EmptyQueries: true}.Mismatches(u)
			if wrong := tc.want != (ddbtest.Reports{BySize: true, EmptyQueries: true}); wrong != (len(asDynamoDB) > 0) {
				t.Errorf("compared as DynamoDB's, the reports differ from the bill at %q; want differences: %v", asDynamoDB, wrong)
			}
		})
	}
	t.Run("the test engine", func(t *testing.T) {
		t.Parallel()
		t.Logf("the probe found %+v", ddbtest.ProbeReports(t, ddbtest.Client(t))) // held to the bill in TestPartitionsBill
	})
}

// reportsWorkload makes calls of every kind the probe probes through a
// front of engine, on partitionsTable's table, and returns their usage.
func reportsWorkload(t *testing.T, engine ddbtest.Engine) ddbtest.Usage {
	t.Helper()
	table := indexedTable(t)
	p := ddbtest.NewPartitions(engine, 0, epoch)
	ctx := context.Background()
	put(t, p, table, sized(t, "w", "a", 3000, map[string]types.AttributeValue{"bucket": str("b"), "exp": num("1"), "proj": str("p")}))
	if err := get(p, table, key("w", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{key("w", "a"), key("none", "a")}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("w", "a"),
		UpdateExpression: aws.String("SET #p = :p"), ExpressionAttributeNames: map[string]string{"#p": "proj"}, ExpressionAttributeValues: map[string]types.AttributeValue{":p": str("q")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Query(ctx, &dynamodb.QueryInput{TableName: &table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk"), ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("nobody")}}); err != nil {
		t.Fatal(err)
	}
	_, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key("w", "a"), ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if !errors.As(err, new(*types.ConditionalCheckFailedException)) {
		t.Fatalf("conditional PutItem over an item: %v", err)
	}
	if _, err := p.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("w", "a")}); err != nil {
		t.Fatal(err)
	}
	return p.Take()
}
