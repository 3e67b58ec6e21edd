package main

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// passwordOnly is Session.Methods of a session whose user typed the
// password and nothing else.
var passwordOnly = []string{"password"}

// reauthFor is where a browser goes for a sensitive action on a session
// whose authentication is too old: the re-authentication page, and back to
// next, the page that asks for the action again.
func reauthFor(next string) string {
	return "/reauth?" + url.Values{"next": {next}}.Encode()
}

// TestStepUpPages: once the session's authentication is older than
// appConfig.Reauth, logging out everywhere and revoking a session do
// nothing and send the browser to re-authenticate, and back to the
// action's confirm page; a wrong password there is refused, a right one
// signs this browser in anew (the old token dead, the other sessions
// alive) and lands on the confirm page, where one press does it.
func TestStepUpPages(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.Reauth = time.Minute
	})
	a, b := ta.browser("browser-A"), ta.browser("browser-B")
	a.signup("alice", "correct horse")
	b.login("alice", "correct horse")
	bID := sessionID(t, a.sessions(), "browser-B")
	revokeB := "/sessions/revoke?id=" + bID

	clock.Advance(time.Minute + time.Second)
	for _, tc := range []struct {
		path string
		form url.Values
		next string
	}{
		{"/logout-everywhere", nil, "/logout-everywhere"},
		{"/sessions/revoke", url.Values{"id": {bID}}, revokeB},
	} {
		res := a.post(tc.path, tc.form)
		if res.code != http.StatusSeeOther || res.header.Get("Location") != reauthFor(tc.next) {
			t.Errorf("POST %s a minute after signing in: %d to %q, want 303 to %q", tc.path, res.code, res.header.Get("Location"), reauthFor(tc.next))
		}
	}
	if a.meStatus() != http.StatusOK || b.meStatus() != http.StatusOK {
		t.Fatalf("a refused sensitive action signed someone out: A %d, B %d", a.meStatus(), b.meStatus())
	}

	page := a.get(reauthFor(revokeB))
	if page.code != http.StatusOK {
		t.Fatalf("GET %s: %d, want 200", reauthFor(revokeB), page.code)
	}
	form := formHTML(t, page.body, "reauth-form")
	for _, want := range []string{`action="/reauth"`, `<input type="hidden" name="next" value="/sessions/revoke?id=` + bID + `">`, `type="password" name="password"`} {
		if !strings.Contains(form, want) {
			t.Errorf("the re-authentication form lacks %s:\n%s", want, form)
		}
	}
	if strings.Contains(form, `name="code"`) {
		t.Errorf("the re-authentication form asks a user without one-time codes for a code:\n%s", form)
	}

	old := a.token()
	res := a.post("/reauth", url.Values{"password": {"wrong horse"}, "next": {revokeB}})
	if res.code != http.StatusUnauthorized || pageMessage(t, res.body) != "The password is wrong." {
		t.Errorf("POST /reauth with a wrong password: %d, message %q; want 401 and what was wrong", res.code, pageMessage(t, res.body))
	}
	if a.token() != old {
		t.Errorf("a refused re-authentication changed the session cookie")
	}
	if res := a.post("/logout-everywhere", nil); res.header.Get("Location") != reauthFor("/logout-everywhere") {
		t.Errorf("POST /logout-everywhere after a wrong password: %d to %q, want 303 to %q", res.code, res.header.Get("Location"), reauthFor("/logout-everywhere"))
	}

	res = a.post("/reauth", url.Values{"password": {"correct horse"}, "next": {revokeB}})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != revokeB {
		t.Fatalf("POST /reauth with the password: %d to %q, want 303 to %q; body:\n%s", res.code, res.header.Get("Location"), revokeB, res.body)
	}
	if c := sessionCookie(t, res); c.Value == old {
		t.Errorf("re-authentication kept the session token")
	}
	if code := ta.withToken(old).meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the token from before the re-authentication: /api/me %d, want 401", code)
	}
	if code := b.meStatus(); code != http.StatusOK {
		t.Errorf("another session after this one re-authenticated: /api/me %d, want 200", code)
	}
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Current: true, Methods: passwordOnly}, {UserAgent: "browser-B", Methods: passwordOnly}},
		a.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress"), byUserAgent); diff != "" {
		t.Errorf("sessions after the re-authentication (-want +got):\n%s", diff)
	}

	// Back where the re-authentication sends it: the revoke, asked again.
	confirm := a.get(revokeB)
	form = formHTML(t, confirm.body, "confirm-form")
	for _, want := range []string{`action="/sessions/revoke"`, `<input type="hidden" name="id" value="` + bID + `">`, `<button id="confirm" class="danger">Revoke</button>`} {
		if confirm.code != http.StatusOK || !strings.Contains(form, want) {
			t.Errorf("GET %s: %d, the confirm form lacks %s:\n%s", revokeB, confirm.code, want, form)
		}
	}
	if code := b.meStatus(); code != http.StatusOK {
		t.Errorf("the confirm page revoked the session by itself: /api/me %d, want 200", code)
	}
	if res := a.get("/sessions/revoke?id=0123456789abcdef0123456789abcdef"); res.code != http.StatusNotFound {
		t.Errorf("the confirm page of a session that is none of the user's: %d, want 404", res.code)
	}
	if res := a.post("/sessions/revoke", url.Values{"id": {bID}}); res.code != http.StatusSeeOther || res.header.Get("Location") != "/" {
		t.Errorf("the confirm page's one press, POST /sessions/revoke: %d to %q, want 303 to /", res.code, res.header.Get("Location"))
	}
	if code := b.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the revoked session: /api/me %d, want 401", code)
	}
	if res := a.post("/logout-everywhere", nil); res.code != http.StatusSeeOther || res.header.Get("Location") != "/" {
		t.Errorf("POST /logout-everywhere after re-authenticating: %d to %q, want 303 to /", res.code, res.header.Get("Location"))
	}
	if code := a.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("after logging out everywhere: /api/me %d, want 401", code)
	}
}

// TestEveryStepUpResumes walks each sensitive action that a browser can be
// sent to re-authenticate for (resumable): its POST, too long after the
// login, goes to re-authenticate and does nothing; the re-authentication
// comes back to the action's confirm page, which does nothing either; and
// one press of its form does the action.
func TestEveryStepUpResumes(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.Reauth = time.Minute
	})
	tested := map[string]bool{}
	for _, tc := range []struct {
		path string
		// setup signs the user in, does what the action needs first, and
		// returns the POST's form.
		setup func(t *testing.T, a *browser) url.Values
		// press sends the confirm page's form, given the page.
		press func(t *testing.T, a *browser, page response) response
		// done checks that the action happened, given press's answer.
		done func(t *testing.T, a *browser, res response)
	}{
		{
			path:  "/logout-everywhere",
			setup: func(t *testing.T, a *browser) url.Values { return nil },
			press: pressConfirm,
			done: func(t *testing.T, a *browser, res response) {
				if res.code != http.StatusSeeOther || a.meStatus() != http.StatusUnauthorized {
					t.Errorf("after the press: %d, /api/me %d; want 303 and signed out", res.code, a.meStatus())
				}
			},
		},
		{
			path: "/sessions/revoke",
			setup: func(t *testing.T, a *browser) url.Values {
				a.app.browser("other-device").login(a.userAgent, "correct horse")
				return url.Values{"id": {sessionID(t, a.sessions(), "other-device")}}
			},
			press: pressConfirm,
			done: func(t *testing.T, a *browser, res response) {
				if list := a.sessions(); res.code != http.StatusSeeOther || len(list) != 1 || !list[0].Current {
					t.Errorf("after the press: %d, sessions %+v; want 303 and this browser's alone", res.code, list)
				}
			},
		},
		{
			path:  "/totp/enrol",
			setup: func(t *testing.T, a *browser) url.Values { return nil },
			press: pressConfirm,
			done: func(t *testing.T, a *browser, res response) {
				if res.code != http.StatusOK || !strings.Contains(res.body, `id="totp-confirm-form"`) || a.app.userItemOf(a.userAgent).TOTPPending == "" {
					t.Errorf("after the press: %d, want 200 and the set-up started:\n%s", res.code, res.body)
				}
			},
		},
		{
			path: "/totp/confirm",
			setup: func(t *testing.T, a *browser) url.Values {
				a.startTOTP()
				return url.Values{"code": {"123456"}}
			},
			press: func(t *testing.T, a *browser, page response) response {
				formHTML(t, page.body, "totp-confirm-form")
				pending := a.app.userItemOf(a.userAgent).TOTPPending
				if m := keyText.FindStringSubmatch(page.body); m == nil || totpSecret(strings.ReplaceAll(m[1], " ", "")) != pending {
					t.Errorf("the confirm page shows another key than the pending set-up's")
				}
				return a.post("/totp/confirm", url.Values{"code": {codeAt(t, pending, clock.Now())}})
			},
			done: func(t *testing.T, a *browser, res response) {
				if res.code != http.StatusSeeOther || a.app.userItemOf(a.userAgent).TOTPSecret == "" {
					t.Errorf("after the press: %d, want 303 and one-time codes on", res.code)
				}
			},
		},
		{
			path: "/totp/remove",
			setup: func(t *testing.T, a *browser) url.Values {
				a.enrolTOTP(clock.Now())
				return nil
			},
			press: pressConfirm,
			done: func(t *testing.T, a *browser, res response) {
				if res.code != http.StatusSeeOther || a.app.userItemOf(a.userAgent).TOTPSecret != "" {
					t.Errorf("after the press: %d, want 303 and one-time codes off", res.code)
				}
			},
		},
		{
			path: "/passkeys/remove",
			setup: func(t *testing.T, a *browser) url.Values {
				key := newSoftKey(t, "localhost", "https://localhost") // the app's default origin
				a.register(key, "laptop")
				return url.Values{"id": {passkeyID(key.credID)}}
			},
			press: pressConfirm,
			done: func(t *testing.T, a *browser, res response) {
				if res.code != http.StatusSeeOther || len(a.app.userItemOf(a.userAgent).Passkeys) != 0 {
					t.Errorf("after the press: %d, want 303 and the passkey removed", res.code)
				}
			},
		},
	} {
		tested[tc.path] = true
		t.Run(strings.ReplaceAll(strings.Trim(tc.path, "/"), "/", "-"), func(t *testing.T) {
			// The browser's User-Agent is its user's name, for the
			// helpers above.
			name := strings.NewReplacer("/", "", "-", "").Replace(tc.path)
			a := ta.browser(name)
			a.signup(name, "correct horse")
			form := tc.setup(t, a)
			if _, ok := resumable[tc.path]; !ok {
				t.Fatalf("%s is not in resumable", tc.path)
			}
			next := tc.path
			if id := form.Get("id"); id != "" {
				next += "?id=" + id
			}

			clock.Advance(time.Minute + time.Second)
			before := ta.userItemOf(name)
			res := a.post(tc.path, form)
			if res.code != http.StatusSeeOther || res.header.Get("Location") != reauthFor(next) {
				t.Fatalf("POST %s too long after the login: %d to %q, want 303 to %q", tc.path, res.code, res.header.Get("Location"), reauthFor(next))
			}
			if code, after := a.meStatus(), ta.userItemOf(name); code != http.StatusOK || after.TOTPSecret != before.TOTPSecret || after.TOTPPending != before.TOTPPending {
				t.Fatalf("the refused POST %s did something: /api/me %d, one-time codes changed %v", tc.path, code, after.TOTPSecret != before.TOTPSecret || after.TOTPPending != before.TOTPPending)
			}
			var reauth url.Values
			if u := ta.userItemOf(name); u.TOTPSecret != "" {
				clock.Advance(30 * time.Second) // the set-up's code is spent: the next one
				reauth = url.Values{"code": {codeAt(t, u.TOTPSecret, clock.Now())}}
			} else {
				reauth = url.Values{}
			}
			reauth.Set("password", "correct horse")
			reauth.Set("next", formValue(t, a.get(res.header.Get("Location")).body, "reauth-form", "next"))
			res = a.post("/reauth", reauth)
			if res.code != http.StatusSeeOther || res.header.Get("Location") != next {
				t.Fatalf("POST /reauth: %d to %q, want 303 to the confirm page %q", res.code, res.header.Get("Location"), next)
			}
			page := a.get(next)
			if page.code != http.StatusOK {
				t.Fatalf("GET %s, the confirm page: %d\n%s", next, page.code, page.body)
			}
			if code, after := a.meStatus(), ta.userItemOf(name); code != http.StatusOK || after.TOTPSecret != before.TOTPSecret || after.TOTPPending != before.TOTPPending {
				t.Fatalf("GET %s did the action by itself", next)
			}
			tc.done(t, a, tc.press(t, a, page))
		})
	}
	for path := range resumable {
		if !tested[path] {
			t.Errorf("resumable's %s has no case here", path)
		}
	}
}

// pressConfirm sends the confirm page's form, as its button does.
func pressConfirm(t *testing.T, a *browser, page response) response {
	t.Helper()
	form := formHTML(t, page.body, "confirm-form")
	action := regexp.MustCompile(`action="([^"]*)"`).FindStringSubmatch(form)
	if action == nil || !strings.Contains(form, `<button id="confirm"`) {
		t.Fatalf("the confirm form has no action or no button:\n%s", form)
	}
	fields := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(form, -1) {
		fields.Set(m[1], html.UnescapeString(m[2]))
	}
	return a.post(html.UnescapeString(action[1]), fields)
}

// formValue is the value of the hidden field name of form id in body.
func formValue(t *testing.T, body, id, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<input type="hidden" name="` + name + `" value="([^"]*)">`).FindStringSubmatch(formHTML(t, body, id))
	if m == nil {
		t.Fatalf("form %s has no field %s:\n%s", id, name, body)
	}
	return html.UnescapeString(m[1])
}

// TestReauthReturnPath: POST /reauth goes back to its "next" when that is a
// page of this site, and to the account otherwise.
func TestReauthReturnPath(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	for _, tc := range []struct{ next, want string }{
		{"/account", "/account"},
		{"/?tab=sessions", "/?tab=sessions"},
		{"", "/account"},
		{"https://evil.example/", "/account"},
		{"//evil.example/", "/account"},
		{`/\evil.example/`, "/account"},
		{"/%2F%2Fevil.example/", "/account"},
	} {
		res := a.post("/reauth", url.Values{"password": {"correct horse"}, "next": {tc.next}})
		if res.code != http.StatusSeeOther || res.header.Get("Location") != tc.want {
			t.Errorf("POST /reauth with next %q: %d to %q, want 303 to %q", tc.next, res.code, res.header.Get("Location"), tc.want)
		}
	}
}

// TestReauthSignedOut: the re-authentication routes need a session; without
// one, a browser goes to log in and the API gets 401.
func TestReauthSignedOut(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	anon := ta.browser("anon")
	if res := anon.get("/reauth?next=/account"); res.code != http.StatusSeeOther || res.header.Get("Location") != "/login?next=%2Freauth%3Fnext%3D%2Faccount" {
		t.Errorf("GET /reauth signed out: %d to %q, want 303 to log in and back", res.code, res.header.Get("Location"))
	}
	if res := anon.post("/reauth", url.Values{"password": {"x"}}); res.code != http.StatusSeeOther || res.header.Get("Location") != "/login" {
		t.Errorf("POST /reauth signed out: %d to %q, want 303 to /login", res.code, res.header.Get("Location"))
	}
	cli := ta.apiClient("cli/1.0")
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/reauth", `{"password": "x"}`},
		{"DELETE", "/api/sessions/0123456789abcdef0123456789abcdef", ""},
	} {
		if res := cli.request(tc.method, tc.path, tc.body); res.code != http.StatusUnauthorized || strings.TrimSpace(res.body) != `{"error":"unauthorized"}` {
			t.Errorf("%s %s signed out: %d %s, want 401 JSON", tc.method, tc.path, res.code, res.body)
		}
	}
}

// TestPasswordChangeReauthenticates: the password change asks for the
// current password, so it counts as a re-authentication: after it, a
// sensitive action works on a session whose login was long ago.
func TestPasswordChangeReauthenticates(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.Reauth = time.Minute
	})
	a := ta.browser("browser-A")
	a.signup("alice", "old password")
	clock.Advance(time.Hour)
	if res := a.post("/logout-everywhere", nil); res.header.Get("Location") != reauthFor("/logout-everywhere") {
		t.Fatalf("POST /logout-everywhere an hour after signing in: %d to %q, want 303 to %q", res.code, res.header.Get("Location"), reauthFor("/logout-everywhere"))
	}
	a.mustPost(http.StatusSeeOther, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
	c := ta.browser("browser-C")
	c.login("alice", "new password")
	cID := sessionID(t, a.sessions(), "browser-C")
	if res := a.post("/sessions/revoke", url.Values{"id": {cID}}); res.code != http.StatusSeeOther || res.header.Get("Location") != "/" {
		t.Errorf("POST /sessions/revoke after the password change: %d to %q, want 303 to /", res.code, res.header.Get("Location"))
	}
	if code := c.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the revoked session: /api/me %d, want 401", code)
	}
}

// TestAPIStepUp: DELETE /api/sessions/{id} on a bearer token whose
// authentication is older than appConfig.Reauth gets RFC 9470's challenge
// and does nothing; POST /api/reauth with the password gives a new token
// and ends the old one; the new one revokes.
func TestAPIStepUp(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.Reauth = 90 * time.Second
	})
	ta.browser("browser-A").signup("alice", "correct horse")
	bob := ta.apiClient("cli/bob")
	ta.browser("browser-B").signup("bob", "bob's password")
	bob.login("bob", "bob's password")
	other := ta.apiClient("cli/other")
	other.login("alice", "correct horse")
	cli := ta.apiClient("cli/1.0")
	cli.login("alice", "correct horse")
	var list []sessionJSON
	if err := json.Unmarshal([]byte(cli.request("GET", "/api/sessions", "").body), &list); err != nil || len(list) != 3 {
		t.Fatalf("GET /api/sessions: %v, %+v; want alice's three sessions", err, list)
	}
	otherID := sessionID(t, list, "cli/other")
	var bobList []sessionJSON
	json.Unmarshal([]byte(bob.request("GET", "/api/sessions", "").body), &bobList)

	clock.Advance(91 * time.Second)
	res := cli.request("DELETE", "/api/sessions/"+otherID, "")
	if res.code != http.StatusUnauthorized || !strings.HasPrefix(res.body, `{"error":`) {
		t.Errorf("DELETE /api/sessions/{id} 91 s after logging in: %d %s, want 401 JSON", res.code, res.body)
	}
	challenge := res.header.Get("WWW-Authenticate")
	params := authParams(challenge)
	if !strings.HasPrefix(challenge, "Bearer ") || params["error"] != "insufficient_user_authentication" || params["max_age"] != "90" {
		t.Errorf(`WWW-Authenticate %q: want Bearer with error="insufficient_user_authentication" and max_age=90 (RFC 9470)`, challenge)
	}
	if code := other.meStatus(); code != http.StatusOK {
		t.Fatalf("the session that a refused DELETE named: /api/me %d, want 200", code)
	}

	if res := cli.request("POST", "/api/reauth", `{"password": "wrong horse"}`); res.code != http.StatusUnauthorized || !isAPIError(res.body) {
		t.Errorf("POST /api/reauth with a wrong password: %d %s, want 401 and no token", res.code, res.body)
	}
	if code := cli.meStatus(); code != http.StatusOK {
		t.Errorf("the token after a refused re-authentication: /api/me %d, want 200", code)
	}
	old := cli.token
	res = cli.request("POST", "/api/reauth", `{"password": "correct horse"}`)
	var tok tokenJSON
	if res.code != http.StatusOK || json.Unmarshal([]byte(res.body), &tok) != nil || tok.Token == "" || tok.Token == old {
		t.Fatalf("POST /api/reauth with the password: %d %s, want 200 and a new token", res.code, res.body)
	}
	if time.Until(tok.ExpiresAt) < 23*time.Hour || !strings.Contains(res.body, `"expiresAt":"`) {
		t.Errorf("POST /api/reauth: expiresAt %v in %s, want a day from now", tok.ExpiresAt, res.body)
	}
	if res.header.Get("Set-Cookie") != "" {
		t.Errorf("POST /api/reauth set a cookie: %s", res.header.Get("Set-Cookie"))
	}
	stale := ta.apiClient("cli/1.0")
	stale.token = old
	if code := stale.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the token from before POST /api/reauth: /api/me %d, want 401", code)
	}
	cli.token = tok.Token

	for _, tc := range []struct {
		name, id string
		want     int
	}{
		{"another user's session", bobList[0].ID, http.StatusNotFound},
		{"an unknown ID", "0123456789abcdef0123456789abcdef", http.StatusNotFound},
		{"own other session", otherID, http.StatusNoContent},
		{"the same again", otherID, http.StatusNotFound},
	} {
		res := cli.request("DELETE", "/api/sessions/"+tc.id, "")
		if res.code != tc.want {
			t.Errorf("DELETE /api/sessions/{id} of %s: %d %s, want %d", tc.name, res.code, res.body, tc.want)
		}
		if tc.want == http.StatusNoContent && res.body != "" {
			t.Errorf("DELETE /api/sessions/{id}: 204 with a body %q", res.body)
		}
	}
	if code := other.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the revoked session: /api/me %d, want 401", code)
	}
	if code := bob.meStatus(); code != http.StatusOK {
		t.Errorf("bob after alice named his session: /api/me %d, want 200", code)
	}
}

// TestAPIReauthRefusals: POST /api/reauth renews a bearer token only.
func TestAPIReauthRefusals(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	browser := ta.browser("browser-A")
	browser.signup("alice", "correct horse")
	cli := ta.apiClient("cli/1.0")
	cli.login("alice", "correct horse")
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"not JSON", "password=correct+horse", http.StatusBadRequest},
		{"an unknown field", `{"password": "correct horse", "username": "bob"}`, http.StatusBadRequest},
		{"no password", `{}`, http.StatusBadRequest},
	} {
		if res := cli.request("POST", "/api/reauth", tc.body); res.code != tc.want || !isAPIError(res.body) {
			t.Errorf("POST /api/reauth with %s: %d %s, want %d", tc.name, res.code, res.body, tc.want)
		}
	}
	r, _ := http.NewRequest("POST", ta.srv.URL+"/api/reauth", strings.NewReader(`{"password": "correct horse"}`))
	r.Header.Set("Content-Type", "application/json")
	if res := browser.do(r); res.code != http.StatusBadRequest || !isAPIError(res.body) {
		t.Errorf("POST /api/reauth with a session cookie: %d %s, want 400", res.code, res.body)
	}
	if code := cli.meStatus(); code != http.StatusOK {
		t.Errorf("the token after refused re-authentications: /api/me %d, want 200", code)
	}
}

// isAPIError reports whether body is the API's error, {"error": ...},
// and nothing else: no token.
func isAPIError(body string) bool {
	var answer map[string]string
	return json.Unmarshal([]byte(body), &answer) == nil && len(answer) == 1 && answer["error"] != ""
}

// sessionID is the ID of the session with that User-Agent in list. (A
// fake clock that stands still gives sessions one creation time, and then
// their order is the IDs' random part.)
func sessionID(t *testing.T, list []sessionJSON, userAgent string) string {
	t.Helper()
	for _, s := range list {
		if s.UserAgent == userAgent {
			return s.ID
		}
	}
	t.Fatalf("no session of %s in %+v", userAgent, list)
	return ""
}

// byUserAgent sorts sessions for cmp.Diff, where a fake clock leaves their
// order to chance.
var byUserAgent = cmpopts.SortSlices(func(a, b sessionJSON) bool { return a.UserAgent < b.UserAgent })

// authParams reads the auth-params of a WWW-Authenticate challenge
// (RFC 9110 11.6.1): name=token or name="quoted string".
func authParams(challenge string) map[string]string {
	params := map[string]string{}
	for _, m := range regexp.MustCompile(`([A-Za-z_]+)=(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))`).FindAllStringSubmatch(challenge, -1) {
		params[m[1]] = m[2] + m[3]
	}
	return params
}

// TestMaxSessions: with appConfig.MaxSessions, a login beyond it ends the
// user's oldest session; a re-authentication takes no slot of its own.
func TestMaxSessions(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(cfg *appConfig) { cfg.MaxSessions = 2 })
	a, b, c := ta.browser("browser-A"), ta.browser("browser-B"), ta.browser("browser-C")
	a.signup("alice", "correct horse")
	b.login("alice", "correct horse")
	if a.meStatus() != http.StatusOK || b.meStatus() != http.StatusOK {
		t.Fatalf("two sessions of two allowed: A %d, B %d; want both signed in", a.meStatus(), b.meStatus())
	}
	c.login("alice", "correct horse")
	if code := a.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the oldest session after a third login: /api/me %d, want 401", code)
	}
	if b.meStatus() != http.StatusOK || c.meStatus() != http.StatusOK {
		t.Errorf("the newer sessions: B %d, C %d; want both signed in", b.meStatus(), c.meStatus())
	}
	c.mustPost(http.StatusSeeOther, "/reauth", url.Values{"password": {"correct horse"}})
	if code := b.meStatus(); code != http.StatusOK {
		t.Errorf("B after C re-authenticated: /api/me %d, want 200", code)
	}
	if n := len(c.sessions()); n != 2 {
		t.Errorf("%d sessions listed, want 2", n)
	}
	// Another user has slots of their own.
	bob := ta.browser("browser-bob")
	bob.signup("bob", "bob's password")
	if b.meStatus() != http.StatusOK || c.meStatus() != http.StatusOK {
		t.Errorf("alice's sessions after bob signed in: B %d, C %d; want both signed in", b.meStatus(), c.meStatus())
	}
}
