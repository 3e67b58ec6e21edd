package ddbsessionoidc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionoidc"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// New refuses a Config that cannot work, naming the field, before it
// reaches the provider.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		edit func(*ddbsessionoidc.Config[user])
		want string
	}{
		{"no Manager", func(c *ddbsessionoidc.Config[user]) { c.Sessions = nil }, "Config.Sessions"},
		{"another table than the Manager's", func(c *ddbsessionoidc.Config[user]) { c.Table = "other" }, `Config.Table "other" is not the Manager's`},
		{"another layout than the Manager's", func(c *ddbsessionoidc.Config[user]) { c.Layout.TTLAttribute = "ttl" }, "Config.Layout {"},
		{"hash-only", func(c *ddbsessionoidc.Config[user]) { c.Layout = ddbsession.Layout{HashOnly: true} }, "Config.Layout.HashOnly"},
		{"the core's prefix", func(c *ddbsessionoidc.Config[user]) { c.Prefix = "SESSION#" }, "Config.Prefix"},
		{"plain-HTTP issuer", func(c *ddbsessionoidc.Config[user]) { c.Issuer = "http://idp.example" }, "Config.Issuer"},
		{"plain-HTTP issuer: the dev-mode setting", func(c *ddbsessionoidc.Config[user]) { c.Issuer = "http://localhost:9000" }, `Config.Issuer "http://localhost:9000": want an https URL; a local test provider on plain HTTP needs Config.InsecureDevMode`},
		{"plain-HTTP callback: the dev-mode setting", func(c *ddbsessionoidc.Config[user]) { c.RedirectURL = "http://localhost:8080/cb" }, `Config.RedirectURL "http://localhost:8080/cb": want an https URL; plain HTTP on localhost needs Config.InsecureDevMode`},
		{"no client ID", func(c *ddbsessionoidc.Config[user]) { c.ClientID = "" }, "Config.ClientID"},
		{"relative redirect", func(c *ddbsessionoidc.Config[user]) { c.RedirectURL = "/callback" }, "Config.RedirectURL"},
		{"no mapping", func(c *ddbsessionoidc.Config[user]) { c.User = nil }, "Config.User"},
		{"method with a space", func(c *ddbsessionoidc.Config[user]) { c.Method = "my idp" }, "Config.Method"},
		{"fresh method of 33", func(c *ddbsessionoidc.Config[user]) { c.Method = strings.Repeat("m", 28) }, "Config.FreshMethod"},
		{"fresh method as method", func(c *ddbsessionoidc.Config[user]) { c.FreshMethod = "oidc" }, "Config.FreshMethod"},
		{"attempt of a day", func(c *ddbsessionoidc.Config[user]) { c.AttemptLifetime = 24 * time.Hour }, "Config.AttemptLifetime"},
		{"cookie name", func(c *ddbsessionoidc.Config[user]) { c.CookieName = "a;b" }, "Config.CookieName"},
		{"no provider there", func(c *ddbsessionoidc.Config[user]) { c.Issuer = e.aURL }, "Config.Issuer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.config(e.a.sessions, e.a.calls)
			tc.edit(&cfg)
			_, err := ddbsessionoidc.New(context.Background(), cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "ddbsessionoidc: "+tc.want) {
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// A Provider whose Layout is not the one the table records, such as one
// with another SessionPrefix than the Manager's, is refused at its first
// call that touches the table, a sign-in or a back-channel logout alike,
// with an error that names the field and both values, and writes nothing.
// New makes no call. Without the check, its records would be keyed where
// no session of the Manager is, and a back-channel logout would end
// nothing.
func TestProviderRefusesAnotherLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const wantField = `Layout.SessionPrefix: the table's "SESSION#", this "S#"`
	var (
		mu       sync.Mutex
		failures []error
	)
	logs := &strings.Builder{}
	newProvider := func() *ddbsessionoidc.Provider[user] {
		calls := ddbtest.NewProbe(e.client)
		// A Manager of another layout than the table's (New makes no
		// call either), whose layout the Provider takes.
		sessions, err := ddbsession.New(ddbsession.Config[user]{Client: calls, Table: e.table, Layout: ddbsession.Layout{SessionPrefix: "S#"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := e.config(sessions, calls)
		cfg.SignInFailed = func(w http.ResponseWriter, r *http.Request, err error) {
			mu.Lock()
			failures = append(failures, err)
			mu.Unlock()
			http.Error(w, "sign-in failed", http.StatusServiceUnavailable)
		}
		cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: logs}, nil))
		p, err := ddbsessionoidc.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n := calls.Take(); len(n) != 0 {
			t.Errorf("New made calls %v", n)
		}
		return p
	}

	w := httptest.NewRecorder()
	newProvider().SignIn(w, httptest.NewRequest("GET", e.aURL+"/signin?next=/account", nil))
	mu.Lock()
	if w.Code != http.StatusServiceUnavailable || len(failures) != 1 || !strings.Contains(failures[0].Error(), wantField) {
		t.Errorf("a sign-in: %d, failures %v; want 503 and an error naming %s", w.Code, failures, wantField)
	}
	mu.Unlock()

	r := httptest.NewRequest("POST", e.bURL+"/backchannel-logout",
		strings.NewReader(url.Values{"logout_token": {e.provider.logoutToken(e.provider.logoutClaims("id2", ""))}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	newProvider().BackChannelLogout(w, r)
	mu.Lock()
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "temporarily_unavailable") || !strings.Contains(logs.String(), strings.ReplaceAll(wantField, `"`, `\"`)) {
		t.Errorf("a back-channel logout: %d %s, log %s; want 400 temporarily_unavailable and a log naming %s", w.Code, w.Body, logs, wantField)
	}
	mu.Unlock()

	for _, item := range e.scanTable() {
		if strings.HasPrefix(pkOf(item), "OIDC#") || strings.HasPrefix(pkOf(item), "S#") {
			t.Errorf("a Provider of another layout wrote %s", pkOf(item))
		}
	}
}

// A Provider's check of the layout that fails on a store error is tried
// again by the next call, and once it has agreed it costs nothing more.
func TestProviderLayoutCheckRetriedAfterAStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	calls := ddbtest.NewProbe(e.client)
	var failures []error
	cfg := e.config(e.a.sessions, calls)
	cfg.SignInFailed = func(w http.ResponseWriter, r *http.Request, err error) {
		failures = append(failures, err)
		http.Error(w, "sign-in failed", http.StatusServiceUnavailable)
	}
	p, err := ddbsessionoidc.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	signIn := func() int {
		w := httptest.NewRecorder()
		p.SignIn(w, httptest.NewRequest("GET", e.aURL+"/signin", nil))
		return w.Code
	}
	outage := errors.New("engine down")
	calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "BatchGetItem" {
			return outage
		}
		return nil
	}
	if code := signIn(); code != http.StatusServiceUnavailable || len(failures) != 1 || !errors.Is(failures[0], outage) {
		t.Errorf("a sign-in whose layout check failed: %d, %v; want 503 and the store's error", code, failures)
	}
	calls.Fail = nil
	calls.Reset()
	if code := signIn(); code != http.StatusSeeOther {
		t.Errorf("the next sign-in: %d, want 303 to the provider", code)
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "PutItem": 1}, calls.Take()); diff != "" {
		t.Errorf("calls of the sign-in that checked the layout again (-want +got):\n%s", diff)
	}
	if code := signIn(); code != http.StatusSeeOther {
		t.Errorf("a third sign-in: %d, want 303 to the provider", code)
	}
	if diff := cmp.Diff(map[string]int{"PutItem": 1}, calls.Take()); diff != "" {
		t.Errorf("calls of a sign-in after the layout agreed (-want +got):\n%s", diff)
	}
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// A Config that names only its Manager takes the Manager's client, table,
// layout and absolute lifetime (ddbsession.Manager.Table): a sign-in then
// writes its record through the Manager's client, into its table.
func TestConfigTakesTheManagers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config(e.a.sessions, nil)
	cfg.Client, cfg.Table = nil, ""
	p, err := ddbsessionoidc.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.a.calls.Take()
	w := httptest.NewRecorder()
	p.SignIn(w, httptest.NewRequest("GET", e.aURL+"/signin?next=/account", nil))
	if w.Code != http.StatusSeeOther && w.Code != http.StatusFound {
		t.Fatalf("SignIn: %d %q, want a redirect to the provider", w.Code, w.Body)
	}
	if calls := e.a.calls.Take(); len(calls) == 0 {
		t.Error("SignIn made no call through the Manager's client")
	}
}
