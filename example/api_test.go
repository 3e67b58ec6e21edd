package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// apiClient is a client without cookies, as a CLI or a script is: it sends
// no Origin or Sec-Fetch-Site header, and only the bearer token it was given.
type apiClient struct {
	t         *testing.T
	app       *testApp
	client    *http.Client
	userAgent string
	token     string
}

func (ta *testApp) apiClient(userAgent string) *apiClient {
	return &apiClient{t: ta.t, app: ta, client: ta.srv.Client(), userAgent: userAgent}
}

// request sends method path with body as JSON (if not ""), the client's
// token (if any), and header's name, value pairs.
func (c *apiClient) request(method, path, body string, header ...string) response {
	c.t.Helper()
	r, err := http.NewRequest(method, c.app.srv.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	r.Header.Set("User-Agent", c.userAgent)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	res, err := c.client.Do(r)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{code: res.StatusCode, body: string(got), header: res.Header}
}

func credsJSON(username, password string) string {
	b, _ := json.Marshal(loginRequest{Username: username, Password: password})
	return string(b)
}

// login logs in at POST /api/login and keeps the token.
func (c *apiClient) login(username, password string) tokenJSON {
	c.t.Helper()
	res := c.request("POST", "/api/login", credsJSON(username, password))
	if res.code != http.StatusOK {
		c.t.Fatalf("POST /api/login: %d %s", res.code, res.body)
	}
	var tok tokenJSON
	if err := json.Unmarshal([]byte(res.body), &tok); err != nil {
		c.t.Fatalf("POST /api/login: %v in %s", err, res.body)
	}
	c.token = tok.Token
	return tok
}

func (c *apiClient) meStatus() int {
	c.t.Helper()
	return c.request("GET", "/api/me", "").code
}

func TestAPILogin(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	ta.browser("browser-A").signup("alice", "correct horse")
	cli := ta.apiClient("cli/1.0")

	res := cli.request("POST", "/api/login", credsJSON("alice", "correct horse"))
	if res.code != http.StatusOK || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST /api/login: %d %q %s, want 200 JSON", res.code, res.header.Get("Content-Type"), res.body)
	}
	if res.header.Get("Set-Cookie") != "" {
		t.Errorf("POST /api/login set a cookie: %s", res.header.Get("Set-Cookie"))
	}
	var fields map[string]string
	if err := json.Unmarshal([]byte(res.body), &fields); err != nil {
		t.Fatalf("POST /api/login body %s: %v", res.body, err)
	}
	if fields["token"] == "" {
		t.Errorf("POST /api/login body %s: no token", res.body)
	}
	expires, err := time.Parse(time.RFC3339, fields["expiresAt"])
	if err != nil || time.Until(expires) < 23*time.Hour || time.Until(expires) > 25*time.Hour {
		t.Errorf("expiresAt %q (%v): want RFC 3339, a day from now", fields["expiresAt"], err)
	}

	cli.token = fields["token"]
	me := cli.request("GET", "/api/me", "")
	if me.code != http.StatusOK || strings.TrimSpace(me.body) != `{"username":"alice"}` {
		t.Errorf("GET /api/me with the bearer token: %d %s", me.code, me.body)
	}
	var list []sessionJSON
	if res := cli.request("GET", "/api/sessions", ""); res.code != http.StatusOK || json.Unmarshal([]byte(res.body), &list) != nil {
		t.Fatalf("GET /api/sessions with the bearer token: %d %s", res.code, res.body)
	}
	want := []sessionJSON{{UserAgent: "cli/1.0", Current: true, Methods: passwordOnly}, {UserAgent: "browser-A", Methods: passwordOnly}}
	if diff := cmp.Diff(want, list, cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress")); diff != "" {
		t.Errorf("GET /api/sessions with the bearer token (-want +got):\n%s", diff)
	}
}

func TestAPILoginRefusals(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 2}
	})
	ta.browser("browser-A").signup("alice", "correct horse")
	cli := ta.apiClient("cli/1.0")

	for _, tc := range []struct {
		name, contentType, body string
		want                    int
	}{
		{"not JSON", "application/json", "username=alice&password=x", http.StatusBadRequest},
		{"truncated", "application/json", `{"username": "alice"`, http.StatusBadRequest},
		{"an array", "application/json", `["alice", "correct horse"]`, http.StatusBadRequest},
		{"two objects", "application/json", credsJSON("alice", "correct horse") + credsJSON("bob", "x"), http.StatusBadRequest},
		{"an unknown field", "application/json", `{"username": "alice", "password": "correct horse", "admin": true}`, http.StatusBadRequest},
		{"no username", "application/json", `{"password": "correct horse"}`, http.StatusBadRequest},
		{"no password", "application/json", `{"username": "alice"}`, http.StatusBadRequest},
		{"a password over 1 KiB", "application/json", credsJSON("alice", strings.Repeat("x", 1025)), http.StatusBadRequest},
		{"a form", "application/x-www-form-urlencoded", "username=alice&password=correct+horse", http.StatusUnsupportedMediaType},
		{"an unknown user", "application/json", credsJSON("nobody", "correct horse"), http.StatusUnauthorized},
		{"a wrong password", "application/json", credsJSON("alice", "wrong"), http.StatusUnauthorized},
		{"another wrong password", "application/json", credsJSON("alice", "wrong again"), http.StatusUnauthorized},
		// The limit of 2 failures per username is spent now.
		{"a third guess", "application/json", credsJSON("alice", "wrong a third time"), http.StatusTooManyRequests},
		{"the right password, too soon", "application/json", credsJSON("alice", "correct horse"), http.StatusTooManyRequests},
	} {
		// In order: the last cases count on the failures before them.
		res := cli.request("POST", "/api/login", tc.body, "Content-Type", tc.contentType)
		if res.code != tc.want {
			t.Errorf("%s: %d, want %d; body: %s", tc.name, res.code, tc.want, res.body)
		}
		var answer struct{ Error string }
		if err := json.Unmarshal([]byte(res.body), &answer); err != nil || answer.Error == "" {
			t.Errorf("%s: body %q, want JSON with an error", tc.name, res.body)
		}
		if tc.want == http.StatusTooManyRequests && res.header.Get("Retry-After") != "60" {
			t.Errorf("%s: Retry-After %q, want 60", tc.name, res.header.Get("Retry-After"))
		}
		if strings.Contains(res.body, "token") || res.header.Get("Set-Cookie") != "" {
			t.Errorf("%s: a refused login handed out a credential: %s", tc.name, res.body)
		}
	}
	clock.Advance(time.Minute)
	cli.login("alice", "correct horse")
}

// CrossOriginProtection wraps every route. A client that is no browser
// sends neither Origin nor Sec-Fetch-Site, and so may log in; a browser
// made to post by another site may not.
func TestAPILoginCrossOrigin(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	ta.browser("browser-A").signup("alice", "correct horse")
	cli := ta.apiClient("curl/8.0")

	res := cli.request("POST", "/api/login", credsJSON("alice", "correct horse"))
	if res.code != http.StatusOK {
		t.Errorf("POST /api/login without Origin or Sec-Fetch-Site: %d %s, want 200", res.code, res.body)
	}
	for _, header := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "https://evil.example"},
	} {
		if res := cli.request("POST", "/api/login", credsJSON("alice", "correct horse"), header...); res.code != http.StatusForbidden {
			t.Errorf("POST /api/login with %s: %s: %d, want 403", header[0], header[1], res.code)
		}
	}
}

func TestBearerRequests(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	alice := ta.browser("browser-A")
	alice.signup("alice", "correct horse")

	t.Run("malformed token costs no DynamoDB call", func(t *testing.T) {
		garbage := ta.apiClient("cli/1.0")
		for _, token := range []string{"not-a-token", strings.Repeat("A", 26) + ".!!!", "x"} {
			garbage.token = token
			if err := ta.app.shutdown(t.Context()); err != nil { // no refresh in flight
				t.Fatal(err)
			}
			before := ta.api.Total()
			res := garbage.request("GET", "/api/me", "")
			if res.code != http.StatusUnauthorized || strings.TrimSpace(res.body) != `{"error":"unauthorized"}` {
				t.Errorf("bearer %q: %d %s, want 401 JSON", token, res.code, res.body)
			}
			if n := ta.api.Total() - before; n != 0 {
				t.Errorf("bearer %q: %d DynamoDB calls, want none", token, n)
			}
		}
	})

	t.Run("cookie and bearer token together", func(t *testing.T) {
		cli := ta.apiClient("cli/1.0")
		cli.login("alice", "correct horse")
		r, _ := http.NewRequest("GET", ta.srv.URL+"/api/me", nil)
		r.Header.Set("Authorization", "Bearer "+cli.token)
		if res := alice.do(r); res.code != http.StatusBadRequest {
			t.Errorf("GET /api/me with a cookie and a bearer token: %d %s, want 400", res.code, res.body)
		}
	})

	t.Run("revoked from the browser's list", func(t *testing.T) {
		cli := ta.apiClient("cli/revoke-me")
		cli.login("alice", "correct horse")
		if code := cli.meStatus(); code != http.StatusOK {
			t.Fatalf("GET /api/me: %d, want 200", code)
		}
		page := alice.get("/")
		if !strings.Contains(page.body, "cli/revoke-me") {
			t.Fatalf("the browser's session list lacks the API client's user agent:\n%s", page.body)
		}
		var id string
		for _, s := range alice.sessions() {
			if s.UserAgent == "cli/revoke-me" {
				id = s.ID
			}
		}
		alice.mustPost(http.StatusSeeOther, "/sessions/revoke", url.Values{"id": {id}})
		if code := cli.meStatus(); code != http.StatusUnauthorized {
			t.Errorf("GET /api/me after the browser revoked the session: %d, want 401", code)
		}
		if code := alice.meStatus(); code != http.StatusOK {
			t.Errorf("the browser after revoking the API session: /api/me %d, want 200", code)
		}
	})

	t.Run("log out everywhere", func(t *testing.T) {
		cli := ta.apiClient("cli/1.0")
		cli.login("alice", "correct horse")
		alice.mustPost(http.StatusSeeOther, "/logout-everywhere", nil)
		if code := cli.meStatus(); code != http.StatusUnauthorized {
			t.Errorf("GET /api/me after logging out everywhere: %d, want 401", code)
		}
	})
}

func TestBearerExpiryAndRefresh(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.IdleTimeout = time.Hour
		cfg.RefreshInterval = 10 * time.Minute
	})
	ta.browser("browser-A").signup("alice", "correct horse")
	cli := ta.apiClient("cli/1.0")
	first := cli.login("alice", "correct horse")

	res := cli.request("GET", "/api/me", "")
	if res.code != http.StatusOK || res.header.Get("Session-Expires") != "" {
		t.Errorf("a request before the refresh interval: %d, Session-Expires %q; want 200 and none", res.code, res.header.Get("Session-Expires"))
	}

	clock.Advance(15 * time.Minute)
	res = cli.request("GET", "/api/me", "")
	if res.code != http.StatusOK {
		t.Fatalf("a request after the refresh interval: %d %s", res.code, res.body)
	}
	expires, err := time.Parse(time.RFC3339, res.header.Get("Session-Expires"))
	if err != nil || !expires.After(first.ExpiresAt) {
		t.Errorf("Session-Expires %q (%v): want RFC 3339, later than the login's %v", res.header.Get("Session-Expires"), err, first.ExpiresAt)
	}
	if err := ta.app.shutdown(t.Context()); err != nil { // the refresh is written
		t.Fatal(err)
	}

	// Idle past the refreshed expiry: the session is over.
	clock.Advance(time.Hour + time.Minute)
	if code := cli.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("a request past the expiry: %d, want 401", code)
	}
}
