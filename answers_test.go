package ddbsession_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestReturnPathRefusesOpenRedirects(t *testing.T) {
	t.Parallel()
	for _, next := range []string{
		"", "account", "https://evil.example/", "http:/evil.example", "//evil.example", "///evil.example",
		`/\evil.example`, `\\evil.example`, "/%2F/evil.example", "/%2f%2fevil.example", "%2F%2Fevil.example",
		"/%5Cevil.example", "/%255Cevil.example", "/%25252F%25252Fevil.example", "javascript:alert(1)",
		"/\t/evil.example", "/\r\nLocation: //evil.example", "/%0d%0aSet-Cookie:x=1", "//user@evil.example",
	} {
		r := httptest.NewRequest("GET", "/login?"+url.Values{"next": {next}}.Encode(), nil)
		if got := ddbsession.ReturnPath(r, "/home"); got != "/home" {
			t.Errorf("ReturnPath(next=%q) = %q, want the fallback", next, got)
		}
	}
	for _, next := range []string{"/", "/account", "/account?tab=2&x=%2F", "/a/b/./c", "/caf%C3%A9"} {
		r := httptest.NewRequest("GET", "/login?"+url.Values{"next": {next}}.Encode(), nil)
		if got := ddbsession.ReturnPath(r, "/home"); got != next {
			t.Errorf("ReturnPath(next=%q) = %q, want it back", next, got)
		}
	}
}

// Redirect as Config.Unauthorized sends a browser to log in and back: a
// GET or HEAD remembers its page, a form's POST the page that sent it, and
// a request with a bearer token, no browser's, gets 401.
func TestRedirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.Unauthorized = ddbsession.Redirect("/login")
		c.BearerTokens = true
	})
	guard := e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("let through") }))
	for _, tc := range []struct {
		method, target, bearer string
		wantCode               int
		wantLocation           string
	}{
		{"GET", "/account/settings?tab=2", "", http.StatusSeeOther, "/login?next=%2Faccount%2Fsettings%3Ftab%3D2"},
		{"HEAD", "/account", "", http.StatusSeeOther, "/login?next=%2Faccount"},
		{"POST", "/account/delete", "", http.StatusSeeOther, "/login"},
		{"GET", "/api/me", "Bearer " + strings.Repeat("A", 43), http.StatusUnauthorized, ""},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.bearer != "" {
			r.Header.Set("Authorization", tc.bearer)
		}
		guard.ServeHTTP(w, r)
		if w.Code != tc.wantCode || w.Header().Get("Location") != tc.wantLocation {
			t.Errorf("%s %s: %d Location %q, want %d %q", tc.method, tc.target, w.Code, w.Header().Get("Location"), tc.wantCode, tc.wantLocation)
		}
		if tc.wantLocation != "" {
			loc, _ := url.Parse(tc.wantLocation)
			want := cmp.Or(loc.Query().Get("next"), "/")
			if got := ddbsession.ReturnPath(httptest.NewRequest("POST", loc.String(), nil), "/"); got != want {
				t.Errorf("ReturnPath after the redirect to %s = %q, want %q", loc, got, want)
			}
		}
	}
	for _, bad := range []string{"login", "https://evil.example/login", "//evil.example"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Redirect(%q) did not panic", bad)
				}
			}()
			ddbsession.Redirect(bad)
		}()
	}
}

// One Manager guards pages with a redirect that remembers the page, and an
// API with JSON, without a second Manager: the Config's answers tell the
// two apart, as Config.Unauthorized's documentation shows.
func TestAnswersForPagesAndAPI(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	apiOr := func(api, page http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				api.ServeHTTP(w, r)
				return
			}
			page.ServeHTTP(w, r)
		})
	}
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) {
		c.Unauthorized = apiOr(jsonError(http.StatusUnauthorized, "unauthorized"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			target := "/login"
			if r.Method == http.MethodGet {
				target += "?" + url.Values{"next": {r.URL.RequestURI()}}.Encode()
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
		}))
		c.StoreUnavailable = apiOr(jsonError(http.StatusServiceUnavailable, "session store unavailable, try again"), http.HandlerFunc(
			func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "try again", http.StatusServiceUnavailable)
			}))
	})
	guard := e.m.RequireSession
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

	w := httptest.NewRecorder()
	guard(ok).ServeHTTP(w, httptest.NewRequest("GET", "/account/settings?tab=2", nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login?next=%2Faccount%2Fsettings%3Ftab%3D2" {
		t.Errorf("page: %d Location %q", w.Code, w.Header().Get("Location"))
	}
	// The login page reads it back.
	loc, _ := url.Parse(w.Header().Get("Location"))
	if got := ddbsession.ReturnPath(httptest.NewRequest("POST", loc.String(), nil), "/"); got != "/account/settings?tab=2" {
		t.Errorf("ReturnPath after the redirect = %q", got)
	}
	w = httptest.NewRecorder()
	guard(ok).ServeHTTP(w, httptest.NewRequest("POST", "/account/delete", nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Errorf("page POST: %d Location %q, want /login without next", w.Code, w.Header().Get("Location"))
	}

	w = httptest.NewRecorder()
	guard(ok).ServeHTTP(w, httptest.NewRequest("GET", "/api/me", nil))
	assertJSONError(t, w, http.StatusUnauthorized, "unauthorized")

	// The store down: JSON for the API, plain text for pages.
	cookie := e.login(e.putUser("alice"))
	p.Fail = func(context.Context, string, any) error { return errors.New("down") }
	w = httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/me", nil)
	r.AddCookie(cookie)
	guard(ok).ServeHTTP(w, r)
	assertJSONError(t, w, http.StatusServiceUnavailable, "session store unavailable, try again")
	w = httptest.NewRecorder()
	r = httptest.NewRequest("GET", "/account", nil)
	r.AddCookie(cookie)
	guard(ok).ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Content-Type") == "application/json" {
		t.Errorf("page in an outage: %d %q, want the plain 503", w.Code, w.Header().Get("Content-Type"))
	}
}

// jsonError answers with status and the body {"error": msg}, as an app's
// API does.
func jsonError(status int, msg string) http.Handler {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(append(body, '\n'))
	})
}

func assertJSONError(t *testing.T, w *httptest.ResponseRecorder, status int, msg string) {
	t.Helper()
	var body struct{ Error string }
	if w.Code != status || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error != msg {
		t.Errorf("got %d %q %q, want %d application/json {\"error\":%q}", w.Code, w.Header().Get("Content-Type"), w.Body, status, msg)
	}
}
