package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

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
			{"hash-only config on a table with a sort key", func(c *ddbsession.Config[User]) { c.HashOnly = true }},
			{"other partition key name", func(c *ddbsession.Config[User]) { c.PartitionKey = "PK" }},
			{"other sort key name", func(c *ddbsession.Config[User]) { c.SortKey = "SK" }},
			{"missing expiry index", func(c *ddbsession.Config[User]) { c.ExpiryIndex = "expiry" }},
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
			cfg.TTLAttribute = "ttl"
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
	m, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: table, HashOnly: true})
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
	// DescribeTimeToLive goes to the wrapped fake below.
	p.next = ttlFake{Client: p.next, attr: attr, status: status}
}

type ttlFake struct {
	ddbsession.Client
	attr   string
	status types.TimeToLiveStatus
}

func (f ttlFake) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{
		AttributeName: aws.String(f.attr), TimeToLiveStatus: f.status,
	}}, nil
}

func (f ttlFake) UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
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

func TestHashOnlyTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.HashOnly = true })
	if err := e.m.CheckTable(context.Background()); errors.Is(err, ddbsession.ErrTableSchema) {
		t.Fatalf("CheckTable: %v", err)
	}
	alice := e.putUser("alice")
	cookie := e.login(alice)
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Fatalf("got %d %q", w.Code, w.Body)
	}
	for _, item := range e.scanAll() {
		if _, ok := item["sk"]; ok {
			t.Errorf("hash-only table got an item with sk: %v", item)
		}
	}
	if n := len(e.scanAll()); n != 2 {
		t.Errorf("%d items, want 2 (user and session; no index item without a sort key)", n)
	}
	if _, err := e.m.List(context.Background(), alice); !errors.Is(err, ddbsession.ErrNoSortKey) {
		t.Errorf("List in a hash-only table = %v, want ErrNoSortKey", err)
	}
	r := newRequest(cookie)
	if err := e.m.Logout(newRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("after Logout: %d", got)
	}
}

// Sessions can share an app's single table with its own names and prefixes.
func TestCustomKeyNamesAndPrefixes(t *testing.T) {
	t.Parallel()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	m, err := ddbsession.New(ddbsession.Config[map[string]any]{
		Client: client, Table: table,
		PartitionKey: "PK", SortKey: "SK",
		SessionPrefix: "S#", UserSessionsPrefix: "US#",
		TTLAttribute: "ttl", ValidAfterAttribute: "cutoff",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	user := ddbsession.UserKey{PK: "TENANT#1", SK: "USER#bob"}
	_, err = client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"PK": attrS(user.PK), "SK": attrS(user.SK),
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := newRecorder()
	if err := m.Login(w, newRequest(), user); err != nil {
		t.Fatal(err)
	}
	cookie := sessionCookie(t, w.Result(), m.CookieName())
	var got string
	h := m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := m.User(r.Context())
		got = u["SK"].(string)
	}))
	r := newRequest(cookie)
	h.ServeHTTP(newRecorder(), r)
	if got != user.SK {
		t.Fatalf("user in context has SK %q, want %q", got, user.SK)
	}
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, item := range out.Items {
		pk := item["PK"].(*types.AttributeValueMemberS).Value
		keys = append(keys, pk[:strings.IndexByte(pk, '#')+1])
		if _, ok := item["ttl"]; pk != user.PK && !ok {
			t.Errorf("item %q has no ttl attribute", pk)
		}
	}
	if diff := cmp.Diff([]string{"S#", "TENANT#", "US#"}, keys, cmpopts.SortSlices(strings.Compare)); diff != "" {
		t.Errorf("item key prefixes (-want +got):\n%s", diff)
	}
	if err := m.RevokeAll(context.Background(), user); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	h.ServeHTTP(rec, newRequest(cookie))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("after RevokeAll with a custom cutoff attribute: %d, want 401", rec.Code)
	}
}
