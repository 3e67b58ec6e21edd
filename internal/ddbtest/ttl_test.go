package ddbtest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
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
	ddbtest.WaitActive(t, client, name)
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

// enginesWithoutTTL are the engines that TTLClient emulates TTL on, made
// of the test engine: its tests are of the emulation, which must never
// depend on whether the engine behind it has TTL. Two stand-ins answer the
// TTL operations as engines without TTL do, whatever the engine has:
//
//   - "no UpdateTimeToLive", as dynalite: UpdateTimeToLive is an
//     UnknownOperationException, and DescribeTimeToLive says DISABLED of a
//     table that exists and ResourceNotFoundException of one that does not
//     (asking the engine's DescribeTable which);
//   - "neither operation": both are UnknownOperationExceptions.
//
// The engine itself is one too where it lacks UpdateTimeToLive (dynalite).
func enginesWithoutTTL(t *testing.T, client *dynamodb.Client) map[string]*dynamodb.Client {
	t.Helper()
	unknown := func(context.Context, any) (any, error) {
		return nil, apiError("UnknownOperationException", "")
	}
	noUpdate, _ := standIn(client, map[string]answer{
		"UpdateTimeToLive": unknown,
		"DescribeTimeToLive": func(ctx context.Context, in any) (any, error) {
			name := in.(*dynamodb.DescribeTimeToLiveInput).TableName
			if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: name}); err != nil {
				return nil, engineError(err)
			}
			return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}}, nil
		},
	})
	neither, _ := standIn(client, map[string]answer{"UpdateTimeToLive": unknown, "DescribeTimeToLive": unknown})
	engines := map[string]*dynamodb.Client{"no UpdateTimeToLive": noUpdate, "neither operation": neither}
	supported, err := ddbtest.SupportsTTL(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if !supported {
		engines["the engine itself"] = client
	}
	return engines
}

// TestTTLClient tests the emulation, on each engine without TTL.
func TestTTLClient(t *testing.T) {
	t.Parallel()
	for name, engine := range enginesWithoutTTL(t, ddbtest.Client(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testEmulation(t, engine)
		})
	}
}

// testEmulation tests TTLClient's emulation on client, an engine without
// TTL. Tables are made and deleted through it, as through any engine.
func testEmulation(t *testing.T, client *dynamodb.Client) {
	ctx := context.Background()

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

// TestTTLClientOnEngineWithTTL: on an engine that has TTL, TTLClient is
// the engine, answers and errors alike, and emulates nothing: it never
// asks DescribeTable, which only the emulation does. It runs on a
// stand-in that answers as DynamoDB documents its TTL operations, and on
// the test engine itself where that has TTL (moto does, dynalite not).
func TestTTLClientOnEngineWithTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)

	t.Run("DynamoDB's documented answers", func(t *testing.T) {
		t.Parallel()
		table := createTable(t, client)
		// UpdateTimeToLive "returns the current TimeToLiveSpecification.
		// It can take up to one hour for the change to fully process. Any
		// additional UpdateTimeToLive calls for the same table during this
		// one hour duration result in a ValidationException"; meanwhile
		// DescribeTimeToLive says ENABLING (TimeToLiveStatus: ENABLING |
		// DISABLING | ENABLED | DISABLED):
		// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html
		// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TimeToLiveDescription.html
		enabled := &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}
		enabling := &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{AttributeName: aws.String("expiresAt"), TimeToLiveStatus: types.TimeToLiveStatusEnabling}}
		tooSoon := apiError("ValidationException", "Time to live has been modified multiple times within a fixed interval")
		var mu sync.Mutex
		updates := 0
		engine, calls := standIn(client, map[string]answer{
			"UpdateTimeToLive": func(context.Context, any) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				if updates++; updates > 1 {
					return nil, tooSoon
				}
				return enabled, nil
			},
			"DescribeTimeToLive": func(context.Context, any) (any, error) { return enabling, nil },
		})
		c := ddbtest.WithTTL(engine)

		out, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table))
		if err != nil || out != enabled {
			t.Errorf("enable: %+v, %v; want the engine's answer %+v", out, err, enabled)
		}
		described, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
		if err != nil || described != enabling {
			t.Errorf("describe: %+v, %v; want the engine's answer %+v", described, err, enabling)
		}
		_, err = c.UpdateTimeToLive(ctx, enable(false, "expiresAt", table))
		if !errors.Is(err, tooSoon) {
			t.Errorf("disable within the hour: %v, want the engine's %v", err, tooSoon)
		}
		wantCode(t, err, "UpdateTimeToLive", "ValidationException")
		if described, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table}); err != nil || described != enabling {
			t.Errorf("describe after the refused disable: %+v, %v; want the engine's answer %+v", described, err, enabling)
		}
		if got, want := calls(), []string{"UpdateTimeToLive", "DescribeTimeToLive", "UpdateTimeToLive", "DescribeTimeToLive"}; !slices.Equal(got, want) {
			t.Errorf("TTLClient called %v, want %v: the engine's TTL operations alone", got, want)
		}
	})

	supported, err := ddbtest.SupportsTTL(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if !supported {
		t.Log("the engine lacks UpdateTimeToLive: TTLClient on it is the emulation, which TestTTLClient tests")
		return
	}
	t.Run("the engine itself", func(t *testing.T) {
		t.Parallel()
		table := createTable(t, client)
		engine, calls := standIn(client, nil)
		c := ddbtest.WithTTL(engine)
		out, err := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table))
		if err != nil {
			t.Fatalf("enable: %v", err)
		}
		if spec := out.TimeToLiveSpecification; aws.ToString(spec.AttributeName) != "expiresAt" || !aws.ToBool(spec.Enabled) {
			t.Errorf("enable answered %+v, want expiresAt enabled", spec)
		}
		// The change may take up to an hour: ENABLING until it has.
		status, attribute := describe(t, c, table)
		if (status != types.TimeToLiveStatusEnabling && status != types.TimeToLiveStatusEnabled) || attribute != "expiresAt" {
			t.Errorf("TTL after enabling is %s on %q, want ENABLING or ENABLED on expiresAt", status, attribute)
		}
		// What else the engine answers, TTLClient answers alike: an
		// update DynamoDB refuses within the hour, and a missing table.
		_, viaTTLClient := c.UpdateTimeToLive(ctx, enable(true, "expiresAt", table))
		_, viaEngine := client.UpdateTimeToLive(ctx, enable(true, "expiresAt", table))
		if code(viaTTLClient) != code(viaEngine) {
			t.Errorf("enabling again: TTLClient answered %v, the engine %v", viaTTLClient, viaEngine)
		}
		missing := "t-no-such-table-" + strings.ToLower(rand.Text())
		_, viaTTLClient = c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &missing})
		_, viaEngine = client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &missing})
		if viaEngine == nil || code(viaTTLClient) != code(viaEngine) {
			t.Errorf("describing a missing table: TTLClient answered %v, the engine %v", viaTTLClient, viaEngine)
		}
		if slices.Contains(calls(), "DescribeTable") {
			t.Errorf("TTLClient called %v: DescribeTable is the emulation's", calls())
		}
	})
}

// code is err's API error code; "" for none, "?" for an error that is no
// API error.
func code(err error) string {
	var api smithy.APIError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &api):
		return api.ErrorCode()
	default:
		return "?"
	}
}
