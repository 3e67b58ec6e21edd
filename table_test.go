package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// engines runs f against the test engine as it is, and against the same
// engine through ddbtest.WithTTL, which adds Time to Live where the engine
// lacks it. ttl tells f whether the client it gets has TTL: probed for the
// engine itself, so that the assertions hold on DynamoDB (which has it) and
// on dynalite (which has not), and both branches run on either.
func engines(t *testing.T, f func(t *testing.T, ttl bool, withClient func(*ddbsession.Config[User]))) {
	supported, err := ddbtest.SupportsTTL(context.Background(), ddbtest.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Run(fmt.Sprintf("engine (TTL %v)", supported), func(t *testing.T) {
		t.Parallel()
		f(t, supported, nil)
	})
	t.Run("engine with TTL", func(t *testing.T) {
		t.Parallel()
		f(t, true, func(c *ddbsession.Config[User]) { c.Client = ddbtest.WithTTL(ddbtest.Client(t)) })
	})
}

func TestCreateTable(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, ttl bool, withClient func(*ddbsession.Config[User])) {
		e := newEnv(t, withClient)
		out, err := e.client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &e.table})
		if err != nil {
			t.Fatal(err)
		}
		d := out.Table
		if d.TableStatus != types.TableStatusActive {
			t.Errorf("status %s, want ACTIVE", d.TableStatus)
		}
		if d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
			t.Errorf("billing %+v, want PAY_PER_REQUEST", d.BillingModeSummary)
		}
		ignore := cmpopts.IgnoreUnexported(types.KeySchemaElement{}, types.AttributeDefinition{})
		wantKeys := []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		}
		if diff := cmp.Diff(wantKeys, d.KeySchema, ignore); diff != "" {
			t.Errorf("key schema (-want +got):\n%s", diff)
		}
		wantAttrs := []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		}
		if diff := cmp.Diff(wantAttrs, d.AttributeDefinitions, ignore); diff != "" {
			t.Errorf("attribute definitions (-want +got):\n%s", diff)
		}

		warned := strings.Contains(e.logs.String(), "level=WARN") && strings.Contains(e.logs.String(), "UpdateTimeToLive")
		if ttl {
			// TTL is on, on the configured attribute, and nothing warned.
			out, err := e.cfg.Client.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: &e.table})
			if err != nil {
				t.Fatal(err)
			}
			d := out.TimeToLiveDescription
			if d == nil || aws.ToString(d.AttributeName) != "expiresAt" ||
				(d.TimeToLiveStatus != types.TimeToLiveStatusEnabled && d.TimeToLiveStatus != types.TimeToLiveStatusEnabling) {
				t.Errorf("TTL after CreateTable = %+v, want enabled on expiresAt", d)
			}
			if warned {
				t.Errorf("CreateTable warned about TTL on an engine that has it:\n%s", e.logs)
			}
		} else if !warned {
			// The engine lacks UpdateTimeToLive: CreateTable warned and carried on.
			t.Errorf("no warning about UpdateTimeToLive:\n%s", e.logs)
		}

		// Calling it again on the existing table is fine, TTL already on or not.
		if err := e.m.CreateTable(context.Background()); err != nil {
			t.Errorf("second CreateTable: %v", err)
		}
	})
}

func TestCheckTable(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, ttl bool, withClient func(*ddbsession.Config[User])) {
		e := newEnv(t, withClient)
		err := e.m.CheckTable(context.Background())
		switch {
		case ttl && err != nil:
			t.Errorf("CheckTable on the table CreateTable made = %v, want nil", err)
		case !ttl && (!errors.Is(err, ddbsession.ErrTTLOff) || errors.Is(err, ddbsession.ErrTableSchema)):
			t.Errorf("CheckTable on an engine without TTL = %v, want ErrTTLOff alone", err)
		}

		mismatched := []struct {
			name   string
			mutate func(*ddbsession.Config[User])
		}{
			{"hash-only config on a table with a sort key", func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true }},
			{"other partition key name", func(c *ddbsession.Config[User]) { c.Layout.PartitionKey = "PK" }},
			{"other sort key name", func(c *ddbsession.Config[User]) { c.Layout.SortKey = "SK" }},
			{"missing expiry index", func(c *ddbsession.Config[User]) { c.Layout.ExpiryIndex = "expiry" }},
		}
		for _, tc := range mismatched {
			t.Run(tc.name, func(t *testing.T) {
				cfg := e.cfg
				tc.mutate(&cfg)
				m, err := ddbsession.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.CheckTable(context.Background()); !errors.Is(err, ddbsession.ErrTableSchema) {
					t.Errorf("CheckTable = %v, want ErrTableSchema", err)
				}
			})
		}
		if ttl {
			// TTL on another attribute than the configured one.
			cfg := e.cfg
			cfg.Layout.TTLAttribute = "ttl"
			m, err := ddbsession.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.CheckTable(context.Background()); !errors.Is(err, ddbsession.ErrTTLOff) {
				t.Errorf("CheckTable with TTL on expiresAt, configured ttl = %v, want ErrTTLOff", err)
			}
		}
	})
}

func TestCheckTableNumberKey(t *testing.T) {
	t.Parallel()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	_, err := client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            &table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: table, Layout: ddbsession.Layout{HashOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckTable(context.Background()); !errors.Is(err, ddbsession.ErrTableSchema) {
		t.Errorf("CheckTable with a Number key = %v, want ErrTableSchema", err)
	}
}

// ttlEngine answers the TTL operations the way DynamoDB does, for the paths
// that dynalite cannot show.
func ttlEngine(p *probe, attr string, status types.TimeToLiveStatus, updateErr error) {
	p.fail = func(_ context.Context, op string) error {
		if op == "UpdateTimeToLive" {
			return updateErr
		}
		return nil
	}
	p.answer = func(_ context.Context, op string, _ any) (any, bool) {
		switch op {
		case "DescribeTimeToLive":
			return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{
				AttributeName: aws.String(attr), TimeToLiveStatus: status,
			}}, true
		case "UpdateTimeToLive":
			return &dynamodb.UpdateTimeToLiveOutput{}, true
		}
		return nil, false
	}
}

func TestTTLChecksAgainstDynamoDBAnswers(t *testing.T) {
	t.Parallel()
	accessDenied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not allowed"}
	cases := []struct {
		name       string
		attr       string
		status     types.TimeToLiveStatus
		updateErr  error
		wantCreate error // from CreateTable; nil for success
		wantCheck  error // from CheckTable
	}{
		{"enabled on expiresAt", "expiresAt", types.TimeToLiveStatusEnabled, nil, nil, nil},
		{"enabled on another attribute", "ttl", types.TimeToLiveStatusEnabled, nil, ddbsession.ErrTTLOff, ddbsession.ErrTTLOff},
		{"disabled and enabling fails", "", types.TimeToLiveStatusDisabled, accessDenied, accessDenied, ddbsession.ErrTTLOff},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *probe
			e := newEnv(t, withProbe(&p))
			ttlEngine(p, tc.attr, tc.status, tc.updateErr)
			if err := e.m.CreateTable(context.Background()); !errors.Is(err, tc.wantCreate) || (tc.wantCreate == nil) != (err == nil) {
				t.Errorf("CreateTable = %v, want %v", err, tc.wantCreate)
			}
			if err := e.m.CheckTable(context.Background()); !errors.Is(err, tc.wantCheck) || (tc.wantCheck == nil) != (err == nil) {
				t.Errorf("CheckTable = %v, want %v", err, tc.wantCheck)
			}
		})
	}
}

// A table created by hand with other keys than the configured ones is a
// mistake CreateTable reports, instead of the first Login failing with
// "Missing the key id".
func TestCreateTableOnOtherSchema(t *testing.T) {
	t.Parallel()
	s, n := types.ScalarAttributeTypeS, types.ScalarAttributeTypeN
	cases := []struct {
		name   string
		keys   []tableKey // of the existing table
		mutate func(*ddbsession.Config[User])
	}{
		{"hash key id", []tableKey{{"id", s, types.KeyTypeHash}}, nil},
		{"other key names", []tableKey{{"PK", s, types.KeyTypeHash}, {"SK", s, types.KeyTypeRange}}, nil},
		{"Number partition key", []tableKey{{"pk", n, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}}, nil},
		{"sort key, hash-only config", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true }},
		{"no expiry index", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			withExpiryIndex},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := ddbtest.Client(t)
			table := ddbtest.TableName(t, client)
			createTable(t, client, table, tc.keys)
			cfg := ddbsession.Config[User]{Client: client, Table: table}
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			m, err := ddbsession.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = m.CreateTable(context.Background())
			if !errors.Is(err, ddbsession.ErrTableSchema) {
				t.Fatalf("CreateTable on an existing table with other keys = %v, want ErrTableSchema", err)
			}
			if !strings.Contains(err.Error(), table) {
				t.Errorf("CreateTable's error does not name table %q: %v", table, err)
			}
		})
	}
}

type tableKey struct {
	name     string
	attrType types.ScalarAttributeType
	keyType  types.KeyType
}

// createTable creates a table with the given keys behind the Manager's
// back, as a newcomer might by hand.
func createTable(t *testing.T, client *dynamodb.Client, table string, keys []tableKey) {
	t.Helper()
	in := &dynamodb.CreateTableInput{TableName: &table, BillingMode: types.BillingModePayPerRequest}
	for _, k := range keys {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k.name), AttributeType: k.attrType})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k.name), KeyType: k.keyType})
	}
	if _, err := client.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := waiter.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// A global table says how it replicates, and CheckTable and CreateTable
// hold it against Config.MREC: a table in multi-Region eventual
// consistency without it is refused (a write in one Region could undo a
// RevokeAll in another); one in multi-Region strong consistency has no TTL,
// which CheckTable reports with what to do instead, and CreateTable leaves
// it be. The probe answers DescribeTable as DynamoDB describes such tables.
func TestGlobalTables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		consistency types.MultiRegionConsistency
		mrec        bool
		wantCheck   []error // each must be in CheckTable's error
		wantCreate  error
		checkSays   string
	}{
		{"MREC without Config.MREC", types.MultiRegionConsistencyEventual, false, []error{ddbsession.ErrTableSchema, ddbsession.ErrTTLOff}, ddbsession.ErrTableSchema, "set Config.MREC"},
		{"MREC with Config.MREC", types.MultiRegionConsistencyEventual, true, []error{ddbsession.ErrTTLOff}, nil, "TTL is off"},
		{"MRSC", types.MultiRegionConsistencyStrong, false, []error{ddbsession.ErrTTLOff}, nil, "multi-Region strong consistency (MRSC), which has no TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *probe
			e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.MREC = tc.mrec })
			p.answer = func(ctx context.Context, op string, in any) (any, bool) {
				if op != "DescribeTable" {
					return nil, false
				}
				out, err := p.next.DescribeTable(ctx, in.(*dynamodb.DescribeTableInput))
				if err != nil {
					t.Fatal(err)
				}
				out.Table.MultiRegionConsistency = tc.consistency
				out.Table.Replicas = []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("us-west-2")}}
				return out, true
			}
			err := e.m.CheckTable(context.Background())
			for _, want := range tc.wantCheck {
				if !errors.Is(err, want) {
					t.Errorf("CheckTable = %v, want it to wrap %v", err, want)
				}
			}
			if errors.Is(err, ddbsession.ErrTableSchema) != slices.Contains(tc.wantCheck, ddbsession.ErrTableSchema) {
				t.Errorf("CheckTable = %v; want ErrTableSchema %v", err, slices.Contains(tc.wantCheck, ddbsession.ErrTableSchema))
			}
			if err == nil || !strings.Contains(err.Error(), tc.checkSays) {
				t.Errorf("CheckTable = %v, want it to say %q", err, tc.checkSays)
			}
			p.reset()
			if err := e.m.CreateTable(context.Background()); !errors.Is(err, tc.wantCreate) || (tc.wantCreate == nil) != (err == nil) {
				t.Errorf("CreateTable on the existing table = %v, want %v", err, tc.wantCreate)
			}
			if tc.consistency == types.MultiRegionConsistencyStrong && p.count("UpdateTimeToLive") != 0 {
				t.Error("CreateTable tried to enable TTL on an MRSC table, which cannot have it")
			}
		})
	}
}
