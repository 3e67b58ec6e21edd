package mcpsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/mcpsession"
)

func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }

// start is the tests' clock at the beginning of each test.
var start = time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)

// The lifetimes of the tests' sessions, and how long a copy of a
// revocation version is used before it is read again.
const (
	idle    = time.Hour
	refresh = 10 * time.Minute
	within  = time.Hour
)

// env is one table that instances of an MCP server share, with one clock.
type env struct {
	t      *testing.T
	client *dynamodb.Client
	table  string
	layout ddbsession.Layout
	clock  *ddbtest.Clock
}

// newEnv creates a table of ddbsession's default layout.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, ddbsession.Layout{})
}

// newEnvWith creates a table of layout.
func newEnvWith(t *testing.T, layout ddbsession.Layout) *env {
	t.Helper()
	client := ddbsessiontest.Client(t)
	e := &env{t: t, client: client, table: ddbsessiontest.TableName(t, client), layout: layout, clock: ddbtest.NewClock(start)}
	m, err := ddbsession.New(ddbsession.Config[struct{}]{
		Client: client, Table: e.table, Layout: layout,
		Logger: slog.New(slog.DiscardHandler), // dynalite has no TTL; the warning is expected
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// config is the Config of the tests' MCP server, "notes", on e's table
// through calls.
func (e *env) config(calls *ddbtest.Probe) mcpsession.Config {
	return mcpsession.Config{
		Sessions: ddbsession.Config[struct{}]{
			Client: calls, Table: e.table, Layout: e.layout,
			Limits: ddbsession.Limits{
				IdleTimeout: idle, RefreshInterval: refresh,
				// Calls a busy test machine delays are no store fault.
				StoreTimeout: time.Minute,
				// No copy of a version goes stale on the machine's clock
				// during a test, ddbsession's global generation included:
				// tests of the server's version advance its clock instead
				// (wiring.mono).
				RevokeEveryoneWithin: within,
			},
			Now:    e.clock.Now,
			Logger: slog.New(slog.DiscardHandler),
		},
		Name: "notes",
	}
}

// items returns every item of e's table, strongly consistent, but the
// table's layout record (pk DDBSESSION#LAYOUT), which CreateTable wrote
// and nothing of an MCP session touches or TTL deletes.
func (e *env) items() []map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatal(err)
	}
	var items []map[string]types.AttributeValue
	for _, it := range out.Items {
		if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk == nil || pk.Value != "DDBSESSION#LAYOUT" {
			items = append(items, it)
		}
	}
	return items
}

// instance is one instance of the tests' MCP server, on its own port, with
// its own Manager and counted DynamoDB client, as another process would
// have them.
type instance struct {
	url       string
	sessions  *mcpsession.Manager
	transport *server.StreamableHTTPServer
	calls     *ddbtest.Probe
	logs      *logBuffer

	mu         sync.Mutex
	registered []string // the client name of each session registered, as a hook after the Manager's sees it
}

// registeredClients returns the client names that in.registered holds.
func (in *instance) registeredClients() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.registered)
}

// start starts an instance on e's table, wired up as the package
// documentation says.
func (e *env) start() *instance {
	e.t.Helper()
	return e.startWith(wiring{})
}

// wiring is how an instance is put together: by default as the package
// documentation says, and otherwise as an app that got it wrong.
type wiring struct {
	config     func(*mcpsession.Config) // edits the Config, if set
	noHooks    bool                     // the MCP server lacks the Manager's hooks
	noResolver bool                     // the transport is mcp-go's own, without the Manager as its resolver
	noHandler  bool                     // the transport is not behind Manager.Handler
	// mcpGoLogger builds the transport with the Manager as its resolver,
	// but not through NewTransport, so it keeps mcp-go's own logger.
	mcpGoLogger bool
	// transport and server are options of the transport and the MCP
	// server besides the tests' own.
	transport []server.StreamableHTTPOption
	server    []server.ServerOption
	// mono, if set, is the monotonic clock that ages the instance's copy
	// of the server's version.
	mono func() int64
	// readServerPerRequest wires the Manager as before the copy: every
	// request reads the server's user item.
	readServerPerRequest bool
}

func (e *env) startWith(w wiring) *instance {
	e.t.Helper()
	in := &instance{calls: newProbe(e.client), logs: &logBuffer{}}
	cfg := e.config(in.calls)
	cfg.Sessions.Logger = slog.New(slog.NewTextHandler(in.logs, nil))
	if w.config != nil {
		w.config(&cfg)
	}
	newManager := mcpsession.New
	switch {
	case w.readServerPerRequest:
		newManager = mcpsession.NewReadingServerPerRequest
	case w.mono != nil:
		newManager = func(cfg mcpsession.Config) (*mcpsession.Manager, error) {
			return mcpsession.NewWithMonotonicClock(cfg, w.mono)
		}
	}
	sessions, err := newManager(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	in.sessions = sessions
	hooks := &server.Hooks{}
	if !w.noHooks {
		sessions.AddHooks(hooks)
	}
	hooks.AddOnRegisterSession(func(_ context.Context, cs server.ClientSession) {
		in.mu.Lock()
		defer in.mu.Unlock()
		in.registered = append(in.registered, cs.(server.SessionWithClientInfo).GetClientInfo().Name)
	})
	mcpServer := newMCPServer(hooks, w.server...)
	opts := append([]server.StreamableHTTPOption{server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...)}, w.transport...)
	switch {
	case w.noResolver:
		in.transport = server.NewStreamableHTTPServer(mcpServer, opts...)
	case w.mcpGoLogger:
		in.transport = server.NewStreamableHTTPServer(mcpServer, append(opts, server.WithSessionIdManagerResolver(sessions))...)
	default:
		in.transport = sessions.NewTransport(mcpServer, opts...)
	}
	var h http.Handler = in.transport
	if !w.noHandler {
		h = sessions.Handler(h)
	}
	srv := httptest.NewServer(h)
	e.t.Cleanup(func() {
		srv.Close()
		if err := sessions.Sessions().Wait(context.Background()); err != nil {
			e.t.Error(err)
		}
		if err := in.transport.Shutdown(context.Background()); err != nil { // stops WithSessionIdleTTL's sweeps
			e.t.Error(err)
		}
	})
	in.url = srv.URL + "/mcp"
	return in
}

// newMCPServer is the tests' MCP server, with opts besides its own: whoami
// answers with what the session knows of its client, echo with its
// argument.
func newMCPServer(hooks *server.Hooks, opts ...server.ServerOption) *server.MCPServer {
	s := server.NewMCPServer("notes", "1.0.0", append([]server.ServerOption{server.WithHooks(hooks), server.WithLogging(), server.WithToolCapabilities(false)}, opts...)...)
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var who whoami
		cs := server.ClientSessionFromContext(ctx)
		if c, ok := cs.(server.SessionWithClientInfo); ok {
			who.Client = c.GetClientInfo()
			who.Sampling = c.GetClientCapabilities().Sampling != nil
		}
		if l, ok := cs.(server.SessionWithLogging); ok {
			who.LogLevel = l.GetLogLevel()
		}
		who.Protocol = server.RequestProtocolVersion(ctx)
		b, err := json.Marshal(who)
		if err != nil {
			return nil, err
		}
		return mcp.NewToolResultText(string(b)), nil
	})
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(req.GetString("text", "")), nil
	})
	return s
}

// whoami is the answer of the whoami tool.
type whoami struct {
	Client   mcp.Implementation `json:"client"`
	Sampling bool               `json:"sampling"`
	Protocol string             `json:"protocol"`
	LogLevel mcp.LoggingLevel   `json:"logLevel"`
}

// balancer sends each request to the instance it points at, as a load
// balancer would.
type balancer struct {
	mu     sync.Mutex
	target *instance
}

func (b *balancer) to(in *instance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.target = in
}

func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	target := b.target
	b.mu.Unlock()
	u, err := url.Parse(target.url)
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = u.Host, ""
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient is mcp-go's own client, on protocol version 2025-11-25,
// through lb, started and not yet initialized.
func mcpClient(t *testing.T, lb *balancer, opts ...transport.StreamableHTTPCOption) (*client.Client, *transport.StreamableHTTP) {
	t.Helper()
	lb.mu.Lock()
	base := lb.target.url
	lb.mu.Unlock()
	trans, err := transport.NewStreamableHTTP(base, append([]transport.StreamableHTTPCOption{
		transport.WithHTTPBasicClient(&http.Client{Transport: lb}),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var copts []client.ClientOption
	if trans.GetSessionId() != "" {
		copts = append(copts, client.WithSession())
	}
	c := client.NewClient(trans, append(copts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))...)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, trans
}

// initialize initializes c as the client "tester" 2.0, with sampling.
func initialize(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "tester", Version: "2.0", Title: "The tests' client"}
	req.Params.Capabilities.Sampling = &mcp.SamplingCapability{}
	res, err := c.Initialize(context.Background(), req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

// callWhoami calls the whoami tool through c.
func callWhoami(t *testing.T, c *client.Client) whoami {
	t.Helper()
	text, err := callTool(c, "whoami", nil)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	var who whoami
	if err := json.Unmarshal([]byte(text), &who); err != nil {
		t.Fatalf("whoami answered %q: %v", text, err)
	}
	return who
}

// callTool calls the tool name through c and returns its text.
func callTool(c *client.Client, name string, args map[string]any) (string, error) {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", errors.New("tool failed: " + mcp.GetTextFromContent(res.Content))
	}
	return mcp.GetTextFromContent(res.Content[0]), nil
}

// post sends one JSON-RPC message to in as a client would, with the
// Mcp-Session-Id id unless "", and returns the answer's status and body.
func post(t *testing.T, in *instance, id, message string) (int, string) {
	t.Helper()
	return send(t, in, http.MethodPost, id, message)
}

// send sends a request of method to in with the Mcp-Session-Id id unless
// "", and the body message unless "".
func send(t *testing.T, in *instance, method, id, message string) (int, string) {
	t.Helper()
	var body io.Reader
	if message != "" {
		body = strings.NewReader(message)
	}
	r, err := http.NewRequest(method, in.url, body)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set(server.HeaderKeyProtocolVersion, mcp.ProtocolVersion20251125)
	if id != "" {
		r.Header.Set(server.HeaderKeySessionID, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(r.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Type") == "text/event-stream" {
		return res.StatusCode, "" // a GET's stream; its status is what counts
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// A JSON-RPC request for each method the tests send by hand.
const (
	callEcho     = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	listTools    = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
	setLevelInfo = `{"jsonrpc":"2.0","id":9,"method":"logging/setLevel","params":{"level":"info"}}`
	initialized  = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	initializeV  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"raw","version":"1"},"capabilities":{}}}`
)

// newProbe is the one test client before c: it counts the calls of each
// operation and records the reads, with the read units they consumed.
func newProbe(c *dynamodb.Client) *ddbtest.Probe {
	p := ddbtest.NewProbe(c)
	p.RecordReads = true
	return p
}

// takeReads returns the partition keys of each read that p recorded since
// the last call, in the order the reads went out, and the read units
// they consumed, and forgets them.
func takeReads(p *ddbtest.Probe) (pks [][]string, units float64) {
	for _, r := range p.TakeReads() {
		pks = append(pks, r.PKs)
		units += r.Units
	}
	return pks, units
}

var errOutage = errors.New("injected DynamoDB outage")

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

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
