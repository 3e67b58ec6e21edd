package ddbsession_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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

// A site of pages and an API on one Manager with the default answers fits
// each caller: a browser's navigation goes to the login page, a program's
// call gets 401 in JSON, and a bearer client the challenge too.
func TestMixedSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.Unauthorized = ddbsession.Redirect("/login")
		c.BearerTokens = true
	})
	guard := e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("let through") }))
	const navigate = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		name, method, target string
		header               http.Header
		wantCode             int
		wantLocation         string
		wantChallenge        string
	}{
		{"a navigation", "GET", "/account", http.Header{"Sec-Fetch-Mode": {"navigate"}, "Accept": {navigate}}, 303, "/login?next=%2Faccount", ""},
		{"a navigation, no fetch metadata", "GET", "/account", http.Header{"Accept": {navigate}}, 303, "/login?next=%2Faccount", ""},
		{"a form's POST", "POST", "/account/delete", http.Header{"Sec-Fetch-Mode": {"navigate"}}, 303, "/login", ""},
		{"a client that says nothing", "GET", "/account", nil, 303, "/login?next=%2Faccount", ""},
		{"fetch", "GET", "/api/me", http.Header{"Sec-Fetch-Mode": {"cors"}, "Accept": {"*/*"}}, 401, "", "Bearer"},
		{"a non-GET fetch", "POST", "/api/cart", http.Header{"Sec-Fetch-Mode": {"same-origin"}}, 401, "", "Bearer"},
		{"Accept prefers JSON", "GET", "/api/me", http.Header{"Accept": {"application/json, text/plain, */*"}}, 401, "", "Bearer"},
		{"Accept prefers problem+json to HTML", "GET", "/api/me", http.Header{"Accept": {"text/html;q=0.5, application/problem+json"}}, 401, "", "Bearer"},
		{"Accept prefers HTML to JSON", "GET", "/account", http.Header{"Accept": {"text/html, application/json;q=0.9"}}, 303, "/login?next=%2Faccount", ""},
		{"a Basic Authorization", "GET", "/api/me", http.Header{"Authorization": {"Basic YTpi"}}, 401, "", "Bearer"},
		{"a bearer token", "GET", "/api/me", http.Header{"Authorization": {"Bearer " + strings.Repeat("A", 43)}}, 401, "", `Bearer error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(tc.method, tc.target, nil)
			maps.Copy(r.Header, tc.header)
			guard.ServeHTTP(w, r)
			if w.Code != tc.wantCode || w.Header().Get("Location") != tc.wantLocation || w.Header().Get("WWW-Authenticate") != tc.wantChallenge {
				t.Errorf("%d Location %q WWW-Authenticate %q, want %d %q %q", w.Code, w.Header().Get("Location"),
					w.Header().Get("WWW-Authenticate"), tc.wantCode, tc.wantLocation, tc.wantChallenge)
			}
			if tc.wantCode == http.StatusUnauthorized {
				assertJSONError(t, w, http.StatusUnauthorized, "unauthorized")
			}
			// A cache must not hand a page's redirect to a program, or the
			// reverse: the answer varies with what tells them apart.
			if vary := strings.Join(w.Header().Values("Vary"), ", "); !strings.Contains(vary, "Sec-Fetch-Mode") || !strings.Contains(vary, "Accept") || !strings.Contains(vary, "Authorization") {
				t.Errorf("Vary %q, want Sec-Fetch-Mode, Authorization and Accept in it", vary)
			}
		})
	}
}

// The default answers, without Redirect, fit the caller too: JSON to a
// program, one line of text to a browser.
func TestDefaultAnswersFitTheCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	guard := e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("let through") }))
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/me", nil)
	r.Header.Set("Sec-Fetch-Mode", "cors")
	guard.ServeHTTP(w, r)
	assertJSONError(t, w, http.StatusUnauthorized, "unauthorized")
	if got := w.Header().Get("WWW-Authenticate"); got != "" {
		t.Errorf("WWW-Authenticate %q without BearerTokens", got)
	}
	w = httptest.NewRecorder()
	guard.ServeHTTP(w, httptest.NewRequest("GET", "/account", nil))
	if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") || w.Body.String() != "unauthorized\n" {
		t.Errorf("a page: %d %q %q, want 401 text/plain", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
}

// Per route, an app answers in its own way with LoadSession and a check
// of its own, as docs/routers.md shows: here a page-like route that must
// answer 404 rather than tell a stranger it exists.
func TestAnswerPerRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Unauthorized = ddbsession.Redirect("/login") })
	hidden := e.m.LoadSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := e.m.Session(r.Context()); !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("admin"))
	}))
	if w := e.get(hidden); w.Code != http.StatusNotFound {
		t.Errorf("without a session: %d, want 404", w.Code)
	}
	if w := e.get(hidden, e.login(e.putUser("alice"))); w.Code != http.StatusOK || w.Body.String() != "admin" {
		t.Errorf("with a session: %d %q", w.Code, w.Body)
	}
}

// An app on a sub-path, behind http.StripPrefix: its cookie is
// __Secure- on the app's path, and a browser sent to log in comes back to
// the page it asked for, prefix and all, through next and ReturnPath.
func TestSubPathApp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.Cookie.Path = "/app"
		c.Unauthorized = ddbsession.Redirect("/app/login")
	})
	alice := e.putUser("alice")
	mux := http.NewServeMux()
	mux.Handle("GET /account", e.m.RequireSession(whoami(e.m)))
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if err := e.m.Login(w, r, alice, nil); err != nil {
			t.Error(err)
		}
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/app/"), http.StatusSeeOther)
	})
	app := http.StripPrefix("/app", mux)

	// Asked for a guarded page: sent to the login page, with the way back.
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("GET", "https://example.test/app/account?tab=2", nil))
	if want := "/app/login?next=%2Fapp%2Faccount%3Ftab%3D2"; w.Code != http.StatusSeeOther || w.Header().Get("Location") != want {
		t.Fatalf("GET /app/account: %d Location %q, want 303 %q", w.Code, w.Header().Get("Location"), want)
	}
	// The login page's form posts there; Login sets the cookie on /app and
	// sends the browser back to the page, inside the app.
	w2 := httptest.NewRecorder()
	app.ServeHTTP(w2, httptest.NewRequest("POST", "https://example.test"+w.Header().Get("Location"), nil))
	if w2.Code != http.StatusSeeOther || w2.Header().Get("Location") != "/app/account?tab=2" {
		t.Errorf("POST /app/login: %d Location %q, want /app/account?tab=2", w2.Code, w2.Header().Get("Location"))
	}
	c := sessionCookie(t, w2.Result(), "__Secure-session")
	if c == nil || c.Path != "/app" || !c.Secure || !c.HttpOnly {
		t.Fatalf("Login's cookie: %v, want __Secure-session on Path=/app, Secure, HttpOnly", c)
	}
	r := httptest.NewRequest("GET", "https://example.test/app/account", nil)
	r.AddCookie(c)
	w3 := httptest.NewRecorder()
	app.ServeHTTP(w3, r)
	if w3.Code != http.StatusOK || w3.Body.String() != "user:alice" {
		t.Errorf("GET /app/account with the cookie: %d %q", w3.Code, w3.Body)
	}

	// A reverse proxy that strips /app leaves no trace of it: Cookie.Path
	// puts it back.
	w4 := httptest.NewRecorder()
	mux.ServeHTTP(w4, httptest.NewRequest("GET", "https://example.test/account", nil))
	if want := "/app/login?next=%2Fapp%2Faccount"; w4.Header().Get("Location") != want {
		t.Errorf("GET /account from the proxy: Location %q, want %q", w4.Header().Get("Location"), want)
	}
	// An app that routes the prefix itself, with no one stripping it, is
	// not given it twice.
	unstripped := e.m.RequireSession(whoami(e.m))
	w5 := httptest.NewRecorder()
	unstripped.ServeHTTP(w5, httptest.NewRequest("GET", "https://example.test/app/account", nil))
	if want := "/app/login?next=%2Fapp%2Faccount"; w5.Header().Get("Location") != want {
		t.Errorf("GET /app/account, not stripped: Location %q, want %q", w5.Header().Get("Location"), want)
	}
}

// Config.Cookie.Path is checked once, by New.
func TestCookiePathChecked(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"app", "/app/", "//evil.example", "/app;Domain=x", "/app?x", "/a\x00"} {
		_, err := ddbsession.New(ddbsession.Config[User]{Client: dynamodb.New(dynamodb.Options{}), Table: "t", Cookie: ddbsession.Cookie{Path: path}})
		if err == nil || !strings.Contains(err.Error(), "Config.Cookie.Path") {
			t.Errorf("Cookie.Path %q: New error %v, want one naming Config.Cookie.Path", path, err)
		}
	}
	for _, tc := range []struct{ name, path, want string }{
		{"", "", "__Host-session"}, {"", "/", "__Host-session"}, {"", "/app", "__Secure-session"},
		{"__Host-s", "/app/v2", "__Secure-s"}, {"__Secure-s", "/", "__Host-s"},
	} {
		m, err := ddbsession.New(ddbsession.Config[User]{Client: dynamodb.New(dynamodb.Options{}), Table: "t", Cookie: ddbsession.Cookie{Name: tc.name, Path: tc.path}})
		if err != nil {
			t.Fatal(err)
		}
		// A malformed cookie of that name is cleared, at no call: on its path.
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(&http.Cookie{Name: tc.want, Value: "malformed"})
		m.RequireSession(http.NotFoundHandler()).ServeHTTP(w, r)
		if c := sessionCookie(t, w.Result(), tc.want); c == nil || c.Path != cmp.Or(tc.path, "/") || c.MaxAge != -1 {
			t.Errorf("Name %q Path %q: cookies cleared %v, want %s on %s", tc.name, tc.path, w.Result().Cookies(), tc.want, cmp.Or(tc.path, "/"))
		}
	}
}

// The same app behind a reverse proxy that strips /app before the request
// reaches it, over real HTTP with a cookie jar: the request holds no trace
// of the prefix, and Cookie.Path is where Redirect learns it. The browser
// sends the cookie to the app's path and nowhere else on the host.
func TestSubPathAppBehindAProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.Cookie.Path = "/app"
		c.Unauthorized = ddbsession.Redirect("/app/login")
		c.Now = nil // the cookie jar keeps the cookie by the real clock
	})
	alice := e.putUser("alice")
	mux := http.NewServeMux()
	mux.Handle("GET /account", e.m.RequireSession(whoami(e.m)))
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if err := e.m.Login(w, r, alice, nil); err != nil {
			t.Error(err)
		}
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/app/"), http.StatusSeeOther)
	})
	app := httptest.NewServer(mux)
	defer app.Close()
	target, _ := url.Parse(app.URL)
	var sawCookieElsewhere atomic.Bool
	front := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		path, ok := strings.CutPrefix(pr.In.URL.Path, "/app")
		if !ok {
			sawCookieElsewhere.Store(len(pr.In.CookiesNamed("__Secure-session")) > 0)
		}
		pr.Out.URL.Path, pr.Out.URL.RawPath = cmp.Or(path, "/"), ""
	}})
	defer front.Close()
	browser := front.Client()
	browser.Jar, _ = cookiejar.New(nil)
	browser.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	do := func(method, path string) *http.Response {
		t.Helper()
		r, _ := http.NewRequest(method, front.URL+path, nil)
		res, err := browser.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := do("GET", "/app/account?tab=2")
	toLogin := res.Header.Get("Location")
	if want := "/app/login?next=%2Fapp%2Faccount%3Ftab%3D2"; res.StatusCode != http.StatusSeeOther || toLogin != want {
		t.Fatalf("GET /app/account: %d Location %q, want 303 %q", res.StatusCode, toLogin, want)
	}
	if res := do("POST", toLogin); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/app/account?tab=2" {
		t.Fatalf("POST %s: %d Location %q, want /app/account?tab=2", toLogin, res.StatusCode, res.Header.Get("Location"))
	}
	r, _ := http.NewRequest("GET", front.URL+"/app/account", nil)
	res, err := browser.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "user:alice" {
		t.Errorf("GET /app/account after the login: %d %q", res.StatusCode, body)
	}
	do("GET", "/other-app/")
	if sawCookieElsewhere.Load() {
		t.Error("the browser sent the session cookie outside /app")
	}
}
