package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// cookieName is the session cookie's name outside dev mode.
const cookieName = "__Host-session"

// boundCookieName is the bound cookie's name, with -dbsc: ddbsession's
// default.
const boundCookieName = "__Host-bound"

// testApp is the whole app on a table of its own, served over TLS so that
// the real __Host- Secure cookie is in play (plain HTTP in dev mode).
type testApp struct {
	t      *testing.T
	app    *app
	srv    *httptest.Server
	api    *ddbtest.Probe // the app's DynamoDB client, which counts its calls
	faults *faults
	client *dynamodb.Client
	table  string
	logs   *syncBuffer
}

// newTestApp starts the app on a new table; options adjust its appConfig.
func newTestApp(t *testing.T, options ...func(*appConfig)) *testApp {
	t.Helper()
	client := ddbtest.Client(t)
	return startApp(t, client, ddbtest.TableName(t, client), options...)
}

// anotherInstance starts a second instance of the app on ta's table, with
// a client, a server and logs of its own, as a second host behind a load
// balancer would run.
func (ta *testApp) anotherInstance(options ...func(*appConfig)) *testApp {
	ta.t.Helper()
	return startApp(ta.t, ta.client, ta.table, options...)
}

func startApp(t *testing.T, client *dynamodb.Client, table string, options ...func(*appConfig)) *testApp {
	t.Helper()
	ta := &testApp{t: t, client: client, table: table, logs: &syncBuffer{}}
	ta.api = ddbtest.NewProbe(client)
	ta.faults = newFaults(ta.api)
	cfg := appConfig{
		Client: ta.api,
		Table:  ta.table,
		Logger: slog.New(slog.NewTextHandler(ta.logs, nil)),
		// With the race detector on two cores, argon2id in parallel tests
		// starves dynalite of CPU, and a call can take longer than the 2s
		// default; a timed-out call aborts its HTTP request, which also
		// crashes dynalite and fails every test after it. The pauses of the
		// race tests also run inside a login's bound.
		StoreTimeout: 15 * time.Second,
		HashCost:     testCost,
	}
	for _, o := range options {
		o(&cfg)
	}
	a, err := newApp(context.Background(), cfg)
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	ta.app = a
	if cfg.Dev {
		ta.srv = httptest.NewServer(a)
	} else {
		ta.srv = httptest.NewTLSServer(a)
	}
	t.Cleanup(ta.srv.Close)
	return ta
}

// testCost is the tests' password hashing: argon2id at its least work, a
// fraction of a millisecond where the default takes tens (TestSignup and
// TestPasswordHash check the default).
var testCost = argonCost{Time: 1, Memory: 8}

// owaspHashing is an option for newTestApp: the app's default hashing.
func owaspHashing(cfg *appConfig) { cfg.HashCost = argonCost{} }

// dev is an option for newTestApp: plain-HTTP development mode.
func dev(cfg *appConfig) { cfg.Dev = true }

// unlimited is an option for newTestApp: failed password checks are not
// limited, for tests of something else that fail many from one address.
func unlimited(cfg *appConfig) {
	cfg.UserLimit = rateLimit{Every: time.Millisecond, Burst: 1 << 20}
	cfg.AddrLimit, cfg.Prefix56Limit, cfg.Prefix48Limit = cfg.UserLimit, cfg.UserLimit, cfg.UserLimit
}

// browser is one HTTP client with its own cookie jar, as a separate
// browser (or device) would be. It does not follow redirects, so that
// tests see the 303s.
type browser struct {
	t         *testing.T
	app       *testApp
	client    *http.Client
	userAgent string
}

func (ta *testApp) browser(userAgent string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		ta.t.Fatal(err)
	}
	c := *ta.srv.Client() // a copy: the server's client is shared
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: ta.t, app: ta, client: &c, userAgent: userAgent}
}

type response struct {
	code   int
	body   string
	header http.Header
}

// do sends a request built by the caller, with the browser's user agent
// and cookies.
func (b *browser) do(r *http.Request) response {
	b.t.Helper()
	res, err := b.send(r)
	if err != nil {
		b.t.Fatalf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	return res
}

// send is do for other goroutines than the test's: it returns the error.
func (b *browser) send(r *http.Request) (response, error) {
	r.Header.Set("User-Agent", b.userAgent)
	res, err := b.client.Do(r)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("read body: %w", err)
	}
	return response{code: res.StatusCode, body: string(body), header: res.Header}, nil
}

// postForm is post for other goroutines than the test's, to the browser's
// app or another base URL, under ctx.
func (b *browser) postForm(ctx context.Context, baseURL, path string, form url.Values) (response, error) {
	r, err := http.NewRequestWithContext(ctx, "POST", baseURL+path, strings.NewReader(form.Encode()))
	if err != nil {
		return response{}, err
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.send(r)
}

func (b *browser) get(path string) response {
	b.t.Helper()
	r, err := http.NewRequest("GET", b.app.srv.URL+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(r)
}

// post sends form to path; header is optional name, value pairs.
func (b *browser) post(path string, form url.Values, header ...string) response {
	b.t.Helper()
	r, err := http.NewRequest("POST", b.app.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return b.do(r)
}

// mustPost is post that fails the test unless the answer is want.
func (b *browser) mustPost(want int, path string, form url.Values) response {
	b.t.Helper()
	res := b.post(path, form)
	if res.code != want {
		b.t.Fatalf("POST %s %v: got %d, want %d; body: %s", path, form, res.code, want, res.body)
	}
	return res
}

func (b *browser) signup(username, password string) {
	b.t.Helper()
	res := b.mustPost(http.StatusSeeOther, "/signup", url.Values{"username": {username}, "password": {password}})
	if loc := res.header.Get("Location"); loc != "/" {
		b.t.Fatalf("signup redirects to %q, want /", loc)
	}
}

func (b *browser) login(username, password string) {
	b.t.Helper()
	b.mustPost(http.StatusSeeOther, "/login", url.Values{"username": {username}, "password": {password}})
}

// meStatus is the status of GET /api/me: 200 signed in, 401 not.
func (b *browser) meStatus() int {
	b.t.Helper()
	return b.get("/api/me").code
}

// token returns the session token in the browser's jar, or "".
func (b *browser) token() string {
	b.t.Helper()
	u, _ := url.Parse(b.app.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == cookieName {
			return c.Value
		}
	}
	return ""
}

// sessions returns GET /api/sessions, decoded.
func (b *browser) sessions() []sessionJSON {
	b.t.Helper()
	res := b.get("/api/sessions")
	if res.code != http.StatusOK {
		b.t.Fatalf("GET /api/sessions: %d %s", res.code, res.body)
	}
	var list []sessionJSON
	if err := json.Unmarshal([]byte(res.body), &list); err != nil {
		b.t.Fatalf("GET /api/sessions: %v in %s", err, res.body)
	}
	return list
}

// withToken returns a browser that carries only the given session token,
// as a stolen or stale cookie would.
func (ta *testApp) withToken(token string) *browser {
	b := ta.browser("replay/1.0")
	u, _ := url.Parse(ta.srv.URL)
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: token, Path: "/", Secure: true}})
	return b
}

// faults are the outages and pauses a test sets on the app's DynamoDB
// calls, to show how the app behaves in an outage or a race: they act
// through the hooks of the app's ddbtest.Probe, which counts the calls.
type faults struct {
	mu       sync.Mutex
	down     map[string]bool // operation name, or "*" for all
	pauses   []*pausePoint
	failures []callMatch
}

// newFaults returns the faults of p's calls, none yet.
func newFaults(p *ddbtest.Probe) *faults {
	f := &faults{}
	p.Fail, p.After = f.fail, f.paused
	return f
}

var errOutage = errors.New("injected DynamoDB outage")

// setDown takes the named operations down, or brings all back up if none
// are named.
func (f *faults) setDown(ops ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = map[string]bool{}
	for _, op := range ops {
		f.down[op] = true
	}
}

// pausePoint holds the caller of one DynamoDB call, after the call is
// made, until the test lets it go: the way to stop a request between two
// of its steps.
type pausePoint struct {
	call    callMatch
	reached chan struct{} // closed once the call is made and held
	resume  chan struct{} // closed by release
	once    sync.Once
}

// pauseAfter arms a pause after the next call of op whose input match
// accepts. Release it, or the caller stays held until its context ends.
func (f *faults) pauseAfter(op string, match func(in any) bool) *pausePoint {
	p := &pausePoint{call: callMatch{op, match}, reached: make(chan struct{}), resume: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses = append(f.pauses, p)
	return p
}

// failNext makes the next call of op whose input match accepts fail with
// errOutage, without reaching DynamoDB.
func (f *faults) failNext(op string, match func(in any) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, callMatch{op, match})
}

// callMatch picks DynamoDB calls: those of op whose input match accepts.
type callMatch struct {
	op    string
	match func(in any) bool
}

func (c callMatch) matches(op string, in any) bool { return (c.op == "*" || c.op == op) && c.match(in) }

// waitReached waits until the paused call has been made.
func (p *pausePoint) waitReached(t *testing.T) {
	t.Helper()
	select {
	case <-p.reached:
	case <-time.After(10 * time.Second):
		t.Fatalf("the %s to pause after was never made", p.call.op)
	}
}

func (p *pausePoint) release() { p.once.Do(func() { close(p.resume) }) }

// paused holds the caller if an armed pause point matches this call: the
// probe's After hook, once the engine has answered.
func (f *faults) paused(ctx context.Context, op string, in, _ any, _ error) error {
	f.mu.Lock()
	var p *pausePoint
	for i, c := range f.pauses {
		if c.call.matches(op, in) {
			p = c
			f.pauses = append(f.pauses[:i], f.pauses[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	close(p.reached)
	select {
	case <-p.resume:
	case <-ctx.Done():
	}
	return nil
}

// readsUser matches a read of user's item: a GetItem, or a BatchGetItem
// that reads it with others (a login reads the table's global revocation
// item with it).
func readsUser(user ddbsession.UserKey) func(in any) bool {
	return func(in any) bool {
		switch in := in.(type) {
		case *dynamodb.GetItemInput:
			return keyIs(in.Key, user)
		case *dynamodb.BatchGetItemInput:
			for _, ka := range in.RequestItems {
				if slices.ContainsFunc(ka.Keys, func(k map[string]types.AttributeValue) bool { return keyIs(k, user) }) {
					return true
				}
			}
		}
		return false
	}
}

// updatesUser matches an UpdateItem of user's item.
func updatesUser(user ddbsession.UserKey) func(in any) bool {
	return func(in any) bool {
		update, ok := in.(*dynamodb.UpdateItemInput)
		return ok && keyIs(update.Key, user)
	}
}

// putsPK matches a PutItem of an item whose partition key starts with
// prefix.
func putsPK(prefix string) func(in any) bool {
	return func(in any) bool {
		put, ok := in.(*dynamodb.PutItemInput)
		if !ok {
			return false
		}
		pk, _ := put.Item["pk"].(*types.AttributeValueMemberS)
		return pk != nil && strings.HasPrefix(pk.Value, prefix)
	}
}

func keyIs(key map[string]types.AttributeValue, user ddbsession.UserKey) bool {
	pk, _ := key["pk"].(*types.AttributeValueMemberS)
	sk, _ := key["sk"].(*types.AttributeValueMemberS)
	return pk != nil && sk != nil && pk.Value == user.PK && sk.Value == user.SK
}

// fail answers a call with errOutage if its operation is down or an armed
// failure matches it: the probe's Fail hook.
func (f *faults) fail(_ context.Context, op string, in any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[op] || f.down["*"] {
		return errOutage
	}
	for i, c := range f.failures {
		if c.matches(op, in) {
			f.failures = append(f.failures[:i], f.failures[i+1:]...)
			return errOutage
		}
	}
	return nil
}

// syncBuffer collects log output from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
