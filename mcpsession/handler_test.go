package mcpsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Two instances on one table, and mcp-go's own client behind a load
// balancer: a session initialized on one is served by the other, with what
// initialize settled; a DELETE on either ends it on both.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	lb := &balancer{target: one}
	c, trans := mcpClient(t, lb)
	res := initialize(t, c)
	id := trans.GetSessionId()
	if res.ProtocolVersion != mcp.ProtocolVersion20251125 || id == "" {
		t.Fatalf("initialize on instance 1: protocol %q, session ID %q; want %s and an ID", res.ProtocolVersion, id, mcp.ProtocolVersion20251125)
	}

	lb.to(two)
	if text, err := callTool(c, "echo", map[string]any{"text": "hello"}); err != nil || text != "hello" {
		t.Fatalf("echo on instance 2 = %q, %v; want hello", text, err)
	}
	want := whoami{
		Client:   mcp.Implementation{Name: "tester", Version: "2.0", Title: "The tests' client"},
		Sampling: true,
		Protocol: mcp.ProtocolVersion20251125,
		LogLevel: mcp.LoggingLevelError, // mcp-go's default before any setLevel
	}
	if diff := cmp.Diff(want, callWhoami(t, c)); diff != "" {
		t.Errorf("whoami on instance 2, which never saw initialize (-want +got):\n%s", diff)
	}

	// A level set on instance 2 reaches instance 1 at its next request.
	//lint:ignore SA1019 logging/setLevel is part of the protocol versions that have sessions.
	if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatalf("setLevel on instance 2: %v", err)
	}
	lb.to(one)
	want.LogLevel = mcp.LoggingLevelDebug
	if diff := cmp.Diff(want, callWhoami(t, c)); diff != "" {
		t.Errorf("whoami on instance 1 after setLevel on instance 2 (-want +got):\n%s", diff)
	}

	// DELETE on instance 1, through the client's Close.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _ := send(t, one, http.MethodDelete, id, ""); code != http.StatusNotFound {
		t.Errorf("a second DELETE of the ended session: status %d, want 404", code)
	}

	// Instance 2 answers the ended session with the protocol's 404, which
	// mcp-go's client reports as ErrSessionTerminated.
	lb2 := &balancer{target: two}
	c2, _ := mcpClient(t, lb2, transport.WithSession(id))
	if _, err := callTool(c2, "echo", map[string]any{"text": "again"}); !errors.Is(err, transport.ErrSessionTerminated) {
		t.Errorf("echo on instance 2 after DELETE on instance 1: %v, want transport.ErrSessionTerminated", err)
	}
	if code, body := post(t, two, id, callEcho); code != http.StatusNotFound {
		t.Errorf("POST on instance 2 after DELETE: status %d %q, want 404", code, body)
	}
	for _, in := range []*instance{one, two} {
		if logs := in.logs.String(); logs != "" {
			t.Errorf("unexpected log:\n%s", logs)
		}
	}
}

// Every ID that is not a live session gets 404 and writes nothing, whatever
// the method: a well-formed one that was never issued costs the one read
// of its session item that finds nothing, a malformed one no call at all.
func TestUnknownIDCostsNoWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	c, trans := mcpClient(t, &balancer{target: in})
	initialize(t, c)
	issued := trans.GetSessionId()
	if len(issued) != 26 || strings.Trim(issued, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
		t.Fatalf("session ID %q: want 26 base32 characters", issued)
	}
	// Never issued, of the issued IDs' form; and of the form that IDs had
	// when every request read the server's user item with the session:
	// the token, then base64url("MCPSERVER#notes") and ("MCPSERVER").
	neverIssued := strings.Repeat("B", 26)
	withServerKey := strings.Repeat("A", 26) + ".TUNQU0VSVkVSI25vdGVz.TUNQU0VSVkVS"

	for _, tc := range []struct {
		name, id  string
		wantReads map[string]int
	}{
		{"never issued", neverIssued, map[string]int{"GetItem": 1}},
		{"never issued, with the server's key", withServerKey, map[string]int{"GetItem": 1}},
		{"malformed", "not-a-session", map[string]int{}},
		{"overlong", issued + strings.Repeat("A", 4096), map[string]int{}},
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				in.calls.Reset()
				body := ""
				if method == http.MethodPost {
					body = callEcho
				}
				code, answer := send(t, in, method, tc.id, body)
				if code != http.StatusNotFound {
					t.Errorf("status %d %q, want 404", code, answer)
				}
				if err := in.sessions.Sessions().Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.wantReads, in.calls.Take()); diff != "" {
					t.Errorf("DynamoDB calls (-want +got):\n%s", diff)
				}
			})
		}
	}
	// The live session was not touched by any of it.
	if code, body := post(t, in, issued, callEcho); code != http.StatusOK {
		t.Errorf("the live session afterwards: status %d %q, want 200", code, body)
	}
}

// A session past its expiry is refused on every instance, though it is
// still in the table (dynalite has no TTL, and DynamoDB's runs late), and
// nothing writes to it: the sliding touch extends live sessions only.
func TestExpiredSessionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	c, trans := mcpClient(t, &balancer{target: one})
	initialize(t, c)
	id := trans.GetSessionId()
	sessions, err := one.sessions.List(context.Background())
	if err != nil || len(sessions) != 1 {
		t.Fatalf("List = %v, %v; want the one session", sessions, err)
	}

	// expiresAt is start+idle in whole seconds: at that instant the
	// session is over.
	e.clock.Advance(idle - 250*time.Millisecond)
	one.calls.Reset()
	two.calls.Reset()
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		for _, in := range []*instance{one, two} {
			body := ""
			if method == http.MethodPost {
				body = callEcho
			}
			if code, answer := send(t, in, method, id, body); code != http.StatusNotFound {
				t.Errorf("%s of the expired session: status %d %q, want 404", method, code, answer)
			}
		}
	}
	for _, tc := range []struct {
		in   *instance
		want map[string]int
	}{
		{one, map[string]int{"GetItem": 3}},
		// Instance 2's first read takes ddbsession's global item and the
		// table's layout record with the session: a BatchGetItem.
		{two, map[string]int{"BatchGetItem": 1, "GetItem": 2}},
	} {
		if err := tc.in.sessions.Sessions().Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, tc.in.calls.Take()); diff != "" {
			t.Errorf("DynamoDB calls (-want +got):\n%s", diff)
		}
	}
	// List's Query filters it out too, and drops its index item, which
	// can no longer show a session that can be used.
	if list, err := two.sessions.List(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("List of the expired session = %v, %v; want none", list, err)
	}
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: &e.table, ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("sid = :sid"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":sid": &types.AttributeValueMemberS{Value: sessions[0].ID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 || !strings.HasPrefix(out.Items[0]["pk"].(*types.AttributeValueMemberS).Value, "SESSION#") {
		t.Fatalf("the expired session's items in the table: %v, want its session item alone still there", out.Items)
	}
	if got := out.Items[0]["expiresAt"].(*types.AttributeValueMemberN).Value; got != strconv.FormatInt(start.Add(idle).Unix(), 10) {
		t.Errorf("expiresAt = %s, want the login's %d, never extended", got, start.Add(idle).Unix())
	}
}

// Use slides the expiry forward once per RefreshInterval, after the
// response, on whichever instance it lands: an UpdateItem of the session
// item then, none in between, and the session outlives its first
// IdleTimeout. Each request reads the session item alone; the first on an
// instance also reads the server's version into its copy, and ddbsession's
// global generation, once per RevokeEveryoneWithin.
func TestSlidingTouch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	lb := &balancer{target: one}
	c, _ := mcpClient(t, lb)
	initialize(t, c)
	expiry := func() time.Time {
		t.Helper()
		list, err := one.sessions.List(context.Background())
		if err != nil || len(list) != 1 {
			t.Fatalf("List = %v, %v; want the one session", list, err)
		}
		return list[0].ExpiresAt
	}
	first := expiry()

	lb.to(two)
	for step := range 5 {
		two.calls.Reset()
		e.clock.Advance(refresh - time.Minute) // due at the second step, and every other after it
		if _, err := callTool(c, "echo", map[string]any{"text": "hi"}); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := two.sessions.Sessions().Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"GetItem": 1}
		if step == 0 {
			// Instance 2's first request: its first reads, ddbsession's
			// with the session and the copy's of the server's user item,
			// each with the global item and the table's layout record.
			want = map[string]int{"BatchGetItem": 2}
		}
		if step%2 == 1 {
			want["UpdateItem"] = 1 // the session item; List reads its expiry there
		}
		if diff := cmp.Diff(want, two.calls.Take()); diff != "" {
			t.Errorf("step %d: DynamoDB calls (-want +got):\n%s", step, diff)
		}
	}
	// 45 minutes after initialize, the expiry is that of the last refresh.
	if got, want := expiry(), start.Add(4*(refresh-time.Minute)).Add(idle).Truncate(time.Second); !got.Equal(want) {
		t.Errorf("expiry %v after the touches, want %v (it was %v)", got, want, first)
	}
	e.clock.Advance(idle - 20*time.Minute) // past the first expiry, not the latest
	if _, err := callTool(c, "echo", map[string]any{"text": "hi"}); err != nil {
		t.Errorf("after the first expiry: %v, want the session alive", err)
	}
}

// The DynamoDB calls of each kind of request: the figures of the package
// documentation's Costs.
func TestCallsPerRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	// The first initialize ever creates the server's user item: the login
	// makes ddbsession's first read, of the global generation and the
	// table's layout record (a BatchGetItem), and the first read of this
	// instance's copy of the server's version, which reads the same two
	// with the user item (a BatchGetItem); it finds no user item, creates
	// it (PutItem) and reads the copy again (a GetItem of the user item),
	// then logs in as every initialize after it does. The copies of the
	// global generation and of the server's version spare the initializes
	// after it those reads.
	in.calls.Reset()
	code, _ := post(t, in, "", initializeV)
	if code != http.StatusOK {
		t.Fatalf("initialize: status %d", code)
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 2, "GetItem": 2, "PutItem": 3, "UpdateItem": 1}, in.calls.Take()); diff != "" {
		t.Errorf("first initialize: DynamoDB calls (-want +got):\n%s", diff)
	}

	// Every initialize after it: the login (the writes of the session and
	// its index item: the server's version and the global generation come
	// from this instance's copies), the read of the new session item and
	// the write of its state, which ddbsession checks against the same
	// copies.
	id := initializeRaw(t, in)
	if diff := cmp.Diff(map[string]int{"GetItem": 1, "PutItem": 2, "UpdateItem": 1}, in.calls.Take()); diff != "" {
		t.Errorf("initialize: DynamoDB calls (-want +got):\n%s", diff)
	}
	// Any request with a session reads its session item alone.
	for _, tc := range []struct {
		name   string
		method string
		body   string
		status int
		want   map[string]int
	}{
		{"notifications/initialized", http.MethodPost, initialized, http.StatusAccepted, map[string]int{"GetItem": 1}},
		{"tools/list", http.MethodPost, listTools, http.StatusOK, map[string]int{"GetItem": 1}},
		{"tools/call", http.MethodPost, callEcho, http.StatusOK, map[string]int{"GetItem": 1}},
		{"logging/setLevel", http.MethodPost, setLevelInfo, http.StatusOK, map[string]int{"GetItem": 1, "UpdateItem": 1}},
		{"logging/setLevel, unchanged", http.MethodPost, setLevelInfo, http.StatusOK, map[string]int{"GetItem": 1}},
		{"DELETE", http.MethodDelete, "", http.StatusOK, map[string]int{"GetItem": 1, "DeleteItem": 2}},
	} {
		in.calls.Reset()
		if code, body := send(t, in, tc.method, id, tc.body); code != tc.status {
			t.Fatalf("%s: status %d %q, want %d", tc.name, code, body, tc.status)
		}
		if err := in.sessions.Sessions().Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, in.calls.Take()); diff != "" {
			t.Errorf("%s: DynamoDB calls (-want +got):\n%s", tc.name, diff)
		}
	}
}

// initializeRaw initializes a session on in by hand, and returns its ID;
// in.calls counts the initialize's calls alone.
func initializeRaw(t *testing.T, in *instance) string {
	t.Helper()
	in.calls.Reset()
	r, err := http.NewRequest(http.MethodPost, in.url, strings.NewReader(initializeV))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session ID %q", res.StatusCode, id)
	}
	return id
}

// Every request without an ID but initialize gets 400, as the transport's
// specification asks of a server that requires a session (MCP 2025-11-25,
// Streamable HTTP, Session Management: 404 is for an ID that is not a
// session, and tells the client to initialize again), and costs no call;
// requests of protocol version 2026-07-28 are mcp-go's alone, at no call.
func TestRequestsWithoutSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	for _, tc := range []struct {
		name, method, body string
	}{
		{"GET", http.MethodGet, ""},
		{"DELETE", http.MethodDelete, ""},
		{"tools/call", http.MethodPost, callEcho},
		{"tools/list", http.MethodPost, listTools},
		{"notifications/initialized", http.MethodPost, initialized},
		{"an answer to a ping", http.MethodPost, `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{"an answer to a sampling request", http.MethodPost, `{"jsonrpc":"2.0","id":4,"result":{"role":"assistant"}}`},
		{"a method spelled in capitals", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"INITIALIZE","params":{}}`},
		{"no JSON", http.MethodPost, "initialize"},
		{"no body", http.MethodPost, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.calls.Reset()
			if code, body := send(t, in, tc.method, "", tc.body); code != http.StatusBadRequest || body != "Bad Request: Mcp-Session-Id header required\n" {
				t.Errorf("status %d %q, want 400 and that the header is required", code, body)
			}
			if calls := in.calls.Take(); len(calls) != 0 {
				t.Errorf("DynamoDB calls %v, want none", calls)
			}
		})
	}
	// A message of 2026-07-28 by its _meta is mcp-go's to answer, even
	// with a header of an earlier version, which mcp-go refuses to mix.
	modern := `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	if code, body := post(t, in, "", modern); code != http.StatusBadRequest || !strings.Contains(body, "does not match") {
		t.Errorf("a 2026-07-28 message under a 2025-11-25 header: status %d %q, want mcp-go's 400", code, body)
	}
	if calls := in.calls.Take(); len(calls) != 0 {
		t.Errorf("a 2026-07-28 message: DynamoDB calls %v, want none", calls)
	}
	// The body of an initialize that the check read goes on to mcp-go
	// whole, and a body past the app's limit is refused as too large.
	if code, body := post(t, in, "", initializeV); code != http.StatusOK || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Errorf("initialize without an ID: status %d %q, want 200 and its result", code, body)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(initializeV))
	r.Body = http.MaxBytesReader(w, r.Body, int64(len(initializeV)-1))
	in.calls.Reset()
	in.sessions.Handler(in.transport).ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("an initialize past http.MaxBytesReader's limit: status %d %q, want 413", w.Code, w.Body)
	}
	if calls := in.calls.Take(); len(calls) != 0 {
		t.Errorf("an initialize past the limit: DynamoDB calls %v, want none", calls)
	}
	// A request of 2026-07-28 with an ID: the header means nothing there,
	// and this server, pinned to the versions with sessions, refuses it.
	id := initializeRaw(t, in)
	in.calls.Reset()
	r, err := http.NewRequest(http.MethodPost, in.url, strings.NewReader(listTools))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20260728)
	r.Header.Set("Mcp-Session-Id", id)
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusOK {
		t.Errorf("a 2026-07-28 request on a server pinned to earlier versions: status %d, want a refusal", res.StatusCode)
	}
	if calls := in.calls.Take(); len(calls) != 0 {
		t.Errorf("a 2026-07-28 request: DynamoDB calls %v, want none", calls)
	}
}

// An initialize that carries the ID of an ended session gets a new one:
// mcp-go ignores the header at initialize, and so does the check's verdict.
func TestInitializeWithAnEndedID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	old := initializeRaw(t, in)
	if code, _ := send(t, in, http.MethodDelete, old, ""); code != http.StatusOK {
		t.Fatalf("DELETE: status %d", code)
	}
	code, body := post(t, in, old, initializeV)
	if code != http.StatusOK || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize with the ended ID: status %d %q", code, body)
	}
	list, err := in.sessions.List(context.Background())
	if err != nil || len(list) != 1 {
		t.Errorf("List = %v, %v; want the new session", list, err)
	}
	if logs := in.logs.String(); logs != "" {
		t.Errorf("unexpected log:\n%s", logs)
	}
}
