package main

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// sessionCookie returns the session cookie that res sets, or fails.
func sessionCookie(t *testing.T, res response) *http.Cookie {
	t.Helper()
	for _, line := range res.header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err == nil && c.Name == cookieName && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no %s cookie set; Set-Cookie: %q", cookieName, res.header.Values("Set-Cookie"))
	return nil
}

func TestKeepMeSignedIn(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	ta.browser("setup").signup("alice", "correct horse")

	page := ta.browser("anon").get("/")
	if n := strings.Count(page.body, `<input type="checkbox" name="remember" value="on" checked>`); n != 2 {
		t.Errorf("the signed-out page has %d ticked \"keep me signed in\" boxes, want 2 (log in, sign up):\n%s", n, page.body)
	}

	for i, tc := range []struct {
		name       string
		remember   []string // the form's remember values
		persistent bool
	}{
		{"ticked", []string{"on"}, true},
		{"not ticked", nil, false},
		{"another value", []string{"yes"}, false},
		{"empty", []string{""}, false},
	} {
		for _, path := range []string{"/login", "/signup"} {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				form := url.Values{"username": {"alice"}, "password": {"correct horse"}, "remember": tc.remember}
				if path == "/signup" {
					form.Set("username", strings.ReplaceAll(tc.name, " ", "")+"x") // a new user each time
				}
				b := ta.browser("browser-" + string(rune('A'+i)))
				c := sessionCookie(t, b.mustPost(http.StatusSeeOther, path, form))
				if tc.persistent && (c.MaxAge < 23*3600 || c.MaxAge > 24*3600) {
					t.Errorf("Max-Age %d, want a day", c.MaxAge)
				}
				if !tc.persistent && (c.MaxAge != 0 || c.RawExpires != "") {
					t.Errorf("Max-Age %d, Expires %q; want neither: a cookie that ends with the browser", c.MaxAge, c.RawExpires)
				}
				if code := b.meStatus(); code != http.StatusOK {
					t.Errorf("signed in: /api/me %d, want 200", code)
				}
			})
		}
	}
}

func TestSessionEventsAreLogged(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	var logs syncBuffer
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.RefreshInterval = 10 * time.Minute
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	token := a.token()
	clock.Advance(15 * time.Minute)
	if code := a.meStatus(); code != http.StatusOK {
		t.Fatalf("/api/me: %d", code)
	}
	if err := ta.app.shutdown(t.Context()); err != nil { // the refresh is written, and reported
		t.Fatal(err)
	}
	a.mustPost(http.StatusSeeOther, "/logout", nil)
	ta.withToken(token).meStatus()

	got := logs.String()
	for _, want := range []string{
		`level=DEBUG msg="session event" kind=created session=`,
		`level=DEBUG msg="session event" kind=refreshed session=`,
		`level=DEBUG msg="session event" kind=ended session=`,
		`level=DEBUG msg="session event" kind=rejected reason=unknown`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the debug log lacks %q; it is:\n%s", want, got)
		}
	}
	if strings.Contains(got, strings.SplitN(token, ".", 2)[0]) {
		t.Errorf("the log holds the session token:\n%s", got)
	}

	// At the default level, none of it.
	quiet := newTestApp(t)
	quiet.browser("browser-A").signup("alice", "correct horse")
	if strings.Contains(quiet.logs.String(), "session event") {
		t.Errorf("session events logged at info level:\n%s", quiet.logs.String())
	}
}

func TestLoginRedirectsBack(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, unlimited)
	ta.browser("setup").signup("alice", "correct horse")
	creds := url.Values{"username": {"alice"}, "password": {"correct horse"}, "remember": {"on"}}

	// A page that needs a session sends the browser to log in...
	b := ta.browser("browser-A")
	res := b.get("/account")
	loc := res.header.Get("Location")
	if res.code != http.StatusSeeOther || loc != "/login?next=%2Faccount" {
		t.Fatalf("GET /account signed out: %d to %q, want 303 to /login?next=%%2Faccount", res.code, loc)
	}
	// ...whose forms carry the way back...
	page := b.get(loc)
	for _, form := range []string{`action="/login?next=%2faccount"`, `action="/signup?next=%2faccount"`} {
		if page.code != http.StatusOK || !strings.Contains(page.body, form) {
			t.Errorf("GET %s: %d, want a form with %s; body:\n%s", loc, page.code, form, page.body)
		}
	}
	// ...and the login goes back there.
	res = b.mustPost(http.StatusSeeOther, "/login?next=%2Faccount", creds)
	if got := res.header.Get("Location"); got != "/account" {
		t.Errorf("login with next=/account redirects to %q", got)
	}
	if page := b.get("/account"); page.code != http.StatusOK || !strings.Contains(page.body, `id="whoami"`) {
		t.Errorf("GET /account signed in: %d; body:\n%s", page.code, page.body)
	}
	// Signed in, the login page passes straight through.
	if res := b.get("/login?next=%2Faccount"); res.code != http.StatusSeeOther || res.header.Get("Location") != "/account" {
		t.Errorf("GET /login signed in: %d to %q, want 303 to /account", res.code, res.header.Get("Location"))
	}
	// A sign-up comes back too.
	res = ta.browser("browser-B").mustPost(http.StatusSeeOther, "/signup?next=%2Faccount", url.Values{"username": {"bob"}, "password": {"bob's password"}})
	if got := res.header.Get("Location"); got != "/account" {
		t.Errorf("sign-up with next=/account redirects to %q", got)
	}

	// Another site is never a way back.
	for _, next := range []string{
		"https://evil.example/",
		"//evil.example/",
		`/\evil.example`,
		"/%2F%2Fevil.example",
		"%2F%2Fevil.example",
		"javascript:alert(1)",
	} {
		t.Run(next, func(t *testing.T) {
			res := ta.browser("browser-C").mustPost(http.StatusSeeOther, "/login?next="+url.QueryEscape(next), creds)
			if got := res.header.Get("Location"); got != "/" {
				t.Errorf("login with next=%q redirects to %q, want /", next, got)
			}
			page := ta.browser("browser-D").get("/login?next=" + url.QueryEscape(next))
			if strings.Contains(page.body, "evil") || strings.Contains(page.body, "javascript") {
				t.Errorf("the login page for next=%q carries it into its forms:\n%s", next, page.body)
			}
		})
	}
}
