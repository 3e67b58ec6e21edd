package ddbsession_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

// withUser returns c with key's user key in the plain, as release v0.2.0
// issued it, in place of its own.
func withUser(c *http.Cookie, key ddbsession.UserKey) *http.Cookie {
	b64 := base64.RawURLEncoding.EncodeToString
	return &http.Cookie{Name: c.Name, Value: c.Value[:tokenLen] + "." + b64([]byte(key.PK)) + "." + b64([]byte(key.SK))}
}

// tokenOnly returns c with the token alone, as releases before the
// one-round-trip read issued it, and HideUserKey does.
func tokenOnly(c *http.Cookie) *http.Cookie {
	return &http.Cookie{Name: c.Name, Value: c.Value[:tokenLen]}
}

// Rolling deploys: a Manager accepts cookies of every form whatever its
// HideUserKey (the token alone, v0.2.0's plain user key, the sealed one),
// and a refresh re-issues the cookie in the form its own setting asks for.
func TestCookieFormsAcrossReleases(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	cookie := e.login(alice)
	hiddenCfg := e.cfg
	hiddenCfg.Cookie.HideUserKey = true
	hidden := primed(t, hiddenCfg)
	old := tokenOnly(cookie)         // as an earlier release, or a HideUserKey Manager, issued it
	plain := withUser(cookie, alice) // as v0.2.0 issued it

	for _, tc := range []struct {
		name   string
		m      *ddbsession.Manager[User]
		cookie *http.Cookie
		calls  map[string]int
	}{
		{"token-only cookie, default Manager", e.m, old, map[string]int{"GetItem": 2}},
		{"cookie with user key, default Manager", e.m, cookie, map[string]int{"BatchGetItem": 1}},
		{"v0.2.0's cookie, default Manager", e.m, plain, map[string]int{"BatchGetItem": 1}},
		{"token-only cookie, HideUserKey", hidden, old, map[string]int{"GetItem": 2}},
		{"cookie with user key, HideUserKey", hidden, cookie, map[string]int{"BatchGetItem": 1}},
	} {
		p.Reset()
		if w := e.get(tc.m.RequireSession(whoami(tc.m)), tc.cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
			t.Errorf("%s: %d %q, want 200 user:alice", tc.name, w.Code, w.Body)
		}
		if diff := cmp.Diff(tc.calls, p.Calls()); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", tc.name, diff)
		}
	}

	// A refresh of the old cookie by the default Manager issues the new form...
	e.clock.Advance(15 * time.Minute)
	c := sessionCookie(t, e.get(e.m.RequireSession(whoami(e.m)), old).Result(), cookieName)
	if c == nil || c.Value != cookie.Value {
		t.Errorf("refresh of a token-only cookie sent %v, want the value %q", c, cookie.Value)
	}
	// ...as does one of v0.2.0's...
	e.clock.Advance(15 * time.Minute)
	c = sessionCookie(t, e.get(e.m.RequireSession(whoami(e.m)), plain).Result(), cookieName)
	if c == nil || c.Value != cookie.Value {
		t.Errorf("refresh of v0.2.0's cookie sent %v, want the value %q", c, cookie.Value)
	}
	// ...and one by a HideUserKey Manager issues the token alone.
	e.clock.Advance(15 * time.Minute)
	c = sessionCookie(t, e.get(hidden.RequireSession(whoami(hidden)), cookie).Result(), cookieName)
	if c == nil || c.Value != old.Value {
		t.Errorf("HideUserKey refresh sent %v, want the token alone %q", c, old.Value)
	}
}

// A user key too long for a cookie is left out of it: the session works on
// the two-read path.
func TestLongUserKeyStaysOutOfCookie(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	long := ddbsession.UserKey{PK: "USER#" + strings.Repeat("x", 1000), SK: "PROFILE" + strings.Repeat("y", 100)}
	e.putUserAt(long, "long")
	cookie := e.login(long)
	if strings.Contains(cookie.Value, ".") || len(cookie.Value) != 26 {
		t.Errorf("cookie for a %d-byte user key = %q, want the token alone", len(long.PK)+len(long.SK), cookie.Value)
	}
	p.Reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:long" {
		t.Errorf("status %d %q", w.Code, w.Body)
	}
	if diff := cmp.Diff(map[string]int{"GetItem": 2}, p.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestLoginCookie(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		mutate     func(*ddbsession.Config[User])
		wantName   string
		wantSecure bool
	}{
		{"default", nil, "__Host-session", true},
		{"custom name keeps the prefix", func(c *ddbsession.Config[User]) { c.Cookie.Name = "sid" }, "__Host-sid", true},
		{"prefixed custom name", func(c *ddbsession.Config[User]) { c.Cookie.Name = "__Host-sid" }, "__Host-sid", true},
		{"dev mode", func(c *ddbsession.Config[User]) { c.Cookie.InsecureDevMode = true }, "session", false},
		{"dev mode custom name", func(c *ddbsession.Config[User]) {
			c.Cookie.InsecureDevMode = true
			c.Cookie.Name = "__Host-sid"
		}, "sid", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.mutate)
			alice := e.putUser("alice")
			w := httptest.NewRecorder()
			if err := e.m.Login(w, httptest.NewRequest("POST", "/login", nil), alice, nil); err != nil {
				t.Fatal(err)
			}
			header := w.Header().Values("Set-Cookie")
			if len(header) != 1 {
				t.Fatalf("Set-Cookie = %q, want one", header)
			}
			c := sessionCookie(t, w.Result(), tc.wantName)
			if c == nil {
				t.Fatalf("no cookie named %q in %q", tc.wantName, header)
			}
			// The token, then the user's key, sealed, for the
			// one-round-trip read (TestCookieSaysNothingOfItsUser).
			token, _, sealed := strings.Cut(c.Value, "~")
			if !tokenFormat.MatchString(token) || !sealed || !wellFormedCookie(c.Value) {
				t.Errorf("cookie %q is not a token of 26 base32 characters and a sealed user key", c.Value)
			}
			want := http.Cookie{
				Name: tc.wantName, Value: c.Value, Path: "/", MaxAge: 3600,
				Secure: tc.wantSecure, HttpOnly: true, SameSite: http.SameSiteLaxMode, Raw: c.Raw,
			}
			if diff := cmp.Diff(want, *c); diff != "" {
				t.Errorf("cookie (-want +got):\n%s", diff)
			}
			if strings.Contains(strings.ToLower(header[0]), "domain") {
				t.Errorf("cookie has a Domain: %q", header[0])
			}
			if err := c.Valid(); err != nil {
				t.Errorf("cookie not valid: %v", err)
			}
			assertPersonal(t, w.Header())
		})
	}
}

func TestCookieMaxAgeFollowsExpiry(t *testing.T) {
	t.Parallel()
	// The idle timeout gives the first expiry; a refresh near the end of
	// the absolute lifetime slides it to that end only, and Max-Age with it.
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.AbsoluteLifetime = 90 * time.Minute })
	c := e.login(e.putUser("alice"))
	if c.MaxAge != 60*60 {
		t.Errorf("Max-Age = %d, want %d", c.MaxAge, 60*60)
	}
	e.clock.Advance(50 * time.Minute)
	w := e.get(e.m.RequireSession(whoami(e.m)), c)
	refreshed := sessionCookie(t, w.Result(), c.Name)
	if refreshed == nil || refreshed.MaxAge != 40*60 {
		t.Errorf("refreshed cookie %v, want Max-Age %d", refreshed, 40*60)
	}
}

func TestLogoutClearsCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	r := httptest.NewRequest("POST", "/logout", nil)
	r.AddCookie(cookie)
	w := httptest.NewRecorder()
	if err := e.m.Logout(w, r); err != nil {
		t.Fatal(err)
	}
	c := sessionCookie(t, w.Result(), cookieName)
	if c == nil {
		t.Fatal("Logout set no cookie")
	}
	want := http.Cookie{
		Name: cookieName, Path: "/", MaxAge: -1, Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Raw: c.Raw,
	}
	if diff := cmp.Diff(want, *c); diff != "" {
		t.Errorf("clearing cookie (-want +got):\n%s", diff)
	}
	assertPersonal(t, w.Header())
}

func TestTokensAreUnique(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	seen := map[string]bool{}
	for range 20 {
		v := e.login(alice).Value
		if seen[v] {
			t.Fatalf("token %q issued twice", v)
		}
		seen[v] = true
	}
}

// A credential has one documented form, <token>.<b64(userPK)>.<b64(userSK)>
// in unpadded base64url, so that each key has one form. Go's base64
// decoders skip '\r' and '\n', even in strict mode, so a credential with
// line breaks inside its user key must be refused as malformed, with no
// call, and not read as a second spelling of the same credential. A Cookie
// header cannot carry them (net/http drops such a cookie), but Authenticate takes
// values that arrived some other way. FuzzAuthenticate found this.
func TestCredentialWithLineBreaksIsMalformed(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	cookie := withUser(e.login(alice), alice)
	token, user, _ := strings.Cut(cookie.Value, ".")
	pk, sk, _ := strings.Cut(user, ".")
	for name, value := range map[string]string{
		"a newline at the end":          cookie.Value + "\n",
		"CRLF in the partition key":     token + "." + pk[:4] + "\r\n" + pk[4:] + "." + sk,
		"a newline before the sort key": token + "." + pk + ".\n" + sk,
	} {
		p.Reset()
		s, _, err := e.m.Authenticate(context.Background(), value)
		if !errors.Is(err, ddbsession.ErrNoSession) || p.Total() != 0 {
			t.Errorf("%s (%q): Authenticate = session %q, %v after %d calls; want ErrNoSession after 0", name, value, s.ID, err, p.Total())
		}
	}
}

func withBearer(c *ddbsession.Config[User]) { c.BearerTokens = true }

// bearerToken is what LoginBearer returns.
type bearerToken struct {
	Token     string
	ExpiresAt time.Time
}

// bearerLogin signs key in through LoginBearer, with a User-Agent.
func (e *env) bearerLogin(key ddbsession.UserKey) bearerToken {
	e.t.Helper()
	r := httptest.NewRequest("POST", "https://example.test/api/login", nil)
	r.Header.Set("User-Agent", "cli/2.0")
	token, expires, err := e.m.LoginBearer(r, key, nil)
	if err != nil {
		e.t.Fatalf("LoginBearer: %v", err)
	}
	return bearerToken{token, expires}
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withBearer)
	alice := e.putUser("alice")
	tok := e.bearerLogin(alice)
	if want := time.Unix(start.Add(time.Hour).Unix(), 0); !tok.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", tok.ExpiresAt, want)
	}
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER "} {
		p.Reset()
		w := e.bearerGet(scheme + tok.Token)
		if w.Code != http.StatusOK || w.Body.String() != "user:alice" {
			t.Errorf("%q: %d %q, want 200 user:alice", scheme, w.Code, w.Body)
		}
		if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.Calls()); diff != "" {
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
	// Authenticate takes the token too.
	if _, u, err := e.m.Authenticate(context.Background(), tok.Token); err != nil || u.Name != "alice" {
		t.Errorf("Authenticate(bearer token) = %v, %v", u, err)
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withBearer) // IdleTimeout 1h
	alice := e.putUser("alice")
	tok := e.bearerLogin(alice)

	// Malformed: 401, no DynamoDB call, WWW-Authenticate says why.
	for _, bad := range []string{"Bearer ", "Bearer x", "Bearer " + strings.ToLower(tok.Token), "Bearer " + tok.Token + ".x", "Bearer  " + tok.Token} {
		p.Reset()
		w := e.bearerGet(bad)
		if w.Code != http.StatusUnauthorized || p.Total() != 0 {
			t.Errorf("%q: status %d after %d calls, want 401 after 0", bad, w.Code, p.Total())
		}
		if got := w.Header().Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
			t.Errorf("%q: WWW-Authenticate %q", bad, got)
		}
	}

	// A cookie and a bearer token: 400, never a guess.
	cookie := e.login(alice)
	p.Reset()
	if w := e.bearerGet("Bearer "+tok.Token, cookie); w.Code != http.StatusBadRequest || p.Total() != 0 {
		t.Errorf("cookie and bearer: status %d after %d calls, want 400 after 0", w.Code, p.Total())
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
	if w := e.bearerGet("Bearer " + tok.Token); w.Header().Get("Session-Expires") != "" {
		t.Errorf("a request between refreshes sent %s", "Session-Expires")
	}
	e.clock.Advance(30 * time.Minute)
	w := e.bearerGet("Bearer " + tok.Token)
	want := time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0).UTC()
	if got := w.Header().Get("Session-Expires"); got != want.Format(time.RFC3339) {
		t.Errorf("%s = %q, want %q", "Session-Expires", got, want.Format(time.RFC3339))
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
	if _, _, err := e.m.LoginBearer(httptest.NewRequest("POST", "/", nil), ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}, nil); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("LoginBearer of an unknown user = %v, want ErrUserNotFound", err)
	}
	refuse := errors.New("no")
	if _, _, err := e.m.LoginBearer(httptest.NewRequest("POST", "/", nil), alice, func(User) error { return refuse }); !errors.Is(err, refuse) {
		t.Errorf("LoginBearer with a refusing verify = %v", err)
	}
}

// A Secure cookie set in answer to plain HTTP for a host that is not
// localhost is dropped by browsers, and the login seems to work while
// every next request is signed out: the library says so, once, naming the
// fix. HTTPS, a TLS proxy's X-Forwarded-Proto, localhost and dev mode are
// fine and say nothing.
func TestSecureCookieOverPlainHTTPWarns(t *testing.T) {
	t.Parallel()
	const warning = "a Secure session cookie answers a plain-HTTP request"
	for _, tc := range []struct {
		name   string
		target string
		header string
		dev    bool
		warns  bool
	}{
		{"LAN address", "http://192.168.1.20:8080/login", "", false, true},
		{"container name", "http://app:8080/login", "", false, true},
		{"app.test", "http://app.test/login", "", false, true},
		{"HTTPS", "https://app.test/login", "", false, false},
		{"behind a TLS proxy", "http://app.test/login", "https", false, false},
		{"localhost", "http://localhost:8080/login", "", false, false},
		{"a .localhost name", "http://app.localhost:8080/login", "", false, false},
		{"127.0.0.1", "http://127.0.0.1:8080/login", "", false, false},
		{"[::1]", "http://[::1]:8080/login", "", false, false},
		{"dev mode", "http://192.168.1.20:8080/login", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *ddbsession.Config[User]) { c.Cookie.InsecureDevMode = tc.dev })
			alice := e.putUser("alice")
			for range 2 {
				r := httptest.NewRequest("POST", tc.target, nil)
				if tc.header != "" {
					r.Header.Set("X-Forwarded-Proto", tc.header)
				}
				if err := e.m.Login(httptest.NewRecorder(), r, alice, nil); err != nil {
					t.Fatal(err)
				}
			}
			want := 0
			if tc.warns {
				want = 1
			}
			if got := strings.Count(e.logs.String(), warning); got != want {
				t.Errorf("%d warnings after two logins, want %d:\n%s", got, want, e.logs)
			}
			if tc.warns && !strings.Contains(e.logs.String(), "Config.Cookie.InsecureDevMode") {
				t.Errorf("the warning does not name the fix:\n%s", e.logs)
			}
		})
	}
}

// LoginBearer with Config.BearerTokens off is refused, with an error that
// says so: RequireSession would refuse every token it issued.
func TestLoginBearerNeedsBearerTokens(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	p.Reset()
	token, _, err := e.m.LoginBearer(newRequest(), alice, nil)
	if err == nil || token != "" || !strings.Contains(err.Error(), "BearerTokens") {
		t.Errorf("LoginBearer without BearerTokens = %q, %v; want an error naming BearerTokens", token, err)
	}
	if n := p.Total(); n != 0 {
		t.Errorf("the refused LoginBearer made %d calls", n)
	}
}

// The cookie names its user to no one who sees it go by: no part of it, as
// sent or decoded as base64 of any alphabet or as hex, holds the user's
// key, and the request still reads the session and the user in one
// BatchGetItem.
func TestCookieSaysNothingOfItsUser(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := ddbsession.UserKey{PK: "USER#alice@example.com", SK: "PROFILE#alice@example.com"}
	e.putUserAt(alice, "alice")
	cookie := e.login(alice)
	for _, part := range decodings(cookie.Value) {
		for _, secret := range []string{"alice", "example.com"} {
			if bytes.Contains(bytes.ToLower(part), []byte(secret)) {
				t.Errorf("cookie %q holds %q (in %q)", cookie.Value, secret, part)
			}
		}
	}
	p.Reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Errorf("status %d %q, want 200 user:alice", w.Code, w.Body)
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// decodings are v and what each of its runs of base64 or hex characters
// decodes to, at every offset, in every base64 alphabet.
func decodings(v string) [][]byte {
	out := [][]byte{[]byte(v)}
	runs := strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '~' })
	for _, run := range append(runs, v) {
		for off := range 4 {
			if off >= len(run) {
				break
			}
			s := strings.TrimRight(run[off:], "=")
			s = s[:len(s)-len(s)%4+min(len(s)%4, 3)]
			for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.RawStdEncoding} {
				for _, try := range []string{s, strings.NewReplacer("-", "+", "_", "/").Replace(s)} {
					if b, err := enc.DecodeString(try[:len(try)/4*4]); err == nil {
						out = append(out, b)
					}
				}
			}
			if b, err := hex.DecodeString(run[off : off+(len(run)-off)/2*2]); err == nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// A sealed user key that does not open for the cookie's token, altered or
// moved from another cookie, is refused as malformed at no DynamoDB call,
// and the cookie cleared.
func TestSealedUserKeyTampered(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice, bob := e.putUser("alice"), e.putUser("bob")
	a, b := e.login(alice), e.login(bob)
	flip := func(v string, i int) string {
		c := v[i] ^ 1
		if c == '~' || c == '.' || !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", rune(c)) {
			c = 'A' + (v[i]-'A'+1)%26
		}
		return v[:i] + string(c) + v[i+1:]
	}
	for name, value := range map[string]string{
		"bob's seal with alice's token": a.Value[:tokenLen] + b.Value[tokenLen:],
		"a flipped byte of the nonce":   flip(a.Value, tokenLen+1+8),
		"a flipped byte of the seal":    flip(a.Value, len(a.Value)-5),
	} {
		p.Reset()
		w := e.get(e.m.RequireSession(whoami(e.m)), &http.Cookie{Name: cookieName, Value: value})
		if w.Code != http.StatusUnauthorized || p.Total() != 0 {
			t.Errorf("%s: status %d after %d calls, want 401 after none", name, w.Code, p.Total())
		}
		if c := sessionCookie(t, w.Result(), cookieName); c == nil || c.MaxAge >= 0 {
			t.Errorf("%s: cookie not cleared: %v", name, c)
		}
	}
}

// Cookie keys rotate in the table's layout record: the first seals, every
// one opens, so a cookie sealed before a rotation still costs one read; an
// instance that has not read the new key yet takes a cookie sealed under it
// on its token alone, at two reads, and reads the keys again with its next
// read of the shared items. An instance's first request with a sealed
// cookie reads the keys before it, once.
func TestCookieKeyRotation(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	before := e.login(alice)
	var mono ddbtest.Mono
	ddbsession.SetMonotonicClock(e.m, mono.Now)
	e.get(e.m.RequireSession(whoami(e.m)), before) // reads the shared items on mono

	addCookieKey(t, e)
	fresh, err := ddbsession.New(e.cfg) // started after the rotation, has read nothing
	if err != nil {
		t.Fatal(err)
	}
	request := func(name string, m *ddbsession.Manager[User], c *http.Cookie, calls map[string]int) {
		t.Helper()
		p.Reset()
		if w := e.get(m.RequireSession(whoami(m)), c); w.Code != http.StatusOK {
			t.Errorf("%s: status %d, want 200", name, w.Code)
		}
		if diff := cmp.Diff(calls, p.Calls()); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", name, diff)
		}
	}
	request("the new instance's first request", fresh, before, map[string]int{"BatchGetItem": 2})
	request("a cookie sealed before the rotation", fresh, before, map[string]int{"BatchGetItem": 1})
	w := newRecorder()
	if err := fresh.Login(w, newRequest(), alice, nil); err != nil {
		t.Fatal(err)
	}
	after := sessionCookie(t, w.Result(), cookieName)
	if after.Value[tokenLen:tokenLen+6] == before.Value[tokenLen:tokenLen+6] { // "~" and the key id
		t.Errorf("the new instance sealed under the old key: %q, %q", after.Value, before.Value)
	}
	request("the new key, on an instance that has not read it", e.m, after, map[string]int{"GetItem": 2})
	mono.Advance(time.Hour) // its copy of the shared items is stale: the next read reads the keys too
	request("the read that reads the keys again", e.m, before, map[string]int{"BatchGetItem": 1})
	request("the new key, read", e.m, after, map[string]int{"BatchGetItem": 1})
}

// addCookieKey rotates the cookie keys of e's table, as an operator does.
func addCookieKey(t *testing.T, e *env) {
	t.Helper()
	key := item.Default.LayoutKey()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, Key: key, ConsistentRead: ptr(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("the layout record: %v, %v", out, err)
	}
	e.putItem(item.AddCookieKey(out.Item, item.NewCookieKey()))
}

// A table that exists without a layout record (v0.1.0's, or one made
// elsewhere) gets a record without cookie keys, as v0.2.0 wrote it, and
// such a table gets v0.2.0's cookies, the user key in the plain, which
// the instances of earlier releases still running in a rolling deploy read
// (they refuse a sealed one as malformed, and could not end its session at
// Logout), until a key is added once every instance runs this release:
// cookies are sealed from then on.
func TestTableWithoutCookieKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // CreateTable created it: its record has a key
	alice := e.putUser("alice")
	ctx := context.Background()
	e.deleteItem(item.Default.LayoutKey())
	login := func() *http.Cookie {
		m := primed(t, e.cfg)
		w := newRecorder()
		if err := m.Login(w, newRequest(), alice, nil); err != nil {
			t.Fatal(err)
		}
		return sessionCookie(t, w.Result(), cookieName)
	}
	if c := login(); c.Value != withUser(c, alice).Value {
		t.Errorf("a table without keys: cookie %q, want v0.2.0's %q", c.Value, withUser(c, alice).Value)
	}
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: item.Default.LayoutKey(), ConsistentRead: ptr(true)})
	if err != nil || out.Item == nil || out.Item["cookieKeys"] != nil {
		t.Fatalf("the record a Manager wrote: %v, %v; want one without keys", out, err)
	}
	addCookieKey(t, e)
	if c := login(); !strings.Contains(c.Value, "~") || strings.Contains(c.Value, ".") {
		t.Errorf("a key added: cookie %q, want it sealed", c.Value)
	}
}

// A table made elsewhere (the AWS CLI, CloudFormation, Terraform, as
// docs/operations.md shows) has no layout record; the first Manager writes
// one without a cookie key, and its cookies carry the user's key in the
// plain: the Manager says so once, naming the table and where the command
// that adds a key is. A table that CreateTable made, with a key, gets no
// such warning.
func TestTableMadeElsewhereWarnsOfPlainCookies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.putUser("alice")
	const warning = "no cookie key"
	e.login(alice)
	if strings.Contains(e.logs.String(), warning) {
		t.Errorf("a table CreateTable made warns of plain cookies:\n%s", e.logs)
	}

	e.deleteItem(item.Default.LayoutKey()) // as if made by Terraform: no record
	m := primed(t, e.cfg)
	for range 2 {
		w := newRecorder()
		if err := m.Login(w, newRequest(), alice, nil); err != nil {
			t.Fatal(err)
		}
		c := sessionCookie(t, w.Result(), cookieName)
		if !strings.Contains(c.Value, base64.RawURLEncoding.EncodeToString([]byte(alice.PK))) {
			t.Fatalf("cookie %q does not name %s in the plain; the test expected it to", c.Value, alice.PK)
		}
	}
	logs := e.logs.String()
	if got := strings.Count(logs, warning); got != 1 {
		t.Errorf("%d warnings of plain cookies after two logins, want 1:\n%s", got, logs)
	}
	for _, want := range []string{"level=WARN", "table=" + e.table, "docs/item-format.md#tokens-and-the-cookie"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the warning lacks %q:\n%s", want, logs)
		}
	}
}
