package ddbsessiontest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
)

// The package documentation's usage, as a test: a client and a table of
// the test's own, and the app's Manager on them.
func TestAccountPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbsessiontest.Client(t)
	sessions, err := ddbsession.New(ddbsession.Config[Account]{
		Client: client,
		Table:  ddbsessiontest.TableName(t, client),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sessions.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	bob := ddbsession.UserKey{PK: "USER#bob", SK: "PROFILE"}
	if err := sessions.CreateUser(ctx, Account{PK: bob.PK, SK: bob.SK, Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	page := sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, _ := sessions.User(r.Context())
		w.Write([]byte(account.Name))
	}))

	login := httptest.NewRecorder()
	if err := sessions.Login(login, httptest.NewRequest("POST", "https://app.example/login", nil), bob, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cookies  []*http.Cookie
		wantCode int
	}{
		{"signed in", login.Result().Cookies(), http.StatusOK},
		{"no cookie", nil, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "https://app.example/account", nil)
			for _, c := range tc.cookies {
				r.AddCookie(c)
			}
			w := httptest.NewRecorder()
			page.ServeHTTP(w, r)
			if w.Code != tc.wantCode {
				t.Errorf("status %d, want %d; body %q", w.Code, tc.wantCode, w.Body)
			}
		})
	}
}

// WithTTL gives a table TTL on any engine: CreateTable turns it on, with
// no warning, and the table then describes it as on.
func TestWithTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbsessiontest.WithTTL(ddbsessiontest.Client(t))
	// Warnings only: CreateTable logs at Info the table it creates, whose
	// name, the test's, holds "TTL".
	var warnings bytes.Buffer
	table := ddbsessiontest.TableName(t, ddbsessiontest.Client(t))
	sessions, err := ddbsession.New(ddbsession.Config[Account]{
		Client: client,
		Table:  table,
		Logger: slog.New(slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sessions.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if warnings.Len() > 0 {
		t.Errorf("CreateTable through WithTTL warned:\n%s", &warnings)
	}
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expiresAt" {
		t.Errorf("TTL through WithTTL after CreateTable: %+v, want enabled on expiresAt", d)
	}
}

// noEngineChildEnv marks the copy of this test binary that
// TestMainNamesThisPackage starts.
const noEngineChildEnv = "DDBSESSIONTEST_NO_ENGINE_CHILD"

// An app's developer without an engine learns what to do, in this
// package's name, before any test runs.
func TestMainNamesThisPackage(t *testing.T) {
	if os.Getenv(noEngineChildEnv) != "" {
		t.Fatal("Main ran the tests without an engine")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMainNamesThisPackage$", "-test.count=1")
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "AWS_ENDPOINT_URL_DYNAMODB" && name != "PATH" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, noEngineChildEnv+"=1", "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the run ended with %v, want exit status 1", err)
	}
	for _, want := range []string{"ddbsessiontest: no DynamoDB engine for these tests", "no Node.js on PATH", "No test ran."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the run's output lacks %q:\n%s", want, out)
		}
	}
}

// motoChildEnv marks the copy of this test binary that TestEngineMoto
// starts, with DDBSESSIONTEST_ENGINE=moto and no endpoint of its own.
const motoChildEnv = "DDBSESSIONTEST_MOTO_CHILD"

// DDBSESSIONTEST_ENGINE=moto makes Main start moto_server from PATH, an
// engine with transactions, where an app's code that uses them works.
func TestEngineMoto(t *testing.T) {
	ctx := context.Background()
	if os.Getenv(motoChildEnv) != "" {
		client := ddbsessiontest.Client(t)
		table := ddbsessiontest.TableName(t, client)
		if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            &table,
			BillingMode:          types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.TransactWriteItems(ctx, transfer(table)); err != nil {
			t.Fatalf("TransactWriteItems on moto: %v", err)
		}
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEngineMoto$", "-test.count=1", "-test.v")
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "AWS_ENDPOINT_URL_DYNAMODB" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, motoChildEnv+"=1", "DDBSESSIONTEST_ENGINE=moto")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ddbsessiontest: moto listening on http://127.0.0.1:") || !strings.Contains(string(out), "--- PASS: TestEngineMoto") {
		t.Errorf("the run with DDBSESSIONTEST_ENGINE=moto ended with %v, want moto started and the transaction through:\n%s", err, out)
	}
}

// transfer is a transaction of two puts in table.
func transfer(table string) *dynamodb.TransactWriteItemsInput {
	put := func(pk string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}}
	}
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put("from"), put("to")}}
}

// An operation the test engine lacks fails, as a test sees it, saying
// which engine lacks what and how to pick another, with the engine's
// error code kept: here against an engine that lacks every operation, and
// against the package's own, which lacks transactions if it is dynalite.
func TestUnknownOperationSaysWhatToDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lacking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"__type":"com.amazon.coral.service#UnknownOperationException"}`))
	}))
	defer lacking.Close()
	check := func(name string, err error, wants ...string) {
		t.Helper()
		var api smithy.APIError
		if err == nil || !errors.As(err, &api) || api.ErrorCode() != "UnknownOperationException" {
			t.Fatalf("%s: %v, want an UnknownOperationException", name, err)
		}
		for _, want := range append(wants, "TransactWriteItems", "Run the tests against moto, which does: DDBSESSIONTEST_ENGINE=moto go test ./...", "AWS_ENDPOINT_URL_DYNAMODB=") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}

	client := ddbsessiontest.Client(t)
	_, err := dynamodb.New(client.Options(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(lacking.URL) }).
		TransactWriteItems(ctx, transfer("any"))
	check("an engine that lacks every operation", err, "ddbsessiontest: the test engine, ")

	table := ddbsessiontest.TableName(t, client)
	sessions, err := ddbsession.New(ddbsession.Config[Account]{Client: client, Table: table, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sessions.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.TransactWriteItems(ctx, transfer(table)); err != nil {
		// Only an engine without transactions, as dynalite is.
		check("the package's engine", err, "does not implement TransactWriteItems")
	}
}
