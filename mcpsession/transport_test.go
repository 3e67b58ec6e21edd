package mcpsession_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/ddbsession/ddbsession/mcpsession"
)

// The line mcp-go's transport logs, with the session's ID, when
// WithSessionIdleTTL drops a session from an instance's memory.
const sweepLine = `msg="Sweeping expired session"`

// No log line of the two-instance run holds a session ID, the SHA-256 the
// table keys its session by, or a part of either, in any form: not
// mcpsession's, ddbsession's, the SDK's, nor mcp-go's, whose transport logs
// the ID when it drops an idle session (its sweep runs here, on instance
// 1), and whose server.WithLogger logs it at every request. Every log of
// the process is captured, at debug level.
//
// Not parallel: it swaps the process's loggers and os.Stderr.
func TestNoSessionIDInLogs(t *testing.T) {
	logs := captureLogs(t)
	secrets, lines := loggedRun(t, logs, wiring{}, mcpsession.RedactSessionIDs)
	var leaked []string
	for _, s := range secrets {
		if strings.Contains(strings.ToLower(lines), strings.ToLower(s)) {
			leaked = append(leaked, s)
		}
	}
	if len(leaked) != 0 {
		t.Errorf("the logs hold %q, session IDs, their hashes or parts of either; the lines:\n%s", leaked, lines)
	}
	// The lines that would hold an ID are there, without it.
	for _, want := range []string{
		sweepLine + " session=[redacted]",
		`msg=mcp.request mcp.method=tools/call mcp.session.id=[redacted]`,
		`msg="Failed to handle sampling response" err="failed to deliver sampling response: no active session found for session [redacted]"`,
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("no log line with %q; the lines:\n%s", want, lines)
		}
	}
}

// The same run with mcp-go's own loggers leaks the session ID into the
// logs, so the test above would catch a wiring that lost either
// protection: the transport's logger (a transport with the Manager as its
// resolver, not built by NewTransport, which the Manager warns of once),
// and server.WithLogger's.
//
// Not parallel: it swaps the process's loggers and os.Stderr.
func TestMCPGoLoggersLeakSessionIDs(t *testing.T) {
	unredacted := func(l *slog.Logger) *slog.Logger { return l }
	for _, tc := range []struct {
		name       string
		w          wiring
		requestLog func(*slog.Logger) *slog.Logger
		leak       string // the line's text before the ID
		warned     int    // the Manager's warnings of a transport not built by NewTransport
	}{
		{"the transport's own logger", wiring{mcpGoLogger: true}, mcpsession.RedactSessionIDs, sweepLine + " session=", 2}, // once per instance
		{"server.WithLogger without RedactSessionIDs", wiring{}, unredacted, "mcp.session.id=", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureLogs(t)
			secrets, lines := loggedRun(t, logs, tc.w, tc.requestLog)
			if id := secrets[0]; !strings.Contains(lines, tc.leak+id) {
				t.Errorf("no log line with %q: the run of this test did not log the session ID, so the test above proves nothing; the lines:\n%s", tc.leak+id, lines)
			}
			if got := strings.Count(lines, "was not built by Manager.NewTransport"); got != tc.warned {
				t.Errorf("%d warnings of a transport not built by NewTransport, want %d; the lines:\n%s", got, tc.warned, lines)
			}
		})
	}
}

// loggedRun runs two instances wired as w, with server.WithLogger of
// requestLog(slog.Default()), one of which drops idle
// sessions from its memory at once, and mcp-go's client through a load
// balancer: initialize on instance 1, requests on instance 2, instance 1's
// sweep, requests on instance 1 again, a second session, the refusals of a
// missing and an unknown ID and of an answer to no sampling request,
// DELETE, and both transports' shutdown. It
// returns every session ID issued, with the forms of each that must not be
// logged (its SHA-256 in hex and base64, half of each), and the lines that
// logs captured.
func loggedRun(t *testing.T, logs *logBuffer, w wiring, requestLog func(*slog.Logger) *slog.Logger) (secrets []string, lines string) {
	t.Helper()
	e := newEnv(t)
	w.config = func(cfg *mcpsession.Config) { cfg.Sessions.Logger = nil } // slog.Default(), which logs captures
	w.server = []server.ServerOption{server.WithLogger(requestLog(slog.Default()))}
	sweeping, kept := w, w
	sweeping.transport = append(w.transport[:len(w.transport):len(w.transport)], server.WithSessionIdleTTL(time.Nanosecond))
	kept.transport = append(w.transport[:len(w.transport):len(w.transport)], server.WithSessionIdleTTL(time.Hour))
	one, two := e.startWith(sweeping), e.startWith(kept)

	lb := &balancer{target: one}
	c, trans := mcpClient(t, lb)
	initialize(t, c)
	id := trans.GetSessionId()
	lb.to(two)
	if text, err := callTool(c, "echo", map[string]any{"text": "hello"}); err != nil || text != "hello" {
		t.Fatalf("echo on instance 2 = %q, %v; want hello", text, err)
	}
	//lint:ignore SA1019 logging/setLevel is part of the protocol versions that have sessions.
	if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatalf("setLevel on instance 2: %v", err)
	}
	logs.waitFor(t, sweepLine) // instance 1 drops the session from its memory
	lb.to(one)
	want := whoami{
		Client:   mcp.Implementation{Name: "tester", Version: "2.0", Title: "The tests' client"},
		Sampling: true, Protocol: mcp.ProtocolVersion20251125, LogLevel: mcp.LoggingLevelDebug,
	}
	if diff := cmp.Diff(want, callWhoami(t, c)); diff != "" {
		t.Errorf("whoami on instance 1 after its sweep (-want +got):\n%s", diff)
	}

	second := initializeRaw(t, two)
	if code, body := post(t, one, second, initialized); code != http.StatusAccepted {
		t.Errorf("notifications/initialized on instance 1: status %d %q", code, body)
	}
	if code, body := post(t, one, "", callEcho); code != http.StatusBadRequest {
		t.Errorf("tools/call without an ID: status %d %q, want 400", code, body)
	}
	// An answer to a sampling request that instance 2 never sent: mcp-go
	// logs an error that names the session.
	if code, body := post(t, two, id, `{"jsonrpc":"2.0","id":99,"result":{"role":"assistant"}}`); code != http.StatusNotFound {
		t.Errorf("an answer to no sampling request: status %d %q, want mcp-go's 404", code, body)
	}
	if code, body := post(t, two, strings.Repeat("B", 26), callEcho); code != http.StatusNotFound {
		t.Errorf("tools/call with an ID never issued: status %d %q, want 404", code, body)
	}
	if code, _ := send(t, one, http.MethodDelete, second, ""); code != http.StatusOK {
		t.Errorf("DELETE of the second session: status %d", code)
	}
	if err := c.Close(); err != nil { // DELETE on instance 1
		t.Fatal(err)
	}
	for _, in := range []*instance{one, two} {
		if err := in.sessions.Sessions().Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := in.transport.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	for _, token := range []string{id, second} {
		if len(token) != 26 {
			t.Fatalf("session ID %q: want ddbsession's 26-character token", token)
		}
		sum := sha256.Sum256([]byte(token))
		for _, s := range []string{
			token,
			hex.EncodeToString(sum[:]),
			base64.RawURLEncoding.EncodeToString(sum[:]), // the table's key: SESSION#<this>
			base64.StdEncoding.EncodeToString(sum[:]),
		} {
			secrets = append(secrets, s, s[:len(s)/2], s[len(s)/2:])
		}
	}
	return secrets, logs.String()
}

// captureLogs sends every log line of the process to one buffer until the
// test ends: slog's default logger, at debug level, the standard
// library's log, and whatever writes to os.Stderr. A logger made before it
// (say slog.Default(), evaluated earlier) keeps its own output.
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
