package ddbtest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A TTLClient stands in for a *dynamodb.Client as ddbsession's
// Config.Client.
var _ ddbsession.Client = (*ddbtest.TTLClient)(nil)

// createTable creates a table of t's with a string hash key, and waits
// until it is active.
func createTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	name := ddbtest.TableName(t, client)
	createTableNamed(t, client, name)
	return name
}

func createTableNamed(t *testing.T, client *dynamodb.Client, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable %q: %v", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute); err != nil {
		t.Fatalf("wait for %q: %v", name, err)
	}
}

func enable(on bool, attribute, table string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName:               &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: &attribute, Enabled: &on},
	}
}

// describe returns the table's TTL status and attribute through c.
func describe(t *testing.T, c *ddbtest.TTLClient, table string) (types.TimeToLiveStatus, string) {
	t.Helper()
	out, err := c.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		t.Fatalf("DescribeTimeToLive %q: %v", table, err)
	}
	d := out.TimeToLiveDescription
	return d.TimeToLiveStatus, aws.ToString(d.AttributeName)
}

func wantStatus(t *testing.T, c *ddbtest.TTLClient, table string, status types.TimeToLiveStatus, attribute string) {
	t.Helper()
	gotStatus, gotAttribute := describe(t, c, table)
	if gotStatus != status || gotAttribute != attribute {
		t.Errorf("TTL of %q is %s on %q, want %s on %q", table, gotStatus, gotAttribute, status, attribute)
	}
}

// wantCode fails t unless err is an API error with the given code,
// reported for operation op.
func wantCode(t *testing.T, err error, op, code string) {
	t.Helper()
	var api smithy.APIError
	var opErr *smithy.OperationError
	switch {
	case !errors.As(err, &api) || api.ErrorCode() != code:
		t.Errorf("error %v, want %s", err, code)
	case !errors.As(err, &opErr) || opErr.Operation() != op:
		t.Errorf("error %v, want it reported for %s", err, op)
	}
}

// TestSupportsTTL checks the probe against what the engine answers for a
// real table.
func TestSupportsTTL(t *testing.T) {
	t.Parallel()
	client := ddbtest.Client(t)
	table := createTable(t, client)
	_, err := client.UpdateTimeToLive(context.Background(), enable(true, "expiresAt", table))
	var api smithy.APIError
	lacksIt := errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
	if err != nil && !lacksIt {
		t.Fatalf("UpdateTimeToLive on the engine: %v", err)
	}
	supported, err := ddbtest.SupportsTTL(context.Background(), client)
	if err != nil {
		t.Fatalf("SupportsTTL: %v", err)
	}
	if supported == lacksIt {
		t.Errorf("SupportsTTL = %v, but the engine answered UpdateTimeToLive with UnknownOperationException: %v", supported, lacksIt)
	}
	t.Logf("the engine implements UpdateTimeToLive: %v", supported)
}

func TestSupportsTTLFailsWithoutEngine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ddbtest.SupportsTTL(ctx, ddbtest.Client(t)); err == nil {
		t.Error("SupportsTTL with a cancelled context: no error")
	}
}

func TestTTLClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)

	t.Run("off, then on the attribute, then off", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		table := createTable(t, client)
		wantStatus(t, c, table, types.TimeToLiveStatusDisabled, "")
		out, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table))
		if err != nil {
			t.Fatalf("enable: %v", err)
		}
		if spec := out.TimeToLiveSpecification; aws.ToString(spec.AttributeName) != "expiresAt" || !aws.ToBool(spec.Enabled) {
			t.Errorf("enable answered %+v, want expiresAt enabled", spec)
		}
		wantStatus(t, c, table, types.TimeToLiveStatusEnabled, "expiresAt")
		if _, err := c.UpdateTimeToLive(ctx, enable(false, "expiresAt", table)); err != nil {
			t.Fatalf("disable: %v", err)
		}
		wantStatus(t, c, table, types.TimeToLiveStatusDisabled, "")
	})

	t.Run("redundant or conflicting updates", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		table := createTable(t, client)
		_, err := c.UpdateTimeToLive(ctx, enable(false, "expiresAt", table))
		wantCode(t, err, "UpdateTimeToLive", "ValidationException")
		if _, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table)); err != nil {
			t.Fatalf("enable: %v", err)
		}
		_, err = c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table))
		wantCode(t, err, "UpdateTimeToLive", "ValidationException")
		_, err = c.UpdateTimeToLive(ctx, enable(true, "other", table))
		wantCode(t, err, "UpdateTimeToLive", "ValidationException")
		_, err = c.UpdateTimeToLive(ctx, enable(false, "other", table))
		wantCode(t, err, "UpdateTimeToLive", "ValidationException")
		wantStatus(t, c, table, types.TimeToLiveStatusEnabled, "expiresAt")
	})

	t.Run("missing table", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		// Emulation starts with the first update the engine cannot do.
		if _, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", createTable(t, client))); err != nil {
			t.Fatalf("enable: %v", err)
		}
		missing := "t-no-such-table-" + strings.ToLower(rand.Text())
		_, engineErr := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &missing})
		var notFound *types.ResourceNotFoundException
		if !errors.As(engineErr, &notFound) {
			t.Fatalf("the engine's DescribeTable of a missing table: %v, want ResourceNotFoundException", engineErr)
		}
		_, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &missing})
		wantCode(t, err, "DescribeTimeToLive", notFound.ErrorCode())
		_, err = c.UpdateTimeToLive(ctx, enable(true, "expiresAt", missing))
		wantCode(t, err, "UpdateTimeToLive", notFound.ErrorCode())
	})

	t.Run("per table", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		on, off := createTable(t, client), createTable(t, client)
		if _, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", on)); err != nil {
			t.Fatalf("enable: %v", err)
		}
		wantStatus(t, c, on, types.TimeToLiveStatusEnabled, "expiresAt")
		wantStatus(t, c, off, types.TimeToLiveStatusDisabled, "")
	})

	t.Run("a table created again starts with TTL off", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		table := createTable(t, client)
		if _, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table)); err != nil {
			t.Fatalf("enable: %v", err)
		}
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table}); err != nil {
			t.Fatalf("DeleteTable: %v", err)
		}
		waiter := dynamodb.NewTableNotExistsWaiter(client, func(o *dynamodb.TableNotExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
			t.Fatalf("wait for deletion: %v", err)
		}
		createTableNamed(t, client, table)
		wantStatus(t, c, table, types.TimeToLiveStatusDisabled, "")
	})

	t.Run("concurrent tables", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		tables := make([]string, 4)
		for i := range tables {
			tables[i] = createTable(t, client)
		}
		var wg sync.WaitGroup
		for _, table := range tables {
			wg.Go(func() {
				if _, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table)); err != nil {
					t.Errorf("enable %q: %v", table, err)
				}
				if _, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table}); err != nil {
					t.Errorf("describe %q: %v", table, err)
				}
			})
		}
		wg.Wait()
		for _, table := range tables {
			wantStatus(t, c, table, types.TimeToLiveStatusEnabled, "expiresAt")
		}
	})

	t.Run("other methods are the client's", func(t *testing.T) {
		t.Parallel()
		c := ddbtest.WithTTL(client)
		table := createTable(t, client)
		key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key}); err != nil {
			t.Fatalf("PutItem: %v", err)
		}
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem: %v, item %v", err, out)
		}
	})
}
