package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
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
			out, err := e.cfg.Client.(ddbtest.Engine).DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: &e.table})
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

// CreateTable on an existing table checks it against the configuration,
// and changes nothing there but TTL: each misfit is an error that says
// what to do.
func TestCreateTableChecksExisting(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, ttl bool, withClient func(*ddbsession.Config[User])) {
		e := newEnv(t, withClient)
		e.logs.Reset()
		if err := e.m.CreateTable(context.Background()); err != nil {
			t.Errorf("CreateTable on the table it made = %v, want nil", err)
		}
		// An engine without TTL (dynalite) is no table to fix: a warning,
		// each time, from the attempt to turn TTL on.
		if warned := strings.Contains(e.logs.String(), "does not implement UpdateTimeToLive"); warned == ttl {
			t.Errorf("CreateTable warned %v on an engine with TTL %v:\n%s", warned, ttl, e.logs)
		}
		mismatched := []struct {
			name   string
			mutate func(*ddbsession.Config[User])
			says   string
		}{
			{"hash-only config on a table with a sort key", func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true },
				`has key (hash "pk", range "sk"), and the layout wants (hash "pk"): set Config.Layout's keys to the table's`},
			{"other partition key name", func(c *ddbsession.Config[User]) { c.Layout.PartitionKey = "PK" },
				`has key (hash "pk", range "sk"), and the layout wants (hash "PK", range "sk")`},
			{"other sort key name", func(c *ddbsession.Config[User]) { c.Layout.SortKey = "SK" },
				`has key (hash "pk", range "sk"), and the layout wants (hash "pk", range "SK")`},
			{"missing expiry index", func(c *ddbsession.Config[User]) { c.Layout.ExpiryIndex = "expiry" },
				`has no expiry index "expiry": add the index`},
		}
		for _, tc := range mismatched {
			t.Run(tc.name, func(t *testing.T) {
				cfg := e.cfg
				tc.mutate(&cfg)
				m, err := ddbsession.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.CreateTable(context.Background()); err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("CreateTable = %v, want it to say %q", err, tc.says)
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
			want := `has TTL on "expiresAt", and the layout keeps the expiry in "ttl": a table has one TTL attribute: set Layout.TTLAttribute to "expiresAt"`
			if err := m.CreateTable(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("CreateTable with TTL on expiresAt, configured ttl = %v, want it to say %q", err, want)
			}
		}
	})
}

func TestCreateTableNumberKey(t *testing.T) {
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
	if err := m.CreateTable(context.Background()); err == nil || !strings.Contains(err.Error(), `has key (hash "pk") of types [N], and the layout wants String (S)`) {
		t.Errorf("CreateTable with a Number key = %v, want it to name the type", err)
	}
}

// ttlEngine answers the TTL operations the way DynamoDB does, for the paths
// that dynalite cannot show.
func ttlEngine(p *ddbtest.Probe, attr string, status types.TimeToLiveStatus, updateErr error) {
	p.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateTimeToLive" {
			return updateErr
		}
		return nil
	}
	p.Answer = func(_ context.Context, op string, _ any) (any, bool) {
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
		name      string
		attr      string
		status    types.TimeToLiveStatus
		updateErr error
		wantErr   error  // wrapped by CreateTable's error, if not nil
		says      string // in CreateTable's error; "" for none
	}{
		{"enabled on expiresAt", "expiresAt", types.TimeToLiveStatusEnabled, nil, nil, ""},
		{"enabled on another attribute", "ttl", types.TimeToLiveStatusEnabled, nil, nil,
			`has TTL on "ttl", and the layout keeps the expiry in "expiresAt": a table has one TTL attribute: set Layout.TTLAttribute to "ttl"`},
		{"disabled and enabling fails", "", types.TimeToLiveStatusDisabled, accessDenied, accessDenied,
			`TTL is off, and turning it on failed: `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p))
			ttlEngine(p, tc.attr, tc.status, tc.updateErr)
			for range 2 { // once more, on the table as the first call left it
				err := e.m.CreateTable(context.Background())
				if (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || (tc.says == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.says)) {
					t.Errorf("CreateTable = %v, want %v saying %q", err, tc.wantErr, tc.says)
				}
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
		says   string
	}{
		{"hash key id", []tableKey{{"id", s, types.KeyTypeHash}}, nil, `has key (hash "id"), and the layout wants (hash "pk", range "sk")`},
		{"other key names", []tableKey{{"PK", s, types.KeyTypeHash}, {"SK", s, types.KeyTypeRange}}, nil,
			`has key (hash "PK", range "SK"), and the layout wants (hash "pk", range "sk")`},
		{"Number partition key", []tableKey{{"pk", n, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}}, nil,
			`has key (hash "pk", range "sk") of types [N S], and the layout wants String (S)`},
		{"sort key, hash-only config", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true }, `has key (hash "pk", range "sk"), and the layout wants (hash "pk")`},
		{"no expiry index", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			withExpiryIndex, `has no expiry index "expiry"`},
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
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CreateTable on an existing table with other keys = %v, want it to say %q", err, tc.says)
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
	ddbtest.WaitActive(t, client, table)
}

// A global table says how it replicates, and CreateTable holds it against
// Config.Layout.MREC: a table in multi-Region eventual consistency without
// it is refused (a write in one Region could undo a RevokeAll in another);
// one in multi-Region strong consistency has no TTL, which CreateTable
// warns of and leaves be. The probe answers DescribeTable as DynamoDB
// describes such tables.
func TestGlobalTables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		consistency types.MultiRegionConsistency
		mrec        bool
		says        string // in CreateTable's error; "" for none
		warns       string // in CreateTable's log; "" for none
	}{
		{"MREC without Config.Layout.MREC", types.MultiRegionConsistencyEventual, false,
			"multi-Region eventual consistency (MREC), and the layout does not say so: set Config.Layout.MREC, or a write in one Region can undo a RevokeAll or a Logout in another", ""},
		{"MREC with Config.Layout.MREC", types.MultiRegionConsistencyEventual, true, "", ""},
		{"MRSC", types.MultiRegionConsistencyStrong, false, "", "multi-Region strong consistency (MRSC), which has no TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Layout.MREC = tc.mrec })
			p.Answer = func(ctx context.Context, op string, in any) (any, bool) {
				if op == "DescribeTimeToLive" { // as DynamoDB has it: an MRSC table cannot have TTL
					d := &types.TimeToLiveDescription{AttributeName: aws.String("expiresAt"), TimeToLiveStatus: types.TimeToLiveStatusEnabled}
					if tc.consistency == types.MultiRegionConsistencyStrong {
						d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
					}
					return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, true
				}
				if op != "DescribeTable" {
					return nil, false
				}
				out, err := p.Engine().DescribeTable(ctx, in.(*dynamodb.DescribeTableInput))
				if err != nil {
					t.Fatal(err)
				}
				out.Table.MultiRegionConsistency = tc.consistency
				out.Table.Replicas = []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("us-west-2")}}
				return out, true
			}
			says := func(op string, err error, want string) {
				t.Helper()
				if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
					t.Errorf("%s = %v, want it to say %q", op, err, want)
				}
				if warned := strings.Contains(e.logs.String(), "MRSC"); warned != (tc.warns != "") || !strings.Contains(e.logs.String(), tc.warns) {
					t.Errorf("%s warned %v, want %v:\n%s", op, warned, tc.warns != "", e.logs)
				}
				e.logs.Reset()
			}
			e.logs.Reset()
			p.Reset()
			says("CreateTable on the existing table", e.m.CreateTable(context.Background()), tc.says)
			if tc.consistency == types.MultiRegionConsistencyStrong && p.Count("UpdateTimeToLive") != 0 {
				t.Error("CreateTable tried to enable TTL on an MRSC table, which cannot have it")
			}
		})
	}
}

// With nothing to talk to (no credentials, no Region, no engine listening)
// CreateTable says how to point the SDK at a local engine or
// at DynamoDB, beside the SDK's own words.
func TestNoEngineHint(t *testing.T) {
	t.Parallel()
	refusing, err := ddbtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	if err := refusing.Refuse(); err != nil {
		t.Fatal(err)
	}
	noCredentials := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no EC2 IMDS role found")
	})
	local := aws.String("http://" + refusing.Addr().String())
	const hint = "no DynamoDB to talk to: for a local engine, set AWS_ENDPOINT_URL_DYNAMODB (http://127.0.0.1:8000, say), AWS_REGION and dummy AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
	for _, tc := range []struct {
		name string
		opts dynamodb.Options
	}{
		{"no credentials", dynamodb.Options{Region: "us-east-1", BaseEndpoint: local, Credentials: noCredentials}},
		{"no Region", dynamodb.Options{Credentials: credentials.NewStaticCredentialsProvider("x", "y", "")}},
		{"nothing listening", dynamodb.Options{Region: "us-east-1", BaseEndpoint: local, Credentials: credentials.NewStaticCredentialsProvider("x", "y", ""),
			RetryMaxAttempts: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := ddbsession.New(ddbsession.Config[User]{Client: dynamodb.New(tc.opts), Table: "app"})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.CreateTable(context.Background()); err == nil || !strings.Contains(err.Error(), hint) {
				t.Errorf("CreateTable = %v, want the hint", err)
			}
			if _, _, err := m.Authenticate(context.Background(), strings.Repeat("A", 26)); err == nil || !strings.Contains(err.Error(), hint) {
				t.Errorf("Authenticate = %v, want the hint", err)
			}
		})
	}
	// An engine that answers gets no hint, even with an error: a missing
	// table gets its own.
	e := newEnv(t)
	cfg := e.cfg
	cfg.Table = "missing-" + e.cfg.Table
	m, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = m.Authenticate(context.Background(), strings.Repeat("A", 26))
	missing := fmt.Sprintf("no such table: call Manager.CreateTable at startup, or run: ddbsession table create -table %s", cfg.Table)
	if err == nil || strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Authenticate on a missing table = %v, want %q and not the engine hint", err, missing)
	}
}

// A newcomer's endpoint mistakes say what they are: an endpoint without a
// scheme, and one that answers, but not as DynamoDB does.
func TestEndpointMistakesExplainThemselves(t *testing.T) {
	t.Parallel()
	notDynamoDB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed) // a web server's page
	}))
	t.Cleanup(notDynamoDB.Close)
	creds := credentials.NewStaticCredentialsProvider("x", "y", "")
	for _, tc := range []struct {
		name     string
		endpoint string
		says     string
	}{
		{"no scheme", strings.TrimPrefix(notDynamoDB.URL, "http://"), "AWS_ENDPOINT_URL_DYNAMODB needs a scheme, as in http://127.0.0.1:8000"},
		{"not DynamoDB", notDynamoDB.URL, "the endpoint answered HTTP 405 in a form DynamoDB never does: is AWS_ENDPOINT_URL_DYNAMODB a DynamoDB endpoint?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(tc.endpoint), Credentials: creds, RetryMaxAttempts: 1})
			m, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "app"})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.CreateTable(context.Background()); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("CreateTable = %v, want it to say %q", err, tc.says)
			}
			if _, _, err := m.Authenticate(context.Background(), strings.Repeat("A", 26)); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Authenticate = %v, want it to say %q", err, tc.says)
			}
		})
	}
}

// The table records its layout at CreateTable, and a Manager of another
// layout on it (a rolling deploy that changed Config.Layout, say) is
// refused: its CreateTable fails naming the field and both values, and so
// does every request and login of a Manager that never called it, which
// would otherwise read and write other items than the table's sessions and
// miss their revocations.
func TestLayoutRecordRefusesAnotherLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field, table, ours string
		mutate             func(*ddbsession.Layout)
	}{
		{"VersionAttribute", "sessionsVersion", "version2", func(l *ddbsession.Layout) { l.VersionAttribute = "version2" }},
		{"SessionPrefix", "SESSION#", "S#", func(l *ddbsession.Layout) { l.SessionPrefix = "S#" }},
		{"MREC", "false", "true", func(l *ddbsession.Layout) { l.MREC = true }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			alice := e.putUser("alice")
			c := e.login(alice)
			cfg := e.cfg
			tc.mutate(&cfg.Layout)
			fresh := func() *ddbsession.Manager[User] {
				m, err := ddbsession.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			other := fresh()
			names := func(what string, err error) {
				t.Helper()
				msg := fmt.Sprint(err)
				if err == nil || !strings.Contains(msg, "Layout."+tc.field) || !strings.Contains(msg, `"`+tc.table+`"`) || !strings.Contains(msg, `"`+tc.ours+`"`) {
					t.Errorf("%s with another %s = %v, want an error naming the field, %q and %q", what, tc.field, err, tc.table, tc.ours)
				}
			}
			// Each write that reads nothing first checks the layout too:
			// a RevokeAll of another version attribute would write one the
			// sessions never copied, and report success.
			names("a Manager's first RevokeAll", fresh().RevokeAll(context.Background(), alice))
			names("a Manager's first Logout", fresh().Logout(newRecorder(), newRequest(c)))
			names("a Manager's first CreateUser", fresh().CreateUser(context.Background(), User{PK: "USER#bob", SK: "PROFILE"}))
			names("a Manager's first Login", other.Login(newRecorder(), newRequest(), alice, nil))
			if got := e.get(other.RequireSession(whoami(other)), c).Code; got != http.StatusServiceUnavailable {
				t.Errorf("a request to a Manager of another layout: %d, want 503", got)
			}
			names("RevokeEveryone", other.RevokeEveryone(context.Background()))
			names("CreateTable", other.CreateTable(context.Background()))
			if got := e.status(c); got != http.StatusOK {
				t.Errorf("the session, on the table's own layout: %d, want 200", got)
			}
		})
	}
}

// Creating a table is an act to see: CreateTable logs at Info the table
// it created, and says nothing of one that was there.
func TestCreateTableLogsWhatItCreates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if logs := e.logs.String(); !strings.Contains(logs, "level=INFO") || !strings.Contains(logs, "created the table") || !strings.Contains(logs, e.table) {
		t.Errorf("CreateTable of a missing table logged:\n%s\nwant an Info line naming the table it created", logs)
	}
	e.logs.Reset()
	if err := e.m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	if logs := e.logs.String(); strings.Contains(logs, "created the table") {
		t.Errorf("CreateTable of a table that exists logged:\n%s", logs)
	}
}
