package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"html"
	"image/png"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// pendingCookieName is the cookie of a login waiting for its code:
// ddbsession's, the session cookie's name with "-pending".
const pendingCookieName = cookieName + "-pending"

// passwordAndCode is Session.Methods of a session whose user typed the
// password and a one-time code.
var passwordAndCode = []string{"password", "otp"}

var (
	qrImage = regexp.MustCompile(`<img id="totp-qr" class="qr" src="data:image/png;base64,([^"]+)"`)
	keyText = regexp.MustCompile(`<code id="totp-key">([A-Z2-7 ]+)</code>`)
)

// startTOTP posts the set-up of one-time codes and returns the page and
// the secret it shows.
func (b *browser) startTOTP() (response, totpSecret) {
	b.t.Helper()
	res := b.mustPost(http.StatusOK, "/totp/enrol", nil)
	m := keyText.FindStringSubmatch(res.body)
	if m == nil {
		b.t.Fatalf("the set-up page shows no key:\n%s", res.body)
	}
	return res, totpSecret(strings.ReplaceAll(m[1], " ", ""))
}

// enrolTOTP sets one-time codes up for b's user, confirming with the code
// of when, and returns the secret.
func (b *browser) enrolTOTP(when time.Time) totpSecret {
	b.t.Helper()
	_, secret := b.startTOTP()
	res := b.mustPost(http.StatusSeeOther, "/totp/confirm", url.Values{"code": {codeAt(b.t, secret, when)}})
	if loc := res.header.Get("Location"); loc != "/account" {
		b.t.Fatalf("POST /totp/confirm goes to %q, want /account", loc)
	}
	return secret
}

// loginTwoSteps logs in with the password, then the code.
func (b *browser) loginTwoSteps(username, password, code string) response {
	b.t.Helper()
	res := b.mustPost(http.StatusOK, "/login", url.Values{"username": {username}, "password": {password}})
	formHTML(b.t, res.body, "code-form")
	return b.post("/login/code", url.Values{"username": {username}, "code": {code}})
}

func TestTOTPSetup(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	if page := a.get("/account"); !strings.Contains(page.body, `<button id="totp-enrol">`) {
		t.Fatalf("the account page offers no set-up of one-time codes:\n%s", page.body)
	}

	res, secret := a.startTOTP()
	m := qrImage.FindStringSubmatch(res.body)
	if m == nil {
		t.Fatalf("the set-up page has no QR code image:\n%s", res.body)
	}
	pngData, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1])) // html/template writes + as &#43;
	if err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(bytes.NewReader(pngData)); err != nil || img.Bounds().Dx() != 240 || img.Bounds().Dy() != 240 {
		t.Errorf("the QR code: %v; want a 240×240 PNG", err)
	}
	if csp := res.header.Get("Content-Security-Policy"); csp != contentSecurityPolicy+"; img-src data:" {
		t.Errorf("the set-up page's Content-Security-Policy %q: want every page's, with data: images", csp)
	}
	if csp := a.get("/account").header.Get("Content-Security-Policy"); strings.Contains(csp, "img-src") {
		t.Errorf("the account page's Content-Security-Policy %q allows images", csp)
	}
	if len(secret) != 32 {
		t.Errorf("the key %q: want 32 base32 characters, 160 bits", secret)
	}
	if item := ta.userItemOf("alice"); item.TOTPPending != secret || item.TOTPSecret != "" {
		t.Errorf("after the set-up's start: pending %q, secret %q; want the key pending, and no secret", string(item.TOTPPending), string(item.TOTPSecret))
	}

	for _, tc := range []struct{ name, code, message string }{
		{"a wrong code", wrongCodeAt(t, secret, clock.Now()), "The code is wrong."},
		{"no code", "", "the code is the six digits that the authenticator app shows"},
		{"five digits", "12345", "the code is the six digits that the authenticator app shows"},
	} {
		res := a.post("/totp/confirm", url.Values{"code": {tc.code}})
		if res.code != http.StatusBadRequest || !strings.HasPrefix(pageMessage(t, res.body), tc.message) || keyText.FindString(res.body) == "" {
			t.Errorf("POST /totp/confirm with %s: %d, message %q; want 400, %q and the set-up again", tc.name, res.code, pageMessage(t, res.body), tc.message)
		}
	}
	if item := ta.userItemOf("alice"); item.TOTPSecret != "" {
		t.Fatalf("a refused confirmation turned one-time codes on")
	}

	code := codeAt(t, secret, clock.Now())
	res = a.post("/totp/confirm", url.Values{"code": {code[:3] + " " + code[3:]}})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != "/account" {
		t.Fatalf("POST /totp/confirm with the app's code: %d to %q, want 303 to /account", res.code, res.header.Get("Location"))
	}
	item := ta.userItemOf("alice")
	if item.TOTPSecret != secret || item.TOTPPending != "" || item.TOTPLastStep != clock.Now().Unix()/30 {
		t.Errorf("after the confirmation: secret %q, pending %q, last step %d; want the key, none, and %d", string(item.TOTPSecret), string(item.TOTPPending), item.TOTPLastStep, clock.Now().Unix()/30)
	}
	page := a.get("/account")
	if !strings.Contains(page.body, `<button id="totp-remove" class="secondary">`) || strings.Contains(page.body, `id="totp-enrol"`) {
		t.Errorf("the account page does not say one-time codes are on:\n%s", page.body)
	}
	if res := a.post("/totp/enrol", nil); res.code != http.StatusConflict {
		t.Errorf("POST /totp/enrol with one-time codes on: %d, want 409", res.code)
	}
	if res := a.post("/totp/confirm", url.Values{"code": {code}}); res.code != http.StatusConflict {
		t.Errorf("POST /totp/confirm with nothing pending: %d, want 409", res.code)
	}
}

// TestTwoStepLogin: a user with one-time codes logs in with the password,
// which BeginLogin checks and which gets the code form and a pending login
// but no session, then the code, which signs in with both methods. A code
// works once.
func TestTwoStepLogin(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	confirmCode := codeAt(t, secret, clock.Now())

	b := ta.browser("browser-B")
	res := b.mustPost(http.StatusOK, "/login?next=%2Faccount", url.Values{"username": {"Alice"}, "password": {"correct horse"}})
	form := formHTML(t, res.body, "code-form")
	for _, want := range []string{`action="/login/code?next=%2faccount"`, `<input type="hidden" name="username" value="alice">`, `name="code"`} {
		if !strings.Contains(form, want) {
			t.Errorf("the code form lacks %s:\n%s", want, form)
		}
	}
	if pending := findCookie(parseSetCookies(res), pendingCookieName); pending == nil || pending.Value == "" {
		t.Errorf("the password step set no %s cookie; Set-Cookie %q", pendingCookieName, res.header.Values("Set-Cookie"))
	}
	if b.token() != "" || b.meStatus() != http.StatusUnauthorized {
		t.Fatalf("the password alone signed in")
	}
	if res := b.post("/login", url.Values{"username": {"alice"}, "password": {"wrong horse"}}); res.code != http.StatusUnauthorized || strings.Contains(res.body, `id="code-form"`) {
		t.Errorf("a wrong password: %d, want 401 and no code form", res.code)
	}
	b.mustPost(http.StatusOK, "/login?next=%2Faccount", url.Values{"username": {"alice"}, "password": {"correct horse"}})

	clock.Advance(30 * time.Second)
	for _, tc := range []struct{ name, code, message string }{
		{"the code that confirmed the set-up", confirmCode, "That code was used already: wait for the next one."},
		{"a wrong code", wrongCodeAt(t, secret, clock.Now()), "The code is wrong."},
	} {
		res := b.post("/login/code?next=%2Faccount", url.Values{"username": {"alice"}, "code": {tc.code}})
		if res.code != http.StatusUnauthorized || pageMessage(t, res.body) != tc.message {
			t.Errorf("POST /login/code with %s: %d, message %q; want 401 and %q", tc.name, res.code, pageMessage(t, res.body), tc.message)
		}
		if b.token() != "" {
			t.Errorf("POST /login/code with %s signed in", tc.name)
		}
	}
	code := codeAt(t, secret, clock.Now())
	res = b.post("/login/code?next=%2Faccount", url.Values{"username": {"alice"}, "code": {code}})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != "/account" {
		t.Fatalf("POST /login/code with the code: %d to %q, want 303 to /account; body:\n%s", res.code, res.header.Get("Location"), res.body)
	}
	if b.meStatus() != http.StatusOK {
		t.Fatalf("signed in with password and code: /api/me %d, want 200", b.meStatus())
	}
	if c := findCookie(parseSetCookies(res), pendingCookieName); c == nil || c.MaxAge >= 0 {
		t.Errorf("the pending cookie was not cleared: %v", c)
	}
	want := []sessionJSON{{UserAgent: "browser-A", Methods: passwordOnly}, {UserAgent: "browser-B", Current: true, Methods: passwordAndCode}}
	if diff := cmp.Diff(want, b.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress"), byUserAgent); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
	if page := b.get("/account"); !strings.Contains(page.body, `<td class="how" data-label="With">password and one-time code</td>`) ||
		!strings.Contains(page.body, `<td class="how" data-label="With">password</td>`) {
		t.Errorf("the sessions list does not say how each session signed in:\n%s", page.body)
	}

	// The same code again, in another browser, within its window.
	c := ta.browser("browser-C")
	if res := c.loginTwoSteps("alice", "correct horse", code); res.code != http.StatusUnauthorized || pageMessage(t, res.body) != "That code was used already: wait for the next one." {
		t.Errorf("a code used already, in another browser: %d, message %q; want 401", res.code, pageMessage(t, res.body))
	}
	clock.Advance(30 * time.Second)
	if res := c.post("/login/code", url.Values{"username": {"alice"}, "code": {codeAt(t, secret, clock.Now())}}); res.code != http.StatusSeeOther || c.meStatus() != http.StatusOK {
		t.Errorf("the next code, on the same pending login: %d, /api/me %d; want 303 and signed in", res.code, c.meStatus())
	}
}

// wrongCodeAt is a six-digit code that is none of secret's around when.
func wrongCodeAt(t *testing.T, secret totpSecret, when time.Time) string {
	t.Helper()
	for n := range 10 {
		code := strings.Repeat(string(rune('0'+n)), 6)
		if _, ok := codeStep(secret, code, when); !ok {
			return code
		}
	}
	t.Fatal("ten codes of one digit are all right: not a TOTP")
	return ""
}

// parseSetCookies reads the cookies that res sets.
func parseSetCookies(res response) []*http.Cookie {
	return (&http.Response{Header: res.header}).Cookies()
}

// TestTwoStepLoginTries: a pending login takes five codes, then the user
// starts again; failed codes count against the user's own limit, and a
// code form that names another user gets no code checked.
func TestTwoStepLoginTries(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 6}
	})
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	ta.browser("browser-bob").signup("bob", "bob's password")
	clock.Advance(30 * time.Second)
	wrong := wrongCodeAt(t, secret, clock.Now())

	b := ta.browser("browser-B")
	b.mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	// Alice's pending login, and the right code, but the form says bob.
	if res := b.post("/login/code", url.Values{"username": {"bob"}, "code": {codeAt(t, secret, clock.Now())}}); res.code != http.StatusUnauthorized || b.token() != "" {
		t.Errorf("alice's pending login completed under bob's name: %d, want 401", res.code)
	}
	for i := 2; i <= 4; i++ {
		if res := b.post("/login/code", url.Values{"username": {"alice"}, "code": {wrong}}); res.code != http.StatusUnauthorized || pageMessage(t, res.body) != "The code is wrong." {
			t.Fatalf("wrong code %d: %d, message %q", i, res.code, pageMessage(t, res.body))
		}
	}
	res := b.post("/login/code", url.Values{"username": {"alice"}, "code": {wrong}})
	if res.code != http.StatusUnauthorized || pageMessage(t, res.body) != "Log in again: the code was wrong too often, or it took too long." {
		t.Errorf("the fifth wrong code: %d, message %q; want 401 and to log in again", res.code, pageMessage(t, res.body))
	}
	if !strings.Contains(formHTML(t, res.body, "login-form"), `value="alice"`) {
		t.Errorf("the log-in form after the fifth code lacks the username")
	}
	if res := b.post("/login/code", url.Values{"username": {"alice"}, "code": {codeAt(t, secret, clock.Now())}}); res.code != http.StatusUnauthorized || b.token() != "" {
		t.Errorf("the right code after five wrong ones: %d, want 401", res.code)
	}

	// Alice's bucket of codes: six failures at once, of which four were
	// hers (the fifth too) and two are left; then 429.
	c := ta.browser("browser-C")
	c.mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	for range 2 {
		c.post("/login/code", url.Values{"username": {"alice"}, "code": {wrong}})
	}
	if res := c.post("/login/code", url.Values{"username": {"alice"}, "code": {codeAt(t, secret, clock.Now())}}); res.code != http.StatusTooManyRequests {
		t.Errorf("a code after six failures: %d, want 429", res.code)
	}
	// The password is another bucket: logging in is not locked.
	ta.browser("browser-D").mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
}

// TestOneCodeBudgetPerUser: a user's one-time codes have one budget of
// guesses, UserLimit's, whichever way they come: the browser's second step
// and POST /api/login, interleaved, get four wrong codes with a burst of
// four, and the fifth guess, from either, is refused, a right code too;
// the password's own bucket is untouched, so logging in still works.
func TestOneCodeBudgetPerUser(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 4}
		cfg.AddrLimit = rateLimit{Every: time.Minute, Burst: 100}
	})
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	clock.Advance(30 * time.Second)
	wrong := wrongCodeAt(t, secret, clock.Now())
	api := func(code string) response {
		body, _ := json.Marshal(loginRequest{Username: "alice", Password: "correct horse", Code: code})
		return ta.apiClient("cli/1.0").request("POST", "/api/login", string(body))
	}
	b := ta.browser("browser-B")
	b.mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	browser := func(code string) response {
		return b.post("/login/code", url.Values{"username": {"alice"}, "code": {code}})
	}

	for i, guess := range []func(string) response{api, browser, api, browser} {
		if res := guess(wrong); res.code != http.StatusUnauthorized {
			t.Fatalf("wrong code %d of 4, interleaved: %d %s, want 401", i+1, res.code, res.body)
		}
	}
	right := codeAt(t, secret, clock.Now())
	if res := api(right); res.code != http.StatusTooManyRequests || res.header.Get("Retry-After") == "" {
		t.Errorf("a fifth code, from the API, after four wrong ones from the browser and the API: %d %s, want 429 with Retry-After", res.code, res.body)
	}
	if res := browser(right); res.code != http.StatusTooManyRequests || b.token() != "" {
		t.Errorf("a fifth code, from the browser: %d, token %q; want 429 and no session", res.code, b.token())
	}
	// The codes' bucket alone is spent: the right password still starts a
	// login, which asks for a code.
	ta.browser("browser-C").mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})

	// A minute on, one guess is back, for either way.
	clock.Advance(time.Minute)
	if res := api(codeAt(t, secret, clock.Now())); res.code != http.StatusOK {
		t.Errorf("the right code a minute later, from the API: %d %s, want 200", res.code, res.body)
	}
}

// TestTOTPRemoval: turning one-time codes off makes logins one step again,
// and voids a login waiting for its code.
func TestTOTPRemoval(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	clock.Advance(30 * time.Second)
	b := ta.browser("browser-B")
	b.mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})

	res := a.mustPost(http.StatusSeeOther, "/totp/remove", nil)
	if loc := res.header.Get("Location"); loc != "/account" {
		t.Errorf("POST /totp/remove goes to %q, want /account", loc)
	}
	if item := ta.userItemOf("alice"); item.TOTPSecret != "" || item.TOTPLastStep != 0 || item.TOTPPending != "" {
		t.Errorf("after the removal: secret %q, last step %d, pending %q; want none", string(item.TOTPSecret), item.TOTPLastStep, string(item.TOTPPending))
	}
	if res := b.post("/login/code", url.Values{"username": {"alice"}, "code": {codeAt(t, secret, clock.Now())}}); res.code != http.StatusConflict || b.token() != "" {
		t.Errorf("a code for a login begun before the removal: %d, want 409", res.code)
	}
	ta.browser("browser-C").login("alice", "correct horse")
}

// TestStepUpTOTP: setting up and removing one-time codes need a recent
// authentication; a user with codes re-authenticates with password and
// code.
func TestStepUpTOTP(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.Reauth = time.Minute
	})
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	bob := ta.browser("browser-bob")
	bob.signup("bob", "bob's password")
	_, bobPending := bob.startTOTP()

	clock.Advance(time.Minute + time.Second)
	for _, tc := range []struct {
		b    *browser
		path string
		form url.Values
	}{
		{bob, "/totp/enrol", nil},
		{bob, "/totp/confirm", url.Values{"code": {"123456"}}},
		{a, "/totp/remove", nil},
	} {
		res := tc.b.post(tc.path, tc.form)
		if res.code != http.StatusSeeOther || res.header.Get("Location") != reauthFor(tc.path) {
			t.Errorf("POST %s a minute after signing in: %d to %q, want 303 to %q", tc.path, res.code, res.header.Get("Location"), reauthFor(tc.path))
		}
	}
	if item := ta.userItemOf("alice"); item.TOTPSecret != secret {
		t.Errorf("a refused removal removed the one-time codes")
	}
	if item := ta.userItemOf("bob"); item.TOTPSecret != "" || item.TOTPPending != bobPending {
		t.Errorf("refused set-up steps changed bob's: secret %q, pending %q (was %q)", string(item.TOTPSecret), string(item.TOTPPending), string(bobPending))
	}

	page := a.get(reauthFor("/totp/remove"))
	if !strings.Contains(formHTML(t, page.body, "reauth-form"), `name="code"`) {
		t.Fatalf("the re-authentication form of a user with one-time codes asks for none:\n%s", page.body)
	}
	code := codeAt(t, secret, clock.Now())
	for _, tc := range []struct {
		name    string
		form    url.Values
		status  int
		message string
	}{
		{"the password alone", url.Values{"password": {"correct horse"}}, http.StatusUnauthorized, "This account needs the code from its authenticator app too."},
		{"a wrong code", url.Values{"password": {"correct horse"}, "code": {wrongCodeAt(t, secret, clock.Now())}}, http.StatusUnauthorized, "The code is wrong."},
		{"a wrong password", url.Values{"password": {"wrong horse"}, "code": {code}}, http.StatusUnauthorized, "The password is wrong."},
		{"a code that is no code", url.Values{"password": {"correct horse"}, "code": {"abcdef"}}, http.StatusBadRequest, "the code is the six digits that the authenticator app shows"},
	} {
		tc.form.Set("next", "/account")
		res := a.post("/reauth", tc.form)
		if res.code != tc.status || pageMessage(t, res.body) != tc.message {
			t.Errorf("POST /reauth with %s: %d, message %q; want %d and %q", tc.name, res.code, pageMessage(t, res.body), tc.status, tc.message)
		}
	}
	res := a.post("/reauth", url.Values{"password": {"correct horse"}, "code": {code}, "next": {"/account"}})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != "/account" {
		t.Fatalf("POST /reauth with password and code: %d to %q, want 303 to /account", res.code, res.header.Get("Location"))
	}
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Current: true, Methods: passwordAndCode}}, a.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress")); diff != "" {
		t.Errorf("sessions after re-authenticating (-want +got):\n%s", diff)
	}
	a.mustPost(http.StatusSeeOther, "/totp/remove", nil)
	if item := ta.userItemOf("alice"); item.TOTPSecret != "" {
		t.Errorf("the removal after re-authenticating left the one-time codes on")
	}
}

// TestAPILoginWithCode: POST /api/login of a user with one-time codes
// needs the code in the same request; POST /api/reauth too.
func TestAPILoginWithCode(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	ta.browser("browser-bob").signup("bob", "bob's password")
	clock.Advance(30 * time.Second)
	code := codeAt(t, secret, clock.Now())
	login := func(username, password, code string) string {
		b, _ := json.Marshal(loginRequest{Username: username, Password: password, Code: code})
		return string(b)
	}

	cli := ta.apiClient("cli/1.0")
	for _, tc := range []struct {
		name, body string
		status     int
		message    string
	}{
		{"no code", login("alice", "correct horse", ""), http.StatusUnauthorized, "This account needs the code from its authenticator app too."},
		{"a wrong code", login("alice", "correct horse", wrongCodeAt(t, secret, clock.Now())), http.StatusUnauthorized, "The code is wrong."},
		{"a wrong password and the code", login("alice", "wrong horse", code), http.StatusUnauthorized, "Wrong username or password."},
		{"a code that is no code", login("alice", "correct horse", "12-456"), http.StatusBadRequest, "the code is the six digits that the authenticator app shows"},
		{"a code for a user without", login("bob", "bob's password", code), http.StatusBadRequest, "This account has no one-time codes: leave the code out."},
	} {
		res := cli.request("POST", "/api/login", tc.body)
		var answer map[string]string
		json.Unmarshal([]byte(res.body), &answer)
		if res.code != tc.status || !isAPIError(res.body) || answer["error"] != tc.message {
			t.Errorf("POST /api/login with %s: %d %s, want %d and %q", tc.name, res.code, res.body, tc.status, tc.message)
		}
	}
	res := cli.request("POST", "/api/login", login("alice", "correct horse", code))
	var tok tokenJSON
	if res.code != http.StatusOK || json.Unmarshal([]byte(res.body), &tok) != nil || tok.Token == "" {
		t.Fatalf("POST /api/login with password and code: %d %s, want 200 and a token", res.code, res.body)
	}
	cli.token = tok.Token
	var list []sessionJSON
	json.Unmarshal([]byte(cli.request("GET", "/api/sessions", "").body), &list)
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Methods: passwordOnly}, {UserAgent: "cli/1.0", Current: true, Methods: passwordAndCode}},
		list, cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress"), byUserAgent); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
	if res := ta.apiClient("cli/2.0").request("POST", "/api/login", login("alice", "correct horse", code)); res.code != http.StatusUnauthorized || !strings.Contains(res.body, "used already") {
		t.Errorf("POST /api/login with a code used already: %d %s, want 401", res.code, res.body)
	}

	if res := cli.request("POST", "/api/reauth", `{"password": "correct horse"}`); res.code != http.StatusUnauthorized || !isAPIError(res.body) {
		t.Errorf("POST /api/reauth without the code: %d %s, want 401", res.code, res.body)
	}
	clock.Advance(30 * time.Second)
	body, _ := json.Marshal(reauthRequest{Password: "correct horse", Code: codeAt(t, secret, clock.Now())})
	res = cli.request("POST", "/api/reauth", string(body))
	if res.code != http.StatusOK || json.Unmarshal([]byte(res.body), &tok) != nil || tok.Token == cli.token {
		t.Fatalf("POST /api/reauth with password and code: %d %s, want 200 and a new token", res.code, res.body)
	}
}

// TestPasswordChangeWithCode: a user with one-time codes changes the
// password with a code too, and the new session has both methods.
func TestPasswordChangeWithCode(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	a := ta.browser("browser-A")
	a.signup("alice", "old password")
	secret := a.enrolTOTP(clock.Now())
	if !strings.Contains(formHTML(t, a.get("/account").body, "password-form"), `name="code"`) {
		t.Errorf("the password form of a user with one-time codes asks for no code")
	}
	clock.Advance(30 * time.Second)
	for _, tc := range []struct {
		name    string
		code    string
		status  int
		message string
	}{
		{"no code", "", http.StatusUnauthorized, "This account needs the code from its authenticator app too."},
		{"a wrong code", wrongCodeAt(t, secret, clock.Now()), http.StatusUnauthorized, "The code is wrong."},
	} {
		res := a.post("/password", url.Values{"current": {"old password"}, "new": {"new password"}, "code": {tc.code}})
		if res.code != tc.status || pageMessage(t, res.body) != tc.message || !strings.Contains(res.body, "<h2>Wrong code</h2>") {
			t.Errorf("POST /password with %s: %d, message %q; want %d and %q", tc.name, res.code, pageMessage(t, res.body), tc.status, tc.message)
		}
	}
	// The old password still logs in: the refused changes changed nothing.
	ta.browser("browser-B").mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"old password"}})
	a.mustPost(http.StatusSeeOther, "/password", url.Values{"current": {"old password"}, "new": {"new password"}, "code": {codeAt(t, secret, clock.Now())}})
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Current: true, Methods: passwordAndCode}}, a.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress")); diff != "" {
		t.Errorf("sessions after the change (-want +got):\n%s", diff)
	}
}

// TestCodeOnceAcrossInstances: two instances read a user with one code
// unused, and both are sent that code; the conditional write of the code's
// step lets one of them sign in, not both.
func TestCodeOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	first := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	second := first.anotherInstance(func(cfg *appConfig) { cfg.Now = clock.Now })
	a := first.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	clock.Advance(30 * time.Second)
	body := credsJSONWithCode("alice", "correct horse", codeAt(t, secret, clock.Now()))

	// The first instance's login is held after it read the user, with the
	// code unused: in a BatchGetItem with the global revocation item, or a
	// GetItem of the user alone while the instance's copy of that is fresh.
	pause := first.faults.pauseAfter("*", readsUser(userKey("alice")))
	defer pause.release()
	var wg sync.WaitGroup
	var held response
	var heldErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		held, heldErr = rawAPIRequest(first, "POST", "/api/login", body)
	}()
	pause.waitReached(t)
	if res := second.apiClient("cli/second").request("POST", "/api/login", body); res.code != http.StatusOK {
		t.Errorf("the second instance's login: %d %s, want 200", res.code, res.body)
	}
	pause.release()
	wg.Wait()
	if heldErr != nil {
		t.Fatal(heldErr)
	}
	if held.code != http.StatusUnauthorized || !strings.Contains(held.body, "used already") {
		t.Errorf("the first instance's login with the same code: %d %s, want 401: the code was used already", held.code, held.body)
	}
}

func credsJSONWithCode(username, password, code string) string {
	b, _ := json.Marshal(loginRequest{Username: username, Password: password, Code: code})
	return string(b)
}

// rawAPIRequest is apiClient.request for other goroutines than the test's.
func rawAPIRequest(ta *testApp, method, path, body string) (response, error) {
	r, err := http.NewRequest(method, ta.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	b := ta.browser("cli/raw")
	b.client.Jar = nil
	return b.send(r)
}

// TestTOTPSecretReachesNoResponse walks the pages and APIs of a user with
// one-time codes, once they are on, looking for the secret.
func TestTOTPSecretReachesNoResponse(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) { cfg.Now = clock.Now })
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	secret := a.enrolTOTP(clock.Now())
	b := ta.browser("browser-B")
	codePage := b.mustPost(http.StatusOK, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	cli := ta.apiClient("cli/1.0")
	for name, res := range map[string]response{
		"GET /account":             a.get("/account"),
		"GET /api/me":              a.get("/api/me"),
		"GET /api/sessions":        a.get("/api/sessions"),
		"GET /reauth":              a.get("/reauth"),
		"POST /totp/enrol":         a.post("/totp/enrol", nil),
		"POST /totp/confirm":       a.post("/totp/confirm", url.Values{"code": {"000000"}}),
		"the code form":            codePage,
		"POST /login/code wrong":   b.post("/login/code", url.Values{"username": {"alice"}, "code": {"000000"}}),
		"POST /api/login no code":  cli.request("POST", "/api/login", credsJSON("alice", "correct horse")),
		"POST /api/login wrong":    cli.request("POST", "/api/login", credsJSONWithCode("alice", "correct horse", "000000")),
		"POST /password wrong":     a.post("/password", url.Values{"current": {"correct horse"}, "new": {"a new password"}, "code": {"000000"}}),
		"POST /reauth wrong code":  a.post("/reauth", url.Values{"password": {"correct horse"}, "code": {"000000"}}),
		"POST /reauth no password": a.post("/reauth", url.Values{"code": {"000000"}}),
	} {
		var headers strings.Builder
		res.header.Write(&headers)
		for _, s := range []string{string(secret), groupsOfFour(string(secret))} {
			if strings.Contains(res.body, s) || strings.Contains(headers.String(), s) {
				t.Errorf("%s: the response holds the one-time-code secret", name)
			}
		}
	}
	if strings.Contains(ta.logs.String(), string(secret)) {
		t.Errorf("the one-time-code secret reached the logs")
	}
}
