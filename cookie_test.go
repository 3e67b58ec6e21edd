package ddbsession_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

func TestLoginCookie(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		mutate     func(*ddbsession.Config[User])
		wantName   string
		wantSecure bool
	}{
		{"default", nil, "__Host-session", true},
		{"custom name keeps the prefix", func(c *ddbsession.Config[User]) { c.CookieName = "sid" }, "__Host-sid", true},
		{"prefixed custom name", func(c *ddbsession.Config[User]) { c.CookieName = "__Host-sid" }, "__Host-sid", true},
		{"dev mode", func(c *ddbsession.Config[User]) { c.InsecureDevMode = true }, "session", false},
		{"dev mode custom name", func(c *ddbsession.Config[User]) {
			c.InsecureDevMode = true
			c.CookieName = "__Host-sid"
		}, "sid", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.mutate)
			alice := e.putUser("alice")
			w := httptest.NewRecorder()
			if err := e.m.Login(w, httptest.NewRequest("POST", "/login", nil), alice); err != nil {
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
			// The token, then the user's key for the one-round-trip read.
			token, user, _ := strings.Cut(c.Value, ".")
			if !tokenFormat.MatchString(token) {
				t.Errorf("token %q is not 26 base32 characters", token)
			}
			b64 := base64.RawURLEncoding.EncodeToString
			if want := b64([]byte(alice.PK)) + "." + b64([]byte(alice.SK)); user != want {
				t.Errorf("cookie %q carries user key %q, want %q", c.Value, user, want)
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
	// The absolute lifetime is shorter than the idle timeout, so the first
	// expiry, and so Max-Age, comes from it.
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.IdleTimeout = 2 * time.Hour
		c.AbsoluteLifetime = 90 * time.Minute
	})
	c := e.login(e.putUser("alice"))
	if c.MaxAge != 90*60 {
		t.Errorf("Max-Age = %d, want %d", c.MaxAge, 90*60)
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
	c := sessionCookie(t, w.Result(), e.m.CookieName())
	if c == nil {
		t.Fatal("Logout set no cookie")
	}
	want := http.Cookie{
		Name: e.m.CookieName(), Path: "/", MaxAge: -1, Secure: true, HttpOnly: true,
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

// FuzzRequireSessionCookie feeds arbitrary cookie values to the middleware.
// Whatever the value, a request without a well-formed token never reaches
// DynamoDB and is refused; a well-formed one reaches a store that is down
// and is refused too. Nothing lets a request through. It needs no engine.
func FuzzRequireSessionCookie(f *testing.F) {
	for _, seed := range []string{"", "AAAAAAAAAAAAAAAAAAAAAAAAAA", "aaaaaaaaaaaaaaaaaaaaaaaaaa", "A=B", "\"quoted\"", strings.Repeat("7", 27), "%00",
		"AAAAAAAAAAAAAAAAAAAAAAAAAA.VVNFUiNhbGljZQ.UFJPRklMRQ", "AAAAAAAAAAAAAAAAAAAAAAAAAA.VVNFUiNhbGljZQ", "AAAAAAAAAAAAAAAAAAAAAAAAAA..",
		"AAAAAAAAAAAAAAAAAAAAAAAAAA.U0VTU0lPTiN4.eA"} {
		f.Add(seed)
	}
	p := newProbe(nil)
	p.fail = func(context.Context, string) error { return errors.New("store down") }
	m, err := ddbsession.New(ddbsession.Config[User]{Client: p, Table: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	h := m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("request let through")
	}))
	f.Fuzz(func(t *testing.T, value string) {
		p.reset()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", m.CookieName()+"="+value)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		// What the request carried after Go's own cookie parsing.
		var wellFormed bool
		for _, c := range r.CookiesNamed(m.CookieName()) {
			wellFormed = wellFormed || wellFormedCookie(c.Value)
		}
		switch {
		case wellFormed && (w.Code != http.StatusServiceUnavailable || p.total() != 1):
			t.Errorf("well-formed %q: status %d after %d calls, want 503 after 1", value, w.Code, p.total())
		case !wellFormed && (w.Code != http.StatusUnauthorized || p.total() != 0):
			t.Errorf("malformed %q: status %d after %d calls, want 401 after 0", value, w.Code, p.total())
		}
	})
}
