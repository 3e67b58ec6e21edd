package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// bearer adds a bearer token to each request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectSDK connects the official SDK's client to url with token ("" for
// none) and checks the revision it negotiated: the client falls back to
// 2025-11-25 silently when server/discover fails.
func connectSDK(t *testing.T, url, token, revision string) *sdk.ClientSession {
	t.Helper()
	httpClient := http.DefaultClient
	if token != "" {
		httpClient = &http.Client{Transport: bearer{token}}
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "example-test", Version: "4.2"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != revision {
		t.Fatalf("negotiated protocol revision %q, want %q", got, revision)
	}
	return cs
}

// callSDK calls a tool and returns its structured result, or the text of
// its tool error.
func callSDK(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, res.Content[0].(*sdk.TextContent).Text
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, ""
}

func openHandle(t *testing.T, cs *sdk.ClientSession) string {
	t.Helper()
	out, errText := callSDK(t, cs, "counter_open", map[string]any{})
	h, ok := out["handle"].(string)
	if errText != "" || !ok || len(out) != 1 {
		t.Fatalf("counter_open = %v, %q; want {\"handle\": \"...\"}", out, errText)
	}
	return h
}

// value calls counter_get, or counter_add with n, and returns the value,
// or the tool error's text.
func value(t *testing.T, cs *sdk.ClientSession, handle string, n ...int) (float64, string) {
	t.Helper()
	name, args := "counter_get", map[string]any{"handle": handle}
	if len(n) > 0 {
		name, args["n"] = "counter_add", n[0]
	}
	out, errText := callSDK(t, cs, name, args)
	if errText != "" {
		return 0, errText
	}
	v, ok := out["value"].(float64)
	if !ok || len(out) != 1 {
		t.Fatalf("%s = %v, want {\"value\": V}", name, out)
	}
	return v, ""
}

// serveApp runs an instance of cfg on a free port and returns its URL
// and the app, whose refreshes the test can wait for.
func serveApp(t *testing.T, cfg appConfig) (string, *app) {
	t.Helper()
	a, err := newApp(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.handler)
	t.Cleanup(func() {
		srv.Close()
		if err := a.handles.Sessions().Wait(context.Background()); err != nil {
			t.Error(err)
		}
		if err := a.sessions.Sessions().Wait(context.Background()); err != nil {
			t.Error(err)
		}
		if err := a.transport.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return srv.URL + "/mcp", a
}

// writes are the calls of calls that write.
func writes(calls map[string]int) map[string]int {
	w := map[string]int{}
	for op, n := range calls {
		if op == "PutItem" || op == "UpdateItem" || op == "DeleteItem" || op == "BatchWriteItem" {
			w[op] = n
		}
	}
	return w
}

// Two instances on one table, driven by the official SDK's client under
// two callers: a handle opened on one works on the other; another
// caller's use of it, a made-up handle and an expired one are refused
// alike, with no write; RevokeAll of the caller ends its handles on both;
// a use costs one read of the caller's own items; no log line, captured
// at debug level with the SDK's own, shows a handle, a token's digest or
// half of either.
func TestHandlesOnTwoInstances(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	client := ddbsessiontest.Client(t)
	table := ddbsessiontest.TableName(t, client)
	calls := ddbtest.NewProbe(client)
	calls.RecordReads = true
	logs := &logBuffer{}
	cfg := appConfig{
		Client: calls, Table: table, IdleTimeout: time.Hour, HandleIdle: 20 * time.Minute, Now: clock.Now,
		Tokens: map[string]string{"alice-token": "alice", "bob-token": "bob"},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	one, appOne := serveApp(t, cfg)
	two, appTwo := serveApp(t, cfg)
	wait := func() {
		t.Helper()
		for _, a := range []*app{appOne, appTwo} {
			if err := a.handles.Sessions().Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	alice1 := connectSDK(t, one, "alice-token", "2026-07-28")
	alice2 := connectSDK(t, two, "alice-token", "2026-07-28")
	bob1 := connectSDK(t, one, "bob-token", "2026-07-28")
	bob2 := connectSDK(t, two, "bob-token", "2026-07-28")
	var handles []string // every handle the test saw, for the logs' check

	h := openHandle(t, alice1)
	handles = append(handles, h)
	if v, errText := value(t, alice2, h, 5); v != 5 || errText != "" {
		t.Fatalf("counter_add 5 on instance 2 = %v, %q; want 5", v, errText)
	}
	if v, errText := value(t, alice1, h, 2); v != 7 || errText != "" {
		t.Fatalf("counter_add 2 on instance 1 = %v, %q; want 7", v, errText)
	}
	hBob := openHandle(t, bob2)
	handles = append(handles, hBob)
	value(t, bob1, hBob, 1) // both instances have read the table's handle key
	wait()

	// A use: one strongly consistent read, of the handle's item and the
	// caller's user item, and no write.
	calls.Take()
	calls.TakeReads()
	if v, errText := value(t, alice2, h); v != 7 || errText != "" {
		t.Fatalf("counter_get on instance 2 = %v, %q; want 7", v, errText)
	}
	wait()
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, calls.Take()); diff != "" {
		t.Errorf("counter_get's DynamoDB calls (-want +got):\n%s", diff)
	}
	aliceReads := calls.TakeReads()
	value(t, bob2, hBob)
	bobReads := calls.TakeReads()
	if len(aliceReads) != 1 || len(bobReads) != 1 {
		t.Fatalf("reads of a use: alice's %+v, bob's %+v; want one each", aliceReads, bobReads)
	}
	for _, r := range []struct {
		read ddbtest.Read
		user string
	}{{aliceReads[0], "USER#alice"}, {bobReads[0], "USER#bob"}} {
		pks := r.read.PKs
		if len(pks) != 2 || !strings.HasPrefix(pks[0], "SESSION#") || pks[1] != r.user {
			t.Errorf("a use of %s's handle read %q, want its session item and %s", r.user, pks, r.user)
		}
		if r.read.Units > 2 {
			t.Errorf("a use of %s's handle cost %v read units, want at most 2 (two items under 4 KB, strongly consistent)", r.user, r.read.Units)
		}
	}
	if aliceReads[0].PKs[0] == bobReads[0].PKs[0] {
		t.Errorf("alice's and bob's handles share the partition %q", aliceReads[0].PKs[0])
	}

	// Refusals: the same text, no write.
	madeUp := make([]byte, 54)
	rand.Read(madeUp)
	refusals := []struct {
		name   string
		cs     *sdk.ClientSession
		handle string
		n      []int
	}{
		{"bob with alice's handle, counter_get", bob2, h, nil},
		{"bob with alice's handle, counter_add", bob1, h, []int{1}},
		{"a made-up handle", alice1, base64.RawURLEncoding.EncodeToString(madeUp), nil},
		{"a handle of another form", alice2, "not-a-handle", []int{1}},
		{"bob's handle, sealed for bob, as alice", alice2, hBob, nil},
	}
	var refusal string
	for _, r := range refusals {
		calls.Take()
		v, errText := value(t, r.cs, r.handle, r.n...)
		wait()
		if errText == "" {
			t.Errorf("%s: value %v, want a tool error", r.name, v)
		}
		if refusal == "" {
			refusal = errText
		}
		if errText != refusal {
			t.Errorf("%s: tool error %q, want the same as every refusal, %q", r.name, errText, refusal)
		}
		if w := writes(calls.Take()); len(w) != 0 {
			t.Errorf("%s: writes %v, want none", r.name, w)
		}
	}
	if v, _ := value(t, alice1, h); v != 7 {
		t.Errorf("counter_get after bob's tries = %v, want 7", v)
	}

	// RevokeAll of alice (what "ddbsession sessions revoke-all -table NAME
	// -sk PROFILE -- USER#alice" does) ends her handles on both instances,
	// and leaves bob's.
	hOther := openHandle(t, alice2)
	handles = append(handles, hOther)
	admin, err := ddbsession.New(ddbsession.Config[struct{}]{Client: client, Table: table, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.RevokeAll(context.Background(), ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		cs     *sdk.ClientSession
		handle string
	}{{"instance 1", alice1, h}, {"instance 2", alice2, h}, {"instance 1, second handle", alice1, hOther}, {"instance 2, second handle", alice2, hOther}} {
		calls.Take()
		if v, errText := value(t, c.cs, c.handle); errText != refusal {
			t.Errorf("after RevokeAll, %s: %v, %q; want the refusal %q", c.name, v, errText, refusal)
		}
		wait()
		if w := writes(calls.Take()); len(w) != 0 {
			t.Errorf("after RevokeAll, %s: writes %v, want none", c.name, w)
		}
	}
	if v, errText := value(t, bob1, hBob); v != 1 || errText != "" {
		t.Errorf("bob's counter after alice's RevokeAll = %v, %q; want 1", v, errText)
	}

	// An expired handle: refused alike, with no write.
	hLate := openHandle(t, alice1)
	handles = append(handles, hLate)
	if v, errText := value(t, alice2, hLate, 3); v != 3 || errText != "" {
		t.Fatalf("counter_add on a new handle after RevokeAll = %v, %q; want 3", v, errText)
	}
	wait()
	clock.Advance(20 * time.Minute)
	calls.Take()
	if v, errText := value(t, alice2, hLate); errText != refusal {
		t.Errorf("an expired handle: %v, %q; want the refusal %q", v, errText, refusal)
	}
	wait()
	if w := writes(calls.Take()); len(w) != 0 {
		t.Errorf("an expired handle: writes %v, want none", w)
	}

	// The logs: the SDK's lines are there (its default logger discards
	// them), and no handle, digest or half of either.
	lines := logs.String()
	if !strings.Contains(lines, "server session connected") {
		t.Errorf("no line of the SDK's in the logs, which should go through the app's logger; the lines:\n%s", lines)
	}
	secrets := append([]string{}, handles...)
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("kind = :kind"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": &types.AttributeValueMemberS{Value: "session"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range out.Items {
		pk := item["pk"].(*types.AttributeValueMemberS).Value
		secrets = append(secrets, strings.TrimPrefix(pk, "SESSION#"))
	}
	if len(secrets) != len(handles)+len(handles) {
		t.Fatalf("session items: %d, want one per handle (%d)", len(secrets)-len(handles), len(handles))
	}
	for _, s := range secrets {
		for _, part := range []string{s, s[:len(s)/2], s[len(s)/2:]} {
			if strings.Contains(lines, part) {
				t.Errorf("the logs hold %q, a handle, a digest or half of either; the lines:\n%s", part, lines)
			}
		}
	}
}

// The flags of the 2026-07-28 revision: -token, -handle-idle and
// -log-level, through run; a client without a token falls back to
// 2025-11-25, which the same path serves.
func TestHandleFlags(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	url, stop := startStoppableTo(t, logs, "-table", ddbsessiontest.TableName(t, ddbsessiontest.Client(t)),
		"-token", "alice:alice-token", "-token", "bob:bob-token", "-handle-idle", "5m", "-log-level", "debug")
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("run after its context ended: %v, want a clean shutdown", err)
		}
	}()
	alice := connectSDK(t, url, "alice-token", "2026-07-28")
	h := openHandle(t, alice)
	if v, errText := value(t, alice, h, 4); v != 4 || errText != "" {
		t.Errorf("counter_add = %v, %q; want 4", v, errText)
	}
	bob := connectSDK(t, url, "bob-token", "2026-07-28")
	if _, errText := value(t, bob, h); errText != "no such handle: open a new one" {
		t.Errorf("bob's counter_get of alice's handle: %q, want the refusal", errText)
	}
	legacy := connectSDK(t, url, "", "2025-11-25")
	res, err := legacy.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != "hi" {
		t.Errorf("echo on 2025-11-25 = %+v, %v; want hi", res, err)
	}
	if lines := logs.String(); !strings.Contains(lines, "server session connected") {
		t.Errorf("-log-level debug logged no SDK line; the lines:\n%s", lines)
	}
	for _, args := range [][]string{{"-token", "nocolon"}, {"-token", ":tok"}, {"-handle-idle", "30s"}, {"-log-level", "loud"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
