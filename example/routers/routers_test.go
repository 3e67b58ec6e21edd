package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode) // no debug-mode banner in the test output
	os.Exit(ddbtest.Main(m))
}

const (
	idleTimeout     = 2 * time.Hour
	refreshInterval = 10 * time.Minute
)

// serve starts newHandler's router around a Manager on a table of its own,
// behind TLS (the cookie is __Host-, so Secure), and returns a browser for
// it: a client with a cookie jar that does not follow redirects.
func serve(t *testing.T, newHandler func(*ddbsession.Manager[User]) http.Handler) (*browser, *ddbtest.Clock, *ddbsession.Manager[User]) {
	t.Helper()
	client := ddbtest.Client(t)
	clk := ddbtest.NewClock(time.Now())
	sessions, err := newSessions(t.Context(), ddbsession.Config[User]{
		Client: client,
		Table:  ddbtest.TableName(t, client),
		Limits: ddbsession.Limits{
			IdleTimeout:     idleTimeout,
			RefreshInterval: refreshInterval,
			StoreTimeout:    time.Minute, // calls a busy test machine delays are no store fault
		},
		Now: clk.Now,
	}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Refresh writes run after the response; none may outlive the
		// test, nor its table.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sessions.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	srv := httptest.NewTLSServer(newHandler(sessions))
	t.Cleanup(srv.Close)
	b := &browser{t: t, base: srv.URL, client: srv.Client()}
	b.client.Jar, _ = cookiejar.New(nil)
	b.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return b, clk, sessions
}

type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

type answer struct {
	status  int
	body    string
	header  http.Header
	cookies []*http.Cookie
}

// do sends a request, a form for POST, with the jar's cookies.
func (b *browser) do(method, path string, form url.Values, header http.Header) answer {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for name, values := range header {
		req.Header[name] = values
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return answer{status: res.StatusCode, body: string(body), header: res.Header, cookies: res.Cookies()}
}

// sessionCookie returns the session cookie that an answer sets, if any.
func sessionCookie(a answer, name string) (*http.Cookie, bool) {
	for _, c := range a.cookies {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// Every router: the public page, 401 before login, a login, the user on a
// guarded page, a refresh when due that re-sends the cookie and moves the
// expiry in the table, and 401 after logout.
func TestLoginRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range routers {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			b, clk, sessions := serve(t, r.handler)
			const cookie = "__Host-session" // the default Config.Cookie.Name
			alice := url.Values{"name": {"alice"}, "password": {demoPassword}}

			if a := b.do("GET", "/", nil, nil); a.status != http.StatusOK || !strings.HasPrefix(a.body, "public page") {
				t.Errorf("GET /: %d %q, want 200 and the public page", a.status, a.body)
			}
			if a := b.do("GET", "/me", nil, nil); a.status != http.StatusUnauthorized || strings.Contains(a.body, "signed in") {
				t.Errorf("GET /me before login: %d %q, want 401 and no page", a.status, a.body)
			}
			wrong := url.Values{"name": {"alice"}, "password": {"guess"}}
			if a := b.do("POST", "/login", wrong, nil); a.status != http.StatusUnauthorized || len(a.cookies) != 0 {
				t.Errorf("POST /login with a wrong password: %d, cookies %v; want 401 and none", a.status, a.cookies)
			}
			crossSite := http.Header{"Sec-Fetch-Site": {"cross-site"}}
			if a := b.do("POST", "/login", alice, crossSite); a.status != http.StatusForbidden || len(a.cookies) != 0 {
				t.Errorf("cross-site POST /login: %d, cookies %v; want 403 and none", a.status, a.cookies)
			}

			a := b.do("POST", "/login", alice, nil)
			if c, ok := sessionCookie(a, cookie); a.status != http.StatusSeeOther || a.header.Get("Location") != "/me" || !ok || !c.Secure {
				t.Fatalf("POST /login: %d to %q, cookies %v; want 303 to /me and a Secure %s cookie", a.status, a.header.Get("Location"), a.cookies, cookie)
			}
			a = b.do("GET", "/me", nil, nil)
			if a.status != http.StatusOK || a.body != "signed in as alice\n" {
				t.Fatalf("GET /me after login: %d %q, want 200 \"signed in as alice\"", a.status, a.body)
			}
			if c, ok := sessionCookie(a, cookie); ok {
				t.Errorf("GET /me with no refresh due sent the cookie %v", c)
			}

			// Past RefreshInterval the expiry moves: the cookie goes out
			// again at once, and the table is written after the response.
			clk.Advance(refreshInterval + time.Minute)
			a = b.do("GET", "/me", nil, nil)
			c, ok := sessionCookie(a, cookie)
			if a.status != http.StatusOK || !ok || c.MaxAge < int((idleTimeout-time.Minute).Seconds()) {
				t.Fatalf("GET /me with a refresh due: %d, cookies %v; want 200 and the %s cookie re-sent for IdleTimeout", a.status, a.cookies, cookie)
			}
			if err := sessions.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Past the expiry the login set, the session lives on only if
			// the refresh reached the table.
			clk.Advance(idleTimeout - refreshInterval)
			if a := b.do("GET", "/me", nil, nil); a.status != http.StatusOK {
				t.Fatalf("GET /me past the login's expiry, after a refresh: %d %q, want 200", a.status, a.body)
			}

			a = b.do("POST", "/logout", nil, nil)
			if c, ok := sessionCookie(a, cookie); a.status != http.StatusSeeOther || !ok || c.MaxAge >= 0 {
				t.Errorf("POST /logout: %d, cookies %v; want 303 and the cookie cleared", a.status, a.cookies)
			}
			if a := b.do("GET", "/me", nil, nil); a.status != http.StatusUnauthorized || strings.Contains(a.body, "signed in") {
				t.Errorf("GET /me after logout: %d %q, want 401", a.status, a.body)
			}
		})
	}
}
