package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }

// start runs the server as main does, on a free port, and returns its
// URL. It stops when the test ends, and the test checks that it stopped
// cleanly. The client is built from the SDK's environment, which
// ddbsessiontest.Main points at the test engine.
func start(t *testing.T, args ...string) string {
	t.Helper()
	url, stop := startStoppable(t, args...)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run after its context ended: %v, want a clean shutdown", err)
		}
	})
	return url
}

// startStoppable is start, with a function that stops the server and
// returns what run returned.
func startStoppable(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	return startStoppableTo(t, io.Discard, args...)
}

// startStoppableTo is startStoppable, with run's stderr (its log lines) to
// stderr.
func startStoppableTo(t *testing.T, stderr io.Writer, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout, stderr)
		stdout.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading the URL that run prints: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, out)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "serving on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		cancel()
		t.Fatalf("run printed %q, want \"serving on http://127.0.0.1:<port>/mcp\"", line)
	}
	return url, func() error {
		cancel()
		return <-done
	}
}

// connect returns mcp-go's own client of url, on protocol version
// 2025-11-25, with the session ID id unless "".
func connect(t *testing.T, url, id string) (*client.Client, *transport.StreamableHTTP) {
	t.Helper()
	trans, err := transport.NewStreamableHTTP(url, transport.WithSession(id), transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	opts := []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}
	if id != "" {
		opts = append(opts, client.WithSession())
	}
	c := client.NewClient(trans, opts...)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, trans
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "example-test", Version: "3.1"}
	if _, err := c.Initialize(context.Background(), req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
}

// call calls the tool name and returns its text.
func call(c *client.Client, name string, args map[string]any) (string, error) {
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		return "", err
	}
	text := mcp.GetTextFromContent(res.Content[0])
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

func sessionOf(t *testing.T, c *client.Client) sessionInfo {
	t.Helper()
	text, err := call(c, "session", nil)
	if err != nil {
		t.Fatalf("session tool: %v", err)
	}
	var info sessionInfo
	if err := json.Unmarshal([]byte(text), &info); err != nil {
		t.Fatalf("session tool answered %q: %v", text, err)
	}
	return info
}

// Two instances on one table, as the README runs them, and mcp-go's own
// client: initialize on instance 1, both tools on instance 2 with the
// session's state, DELETE on instance 1, and the protocol's 404 on
// instance 2.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	table := ddbsessiontest.TableName(t, ddbsessiontest.Client(t))
	one := start(t, "-table", table, "-idle", "20m")
	two := start(t, "-table", table, "-idle", "20m")

	first, trans := connect(t, one, "")
	initialize(t, first)
	id := trans.GetSessionId()
	if id == "" {
		t.Fatal("initialize on instance 1 issued no session ID")
	}
	atOne := sessionOf(t, first)

	second, _ := connect(t, two, id)
	if text, err := call(second, "echo", map[string]any{"text": "hello"}); err != nil || text != "hello" {
		t.Errorf("echo on instance 2 = %q, %v; want hello", text, err)
	}
	//lint:ignore SA1019 logging/setLevel is part of the protocol versions that have sessions.
	if err := second.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatalf("setLevel on instance 2: %v", err)
	}
	atTwo := sessionOf(t, second)
	want := sessionInfo{
		Client: "example-test", Version: "3.1", Protocol: mcp.ProtocolVersion20251125,
		LogLevel: mcp.LoggingLevelInfo, ID: atOne.ID, ExpiresAt: atOne.ExpiresAt,
	}
	if diff := cmp.Diff(want, atTwo); diff != "" || len(atOne.ID) != 32 {
		t.Errorf("the session tool on instance 2, which never saw initialize (-want +got):\n%s", diff)
	}
	if strings.Contains(atTwo.ID, id[:26]) {
		t.Errorf("the tool showed the session ID %q, a credential", atTwo.ID)
	}

	if err := first.Close(); err != nil { // DELETE on instance 1
		t.Fatal(err)
	}
	if _, err := call(second, "echo", map[string]any{"text": "again"}); !errors.Is(err, transport.ErrSessionTerminated) {
		t.Errorf("echo on instance 2 after DELETE on instance 1: %v, want transport.ErrSessionTerminated (404)", err)
	}
}

// A session past its expiry is refused, though TTL has not deleted it: the
// item is still in the table.
func TestExpiredSessionIsRefused(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	client := ddbsessiontest.Client(t)
	table := ddbsessiontest.TableName(t, client)
	url := serve(t, appConfig{Client: client, Table: table, IdleTimeout: 20 * time.Minute, Now: clock.Now})
	c, trans := connect(t, url, "")
	initialize(t, c)

	clock.Advance(20 * time.Minute)
	if _, err := call(c, "echo", map[string]any{"text": "late"}); !errors.Is(err, transport.ErrSessionTerminated) {
		t.Errorf("echo with the expired session: %v, want transport.ErrSessionTerminated (404)", err)
	}
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("kind = :kind"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": &types.AttributeValueMemberS{Value: "session"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 {
		t.Errorf("session items in the table: %d, want the expired one still there", len(out.Items))
	}
	if trans.GetSessionId() != "" {
		t.Errorf("the client still holds the session ID after the 404")
	}
}

// An ID that was never issued costs one read and no write, whatever the
// method; a malformed one costs nothing.
func TestNeverIssuedIDCostsNoWrite(t *testing.T) {
	t.Parallel()
	client := ddbsessiontest.Client(t)
	calls := ddbtest.NewProbe(client)
	url := serve(t, appConfig{Client: calls, Table: ddbsessiontest.TableName(t, client), IdleTimeout: time.Hour})
	c, _ := connect(t, url, "")
	initialize(t, c)

	for _, tc := range []struct {
		name, id string
		want     map[string]int
	}{
		// The read of the session item that finds nothing.
		{"never issued", strings.Repeat("A", 26), map[string]int{"GetItem": 1}},
		{"malformed", "mcp-session-0b4e8f0a-not-ours", map[string]int{}},
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			calls.Reset()
			r, err := http.NewRequest(method, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Mcp-Session-Id", tc.id)
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("%s, %s: status %d, want 404", tc.name, method, res.StatusCode)
			}
			if diff := cmp.Diff(tc.want, calls.Take()); diff != "" {
				t.Errorf("%s, %s: DynamoDB calls (-want +got):\n%s", tc.name, method, diff)
			}
		}
	}
}

// A request without an ID gets 400 and costs no call, whatever the method,
// unless it is an initialize: 404 is for an ID that is not a session.
func TestMissingIDCostsNothing(t *testing.T) {
	t.Parallel()
	client := ddbsessiontest.Client(t)
	calls := ddbtest.NewProbe(client)
	url := serve(t, appConfig{Client: calls, Table: ddbsessiontest.TableName(t, client), IdleTimeout: time.Hour})
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		calls.Reset()
		r, err := http.NewRequest(method, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
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
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s without an ID: status %d, want 400", method, res.StatusCode)
		}
		if got := calls.Take(); len(got) != 0 {
			t.Errorf("%s without an ID: DynamoDB calls %v, want none", method, got)
		}
	}
}

// A session's GET stream does not hold up shutdown, and shutting down ends
// nothing in the table: another instance serves the session on.
func TestShutdownWithOpenStream(t *testing.T) {
	t.Parallel()
	table := ddbsessiontest.TableName(t, ddbsessiontest.Client(t))
	one, stop := startStoppable(t, "-table", table)
	two := start(t, "-table", table)
	c, trans := connect(t, one, "")
	initialize(t, c)

	r, err := http.NewRequest(http.MethodGet, one, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Mcp-Session-Id", trans.GetSessionId())
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: status %d", res.StatusCode)
	}
	began := time.Now()
	if err := stop(); err != nil {
		t.Errorf("shutdown with an open stream: %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("shutdown took %v, want the stream closed at once", took)
	}
	second, _ := connect(t, two, trans.GetSessionId())
	if text, err := call(second, "echo", map[string]any{"text": "still here"}); err != nil || text != "still here" {
		t.Errorf("echo on instance 2 after instance 1 shut down: %q, %v", text, err)
	}
}

// No log line of two instances of the example holds the session ID, the
// SHA-256 the table keys it by, or half of either, in any form: not
// mcpsession's, ddbsession's, the SDK's, nor mcp-go's transport's, which
// logs the ID when it drops an idle session from an instance's memory
// (here at once, on instance 1, whose sweep the test waits for). Every log
// of the process is captured, at debug level. mcpsession's
// TestMCPGoLoggersLeakSessionIDs shows that mcp-go's own logger, in the
// same run, would log it.
//
// Not parallel: it swaps the process's loggers and os.Stderr.
func TestNoSessionIDInLogs(t *testing.T) {
	logs := captureLogs(t)
	client := ddbsessiontest.Client(t)
	table := ddbsessiontest.TableName(t, client)
	var id string
	t.Cleanup(func() { // after both instances shut down
		lines := logs.String()
		sum := sha256.Sum256([]byte(id))
		var leaked []string
		for _, s := range []string{id, hex.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sum[:])} {
			for _, part := range []string{s, s[:len(s)/2], s[len(s)/2:]} {
				if strings.Contains(strings.ToLower(lines), strings.ToLower(part)) {
					leaked = append(leaked, part)
				}
			}
		}
		if len(leaked) != 0 {
			t.Errorf("the logs hold %q, the session ID, its hash or parts of either; the lines:\n%s", leaked, lines)
		}
	})
	one := serve(t, appConfig{Client: client, Table: table, IdleTimeout: time.Hour, MemoryIdle: time.Nanosecond})
	two := serve(t, appConfig{Client: client, Table: table, IdleTimeout: time.Hour})

	first, trans := connect(t, one, "")
	initialize(t, first)
	id = trans.GetSessionId()
	if len(id) != 26 {
		t.Fatalf("initialize issued the session ID %q, want 26 characters", id)
	}
	second, _ := connect(t, two, id)
	if text, err := call(second, "echo", map[string]any{"text": "hello"}); err != nil || text != "hello" {
		t.Errorf("echo on instance 2 = %q, %v; want hello", text, err)
	}
	logs.waitFor(t, `msg="Sweeping expired session"`)
	if info := sessionOf(t, first); info.Client != "example-test" {
		t.Errorf("the session tool on instance 1 after its sweep: %+v, want the client of initialize", info)
	}
	if err := first.Close(); err != nil { // DELETE on instance 1
		t.Fatal(err)
	}
}

// captureLogs sends every log line of the process to one buffer until the
// test ends: slog's default logger, at debug level, the standard
// library's log, and whatever writes to os.Stderr.
func captureLogs(t *testing.T) *logBuffer {
	t.Helper()
	logs := &logBuffer{}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(logs, r)
	}()
	stderr, defaultLogger, logOutput, logFlags := os.Stderr, slog.Default(), log.Writer(), log.Flags()
	os.Stderr = w
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.SetOutput(logs) // after SetDefault, which sends it into slog
	log.SetFlags(log.LstdFlags)
	t.Cleanup(func() {
		slog.SetDefault(defaultLogger)
		log.SetOutput(logOutput)
		log.SetFlags(logFlags)
		os.Stderr = stderr
		w.Close()
		<-copied
		r.Close()
	})
	return logs
}

// logBuffer collects log lines.
type logBuffer struct {
	mu   sync.Mutex
	b    strings.Builder
	grew chan struct{} // closed at the next write; nil until waitFor needs it
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grew != nil {
		close(l.grew)
		l.grew = nil
	}
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until the lines hold s, for as long as the test may run.
func (l *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	var timeout <-chan time.Time
	if deadline, ok := t.Deadline(); ok {
		timeout = time.After(time.Until(deadline) - 10*time.Second) // time left to report
	}
	for {
		l.mu.Lock()
		found := strings.Contains(l.b.String(), s)
		if l.grew == nil {
			l.grew = make(chan struct{})
		}
		grew := l.grew
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-grew:
		case <-timeout:
			t.Fatalf("no log line with %q before the test's deadline; the lines:\n%s", s, l.String())
		}
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-idle", "soon"}, {"-nope"}, {"extra"}, {"-idle", "30s"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

// serve runs an instance of cfg on a free port and returns its URL.
func serve(t *testing.T, cfg appConfig) string {
	t.Helper()
	url, _ := serveApp(t, cfg)
	return url
}
