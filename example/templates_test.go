package main

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestErrorPages asks for every kind of error a browser can meet outside
// the sign-up and log-in forms: each is the app's own page, styles and all,
// with a heading in words rather than the status text, a title of its own,
// and a way back. The API answers in JSON instead.
func TestErrorPages(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	signedIn := ta.browser("A")
	signedIn.signup("alice", "correct horse")
	outage := ta.browser("B")
	outage.signup("bob", "bob's password")
	anon := ta.browser("anon")
	style := regexp.MustCompile(`(?s)<style>.*</style>`).FindString(anon.get("/").body)

	for _, tc := range []struct {
		name    string
		do      func() response
		code    int
		heading string
		message string
	}{
		{"no such page", func() response { return anon.get("/nowhere") }, http.StatusNotFound, "Not found", "There is no page at this address."},
		{"no such method", func() response {
			r, _ := http.NewRequest("PUT", ta.srv.URL+"/login", nil)
			return anon.do(r)
		}, http.StatusMethodNotAllowed, "Not possible here", "This address does not take that kind of request."},
		{"a cross-origin form", func() response {
			return signedIn.post("/logout", nil, "Sec-Fetch-Site", "cross-site")
		}, http.StatusForbidden, "Request refused", "This form was sent from another site"},
		{"a wrong current password", func() response {
			return signedIn.post("/password", url.Values{"current": {"wrong"}, "new": {"new password"}})
		}, http.StatusUnauthorized, "Wrong password", "The current password is wrong."},
		{"a bad new password", func() response {
			return signedIn.post("/password", url.Values{"current": {"correct horse"}, "new": {"short"}})
		}, http.StatusBadRequest, "Please check the form", "new password must be at least 8 characters long"},
		{"no such session", func() response {
			return signedIn.post("/sessions/revoke", url.Values{"id": {"0123456789abcdef0123456789abcdef"}})
		}, http.StatusNotFound, "Not found", "No such session."},
		{"the session store down", func() response {
			ta.faults.setDown("BatchGetItem")
			defer ta.faults.setDown()
			return outage.get("/")
		}, http.StatusServiceUnavailable, "Please try again shortly", "The session store is unavailable."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.do()
			if res.code != tc.code {
				t.Fatalf("%d, want %d; body:\n%s", res.code, tc.code, res.body)
			}
			if ct := res.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q, want the HTML page", ct)
			}
			for _, want := range []string{
				style,
				"<title>" + tc.heading + " · ddbsession example</title>",
				"<h2>" + tc.heading + "</h2>",
				`<a href="/">Back to the start page</a>`,
			} {
				if !strings.Contains(res.body, want) {
					t.Errorf("the page lacks %.80q:\n%s", want, res.body)
				}
			}
			if msg := pageMessage(t, res.body); !strings.Contains(msg, tc.message) {
				t.Errorf("message %q, want one with %q", msg, tc.message)
			}
			if text := http.StatusText(tc.code); text != tc.heading && strings.Contains(res.body, "<h2>"+text) {
				t.Errorf("the heading is the status text %q", text)
			}
		})
	}

	if res := anon.get("/nowhere"); res.header.Get("Allow") != "" {
		t.Errorf("a 404 says Allow %q", res.header.Get("Allow"))
	}
	r, _ := http.NewRequest("PUT", ta.srv.URL+"/login", nil)
	if res := anon.do(r); !strings.Contains(res.header.Get("Allow"), "GET") || !strings.Contains(res.header.Get("Allow"), "POST") {
		t.Errorf("PUT /login: Allow %q, want GET and POST, as the mux says", res.header.Get("Allow"))
	}
	api := ta.apiClient("cli/1.0")
	if res := api.request("GET", "/api/nowhere", ""); res.code != http.StatusNotFound || res.header.Get("Content-Type") != "application/json" || !strings.HasPrefix(res.body, `{"error":`) {
		t.Errorf("GET /api/nowhere: %d %q %s, want 404 in JSON", res.code, res.header.Get("Content-Type"), res.body)
	}
}

// TestFailedFormsKeepWhatWasTyped refuses a log-in and a sign-up: the page
// comes back with the message above the form that failed, the username
// and "keep me signed in" as they were sent, the way back (next) kept, and
// no password anywhere in it.
func TestFailedFormsKeepWhatWasTyped(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	ta.browser("A").signup("alice", "correct horse")
	b := ta.browser("B")

	res := b.post("/login?next=%2Faccount", url.Values{"username": {"alice"}, "password": {"wrong horse"}})
	if res.code != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d, want 401", res.code)
	}
	login := formHTML(t, res.body, "login-form")
	for _, want := range []string{`value="alice"`, `action="/login?next=%2faccount"`, `<input type="checkbox" name="remember" value="on">`} {
		if !strings.Contains(login, want) {
			t.Errorf("the log-in form shown again lacks %s:\n%s", want, login)
		}
	}
	if msg := pageMessage(t, res.body); msg != "Wrong username or password." {
		t.Errorf("message %q", msg)
	}
	if i, j := strings.Index(res.body, `id="message"`), strings.Index(res.body, `id="login-form"`); i < strings.Index(res.body, "<h2>Log in</h2>") || i > j {
		t.Errorf("the message is not above the log-in form:\n%s", res.body)
	}
	if signup := formHTML(t, res.body, "signup-form"); strings.Contains(signup, "alice") || !strings.Contains(signup, `value="on" checked>`) {
		t.Errorf("the sign-up form took the log-in form's values:\n%s", signup)
	}
	if strings.Contains(res.body, "wrong horse") {
		t.Errorf("the page holds the password that was sent")
	}
	if !strings.Contains(res.body, "<title>Error · Log in or sign up · ddbsession example</title>") {
		t.Errorf("the title does not say that something failed:\n%s", res.body)
	}

	res = b.post("/signup", url.Values{"username": {"Alice"}, "password": {"a fine password"}, "remember": {"on"}})
	signup := formHTML(t, res.body, "signup-form")
	if res.code != http.StatusConflict || !strings.Contains(signup, `value="Alice"`) || !strings.Contains(signup, `value="on" checked>`) {
		t.Errorf("a taken name: %d, want 409 and the sign-up form as it was sent:\n%s", res.code, signup)
	}
	if strings.Contains(res.body, "a fine password") {
		t.Errorf("the page holds the password that was sent")
	}
	// A name as typed goes back escaped.
	res = b.post("/signup", url.Values{"username": {`"><b>x`}, "password": {"short"}})
	if res.code != http.StatusBadRequest || strings.Contains(res.body, "<b>x") {
		t.Errorf("a name with markup: %d, want 400 and the name escaped:\n%s", res.code, res.body)
	}
}

// formHTML returns the form with that id in body.
func formHTML(t *testing.T, body, id string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `<form id="`+id+`"`)
	form, _, ok2 := strings.Cut(rest, "</form>")
	if !ok || !ok2 {
		t.Fatalf("no form %s in:\n%s", id, body)
	}
	return form
}

// TestLoginRequiredNotice: the login page says why the browser is there
// when a page that needs a session sent it, and only then.
func TestLoginRequiredNotice(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	b := ta.browser("anon")
	const notice = "Please log in to continue."
	loc := b.get("/account").header.Get("Location")
	if page := b.get(loc); !strings.Contains(page.body, notice) {
		t.Errorf("GET %s lacks %q:\n%s", loc, notice, page.body)
	}
	for _, path := range []string{"/", "/login", "/login?next=https%3A%2F%2Fevil.example%2F"} {
		if page := b.get(path); strings.Contains(page.body, notice) {
			t.Errorf("GET %s says %q, though nothing sent the browser there", path, notice)
		}
	}
}

// TestPageTitles: every page has a title of its own.
func TestPageTitles(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	anon, alice := ta.browser("anon"), ta.browser("A")
	alice.signup("alice", "correct horse")
	title := regexp.MustCompile(`<title>(.*?)</title>`)
	seen := map[string]string{}
	for name, res := range map[string]response{
		"signed out":    anon.get("/"),
		"signed in":     alice.get("/"),
		"a failed form": anon.post("/login", creds("alice", "wrong horse")),
		"no such page":  anon.get("/nowhere"),
		"an error page": alice.post("/password", url.Values{"current": {"wrong"}, "new": {"new password"}}),
	} {
		m := title.FindStringSubmatch(res.body)
		if m == nil {
			t.Errorf("%s: no title", name)
			continue
		}
		if other, ok := seen[m[1]]; ok {
			t.Errorf("%s and %s share the title %q", name, other, m[1])
		}
		seen[m[1]] = name
	}
}

// TestStylesheetContrast computes WCAG 2's contrast ratio for every pair of
// colours that the stylesheet puts together: at least 4.5:1 for text (1.4.3)
// and 3:1 for a control's boundary against what surrounds it (1.4.11).
// Every colour must be a variable in :root and each must be in a pair, or
// named as decoration, so that a colour added later is checked too.
func TestStylesheetContrast(t *testing.T) {
	t.Parallel()
	page, err := templateFiles.ReadFile("templates/layout.html")
	if err != nil {
		t.Fatal(err)
	}
	css := regexp.MustCompile(`(?s)<style>(.*)</style>`).FindStringSubmatch(string(page))[1]
	root := regexp.MustCompile(`(?s):root\s*\{(.*?)\}`).FindStringSubmatch(css)
	if root == nil {
		t.Fatal("the stylesheet has no :root block")
	}
	colours := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]+)\s*;`).FindAllStringSubmatch(root[1], -1) {
		colours[m[1]] = m[2]
	}
	rest := strings.Replace(css, root[0], "", 1)
	if m := regexp.MustCompile(`#[0-9a-fA-F]{3,8}\b|\b(rgba?|hsla?)\(|:\s*(white|black|gr[ae]y|red|blue|green)\b`).FindString(rest); m != "" {
		t.Errorf("a colour outside :root, which this test cannot check: %q", m)
	}
	for _, m := range regexp.MustCompile(`var\(--([a-z-]+)\)`).FindAllStringSubmatch(rest, -1) {
		if _, ok := colours[m[1]]; !ok {
			t.Errorf("var(--%s) is used, but :root does not define it", m[1])
		}
	}

	decoration := map[string]string{"rule": "the lines between table rows", "shadow": "the cards' shadow"}
	pairs := []struct {
		fg, bg string
		min    float64
		what   string
	}{
		{"text", "page", 4.5, "the header"},
		{"text", "card", 4.5, "text in a card, and typed into a field"},
		{"muted", "page", 4.5, "the header's subtitle"},
		{"muted", "card", 4.5, "hints, table headings and time labels"},
		{"accent", "card", 4.5, "links"},
		{"on-accent", "accent", 4.5, "a button's label"},
		{"on-accent", "danger", 4.5, "Log out everywhere's label"},
		{"text", "secondary", 4.5, "a secondary button's label"},
		{"badge-text", "badge", 4.5, "the this-browser badge"},
		{"bound-text", "bound", 4.5, "the device-bound badge"},
		{"error-text", "error", 4.5, "a form's error message"},
		{"notice-text", "notice", 4.5, "the log-in notice"},
		{"control-border", "card", 3, "the border of a field and of a secondary button"},
		{"accent", "card", 3, "a button"},
		{"danger", "card", 3, "Log out everywhere"},
	}
	used := map[string]bool{}
	for _, p := range pairs {
		used[p.fg], used[p.bg] = true, true
		fg, err1 := luminance(colours[p.fg])
		bg, err2 := luminance(colours[p.bg])
		if err1 != nil || err2 != nil {
			t.Errorf("%s on %s (%s): %v %v", p.fg, p.bg, p.what, err1, err2)
			continue
		}
		ratio := (max(fg, bg) + 0.05) / (min(fg, bg) + 0.05)
		t.Logf("%-14s on %-9s %5.2f:1  %s", p.fg, p.bg, ratio, p.what)
		if ratio < p.min {
			t.Errorf("%s %s on %s %s (%s): contrast %.2f:1, want at least %.1f:1", p.fg, colours[p.fg], p.bg, colours[p.bg], p.what, ratio, p.min)
		}
	}
	for name := range colours {
		if _, ok := decoration[name]; !used[name] && !ok {
			t.Errorf("--%s is in no checked pair and not named as decoration", name)
		}
	}
}

// luminance is a colour's relative luminance as WCAG 2 defines it, from
// "#rgb" or "#rrggbb".
func luminance(hex string) (float64, error) {
	h := strings.TrimPrefix(hex, "#")
	if len(h) == 3 {
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	}
	if len(h) != 6 {
		return 0, fmt.Errorf("colour %q: want #rgb or #rrggbb, opaque", hex)
	}
	var lin [3]float64
	for i := range lin {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return 0, fmt.Errorf("colour %q: %v", hex, err)
		}
		c := float64(v) / 255
		if c <= 0.04045 {
			lin[i] = c / 12.92
		} else {
			lin[i] = math.Pow((c+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*lin[0] + 0.7152*lin[1] + 0.0722*lin[2], nil
}

// The sessions list says how each session signed in, in words, and leaves
// out single sign-on's mark of a login at the provider.
func TestMethodsInWords(t *testing.T) {
	for _, tc := range []struct {
		methods []string
		want    string
	}{
		{nil, "not recorded"},
		{[]string{methodPassword, methodOTP}, "password and one-time code"},
		{[]string{methodOIDC, methodOIDCFresh}, "single sign-on"},
		{[]string{methodOIDC}, "single sign-on"},
		{[]string{"passkey"}, "passkey"},
	} {
		if got := methodsInWords(tc.methods); got != tc.want {
			t.Errorf("methodsInWords(%q) = %q, want %q", tc.methods, got, tc.want)
		}
	}
}
