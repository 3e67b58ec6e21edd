package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// dbscFeatures are the Chromium features that turn device binding on in a
// Linux build: DBSC itself, without the origin-trial token a page would
// otherwise need and without the limit of 6 signatures in 9 minutes per
// site (this test signs more often), and software keys, since Linux has no
// TPM-backed key store that Chromium uses.
const dbscFeatures = "DeviceBoundSessions:RequireOriginTrialTokens/false/RefreshQuota/false," +
	"EnableBoundSessionCredentialsSoftwareKeysForManualTesting"

// TestBrowserDeviceBinding proves device binding (DBSC) in headless
// Chromium: a log-in through the form binds the session to a key of the
// browser's; the page keeps working across several bound-cookie lifetimes,
// because Chromium holds a request whose bound cookie has expired until it
// has proved the key for a fresh one; and a copy of the browser's cookies
// in another client works only until the bound cookie it holds expires,
// while the browser carries on.
//
// Chromium binds sessions only over HTTPS with a certificate it validates
// (--ignore-certificate-errors is not enough), so the test makes a CA of its
// own and trusts it in a fresh NSS database, the one Chromium on Linux
// reads at $HOME/.pki/nssdb, with a HOME of the test's. It needs Debian's
// chromium and libnss3-tools (certutil) packages, and fails, never skips,
// without them.
//
// Real time must pass for bound cookies to expire: with 15-second cookies
// the test takes about 40 seconds.
func TestBrowserDeviceBinding(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("this test drives headless Chromium, which was not found (%v).\nInstall Debian's chromium package: apt-get install chromium", err)
	}
	certutil, err := exec.LookPath("certutil")
	if err != nil {
		t.Fatalf("this test trusts a test CA in Chromium's NSS database with certutil, which was not found (%v).\nInstall Debian's libnss3-tools package: apt-get install libnss3-tools", err)
	}

	const bound = 15 * time.Second
	watch := newWatcher()
	client := ddbtest.Client(t)
	var logs syncBuffer
	a, err := newApp(context.Background(), appConfig{
		Client:        client,
		Table:         ddbtest.TableName(t, client),
		Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		StoreTimeout:  15 * time.Second, // see startApp
		HashCost:      testCost,
		DeviceBinding: true,
		BoundLifetime: bound,
		OnEvent:       watch.event,
	})
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	t.Cleanup(func() { a.shutdown(context.Background()) })
	ca := newTestCA(t)
	cert, _, _ := ca.issue(t, "127.0.0.1")
	srv := httptest.NewUnstartedServer(watch.requests(a))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	home := t.TempDir()
	trustInNSS(t, certutil, home, ca)

	// Generous: two cores, shared with other tests; the waits for cookies
	// to expire take about 35 seconds of it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var browserOutput syncBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("HOME="+home), // where Chromium finds .pki/nssdb
		chromedp.CombinedOutput(&browserOutput),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // tests may run as root, where the sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("enable-features", dbscFeatures),
		// Chromium's log, shown if the test fails; device binding's
		// verbose lines too, where the build keeps them.
		chromedp.Flag("enable-logging", "stderr"),
		chromedp.Flag("vmodule", "*/device_bound_sessions/*=2"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	t.Cleanup(func() {
		// Cleanups run after the test's failures, with the whole story.
		t.Logf("what the server saw (seconds since the app started):\n%s", watch)
		if t.Failed() {
			t.Logf("app logs:\n%s", logs.String())
			t.Logf("browser output:\n%s", browserOutput.String())
		}
	})

	// Alice signs up from a Go client, which ignores the offer to bind.
	other := newGoClient(t, ca, srv.URL)
	if res := other.postForm("/signup", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-up from a Go client: %d, want 303", res.StatusCode)
	}

	// 1. Log in through the form. The answer offers binding, and Chromium
	// registers a key of its own while it follows the redirect home.
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/login")); err != nil {
		t.Fatalf("Chromium (%s) did not start or did not load the app: %v\n"+
			"Install Debian's chromium package (apt-get install chromium).\nBrowser output:\n%s", chromium, err, browserOutput.String())
	}
	do(t, tab, "log in",
		chromedp.WaitVisible("#login-form"),
		chromedp.SendKeys("#login-form input[name=username]", "alice"),
		chromedp.SendKeys("#login-form input[name=password]", "correct horse battery"),
		chromedp.Click("#login-form button"),
	)
	watch.waitFor(t, "Chromium to register its key, and to load the page after logging in", 30*time.Second, func() bool {
		return watch.count(ddbsession.EventBound) == 1 && watch.requestsServed("GET /") == 1
	})
	// The server has answered the registration; Chromium stores the bound
	// cookie of the answer on its own time, which a busy machine stretches:
	// the next page waits for the cookie, or it goes without it.
	waitForBoundCookie(t, tab, srv.URL)

	// 2. Signed in, with the bound cookie, and listed as device-bound,
	// unlike the Go client's session.
	signedIn(t, tab, srv.URL, "after registration")
	list := pageSessions(t, tab, srv.URL)
	if len(list) != 2 {
		t.Fatalf("GET /api/sessions in the browser lists %d sessions, want 2: %+v", len(list), list)
	}
	for _, s := range list {
		if s.DeviceBound != s.Current {
			t.Errorf("GET /api/sessions: %+v; want the browser's own session device-bound, and only it", s)
		}
	}
	// The page's sessions list marks the same session, in the browser's
	// row ("this browser") and no other.
	do(t, tab, "load the sessions list", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#sessions"))
	rows := value(t, tab, "read the sessions list", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#sessions tbody tr td.agent")].map(td => td.innerText)`))
	var marked int
	for _, row := range rows {
		if strings.Contains(row, "device-bound") {
			marked++
			if !strings.Contains(row, "this browser") {
				t.Errorf("the sessions list marks another session than the browser's device-bound: %q", row)
			}
		}
	}
	if len(rows) != 2 || marked != 1 {
		t.Errorf("the sessions list: %q, want two sessions, one of them device-bound", rows)
	}
	checkWidths(t, tab, "device-bound")

	// 3. The theft: a copy of both cookies in a plain Go client. Within the
	// bound cookie's lifetime it may work.
	session, stolen := freshCookies(t, tab, srv.URL, watch, bound)
	if left := time.Until(stolen.Expires); left <= 0 || left > bound+time.Second {
		t.Errorf("the bound cookie expires in %v, want within the -bound lifetime %v", left, bound)
	}
	thief := newGoClient(t, ca, srv.URL, session, stolen)
	code := thief.get("/api/me").StatusCode
	left := time.Until(stolen.Expires)
	t.Logf("the copy, %.1fs before its bound cookie expires: GET /api/me %d", left.Seconds(), code)
	if code != http.StatusOK && left > 2*time.Second {
		t.Errorf("GET /api/me with a copy of both cookies, the bound one valid for %v more: %d, want 200", left, code)
	}

	// 4. Once the bound cookies have expired, the copy is refused; the
	// browser, whose cookie has expired too, refreshes it before its
	// request goes out (a deferred refresh), and carries on.
	refreshesBefore := watch.count(ddbsession.EventBoundRefreshed)
	waitBoundExpired(t, tab, srv.URL, watch, bound)
	if code := thief.get("/api/me").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("GET /api/me with the copy after its bound cookie expired: %d, want 401", code)
	}
	if code := newGoClient(t, ca, srv.URL, session).get("/api/me").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("GET /api/me with a copy of the session cookie alone: %d, want 401", code)
	}
	signedIn(t, tab, srv.URL, "after the first bound cookie expired")
	if code, body := load(t, tab, srv.URL+"/api/me"); code != http.StatusOK {
		t.Errorf("GET /api/me in the browser after the first bound cookie expired: %d %s, want 200", code, body)
	}
	if _, current := browserCookies(t, tab, srv.URL, true); current.Value == stolen.Value {
		t.Errorf("the browser still holds the bound cookie it had before that expired")
	}

	// 5. Once more: the browser's bound cookie expires again, and the page
	// still works. The copy stays refused.
	waitBoundExpired(t, tab, srv.URL, watch, bound)
	signedIn(t, tab, srv.URL, "after the second bound cookie expired")
	if code := thief.get("/api/me").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("GET /api/me with the copy, two bound cookies later: %d, want 401", code)
	}
	for _, s := range pageSessions(t, tab, srv.URL) {
		if s.Current && !s.DeviceBound {
			t.Errorf("GET /api/sessions in the browser: the current session %+v is not device-bound", s)
		}
	}

	refreshes := watch.count(ddbsession.EventBoundRefreshed)
	deferred := watch.deferredRefreshes()
	t.Logf("bound-cookie refreshes: %d in all, %d after the theft; %d with the bound cookie expired (deferred)",
		refreshes, refreshes-refreshesBefore, deferred)
	if refreshes-refreshesBefore < 2 {
		t.Errorf("the server saw %d bound-cookie refreshes across two expiries, want at least 2", refreshes-refreshesBefore)
	}
	if deferred < 2 {
		t.Errorf("the server saw %d refreshes for an expired bound cookie, want at least 2: one per expiry", deferred)
	}
	if n := watch.count(ddbsession.EventBound); n != 1 {
		t.Errorf("the server saw %d registrations, want 1", n)
	}
}

// freshCookies reads the browser's session and bound cookies once the
// bound one has a few seconds left. On a slow machine the cookie that
// registration set may be close to expiry by the time the test reads it
// (its Max-Age is the lifetime less 5 s), so the test then lets it expire
// and loads the page, which brings a fresh one (a deferred refresh).
func freshCookies(t *testing.T, tab context.Context, base string, watch *watcher, lifetime time.Duration) (session, bound *http.Cookie) {
	t.Helper()
	for range 3 {
		session, bound = browserCookies(t, tab, base, false)
		if session != nil && bound != nil && time.Until(bound.Expires) > 4*time.Second {
			return session, bound
		}
		waitBoundExpired(t, tab, base, watch, lifetime)
		signedIn(t, tab, base, "to get a fresh bound cookie")
	}
	session, bound = browserCookies(t, tab, base, true)
	if time.Until(bound.Expires) <= 4*time.Second {
		t.Fatalf("three times, the browser's bound cookie had 4s or less left: %v", time.Until(bound.Expires))
	}
	return session, bound
}

// waitBoundExpired waits until every bound cookie issued so far has
// expired, in the browser and on the server; a refresh during the wait (one
// Chromium started on the last request) moves the end. Only time makes a
// cookie expire: there is nothing to poll for sooner.
//
// The wait ends a second after the later of the two expiries, because
// ddbsession keeps a bound cookie's expiry in whole seconds, rounded down,
// while the browser counts Max-Age from when it got the cookie: the
// server's record expires up to a second (and a network trip) before the
// browser's cookie. In that window Chromium sends the cookie, sees no
// reason to refresh it, and the server refuses the request.
func waitBoundExpired(t *testing.T, tab context.Context, base string, watch *watcher, lifetime time.Duration) {
	t.Helper()
	for {
		end := watch.lastBoundCookie().Add(lifetime)
		if _, bound := browserCookies(t, tab, base, false); bound != nil && bound.Expires.After(end) {
			end = bound.Expires
		}
		wait := time.Until(end.Add(time.Second))
		if wait <= 0 {
			return
		}
		if wait > lifetime+5*time.Second {
			t.Fatalf("a bound cookie expires in %v, later than its lifetime %v allows", wait, lifetime)
		}
		select {
		case <-time.After(wait):
		case <-watch.changed:
		}
	}
}

// trustInNSS makes a fresh NSS database in home/.pki/nssdb, the one
// Chromium on Linux reads for locally trusted certificates, that trusts ca
// to identify web sites.
func trustInNSS(t *testing.T, certutil, home string, ca *testCA) {
	t.Helper()
	dir := filepath.Join(home, ".pki", "nssdb")
	caFile := filepath.Join(home, "test-ca.pem")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-N", "-d", "sql:" + dir, "--empty-password"},
		{"-A", "-d", "sql:" + dir, "-t", "C,,", "-n", "ddbsession example test CA", "-i", caFile},
	} {
		if out, err := exec.Command(certutil, args...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// signedIn loads the home page and fails the test unless it is signed in.
func signedIn(t *testing.T, tab context.Context, base, when string) {
	t.Helper()
	do(t, tab, "load the home page "+when, chromedp.Navigate(base+"/"), chromedp.WaitReady("body"))
	whoami := value(t, tab, "read who am I "+when, chromedp.Evaluate[string](`document.querySelector("#whoami")?.innerText ?? "signed out"`))
	if whoami != "Signed in as alice" {
		t.Fatalf("the home page %s says %q, want signed in as alice", when, whoami)
	}
}

// pageSessions is GET /api/sessions, loaded in the tab. (The app's
// Content-Security-Policy lets no page script fetch.)
func pageSessions(t *testing.T, tab context.Context, base string) []sessionJSON {
	t.Helper()
	code, body := load(t, tab, base+"/api/sessions")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/sessions in the browser: %d, %v in %q", code, err, body)
	}
	return list
}

// load loads url in the tab and returns the status and the text shown.
func load(t *testing.T, tab context.Context, url string) (int, string) {
	t.Helper()
	res, err := chromedp.RunResponse(tab, chromedp.Navigate(url))
	if err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	return int(res.Status), value(t, tab, "read "+url, chromedp.Evaluate[string](`document.body.innerText`))
}

// browserCookies returns the browser's session and bound cookies for base,
// as a thief who read them off the machine would have them. Unless
// required, either may be nil: the browser has dropped it, or never had it.
func browserCookies(t *testing.T, tab context.Context, base string, required bool) (session, bound *http.Cookie) {
	t.Helper()
	stored, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{URLs: []string{base}})
	if err != nil {
		t.Fatalf("read the browser's cookie store: %v", err)
	}
	for _, c := range stored.Cookies {
		sec, frac := math.Modf(c.Expires)
		copied := &http.Cookie{Name: c.Name, Value: c.Value, Expires: time.Unix(int64(sec), int64(frac*1e9))}
		switch c.Name {
		case cookieName:
			session = copied
		case boundCookieName:
			bound = copied
		}
	}
	if required && (session == nil || bound == nil) {
		t.Fatalf("the browser's cookie store lacks the session or the bound cookie: %d cookies", len(stored.Cookies))
	}
	return session, bound
}

// waitForBoundCookie waits until the browser's cookie store holds the
// bound cookie for base.
func waitForBoundCookie(t *testing.T, tab context.Context, base string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, bound := browserCookies(t, tab, base, false); bound != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("waited 30s for the browser to store the bound cookie of its registration")
		}
	}
}

// watcher records what the server sees: each request, with whether it
// carried a bound cookie and the session events it caused, and counts of
// events and requests that the test waits on.
type watcher struct {
	start      time.Time
	mu         sync.Mutex
	lines      []string
	kinds      map[ddbsession.EventKind]int
	served     map[string]int // completed requests by "METHOD /path"
	deferred   int            // refreshes whose request carried no bound cookie
	lastIssued time.Time      // when the latest bound cookie was issued
	changed    chan struct{}  // a buffered signal: something was recorded
}

func newWatcher() *watcher {
	return &watcher{
		start:   time.Now(),
		kinds:   map[ddbsession.EventKind]int{},
		served:  map[string]int{},
		changed: make(chan struct{}, 1),
	}
}

// request is what the watcher keeps of a request in flight, in its context.
type request struct {
	events []ddbsession.EventKind
	done   bool
}

type requestKey struct{}

func (w *watcher) logf(format string, args ...any) {
	w.lines = append(w.lines, fmt.Sprintf("%6.2fs ", time.Since(w.start).Seconds())+fmt.Sprintf(format, args...))
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watcher) event(ctx context.Context, e ddbsession.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kinds[e.Kind]++
	if e.Kind == ddbsession.EventBound || e.Kind == ddbsession.EventBoundRefreshed {
		w.lastIssued = time.Now()
	}
	if r, ok := ctx.Value(requestKey{}).(*request); ok && !r.done {
		r.events = append(r.events, e.Kind)
	}
	if e.Reason != "" {
		w.logf("  event %v: %v", e.Kind, e.Reason)
	} else {
		w.logf("  event %v", e.Kind)
	}
}

func (w *watcher) count(k ddbsession.EventKind) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kinds[k]
}

func (w *watcher) requestsServed(methodPath string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.served[methodPath]
}

func (w *watcher) deferredRefreshes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deferred
}

// waitFor waits for cond, checked whenever something is recorded, until
// timeout.
func (w *watcher) waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-w.changed:
		case <-deadline:
			t.Fatalf("waited %v for %s", timeout, what)
		}
	}
}

// lastBoundCookie is when the latest bound cookie was issued.
func (w *watcher) lastBoundCookie() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastIssued
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// requests wraps the app's handler to record each request.
func (w *watcher) requests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: rw, code: http.StatusOK}
		req := &request{}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
		_, err := r.Cookie(boundCookieName)
		hasBound := err == nil

		w.mu.Lock()
		defer w.mu.Unlock()
		req.done = true
		methodPath := r.Method + " " + r.URL.Path
		w.served[methodPath]++
		line := fmt.Sprintf("%s: %d; bound cookie sent: %v", methodPath, rec.code, hasBound)
		if v := r.Header.Get("Secure-Session-Skipped"); v != "" {
			line += "; Secure-Session-Skipped: " + v
		}
		if r.Header.Get("Secure-Session-Response") != "" {
			line += "; signed"
		}
		if rw.Header().Get("Secure-Session-Registration") != "" {
			line += "; offers binding"
		}
		if slices.Contains(req.events, ddbsession.EventRejected) {
			line += "; session refused"
		}
		if r.URL.Path == "/dbsc/refresh" && slices.Contains(req.events, ddbsession.EventBoundRefreshed) && !hasBound {
			// Chromium sends the cookies it holds with a refresh; without
			// the bound cookie, it had expired, and the refresh held back
			// the request that needed it.
			w.deferred++
			line += "; deferred"
		}
		w.logf("%s", line)
	})
}

// statusRecorder keeps the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
