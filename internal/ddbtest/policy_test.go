package ddbtest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func frontKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

// accessDenied reports whether err is DynamoDB's answer to a call that the
// caller's policy does not allow, as the SDK reports it: HTTP 400, error
// code AccessDeniedException, naming the action and the resource.
func accessDenied(t *testing.T, err error, action, resource string) {
	t.Helper()
	var api smithy.APIError
	var res *awshttp.ResponseError
	switch {
	case !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException":
		t.Fatalf("error %v, want AccessDeniedException", err)
	case !errors.As(err, &res) || res.HTTPStatusCode() != 400 || res.ServiceRequestID() == "":
		t.Errorf("error %v: want HTTP 400 with a request ID, as DynamoDB answers", err)
	case !strings.Contains(api.ErrorMessage(), "is not authorized to perform: "+action+" on resource: "+resource+" because"):
		t.Errorf("message %q does not name %s on %s", api.ErrorMessage(), action, resource)
	}
}

func TestFrontAllowsOnlyThePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := ddbtest.Client(t)
	table, other := createTable(t, admin), createTable(t, admin)
	front := ddbtest.NewFront(t, ddbtest.Policy{
		Actions:   []string{"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"},
		Resources: []string{ddbtest.TableARN(table)},
	})
	c := front.Client()

	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: frontKey("a")}); err != nil {
		t.Fatalf("PutItem, allowed: %v", err)
	}
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: frontKey("a"), ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("GetItem, allowed: item %v, %v", got, err)
	}

	_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: frontKey("a")})
	accessDenied(t, err, "dynamodb:DeleteItem", ddbtest.TableARN(table))
	if got, err := admin.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: frontKey("a"), ConsistentRead: aws.Bool(true)}); err != nil || got.Item == nil {
		t.Errorf("the refused DeleteItem reached the engine: item %v, %v", got.Item, err)
	}

	_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &other, Key: frontKey("a")})
	accessDenied(t, err, "dynamodb:GetItem", ddbtest.TableARN(other))

	// A batch needs the action on each of its tables.
	_, err = c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {Keys: []map[string]types.AttributeValue{frontKey("a")}},
		other: {Keys: []map[string]types.AttributeValue{frontKey("a")}},
	}})
	accessDenied(t, err, "dynamodb:BatchGetItem", ddbtest.TableARN(other))

	if diff := cmp.Diff([]string{"dynamodb:GetItem", "dynamodb:PutItem"}, front.Used()); diff != "" {
		t.Errorf("Used (-want +got):\n%s", diff)
	}
	// The calls it let through, counted; the refused ones are not.
	if diff := cmp.Diff(map[string]int{"GetItem": 1, "PutItem": 1}, front.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	var refused []string
	for _, c := range front.Refused() {
		refused = append(refused, c.Action+" "+strings.Join(c.Resources, ","))
	}
	want := []string{
		"dynamodb:DeleteItem " + ddbtest.TableARN(table),
		"dynamodb:GetItem " + ddbtest.TableARN(other),
		"dynamodb:BatchGetItem " + strings.Join(slices.Sorted(slices.Values([]string{ddbtest.TableARN(table), ddbtest.TableARN(other)})), ","),
	}
	if diff := cmp.Diff(want, refused); diff != "" {
		t.Errorf("Refused (-want +got):\n%s", diff)
	}
}

func TestFrontIndexIsAResourceOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := ddbtest.Client(t)
	table := ddbtest.TableName(t, admin)
	_, err := admin.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: &table,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("byG"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, admin, table)
	query := func(c *dynamodb.Client, index *string) error {
		in := &dynamodb.QueryInput{
			TableName:                 &table,
			IndexName:                 index,
			KeyConditionExpression:    aws.String("#k = :v"),
			ExpressionAttributeNames:  map[string]string{"#k": "pk"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "x"}},
		}
		if index != nil {
			in.ExpressionAttributeNames["#k"] = "g"
		}
		_, err := c.Query(ctx, in)
		return err
	}
	tableOnly := ddbtest.NewFront(t, ddbtest.Policy{Actions: []string{"dynamodb:Query"}, Resources: []string{ddbtest.TableARN(table)}})
	if err := query(tableOnly.Client(), nil); err != nil {
		t.Fatalf("Query of the table, allowed: %v", err)
	}
	accessDenied(t, query(tableOnly.Client(), aws.String("byG")), "dynamodb:Query", ddbtest.IndexARN(table, "byG"))

	// IAM's wildcards: * across the slashes of an index ARN, ? for one
	// character, and actions in any case.
	wild := ddbtest.NewFront(t, ddbtest.Policy{
		Actions:   []string{"DynamoDB:Q?ery"},
		Resources: []string{ddbtest.TableARN(table) + "/index/*"},
	})
	if err := query(wild.Client(), aws.String("byG")); err != nil {
		t.Fatalf("Query of the index under a wildcard: %v", err)
	}
	accessDenied(t, query(wild.Client(), nil), "dynamodb:Query", ddbtest.TableARN(table))
}

func TestFrontHoldsACallUntilLetGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := ddbtest.Client(t)
	table := createTable(t, admin)
	held, release, gone := make(chan string), make(chan struct{}), make(chan struct{})
	front := ddbtest.NewFront(t, ddbtest.Policy{Actions: []string{"dynamodb:PutItem"}, Resources: []string{ddbtest.TableARN(table)}},
		ddbtest.FrontHold(func(ctx context.Context, c ddbtest.FrontCall) bool {
			held <- string(c.Body)
			select {
			case <-release:
				return true
			case <-ctx.Done():
				close(gone)
				return false
			}
		}))
	exists := func(pk string) bool {
		t.Helper()
		out, err := admin.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: frontKey(pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}

	done := make(chan error, 1)
	go func() {
		_, err := front.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: frontKey("let-go")})
		done <- err
	}()
	if body := <-held; !strings.Contains(body, "let-go") {
		t.Fatalf("held %s", body)
	}
	if exists("let-go") {
		t.Fatal("a held put reached the engine")
	}
	release <- struct{}{}
	if err := <-done; err != nil || !exists("let-go") {
		t.Fatalf("the put let go: %v, in the table %v", err, exists("let-go"))
	}

	// A caller that goes away while its call is held (a process killed)
	// never has the call reach the engine.
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := front.Client().PutItem(cctx, &dynamodb.PutItemInput{TableName: &table, Item: frontKey("lost")}, func(o *dynamodb.Options) {
			o.RetryMaxAttempts = 1
		})
		done <- err
	}()
	<-held
	cancel()
	<-gone
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that went away: %v", err)
	}
	close(release) // nothing is held any more: a late release changes nothing
	if exists("lost") {
		t.Error("the put of a caller gone while it was held reached the engine")
	}
}

func TestFrontTTLThroughTTLClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := ddbtest.WithTTL(ddbtest.Client(t))
	table := createTable(t, admin.Client)
	front := ddbtest.NewFront(t, ddbtest.Policy{Actions: []string{"dynamodb:DescribeTimeToLive"}, Resources: []string{ddbtest.TableARN(table)}},
		ddbtest.FrontTTL(admin))
	describeThrough := func() types.TimeToLiveStatus {
		t.Helper()
		out, err := front.Client().DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
		if err != nil {
			t.Fatal(err)
		}
		return out.TimeToLiveDescription.TimeToLiveStatus
	}
	if got := describeThrough(); got != types.TimeToLiveStatusDisabled {
		t.Errorf("before: %s", got)
	}
	if _, err := admin.UpdateTimeToLive(ctx, enable(true, "expiresAt", table)); err != nil {
		t.Fatal(err)
	}
	if got := describeThrough(); got != types.TimeToLiveStatusEnabled {
		t.Errorf("after the admin enabled TTL: %s", got)
	}
	// The policy still decides first.
	_, err := front.Client().UpdateTimeToLive(ctx, enable(false, "expiresAt", table))
	accessDenied(t, err, "dynamodb:UpdateTimeToLive", ddbtest.TableARN(table))
}

func TestDocumentedPolicies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(text string) string {
		t.Helper()
		f := filepath.Join(dir, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))+".md")
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	got, err := ddbtest.DocumentedPolicies(write("# Policy\n\n" +
		"| Feature set | What | Actions |\n|---|---|---|\n" +
		"| `sign-in` | Login, Logout | `dynamodb:PutItem`, `dynamodb:GetItem` `dynamodb:PutItem` |\n" +
		"| `startup` | CreateTable | `dynamodb:DescribeTable` |\n" +
		"| not a set | prose | `dynamodb:Scan` |\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"sign-in": {"dynamodb:GetItem", "dynamodb:PutItem"}, "startup": {"dynamodb:DescribeTable"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ddbtest.DocumentedPolicies(write("| `a` | x | `dynamodb:GetItem` |\n| `a` | y | `dynamodb:PutItem` |\n")); err == nil {
		t.Error("a feature set in two rows: no error")
	}
	if _, err := ddbtest.DocumentedPolicies(write("no table here\n")); err == nil {
		t.Error("no table: no error")
	}
}
