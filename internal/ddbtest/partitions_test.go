package ddbtest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// partitionsTable creates a table with a String key (pk, sk) and a global
// secondary index "byBucket" on (bucket, exp) that projects "proj", and
// returns a front of scale on it.
func partitionsTable(t *testing.T, scale float64) (*ddbtest.Partitions, string) {
	t.Helper()
	return ddbtest.NewPartitions(ddbtest.Client(t), scale, epoch), indexedTable(t)
}

// indexedTable creates partitionsTable's table, and returns its name.
func indexedTable(t *testing.T) string {
	t.Helper()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	s := func(name string, typ types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: typ}
	}
	key := func(hash, sort string) []types.KeySchemaElement {
		return []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(sort), KeyType: types.KeyTypeRange}}
	}
	ctx := context.Background()
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: &table, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{s("pk", types.ScalarAttributeTypeS), s("sk", types.ScalarAttributeTypeS), s("bucket", types.ScalarAttributeTypeS), s("exp", types.ScalarAttributeTypeN)},
		KeySchema:            key("pk", "sk"),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("byBucket"), KeySchema: key("bucket", "exp"),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"proj"}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, client, table)
	return table
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)}
}

// sized is the item under (pk, sk) whose size is exactly size bytes,
// padded with attribute "pad", and with more attributes besides.
func sized(t *testing.T, pk, sk string, size int, more map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	av := key(pk, sk)
	for k, v := range more {
		av[k] = v
	}
	pad := size - ddbtest.ItemSize(av) - len("pad")
	if pad < 0 {
		t.Fatalf("an item of %d bytes cannot hold %v", size, more)
	}
	av["pad"] = str(strings.Repeat("x", pad))
	if got := ddbtest.ItemSize(av); got != size {
		t.Fatalf("sized: %d bytes, want %d", got, size)
	}
	return av
}

func put(t *testing.T, p *ddbtest.Partitions, table string, av map[string]types.AttributeValue) {
	t.Helper()
	if _, err := p.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: av}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
}

func get(p *ddbtest.Partitions, table string, k map[string]types.AttributeValue) error {
	_, err := p.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: k, ConsistentRead: aws.Bool(true)})
	return err
}

// bills are the units of each call of a usage's log.
type bill struct {
	Op                                 string
	Read, Write, IndexRead, IndexWrite float64
	Items                              int
	Throttled, ConditionFailed         bool
}

func bills(u ddbtest.Usage) []bill {
	var out []bill
	for _, c := range u.Log {
		out = append(out, bill{c.Op, c.ReadUnits, c.WriteUnits, c.IndexReadUnits, c.IndexWriteUnits, c.Items, c.Throttled, c.ConditionFailed})
	}
	return out
}

// The front bills each call as DynamoDB does, from item sizes, on any
// engine; where the engine reports the capacity it consumed as DynamoDB
// does (dynalite, but for an empty Query), the two agree.
func TestPartitionsBill(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 0)
	ctx := context.Background()
	big := sized(t, "big", "a", 5000, nil) // 2 read units, 5 write units
	put(t, p, table, big)
	put(t, p, table, sized(t, "small", "a", 300, map[string]types.AttributeValue{"bucket": str("b1"), "exp": num("100"), "proj": str("p")}))
	put(t, p, table, sized(t, "small", "b", 300, map[string]types.AttributeValue{"bucket": str("b1"), "exp": num("101")}))
	p.Take()

	get(p, table, key("big", "a"))
	get(p, table, key("none", "a"))
	p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("big", "a")}) // eventually consistent: half
	p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("big", "a"), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk")})
	p.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{key("big", "a"), key("small", "a"), key("none", "a")}, ConsistentRead: aws.Bool(true)},
	}})
	// A filter that drops both items: billed for both, read together.
	p.Query(ctx, &dynamodb.QueryInput{TableName: &table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("#pk = :pk"), FilterExpression: aws.String("#x = :x"),
		ExpressionAttributeNames:  map[string]string{"#pk": "pk", "#x": "nothing"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("small"), ":x": str("x")}})
	p.Query(ctx, &dynamodb.QueryInput{TableName: &table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk"), ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("nobody")}})
	p.Query(ctx, &dynamodb.QueryInput{TableName: &table, IndexName: aws.String("byBucket"),
		KeyConditionExpression: aws.String("#b = :b"), ExpressionAttributeNames: map[string]string{"#b": "bucket"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":b": str("b1")}})

	// Writes: the larger of before and after, in KB; index entries apart.
	names := map[string]string{"#b": "bucket", "#e": "exp", "#p": "proj"}
	put(t, p, table, sized(t, "w", "a", 2500, nil))                                    // 3: new
	p.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("w", "a"), // 3: the item before
		UpdateExpression: aws.String("REMOVE #pad"), ExpressionAttributeNames: map[string]string{"#pad": "pad"}})
	p.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("w", "a"), // 1, and an index entry of its own
		UpdateExpression: aws.String("SET #b = :b, #e = :e, #p = :p"), ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":b": str("b2"), ":e": num("5"), ":p": str("p")}})
	p.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("w", "a"), // the entry moves: two index writes
		UpdateExpression: aws.String("SET #e = :e"), ExpressionAttributeNames: map[string]string{"#e": "exp"}, ExpressionAttributeValues: map[string]types.AttributeValue{":e": num("6")}})
	p.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("w", "a"), // a projected attribute: one
		UpdateExpression: aws.String("SET #p = :p"), ExpressionAttributeNames: map[string]string{"#p": "proj"}, ExpressionAttributeValues: map[string]types.AttributeValue{":p": str("q")}})
	p.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("w", "a"), // not projected: none
		UpdateExpression: aws.String("SET #o = :o"), ExpressionAttributeNames: map[string]string{"#o": "other"}, ExpressionAttributeValues: map[string]types.AttributeValue{":o": str("o")}})
	_, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: big, // the condition fails: billed all the same
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if !errors.As(err, new(*types.ConditionalCheckFailedException)) {
		t.Fatalf("conditional PutItem over an item: %v", err)
	}
	p.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("w", "a")})    // 1, and its entry
	p.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("big", "a")})  // 5
	p.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("none", "a")}) // 1: nothing to delete

	u := p.Take()
	want := []bill{
		{Op: "GetItem", Read: 2, Items: 1},
		{Op: "GetItem", Read: 1},
		{Op: "GetItem", Read: 1, Items: 1},
		{Op: "GetItem", Read: 2, Items: 1},
		{Op: "BatchGetItem", Read: 4, Items: 2},
		{Op: "Query", Read: 1, Items: 2},
		{Op: "Query", Read: 1},
		{Op: "Query", IndexRead: 0.5, Items: 2},
		{Op: "PutItem", Write: 3},
		{Op: "UpdateItem", Write: 3},
		{Op: "UpdateItem", Write: 1, IndexWrite: 1},
		{Op: "UpdateItem", Write: 1, IndexWrite: 2},
		{Op: "UpdateItem", Write: 1, IndexWrite: 1},
		{Op: "UpdateItem", Write: 1},
		{Op: "PutItem", Write: 5, ConditionFailed: true},
		{Op: "DeleteItem", Write: 1, IndexWrite: 1},
		{Op: "DeleteItem", Write: 5},
		{Op: "DeleteItem", Write: 1},
	}
	if diff := cmp.Diff(want, bills(u)); diff != "" {
		t.Errorf("bills (-want +got):\n%s", diff)
	}
	if u.ReadUnits != 12 || u.IndexReadUnits != 0.5 || u.WriteUnits != 22 || u.IndexWriteUnits != 5 {
		t.Errorf("totals: read %v, index read %v, write %v, index write %v; want 12, 0.5, 22, 5", u.ReadUnits, u.IndexReadUnits, u.WriteUnits, u.IndexWriteUnits)
	}
	if u.Calls["UpdateItem"] != 5 || u.Calls["Query"] != 3 {
		t.Errorf("calls %v", u.Calls)
	}
	reports := ddbtest.ProbeReports(t, ddbtest.Client(t))
	t.Logf("the engine's reports: %+v", reports)
	for _, m := range reports.Mismatches(u) {
		t.Error(m)
	}
}

// Item sizes are DynamoDB's, Numbers included: at 1,024 bytes a write is
// one unit, at 1,025 two, and an engine that reports by size reports as
// much (dynalite sizes Numbers as DynamoDB does; where the engine reports
// fixed figures, the bill alone is checked).
func TestItemSizeAtTheUnitBoundary(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 0)
	reports := ddbtest.ProbeReports(t, ddbtest.Client(t))
	t.Logf("the engine's reports: %+v", reports)
	for i, n := range []string{"0", "7", "-7", "12", "100", "1796040000250", "-12.5", "0.001", "3.14159", "1e3", "99999999999999999999"} {
		for _, size := range []int{1024, 1025} {
			put(t, p, table, sized(t, "n", strconv.Itoa(i), size, map[string]types.AttributeValue{"n": num(n)}))
			c := p.Take().Log[0]
			want := float64(size+1023) / 1024
			want = float64(int(want))
			if c.WriteUnits != want {
				t.Errorf("Number %s in an item of %d bytes: billed %v, want %v", n, size, c.WriteUnits, want)
			}
			if reports.BySize && (c.Reported == nil || *c.Reported != want) {
				t.Errorf("Number %s in an item of %d bytes: the engine reported %v, want %v", n, size, reportedText(c.Reported), want)
			}
			p.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &table, Key: key("n", strconv.Itoa(i))})
			p.Take()
		}
	}
}

// reportedText is what an engine reported: its figure, or "nothing".
func reportedText(units *float64) string {
	if units == nil {
		return "nothing"
	}
	return strconv.FormatFloat(*units, 'g', -1, 64)
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		av   map[string]types.AttributeValue
		want int
	}{
		{map[string]types.AttributeValue{"a": str("héllo")}, 1 + 6},
		{map[string]types.AttributeValue{"n": num("0")}, 1 + 1},
		{map[string]types.AttributeValue{"n": num("1796040000250")}, 1 + 8},
		{map[string]types.AttributeValue{"n": num("-12.5")}, 1 + 4},
		{map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3}}}, 1 + 3},
		{map[string]types.AttributeValue{"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{str("ab"), num("1")}}}, 1 + 3 + (1 + 2) + (1 + 2)},
		{map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": str("v")}}}, 1 + 3 + 1 + 2},
		{map[string]types.AttributeValue{"s": &types.AttributeValueMemberSS{Value: []string{"ab", "c"}}}, 1 + 3},
	} {
		if got := ddbtest.ItemSize(tc.av); got != tc.want {
			t.Errorf("ItemSize(%v) = %d, want %d", tc.av, got, tc.want)
		}
	}
}

func throughputExceeded(t *testing.T, err error, reason string) {
	t.Helper()
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("error %v, want a ProvisionedThroughputExceededException", err)
	}
	if len(pte.ThrottlingReasons) != 1 || aws.ToString(pte.ThrottlingReasons[0].Reason) != reason {
		t.Errorf("throttling reasons %+v, want %s", pte.ThrottlingReasons, reason)
	}
}

// At a scale of 100, a partition key serves 30 read units a second, on the
// virtual clock alone: the 31st read of the second is refused, a key
// beside it is not, a tenth of a second refills 3 units, and ten idle
// seconds no more than one second's.
func TestPartitionsThrottleReads(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 100)
	put(t, p, table, sized(t, "hot", "a", 100, nil))
	for i := range 30 {
		if err := get(p, table, key("hot", "a")); err != nil {
			t.Fatalf("read %d: %v", i+1, err)
		}
	}
	throughputExceeded(t, get(p, table, key("hot", "a")), "TableReadKeyRangeThroughputExceeded")
	throughputExceeded(t, get(p, table, key("hot", "other sort key")), "TableReadKeyRangeThroughputExceeded")
	if err := get(p, table, key("cold", "a")); err != nil {
		t.Errorf("another partition key: %v", err)
	}
	reads := func(n int) (passed int) {
		for range n {
			if get(p, table, key("hot", "a")) == nil {
				passed++
			}
		}
		return passed
	}
	p.Advance(100 * time.Millisecond)
	if got := reads(5); got != 3 {
		t.Errorf("a tenth of a second later, %d of 5 reads passed, want 3", got)
	}
	p.Advance(10 * time.Second)
	if got := reads(40); got != 30 {
		t.Errorf("ten idle seconds later, %d of 40 reads passed, want 30 (no burst past a second)", got)
	}
	u := p.Usage()
	if u.Throttled != 2+2+10 || u.ThrottledKeys[table+" S:hot"] != 14 {
		t.Errorf("throttled %d, by key %v; want 14, all on the hot key", u.Throttled, u.ThrottledKeys)
	}
	if got := u.Keys[table+" S:hot"].ReadUnits; got != 30+3+30 {
		t.Errorf("the hot key was billed %v read units, want 63", got)
	}
}

// A large item's read takes its whole bill from the bucket, which then
// owes it: 11 units of a 30-unit second for a 45 KB item, so the third
// read passes on the last 8 units and the fourth waits for the debt.
func TestPartitionsBillLargeReadsWhole(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 100)
	put(t, p, table, sized(t, "big", "a", 45_000, nil)) // 11 read units
	passed := 0
	for range 4 {
		if get(p, table, key("big", "a")) == nil {
			passed++
		}
	}
	if passed != 3 {
		t.Errorf("%d reads of an 11-unit item passed in a 30-unit second, want 3", passed)
	}
	p.Advance(time.Second / 10) // 3 units: the bucket is at 0
	if get(p, table, key("big", "a")) == nil {
		t.Errorf("a read passed from an empty bucket: %+v", p.Usage())
	}
}

// A BatchGetItem reads the keys that fit and leaves the others
// unprocessed; none fitting, it is refused whole.
func TestPartitionsBatchGetItem(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 100)
	put(t, p, table, sized(t, "hot", "a", 100, nil))
	put(t, p, table, sized(t, "cold", "a", 100, nil))
	for range 30 {
		get(p, table, key("hot", "a"))
	}
	p.Take()
	ctx := context.Background()
	out, err := p.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{key("hot", "a"), key("cold", "a")}, ConsistentRead: aws.Bool(true)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Responses[table]); n != 1 || out.Responses[table][0]["pk"].(*types.AttributeValueMemberS).Value != "cold" {
		t.Errorf("responses %v, want the cold item alone", out.Responses)
	}
	un := out.UnprocessedKeys[table]
	if len(un.Keys) != 1 || un.Keys[0]["pk"].(*types.AttributeValueMemberS).Value != "hot" || !aws.ToBool(un.ConsistentRead) {
		t.Errorf("unprocessed %+v, want the hot key, strongly consistent", un)
	}
	_, err = p.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{key("hot", "a")}, ConsistentRead: aws.Bool(true)},
	}})
	throughputExceeded(t, err, "TableReadKeyRangeThroughputExceeded")
	u := p.Take()
	if u.Unprocessed != 1 || u.Throttled != 1 || u.ReadUnits != 1 {
		t.Errorf("unprocessed %d, throttled %d, read units %v; want 1, 1, 1", u.Unprocessed, u.Throttled, u.ReadUnits)
	}
}

// Writes have 10 units a second at a scale of 100, apart from reads; so
// has each partition key of an index, which items of many partition keys
// can share.
func TestPartitionsThrottleWrites(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 100)
	ctx := context.Background()
	for i := range 10 {
		put(t, p, table, sized(t, "w", "a", 100, map[string]types.AttributeValue{"v": num(strconv.Itoa(i))}))
	}
	_, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key("w", "a")})
	throughputExceeded(t, err, "TableWriteKeyRangeThroughputExceeded")
	if err := get(p, table, key("w", "a")); err != nil {
		t.Errorf("a read of the write-throttled key: %v", err)
	}
	for i := range 10 {
		put(t, p, table, map[string]types.AttributeValue{"pk": str("user" + strconv.Itoa(i)), "sk": str("s"), "bucket": str("hour#0"), "exp": num("1")})
	}
	_, err = p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{"pk": str("user10"), "sk": str("s"), "bucket": str("hour#0"), "exp": num("1")}})
	throughputExceeded(t, err, "IndexWriteKeyRangeThroughputExceeded")
	p.Advance(time.Second)
	if _, err := p.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key("w", "a")}); err != nil {
		t.Errorf("a second later: %v", err)
	}
	if u := p.Usage(); u.Throttled != 2 || u.ThrottledKeys[table+"/byBucket S:hour#0"] != 1 {
		t.Errorf("throttled %d, by key %v", u.Throttled, u.ThrottledKeys)
	}
}

// The front passes the caller's own ReturnConsumedCapacity through and
// adds nothing where the caller asked for none.
func TestPartitionsConsumedCapacityAsAsked(t *testing.T) {
	t.Parallel()
	p, table := partitionsTable(t, 0)
	put(t, p, table, sized(t, "k", "a", 100, nil))
	ctx := context.Background()
	out, err := p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("k", "a")})
	if err != nil || out.ConsumedCapacity != nil {
		t.Errorf("asked for none: %v, %+v", err, out.ConsumedCapacity)
	}
	out, err = p.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("k", "a"), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil || out.ConsumedCapacity == nil || aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) != 0.5 {
		t.Errorf("asked for the total: %v, %+v", err, out.ConsumedCapacity)
	}
}
