package ddbsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ddbsession/ddbsession"
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

// One Manager guards pages with a redirect that remembers the page, and an
// API with JSON, without a second Manager.
func TestAnswersForPagesAndAPI(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	pages := e.m.RequireSessionWith(ddbsession.Answers{Unauthorized: ddbsession.RedirectToLogin("/login")})
	api := e.m.RequireSessionWith(ddbsession.APIAnswers())
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

	w := httptest.NewRecorder()
	pages(ok).ServeHTTP(w, httptest.NewRequest("GET", "/account/settings?tab=2", nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login?next=%2Faccount%2Fsettings%3Ftab%3D2" {
		t.Errorf("page: %d Location %q", w.Code, w.Header().Get("Location"))
	}
	// The login page reads it back.
	loc, _ := url.Parse(w.Header().Get("Location"))
	if got := ddbsession.ReturnPath(httptest.NewRequest("POST", loc.String(), nil), "/"); got != "/account/settings?tab=2" {
		t.Errorf("ReturnPath after the redirect = %q", got)
	}
	w = httptest.NewRecorder()
	pages(ok).ServeHTTP(w, httptest.NewRequest("POST", "/account/delete", nil))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Errorf("page POST: %d Location %q, want /login without next", w.Code, w.Header().Get("Location"))
	}

	w = httptest.NewRecorder()
	api(ok).ServeHTTP(w, httptest.NewRequest("GET", "/api/me", nil))
	assertJSONError(t, w, http.StatusUnauthorized, "unauthorized")

	// The store down: JSON for the API, the Config's answer for pages.
	cookie := e.login(e.putUser("alice"))
	p.fail = func(context.Context, string) error { return errors.New("down") }
	w = httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/me", nil)
	r.AddCookie(cookie)
	api(ok).ServeHTTP(w, r)
	assertJSONError(t, w, http.StatusServiceUnavailable, "session store unavailable, try again")
	w = httptest.NewRecorder()
	r = httptest.NewRequest("GET", "/account", nil)
	r.AddCookie(cookie)
	pages(ok).ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Content-Type") == "application/json" {
		t.Errorf("page in an outage: %d %q, want the plain 503", w.Code, w.Header().Get("Content-Type"))
	}
}

// Negotiate picks JSON for clients that ask for it.
func TestNegotiate(t *testing.T) {
	t.Parallel()
	h := ddbsession.Negotiate(ddbsession.RedirectToLogin("/login"), ddbsession.JSONError(http.StatusUnauthorized, "unauthorized"))
	for _, tc := range []struct {
		accept, authorization string
		json                  bool
	}{
		{"text/html,application/xhtml+xml,*/*;q=0.8", "", false},
		{"", "", false},
		{"application/json", "", true},
		{"application/problem+json, */*", "", true},
		{"*/*", "Bearer x", true},
	} {
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Accept", tc.accept)
		if tc.authorization != "" {
			r.Header.Set("Authorization", tc.authorization)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Code == http.StatusUnauthorized; got != tc.json {
			t.Errorf("Accept %q, Authorization %q: status %d, want JSON %v", tc.accept, tc.authorization, w.Code, tc.json)
		}
	}
}

func assertJSONError(t *testing.T, w *httptest.ResponseRecorder, status int, msg string) {
	t.Helper()
	var body struct{ Error string }
	if w.Code != status || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Error != msg {
		t.Errorf("got %d %q %q, want %d application/json {\"error\":%q}", w.Code, w.Header().Get("Content-Type"), w.Body, status, msg)
	}
}
