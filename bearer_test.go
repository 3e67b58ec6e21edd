package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

func withBearer(c *ddbsession.Config[User]) { c.BearerTokens = true }

// bearerLogin signs key in through LoginBearer, with a User-Agent.
func (e *env) bearerLogin(key ddbsession.UserKey) ddbsession.BearerToken {
	e.t.Helper()
	r := httptest.NewRequest("POST", "https://example.test/api/login", nil)
	r.Header.Set("User-Agent", "cli/2.0")
	tok, err := e.m.LoginBearer(r, key, nil)
	if err != nil {
		e.t.Fatalf("LoginBearer: %v", err)
	}
	return tok
}

// bearerGet sends a GET through RequireSession with an Authorization header
// and the given cookies.
func (e *env) bearerGet(authorization string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest("GET", "https://example.test/api/me", nil)
	r.Header.Set("Authorization", authorization)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	e.m.RequireSession(whoami(e.m)).ServeHTTP(w, r)
	e.settle()
	return w
}

func TestBearerValid(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p), withBearer)
	alice := e.putUser("alice")
	tok := e.bearerLogin(alice)
	if want := time.Unix(start.Add(time.Hour).Unix(), 0); !tok.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", tok.ExpiresAt, want)
	}
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER "} {
		p.reset()
		w := e.bearerGet(scheme + tok.Token)
		if w.Code != http.StatusOK || w.Body.String() != "user:alice" {
			t.Errorf("%q: %d %q, want 200 user:alice", scheme, w.Code, w.Body)
		}
		if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.calls); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
			t.Errorf("a bearer request got Set-Cookie %q", c)
		}
	}
	// Listed like any session, with its User-Agent.
	if list := e.mustList(alice); len(list) != 1 || list[0].UserAgent != "cli/2.0" {
		t.Errorf("List = %+v, want the bearer session with its User-Agent", list)
	}
	// Check takes the token too.
	if _, u, err := e.m.Check(context.Background(), tok.Token); err != nil || u.Name != "alice" {
		t.Errorf("Check(bearer token) = %v, %v", u, err)
	}
}

// Without Config.BearerTokens an Authorization header is never read.
func TestBearerOffByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withBearer)
	tok := e.bearerLogin(e.putUser("alice"))
	cfg := e.cfg
	cfg.BearerTokens = false
	m, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok.Token)
	w := httptest.NewRecorder()
	m.RequireSession(whoami(m)).ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("a bearer token to a Manager without BearerTokens: %d, want 401", w.Code)
	}
}

func TestBearerRejected(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p), withBearer) // IdleTimeout 1h
	alice := e.putUser("alice")
	tok := e.bearerLogin(alice)

	// Malformed: 401, no DynamoDB call, WWW-Authenticate says why.
	for _, bad := range []string{"Bearer ", "Bearer x", "Bearer " + strings.ToLower(tok.Token), "Bearer " + tok.Token + ".x", "Bearer  " + tok.Token} {
		p.reset()
		w := e.bearerGet(bad)
		if w.Code != http.StatusUnauthorized || p.total() != 0 {
			t.Errorf("%q: status %d after %d calls, want 401 after 0", bad, w.Code, p.total())
		}
		if got := w.Header().Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
			t.Errorf("%q: WWW-Authenticate %q", bad, got)
		}
	}

	// A cookie and a bearer token: 400, never a guess.
	cookie := e.login(alice)
	p.reset()
	if w := e.bearerGet("Bearer "+tok.Token, cookie); w.Code != http.StatusBadRequest || p.total() != 0 {
		t.Errorf("cookie and bearer: status %d after %d calls, want 400 after 0", w.Code, p.total())
	}

	// Revoked one by one, as from the browser's list.
	for _, s := range e.mustList(alice) {
		if s.UserAgent == "cli/2.0" {
			if err := e.m.Revoke(context.Background(), alice, s.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if w := e.bearerGet("Bearer " + tok.Token); w.Code != http.StatusUnauthorized {
		t.Errorf("after Revoke: %d, want 401", w.Code)
	}
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK {
		t.Errorf("the browser session after revoking the bearer one: %d", w.Code)
	}

	// Revoked by RevokeAll.
	tok = e.bearerLogin(alice)
	e.clock.Advance(time.Millisecond)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if w := e.bearerGet("Bearer " + tok.Token); w.Code != http.StatusUnauthorized {
		t.Errorf("after RevokeAll: %d, want 401", w.Code)
	}

	// Expired.
	e.clock.Advance(time.Millisecond)
	tok = e.bearerLogin(alice)
	e.clock.Advance(2 * time.Hour)
	if w := e.bearerGet("Bearer " + tok.Token); w.Code != http.StatusUnauthorized {
		t.Errorf("expired: %d, want 401", w.Code)
	}
}

// A refresh of a bearer session moves its expiry, sets no cookie and says
// the new expiry in the Session-Expires header.
func TestBearerRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withBearer) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	tok := e.bearerLogin(alice)
	if w := e.bearerGet("Bearer " + tok.Token); w.Header().Get(ddbsession.SessionExpiresHeader) != "" {
		t.Errorf("a request between refreshes sent %s", ddbsession.SessionExpiresHeader)
	}
	e.clock.Advance(30 * time.Minute)
	w := e.bearerGet("Bearer " + tok.Token)
	want := time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0).UTC()
	if got := w.Header().Get(ddbsession.SessionExpiresHeader); got != want.Format(time.RFC3339) {
		t.Errorf("%s = %q, want %q", ddbsession.SessionExpiresHeader, got, want.Format(time.RFC3339))
	}
	if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("refresh of a bearer session set a cookie: %q", c)
	}
	if got := itemExpiry(t, e.itemOf(kindSession, "")); !got.Equal(want) {
		t.Errorf("stored expiry %v, want %v", got, want)
	}
	// Still valid past the first expiry.
	e.clock.Advance(45 * time.Minute)
	if w := e.bearerGet("Bearer " + tok.Token); w.Code != http.StatusOK {
		t.Errorf("after the refresh, past the first expiry: %d", w.Code)
	}
}

// Logout ends a bearer session too, and LoginBearer refuses what Login does.
func TestBearerLogoutAndRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withBearer)
	alice := e.putUser("alice")
	tok := e.bearerLogin(alice)
	r := httptest.NewRequest("POST", "/api/logout", nil)
	r.Header.Set("Authorization", "Bearer "+tok.Token)
	if err := e.m.Logout(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if w := e.bearerGet("Bearer " + tok.Token); w.Code != http.StatusUnauthorized {
		t.Errorf("after Logout: %d, want 401", w.Code)
	}
	if _, err := e.m.LoginBearer(httptest.NewRequest("POST", "/", nil), ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}, nil); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("LoginBearer of an unknown user = %v, want ErrUserNotFound", err)
	}
	refuse := errors.New("no")
	if _, err := e.m.LoginBearer(httptest.NewRequest("POST", "/", nil), alice, func(User) error { return refuse }); !errors.Is(err, refuse) {
		t.Errorf("LoginBearer with a refusing verify = %v", err)
	}
}
