package ddbsession_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The fault matrix: every public operation, through a real DynamoDB client
// talking HTTP to a faulty endpoint, with the SDK's own retries at work.
// The endpoint (faultFront) stands in front of the engine: it forwards the
// first k requests of an operation to it, so that the fault strikes at
// every step of a multi-call flow in turn, from the first call (k = 0,
// nothing reaches the engine) to the last.

// faultStoreTimeout is the matrix's Config.Limits.StoreTimeout, and faultBound the
// time within which every faulted operation must have failed. The client
// retries up to faultAttempts times with the SDK's backoff (25 ms base for
// DynamoDB, 1 s for throttling, 20 s cap), which would run for minutes if
// StoreTimeout did not bound the call; a hang would run for ever.
const (
	faultStoreTimeout = 200 * time.Millisecond
	faultBound        = 15 * time.Second
	faultAttempts     = 20
)

// fault is what the endpoint does to a request it does not forward.
type fault struct {
	name   string
	action faultAction
	status int    // for answer and lostAnswer: the HTTP answer
	body   string // its body
}

type faultAction int

const (
	answer     faultAction = iota // answer with status and body
	lostAnswer                    // forward to the engine, drop its answer, answer with status and body
	hang                          // read the request, never answer
	reset                         // read the request, reset the connection
	refuse                        // stop listening: connections are refused
)

// faults are the store failures of the matrix, with DynamoDB's own error
// bodies (awsJson1_0: __type and message).
var faults = []fault{
	{name: "HTTP 500", action: answer, status: 500,
		body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`},
	{name: "ProvisionedThroughputExceededException", action: answer, status: 400,
		body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`},
	{name: "ThrottlingException", action: answer, status: 400,
		body: `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`},
	{name: "garbage body", action: answer, status: 200, body: "\x00\xff<html>not JSON{{"},
	{name: "write applied, answer lost", action: lostAnswer, status: 500,
		body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`},
	{name: "hang", action: hang},
	{name: "connection reset", action: reset},
	{name: "connection refused", action: refuse},
}

// faultFront is a TCP endpoint in front of the engine. It forwards its
// first pass connections to the engine byte for byte and applies its fault
// to every later one. Its client opens one connection per request (no
// keep-alive), so a connection is one request attempt, retries included.
type faultFront struct {
	ln     *ddbtest.Listener // refuses, keeping its port, for the refuse fault
	engine string            // host:port
	fault  fault
	pass   int

	mu       sync.Mutex
	accepted int
	conns    map[net.Conn]bool
	stopped  bool
	wire     map[string]bool // session item keys seen in requests
	wg       sync.WaitGroup
}

// sessionKeyOnWire matches a session item's partition key in a request.
var sessionKeyOnWire = regexp.MustCompile(`SESSION#[A-Za-z0-9_-]{43}`)

// record notes the session item keys in a request's bytes.
func (ff *faultFront) record(request []byte) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	for _, key := range sessionKeyOnWire.FindAll(request, -1) {
		ff.wire[string(key)] = true
	}
}

// sessionKeys returns the session item keys the front has seen.
func (ff *faultFront) sessionKeys() []string {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return slices.Sorted(maps.Keys(ff.wire))
}

// startFaultFront starts a front that forwards pass connections and then
// applies f; pass < 0 forwards every one. It stops when t ends.
func startFaultFront(t testing.TB, f fault, pass int) *faultFront {
	t.Helper()
	endpoint, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ddbtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ff := &faultFront{ln: ln, engine: endpoint.Host, fault: f, pass: pass, conns: map[net.Conn]bool{}, wire: map[string]bool{}}
	if f.action == refuse && pass == 0 {
		ln.Refuse()
	}
	ff.wg.Add(1)
	go ff.serve()
	t.Cleanup(ff.stop)
	return ff
}

func (ff *faultFront) url() string { return "http://" + ff.ln.Addr().String() }

// attempts returns how many connections the front has accepted: forwarded
// ones and faulted ones. Refused ones are not seen.
func (ff *faultFront) attempts() int {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	return ff.accepted
}

func (ff *faultFront) serve() {
	defer ff.wg.Done()
	for {
		conn, err := ff.ln.Accept()
		if err != nil {
			return
		}
		ff.mu.Lock()
		if ff.stopped {
			ff.mu.Unlock()
			conn.Close()
			return
		}
		ff.accepted++
		forward := ff.pass < 0 || ff.accepted <= ff.pass
		if ff.fault.action == refuse && ff.accepted == ff.pass {
			ff.ln.Refuse()
		}
		ff.conns[conn] = true
		ff.wg.Add(1)
		ff.mu.Unlock()
		go func() {
			defer ff.wg.Done()
			defer ff.drop(conn)
			if forward {
				ff.forward(conn)
			} else {
				ff.apply(conn)
			}
		}()
	}
}

func (ff *faultFront) drop(conn net.Conn) {
	conn.Close()
	ff.mu.Lock()
	delete(ff.conns, conn)
	ff.mu.Unlock()
}

// stop closes the listener and every connection, and waits for the front's
// goroutines, so that none outlives the test.
func (ff *faultFront) stop() {
	ff.mu.Lock()
	ff.stopped = true
	ff.ln.Close()
	for conn := range ff.conns {
		conn.Close()
	}
	ff.mu.Unlock()
	ff.wg.Wait()
}

// forward copies one connection to the engine and back. The client asks
// for "Connection: close", so the engine's close ends it.
func (ff *faultFront) forward(conn net.Conn) {
	engine, err := net.Dial("tcp", ff.engine)
	if err != nil {
		return
	}
	defer engine.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var request bytes.Buffer
		io.Copy(engine, io.TeeReader(conn, &request))
		engine.Close()
		ff.record(request.Bytes())
	}()
	io.Copy(conn, engine)
	conn.Close()
	<-done
}

// giveUp ends a case that the operation's bound did not end: the front
// drops its connections and answers every later request with an error the
// SDK does not retry, so that the operation returns and the test reports
// it instead of hanging.
func (ff *faultFront) giveUp() {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	ff.fault = fault{name: "gave up", action: answer, status: 400,
		body: `{"__type":"com.amazon.coral.validate#ValidationException","message":"the test gave up"}`}
	for conn := range ff.conns {
		conn.Close()
	}
}

// apply reads one request and answers it with the front's fault.
func (ff *faultFront) apply(conn net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	ff.record(body)
	ff.mu.Lock()
	f := ff.fault
	ff.mu.Unlock()
	switch f.action {
	case hang:
		io.Copy(io.Discard, conn) // until the client gives up, or stop
	case reset:
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetLinger(0) // Close sends RST
		}
	case lostAnswer:
		ff.toEngine(req, body)
		writeAnswer(conn, f.status, f.body)
	case answer:
		writeAnswer(conn, f.status, f.body)
	case refuse:
		// A connection that slipped in before the listener stopped.
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetLinger(0)
		}
	}
}

// toEngine sends a request to the engine and drops its answer: the write
// is applied, and the client never learns it.
func (ff *faultFront) toEngine(req *http.Request, body []byte) {
	engine, err := net.Dial("tcp", ff.engine)
	if err != nil {
		return
	}
	defer engine.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	if err := req.Write(engine); err != nil {
		return
	}
	if res, err := http.ReadResponse(bufio.NewReader(engine), req); err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}

func writeAnswer(conn net.Conn, status int, body string) {
	fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// faultClient is an SDK client for the front: the SDK's own HTTP client
// without keep-alive (one connection per attempt, none left idle), and
// retries up to faultAttempts.
func faultClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(endpoint),
		Credentials:      credentials.NewStaticCredentialsProvider("fault", "fault", ""),
		RetryMaxAttempts: faultAttempts,
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.DisableKeepAlives = true
		}),
	})
}

// faultFixture is one case's user, with a live session made on the engine
// directly.
type faultFixture struct {
	e      *env
	user   ddbsession.UserKey
	cookie *http.Cookie
	id     string // the session's public ID
	tag    string // unique to the case, for keys it creates
}

// faultOutcome is what an operation did.
type faultOutcome struct {
	http      bool // the operation answers an HTTP request
	status    int
	through   bool     // the wrapped handler was called
	setCookie []string // Set-Cookie headers sent
	body      string
	err       error
}

// faultOp is a public operation of the matrix.
type faultOp struct {
	name string
	run  func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome
	// ended, if set, says whether the operation's work is done though it
	// returned nil: Logout, Revoke and RevokeAll may report success once
	// the session is dead, leaving the rest to best effort.
	ended func(fx faultFixture) bool
	// clears: the operation clears the cookie whatever happens (Logout).
	clears bool
}

// serve runs one request with cookie c through h.
func serve(ctx context.Context, h func(http.Handler) http.Handler, c *http.Cookie) faultOutcome {
	through := false
	r := httptest.NewRequestWithContext(ctx, "GET", "https://example.test/", nil)
	r.AddCookie(c)
	w := httptest.NewRecorder()
	h(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { through = true })).ServeHTTP(w, r)
	return faultOutcome{http: true, status: w.Code, through: through, setCookie: w.Header().Values("Set-Cookie"), body: w.Body.String()}
}

// sessionEnded reports whether fx's session no longer authenticates, as
// the engine, read directly, has it.
func sessionEnded(fx faultFixture) bool {
	_, _, err := fx.e.m.Authenticate(context.Background(), fx.cookie.Value)
	return errors.Is(err, ddbsession.ErrNoSession)
}

func faultOps() []faultOp {
	bg := context.Background()
	login := func(m *ddbsession.Manager[User], fx faultFixture, with bool) faultOutcome {
		w := httptest.NewRecorder()
		r := newRequest(fx.cookie)
		var err error
		if with {
			err = m.Login(w, r, fx.user, func(User) error { return nil })
		} else {
			err = m.Login(w, r, fx.user, nil)
		}
		return faultOutcome{err: err, setCookie: w.Header().Values("Set-Cookie")}
	}
	return []faultOp{
		{name: "RequireSession", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return serve(bg, m.RequireSession, fx.cookie)
		}},
		{name: "RequireSession, token-only cookie", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return serve(bg, m.RequireSession, tokenOnly(fx.cookie))
		}},
		{name: "RequireSession, client hangs up", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			// A client that hangs up before the store answers.
			ctx, cancel := context.WithTimeout(bg, faultStoreTimeout/4)
			defer cancel()
			return serve(ctx, m.RequireSession, fx.cookie)
		}},
		{name: "LoadSession", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return serve(bg, m.LoadSession, fx.cookie)
		}},
		{name: "LoadSession, token-only cookie", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return serve(bg, m.LoadSession, tokenOnly(fx.cookie))
		}},
		{name: "Authenticate", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			_, _, err := m.Authenticate(bg, fx.cookie.Value)
			return faultOutcome{err: err}
		}},
		{name: "Authenticate, token only", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			_, _, err := m.Authenticate(bg, tokenOnly(fx.cookie).Value)
			return faultOutcome{err: err}
		}},
		{name: "Login", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return login(m, fx, false)
		}},
		{name: "Login with verify", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return login(m, fx, true)
		}},
		{name: "Logout", clears: true, ended: sessionEnded, run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			w := httptest.NewRecorder()
			err := m.Logout(w, newRequest(fx.cookie))
			return faultOutcome{err: err, setCookie: w.Header().Values("Set-Cookie")}
		}},
		{name: "RevokeAll", ended: sessionEnded, run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return faultOutcome{err: m.RevokeAll(bg, fx.user)}
		}},
		{name: "List", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			_, err := m.List(bg, fx.user)
			return faultOutcome{err: err}
		}},
		{name: "Revoke", ended: sessionEnded, run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			return faultOutcome{err: m.Revoke(bg, fx.user, fx.id)}
		}},
		{name: "CreateUser", run: func(m *ddbsession.Manager[User], fx faultFixture) faultOutcome {
			err := m.CreateUser(bg, User{PK: "USER#created-" + fx.tag, SK: "PROFILE", Name: "new"})
			return faultOutcome{err: err}
		}},
	}
}

// faultCase is one cell of the matrix and what happened in it.
type faultCase struct {
	op      faultOp
	fault   fault
	pass    int // requests forwarded before the fault
	fx      faultFixture
	out     faultOutcome
	elapsed time.Duration
	tries   int // connections the front saw after its pass
	logs    string
	wire    []string // session item keys sent to the front
}

func (c *faultCase) name() string {
	return fmt.Sprintf("%s/%s/after %d", c.op.name, c.fault.name, c.pass)
}

// faultEnv is the matrix's table: one for all cases, each case with a user
// of its own. The expiry index makes Expiring work; two shards keep its
// fan-out small.
func faultEnv(t *testing.T) *env {
	return newEnv(t, withExpiryIndex, func(c *ddbsession.Config[User]) { c.Layout.ExpiryIndexShards = 2 })
}

// newFixture makes a user with a live session for one case.
func newFixture(e *env, tag string) faultFixture {
	e.t.Helper()
	key := ddbsession.UserKey{PK: "USER#" + tag, SK: "PROFILE"}
	e.putUserAt(key, tag)
	c := e.login(key)
	return faultFixture{e: e, user: key, cookie: c, id: e.sessionFor(c).ID, tag: tag}
}

// faultManager is a Manager like e's, on a client for front, with the
// matrix's StoreTimeout (unless healthy) and its own debug-level log.
func faultManager(t testing.TB, e *env, front *faultFront, timeout time.Duration) (*ddbsession.Manager[User], *syncBuffer) {
	logs := &syncBuffer{}
	cfg := e.cfg
	cfg.Client = faultClient(front.url())
	cfg.Limits.StoreTimeout = timeout
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, logs
}

// runFaultMatrix runs every operation under every fault at every step,
// calling check on each case in a subtest of its own. For each operation
// it first counts the requests the operation makes on a healthy front, and
// checks that it succeeds there; then, for each fault and each k below that
// count, it forwards k requests and faults the rest. Cases run
// concurrently: most of their time is spent waiting out StoreTimeout.
func runFaultMatrix(t *testing.T, check func(t *testing.T, c *faultCase)) {
	e := faultEnv(t)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, op := range faultOps() {
		healthy := newFixture(e, safeTag("healthy "+op.name))
		front := startFaultFront(t, fault{name: "none"}, -1)
		m, _ := faultManager(t, e, front, time.Minute) // patient: a busy machine is no fault
		out := op.run(m, healthy)
		if err := m.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		steps := front.attempts()
		if out.err != nil || (out.http && (out.status != http.StatusOK || !out.through)) || steps == 0 {
			if !strings.Contains(op.name, "hangs up") {
				t.Fatalf("%s on a healthy store: %+v after %d requests", op.name, out, steps)
			}
			steps = 1 // a gone client's request ends at its first call
		}
		for _, f := range faults {
			for pass := range steps {
				c := &faultCase{op: op, fault: f, pass: pass}
				c.fx = newFixture(e, safeTag(c.name()))
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					t.Run(c.name(), func(t *testing.T) {
						runFaultCase(t, e, c)
						check(t, c)
					})
				})
			}
		}
	}
	wg.Wait()
}

func safeTag(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '/' || r == ',' {
			return '-'
		}
		return r
	}, s)
}

// runFaultCase runs one case and records what happened.
func runFaultCase(t *testing.T, e *env, c *faultCase) {
	front := startFaultFront(t, c.fault, c.pass)
	m, logs := faultManager(t, e, front, faultStoreTimeout)
	watchdog := time.AfterFunc(faultBound, front.giveUp)
	began := time.Now()
	c.out = c.op.run(m, c.fx)
	c.elapsed = time.Since(began)
	watchdog.Stop()
	if err := m.Wait(context.Background()); err != nil {
		t.Errorf("refresh writes still pending: %v", err)
	}
	c.tries = front.attempts() - c.pass
	front.stop()
	c.logs = logs.String()
	c.wire = front.sessionKeys()
}

// TestFaultMatrix proves that every public operation fails closed under
// every store fault, at every step of its flow, within StoreTimeout: no
// request gets through or gets a 2xx, no cookie that may still be valid is
// cleared, no operation reports success for work it has not done, and
// nothing is left running (the front's goroutines end with each case;
// TestMain's goleak check covers the rest).
func TestFaultMatrix(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	retried := map[string]int{} // the most attempts a fault saw in one case
	runFaultMatrix(t, func(t *testing.T, c *faultCase) {
		mu.Lock()
		retried[c.fault.name] = max(retried[c.fault.name], c.tries)
		mu.Unlock()
		t.Logf("%v, %d attempts after the pass; status %d, err %v", c.elapsed.Round(time.Millisecond), c.tries, c.out.status, c.out.err)
		if c.elapsed > faultBound {
			t.Errorf("took %v with StoreTimeout %v, want under %v", c.elapsed, faultStoreTimeout, faultBound)
		}
		out := c.out
		if out.http {
			if out.through || out.status != http.StatusServiceUnavailable {
				t.Errorf("status %d, handler called %v; want 503, not called", out.status, out.through)
			}
			if len(out.setCookie) != 0 {
				t.Errorf("a store failure touched the cookie: Set-Cookie %q", out.setCookie)
			}
			return
		}
		for _, sc := range out.setCookie {
			if c.op.clears {
				continue
			}
			if ck, err := http.ParseSetCookie(sc); err != nil || ck.Value != "" {
				t.Errorf("a failed %s set a session cookie: %q", c.op.name, sc)
			}
		}
		if c.op.clears {
			if len(out.setCookie) != 1 || !strings.Contains(out.setCookie[0], "Max-Age=0") {
				t.Errorf("%s did not clear the cookie: Set-Cookie %q", c.op.name, out.setCookie)
			}
		}
		switch {
		case out.err == nil && c.op.ended == nil:
			t.Errorf("%s reported success under the fault", c.op.name)
		case out.err == nil && !c.op.ended(c.fx):
			t.Errorf("%s reported success, but the session still authenticates", c.op.name)
		case errors.Is(out.err, ddbsession.ErrNoSession),
			errors.Is(out.err, ddbsession.ErrUserNotFound), errors.Is(out.err, ddbsession.ErrUserExists):
			t.Errorf("a store failure reported as an answer: %v", out.err)
		}
	})
	// The SDK retried: its retry logic, not only the first attempt, ran
	// under the bound.
	for _, name := range []string{"HTTP 500", "connection reset", "write applied, answer lost"} {
		if retried[name] < 2 {
			t.Errorf("%s: at most %d attempts in a case, want the SDK to have retried", name, retried[name])
		}
	}
	t.Logf("most attempts per case: %v", retried)
}

// secretForms are the forms in which a session cookie's secret could leak:
// the token (in either case), the digest that keys its item (base64url, as
// stored, and hex or standard base64, as a careless log might print it),
// the item's partition key, and the whole cookie value; and 20 of the
// token's 26 characters, a leak too.
func secretForms(cookieValue string) map[string]string {
	token := cookieValue[:26]
	sum := sha256.Sum256([]byte(token))
	return map[string]string{
		"the token":                token,
		"the token, lowercase":     strings.ToLower(token),
		"20 characters of it":      token[:20],
		"the token's hash":         base64.RawURLEncoding.EncodeToString(sum[:]),
		"the token's hash, hex":    hex.EncodeToString(sum[:]),
		"the token's hash, base64": base64.RawStdEncoding.EncodeToString(sum[:]),
		"the session item's key":   "SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:]),
		"the whole cookie value":   cookieValue,
	}
}

// TestNoSecretInLogsOrErrorsUnderFaults runs the fault matrix with the
// Manager logging at debug level, and checks every log record, every
// returned error and every response body of every case for the case's
// session cookie in any of its secretForms, and for every session item key
// (a token's hash) that went over the wire in the case, including those of
// sessions that Login created and never got to hand out.
func TestNoSecretInLogsOrErrorsUnderFaults(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	levels := map[string]int{}
	runFaultMatrix(t, func(t *testing.T, c *faultCase) {
		mu.Lock()
		for _, level := range []string{"DEBUG", "INFO", "WARN", "ERROR"} {
			levels[level] += strings.Count(c.logs, "level="+level)
		}
		mu.Unlock()
		texts := map[string]string{"the log": c.logs, "the response body": c.out.body}
		if c.out.err != nil {
			texts["the error"] = c.out.err.Error()
		}
		secrets := secretForms(c.fx.cookie.Value)
		for i, key := range c.wire {
			secrets[fmt.Sprintf("session key %d on the wire", i)] = key
			secrets[fmt.Sprintf("token hash %d on the wire", i)] = strings.TrimPrefix(key, "SESSION#")
		}
		for where, text := range texts {
			for what, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("%s holds %s %q:\n%s", where, what, secret, text)
				}
			}
		}
	})
	// The check saw records at the levels where a leak would be: a client
	// that hung up logs at debug level, a store failure at error level.
	if levels["DEBUG"] == 0 || levels["ERROR"] == 0 {
		t.Errorf("log records by level %v: want debug and error records to check", levels)
	}
	t.Logf("log records checked, by level: %v", levels)
}
