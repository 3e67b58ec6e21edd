package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestBrowserStepUp walks issue 17 in headless Chromium: set up one-time
// codes from the account page (the QR code shows, under the page's
// Content-Security-Policy), log out, log in with the password and then a
// code, let -reauth (2 s here) go by, click "Log out everywhere" and be
// sent to re-authenticate, do so with password and code, come back to
// "Log out everywhere" asked again, and press it once. The app's clock is
// a fake one, which the test moves on instead of waiting; it gives the
// codes their time steps too. It needs Debian's chromium package and fails, never
// skips, without it.
func TestBrowserStepUp(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.Reauth = 2 * time.Second
	})
	tab := startChromium(t, ta.srv.URL)

	do(t, tab, "sign up",
		chromedp.WaitVisible("#signup-form"),
		chromedp.SendKeys("#signup-form input[name=username]", "alice"),
		chromedp.SendKeys("#signup-form input[name=password]", "correct horse battery"),
		chromedp.Click("#signup-form button"),
		chromedp.WaitVisible("#whoami"),
	)
	do(t, tab, "start the set-up of one-time codes", chromedp.Click("#totp-enrol"), chromedp.WaitVisible("#totp-confirm-form"))
	// A QR code that the CSP blocked would be an image of no width.
	qrWidth := value(t, tab, "look at the QR code", chromedp.Evaluate[int](`(() => { const img = document.querySelector("#totp-qr"); return img.complete ? img.naturalWidth : -1 })()`))
	if qrWidth != qrSize {
		t.Errorf("the QR code's image is %d px wide, want %d: it did not load", qrWidth, qrSize)
	}
	checkWidths(t, tab, "totp-setup")
	secret := totpSecret(strings.ReplaceAll(value(t, tab, "read the key", chromedp.Text("#totp-key")), " ", ""))
	do(t, tab, "confirm with the app's code",
		chromedp.SendKeys("#totp-confirm-form input[name=code]", codeAt(t, secret, clock.Now())),
		chromedp.Click("#totp-confirm-form button"),
		chromedp.WaitVisible("#totp-remove"),
	)
	if status := value(t, tab, "read the status", chromedp.Text("#totp-status")); !strings.HasPrefix(status, "On:") {
		t.Errorf("after the set-up the account page says %q", status)
	}

	do(t, tab, "log out", chromedp.Click("#logout"), chromedp.WaitVisible("#login-form"))
	do(t, tab, "log in with the password",
		chromedp.SendKeys("#login-form input[name=username]", "alice"),
		chromedp.SendKeys("#login-form input[name=password]", "correct horse battery"),
		chromedp.Click("#login-form button"),
		chromedp.WaitVisible("#code-form"),
	)
	checkWidths(t, tab, "login-code")
	clock.Advance(30 * time.Second) // the set-up's code is spent: the next one
	do(t, tab, "log in with the code",
		chromedp.SendKeys("#code-form input[name=code]", codeAt(t, secret, clock.Now())),
		chromedp.Click("#code-form button"),
		chromedp.WaitVisible("#whoami"),
	)
	if how := value(t, tab, "read how the session signed in", chromedp.Text("#sessions td.how")); how != "password and one-time code" {
		t.Errorf("the sessions list says the session signed in with %q", how)
	}

	clock.Advance(3 * time.Second) // past -reauth
	do(t, tab, "log out everywhere, too long after logging in", chromedp.Click("#logout-everywhere"), chromedp.WaitVisible("#reauth-form"))
	if at := value(t, tab, "read the address", chromedp.Evaluate[string](`location.pathname + location.search`)); at != reauthFor("/logout-everywhere") {
		t.Errorf("log out everywhere sent the browser to %s, want %s", at, reauthFor("/logout-everywhere"))
	}
	checkWidths(t, tab, "reauth")
	clock.Advance(30 * time.Second) // the login's code is spent too
	do(t, tab, "re-authenticate with password and code",
		chromedp.SendKeys("#reauth-form input[name=password]", "correct horse battery"),
		chromedp.SendKeys("#reauth-form input[name=code]", codeAt(t, secret, clock.Now())),
		chromedp.Click("#reauth-form button"),
		chromedp.WaitVisible("#confirm-form"),
	)
	// Back at what was asked for: log out everywhere, one press away.
	if at := value(t, tab, "read the address", chromedp.Evaluate[string](`location.pathname`)); at != "/logout-everywhere" {
		t.Errorf("the re-authentication came back to %s, want the confirm page /logout-everywhere", at)
	}
	checkWidths(t, tab, "confirm")
	if list, err := ta.app.sessions.List(t.Context(), userKey("alice")); err != nil || len(list) != 1 {
		t.Errorf("alice's sessions on the confirm page: %v, %v; want the one of this browser", list, err)
	}
	do(t, tab, "press the confirm page's button", chromedp.Click("#confirm"), chromedp.WaitVisible("#signup-form"))
	if list, err := ta.app.sessions.List(t.Context(), userKey("alice")); err != nil || len(list) != 0 {
		t.Errorf("alice's sessions after logging out everywhere: %v, %v; want none", list, err)
	}
}
