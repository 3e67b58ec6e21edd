package ddbsessionotel_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ddbsession/ddbsession"
)

// A session's life through the library, against the engine: the metrics
// count each event once, and each request's check is a span with its
// DynamoDB calls as children, ended before the app's handler, whose span
// is the check's sibling.
func TestSessionLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.newUser()
	account := e.tel.Guard(e.m.RequireSession, e.m.Session)(e.account())

	cookie := sessionCookie(t, e.serve(e.loginHandler(alice), http.MethodPost, "/login"))
	if w := e.serve(account, http.MethodGet, "/account", cookie); w.Code != http.StatusOK {
		t.Fatalf("GET /account: %d %q", w.Code, w.Body)
	}
	e.clock.Advance(2 * time.Hour) // past the default Limits.RefreshInterval, an hour
	w := e.serve(account, http.MethodGet, "/account", cookie)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /account, due for a refresh: %d %q", w.Code, w.Body)
	}
	cookie = sessionCookie(t, w)
	if w := e.serve(e.logoutHandler(), http.MethodPost, "/logout", cookie); w.Code != http.StatusOK {
		t.Fatalf("POST /logout: %d %q", w.Code, w.Body)
	}
	if w := e.serve(account, http.MethodGet, "/account", cookie); w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /account after logout: %d %q, want 401", w.Code, w.Body)
	}

	wantMetrics := map[string]float64{
		"ddbsession.session.created":                                       1,
		"ddbsession.session.refresh.duration count":                        1,
		"ddbsession.session.ended":                                         1,
		"ddbsession.request.rejected{ddbsession.rejection.reason=unknown}": 1,
	}
	if diff := cmp.Diff(wantMetrics, e.metricValues()); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	// The logout handler runs outside RequireSession, so Logout reads the
	// session first: its copy names the index item, whatever the delete's
	// answer.
	wantTree := `POST /login
  DynamoDB.BatchGetItem
  DynamoDB.PutItem
  DynamoDB.PutItem
  DynamoDB.PutItem
GET /account
  ddbsession.check ddbsession.check.outcome=accepted
    DynamoDB.BatchGetItem
  account
GET /account
  ddbsession.check ddbsession.check.outcome=accepted
    DynamoDB.BatchGetItem
    DynamoDB.UpdateItem
  account
POST /logout
  DynamoDB.GetItem
  DynamoDB.DeleteItem
  DynamoDB.DeleteItem
  DynamoDB.PutItem
GET /account
  ddbsession.check ddbsession.check.outcome=rejected ddbsession.rejection.reason=unknown
    DynamoDB.BatchGetItem
`
	if diff := cmp.Diff(wantTree, e.spanTree()); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}

	// The check is over before the app's handler begins.
	var checks, handlers []tracetest.SpanStub
	for _, s := range tracetest.SpanStubsFromReadOnlySpans(e.spans.Ended()) {
		switch s.Name {
		case "ddbsession.check":
			checks = append(checks, s)
		case "account":
			handlers = append(handlers, s)
		}
	}
	for i, h := range handlers {
		if c := checks[i]; c.EndTime.After(h.StartTime) {
			t.Errorf("request %d: the check span ended at %v, after the handler's began at %v", i+1, c.EndTime, h.StartTime)
		}
	}
}

// Nothing exported, metrics or spans (the library's and otelaws's), holds
// the session's token, its hash, its ID or the user's key.
func TestTelemetryHoldsNoSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.newUser()
	account := e.tel.Guard(e.m.RequireSession, e.m.Session)(e.account())
	cookie := sessionCookie(t, e.serve(e.loginHandler(alice), http.MethodPost, "/login"))
	e.serve(account, http.MethodGet, "/account", cookie)
	sessions, err := e.m.List(t.Context(), alice)
	if err != nil || len(sessions) != 1 {
		t.Fatalf("List: %v, %v", sessions, err)
	}
	e.clock.Advance(2 * time.Hour)
	cookie = sessionCookie(t, e.serve(account, http.MethodGet, "/account", cookie))
	e.serve(e.logoutHandler(), http.MethodPost, "/logout", cookie)
	e.serve(account, http.MethodGet, "/account", cookie) // rejected: unknown
	withUserOfBob := &http.Cookie{Name: cookie.Name, Value: tokenOf(cookie) + "." + base64.RawURLEncoding.EncodeToString([]byte("USER#bob"))}
	e.serve(account, http.MethodGet, "/account", withUserOfBob)
	if err := e.m.RevokeAll(t.Context(), alice); err != nil {
		t.Fatal(err)
	}

	token := tokenOf(cookie)
	digest := sha256.Sum256([]byte(token))
	secrets := map[string]string{
		"token":        token,
		"token's hash": base64.RawURLEncoding.EncodeToString(digest[:]),
		"session ID":   sessions[0].ID,
		"user PK":      alice.PK,
		"user SK":      alice.SK,
		"cookie":       cookie.Value,
	}
	exported := fmt.Sprintf("%+v\n%+v", e.collect(), tracetest.SpanStubsFromReadOnlySpans(e.spans.Ended()))
	// The dump holds attribute values, or this test would prove nothing:
	// the table's name is one (otelaws's aws.dynamodb.table_names), and
	// so is a rejection's reason.
	for _, want := range []string{e.table, "unknown", "ddbsession.check"} {
		if !strings.Contains(exported, want) {
			t.Fatalf("the exported data does not hold %q:\n%s", want, exported)
		}
	}
	for what, secret := range secrets {
		if strings.Contains(exported, secret) {
			t.Errorf("the exported data holds the %s %q", what, secret)
		}
	}
}

// tokenOf is the token part of a session cookie's value.
func tokenOf(c *http.Cookie) string {
	token := c.Value[:26]
	return token
}

// The login counters against the engine, as the package documentation
// says they overlap: a login that evicts the oldest session under
// Config.Limits.MaxSessions, a re-authentication, a two-step login with two
// wrong second factors, a step-up, and, with RefuseAtMaxSessions, a
// refused login.
func TestLoginCounters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(cfg *ddbsession.Config[User]) { cfg.Limits.MaxSessions = 1 })
	alice := e.newUser()
	login := e.loginHandler(alice)
	account := e.tel.Guard(e.m.RequireSession, e.m.Session)(e.account())

	first := sessionCookie(t, e.serve(login, http.MethodPost, "/login"))
	second := sessionCookie(t, e.serve(login, http.MethodPost, "/login")) // another browser: the first session goes
	if w := e.serve(account, http.MethodGet, "/account", first); w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /account with the evicted session: %d %q, want 401", w.Code, w.Body)
	}
	reauthenticated := sessionCookie(t, e.serve(login, http.MethodPost, "/login", second))

	// A two-step login in a third browser, whose code is right at the third
	// try; its session takes the slot of the re-authenticated one.
	begin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := e.m.BeginLogin(w, r, alice, nil, "password"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	tries := 0
	complete := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries++
		err := e.m.CompleteLogin(w, r, func(User) error {
			if tries < 3 {
				return errors.New("wrong code")
			}
			return nil
		}, "otp")
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
		}
	})
	pending := cookieNamed(t, e.serve(begin, http.MethodPost, "/login"), "__Host-session-pending")
	for range 2 {
		if w := e.serve(complete, http.MethodPost, "/login/otp", pending); w.Code != http.StatusForbidden {
			t.Fatalf("POST /login/otp with a wrong code: %d %q, want 403", w.Code, w.Body)
		}
	}
	twoStep := sessionCookie(t, e.serve(complete, http.MethodPost, "/login/otp", pending))

	// Eleven minutes on, a guard that wants an authentication within ten
	// sends the request to re-authenticate.
	e.clock.Advance(11 * time.Minute)
	recent := e.tel.Guard(e.m.RequireSession, e.m.Session)(e.m.RequireAuthentication(10 * time.Minute)(e.account()))
	if w := e.serve(recent, http.MethodPost, "/logout-everywhere", twoStep); w.Code != http.StatusUnauthorized {
		t.Fatalf("POST /logout-everywhere eleven minutes after the login: %d %q, want 401", w.Code, w.Body)
	}
	if w := e.serve(account, http.MethodGet, "/account", reauthenticated); w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /account with the session the two-step login evicted: %d %q, want 401", w.Code, w.Body)
	}

	want := map[string]float64{
		"ddbsession.session.created":                                       4, // two logins, the re-authentication, the two-step login
		"ddbsession.session.evicted":                                       2, // the first session, the re-authenticated one
		"ddbsession.request.rejected{ddbsession.rejection.reason=unknown}": 2, // the evicted sessions, deleted
		"ddbsession.session.reauthenticated":                               1,
		"ddbsession.session.rotated":                                       1, // the session the re-authentication replaced
		"ddbsession.login.pending":                                         1,
		"ddbsession.login.second_factor.failed":                            2,
		"ddbsession.login.failed":                                          2, // the same two: each a failed sign-in
		"ddbsession.request.step_up":                                       1,
	}
	if diff := cmp.Diff(want, e.metricValues()); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	refusing := newEnv(t, func(cfg *ddbsession.Config[User]) { cfg.Limits.MaxSessions, cfg.Limits.RefuseAtMaxSessions = 1, true })
	bob := refusing.newUser()
	refusing.serve(refusing.loginHandler(bob), http.MethodPost, "/login")
	if w := refusing.serve(refusing.loginHandler(bob), http.MethodPost, "/login"); w.Code != http.StatusInternalServerError {
		t.Fatalf("POST /login beyond MaxSessions: %d %q, want the handler's 500", w.Code, w.Body)
	}
	want = map[string]float64{
		"ddbsession.session.created": 1,
		"ddbsession.login.refused":   1,
	}
	if diff := cmp.Diff(want, refusing.metricValues()); diff != "" {
		t.Errorf("metrics with RefuseAtMaxSessions (-want +got):\n%s", diff)
	}
}
