package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBrowser walks the app in headless Chromium, over TLS so that the
// real __Host- Secure cookie is in play: sign up, stay signed in across a
// reload, check that scripts cannot read the cookie, sign in from a second
// isolated browser context, log out everywhere from the first, and see the
// second signed out. On the way it looks at every page at 1280, 390 and
// 320 px wide (checkWidths): none may scroll sideways. It needs Debian's
// chromium package and fails, never skips, without it.
func TestBrowser(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	first := startChromium(t, ta.srv.URL)
	checkWidths(t, first, "signed-out")
	do(t, first, "open a page that needs a session", chromedp.Navigate(ta.srv.URL+"/account"), chromedp.WaitVisible("#notice"))
	checkWidths(t, first, "login-required")
	do(t, first, "log in with a wrong password",
		chromedp.SendKeys("#login-form input[name=username]", "alice"),
		chromedp.SendKeys("#login-form input[name=password]", "not the password"),
		chromedp.Click("#login-form button"),
		chromedp.WaitVisible("#message"),
	)
	checkWidths(t, first, "login-failed")
	do(t, first, "open a page that is not there", chromedp.Navigate(ta.srv.URL+"/nowhere"), chromedp.WaitVisible("#message"))
	checkWidths(t, first, "not-found")
	do(t, first, "go home", chromedp.Navigate(ta.srv.URL), chromedp.WaitVisible("#signup-form"))

	// 1. Sign up.
	do(t, first, "sign up",
		chromedp.WaitVisible("#signup-form"),
		chromedp.SendKeys("#signup-form input[name=username]", "alice"),
		chromedp.SendKeys("#signup-form input[name=password]", "correct horse battery"),
		chromedp.Click("#signup-form button"),
		chromedp.WaitVisible("#whoami"),
	)
	if got := value(t, first, "read who am I", chromedp.Text("#whoami")); got != "Signed in as alice" {
		t.Fatalf("after sign-up the page says %q", got)
	}

	// 2. A reload stays signed in: the browser kept and sent the cookie.
	do(t, first, "reload", chromedp.Reload(), chromedp.WaitVisible("#whoami"))

	// 3. Scripts cannot see the session cookie (HttpOnly), though it exists.
	// The probe cookie shows that document.cookie does list cookies here.
	visible := value(t, first, "read document.cookie",
		chromedp.Evaluate[string](`document.cookie = "probe=1; Secure; SameSite=Strict"; document.cookie`))
	if !strings.Contains(visible, "probe=1") {
		t.Fatalf("document.cookie = %q, lacks the probe cookie just set: the check below would prove nothing", visible)
	}
	if strings.Contains(visible, cookieName) {
		t.Errorf("document.cookie = %q: scripts can read the session cookie", visible)
	}
	stored, err := chromedp.Call(first, network.GetCookies, network.GetCookiesParams{URLs: []string{ta.srv.URL}})
	if err != nil {
		t.Fatalf("read the browser's cookie store: %v", err)
	}
	var session *network.Cookie
	for _, c := range stored.Cookies {
		if c.Name == cookieName {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("the browser's cookie store has no %s cookie; it has %d others", cookieName, len(stored.Cookies))
	}
	if !session.HTTPOnly || !session.Secure || session.SameSite != network.CookieSameSiteLax || session.Path != "/" {
		t.Errorf("session cookie: HttpOnly %v, Secure %v, SameSite %q, Path %q; want HttpOnly, Secure, Lax, /",
			session.HTTPOnly, session.Secure, session.SameSite, session.Path)
	}

	// 4. A second, isolated browser context (its own cookie jar) logs in.
	second, cancelSecond := chromedp.NewContext(first, chromedp.WithNewBrowserContext())
	defer cancelSecond()
	do(t, second, "log in from the second context",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(ta.srv.URL),
		chromedp.WaitVisible("#login-form"), // not signed in: the contexts share no cookies
		chromedp.SendKeys("#login-form input[name=username]", "alice"),
		chromedp.SendKeys("#login-form input[name=password]", "correct horse battery"),
		chromedp.Click("#login-form button"),
		chromedp.WaitVisible("#whoami"),
	)

	// The first context now lists both sessions; keep a picture of it.
	do(t, first, "reload", chromedp.Reload(), chromedp.WaitVisible("#sessions"))
	if rows := value(t, first, "count sessions", chromedp.Evaluate[int](`document.querySelectorAll("#sessions tr").length - 1`)); rows != 2 {
		t.Errorf("the first context lists %d sessions, want 2", rows)
	}
	// It notes the second's sign-in, from a device new to the account.
	if got := value(t, first, "read the new-device notice", chromedp.Text("#new-devices li")); !strings.HasPrefix(got, "Chrome") {
		t.Errorf("the new-device notice says %q, want the second context's Chromium", got)
	}
	checkWidths(t, first, "signed-in") // docs/signed-in.png is its 1280 px picture
	do(t, first, "change the password with a wrong current one",
		chromedp.SendKeys("#password-form input[name=current]", "not the password"),
		chromedp.SendKeys("#password-form input[name=new]", "a new password"),
		chromedp.Click("#password-form button"),
		chromedp.WaitVisible("#message"),
	)
	checkWidths(t, first, "error")
	do(t, first, "go back", chromedp.Navigate(ta.srv.URL), chromedp.WaitVisible("#sessions"))

	// 5. Log out everywhere from the first context.
	do(t, first, "log out everywhere", chromedp.Click("#logout-everywhere"), chromedp.WaitVisible("#signup-form"))

	// The logout's Clear-Site-Data left the device cookie, so this
	// browser's next sign-in is from a device the account knows.
	stored, err = chromedp.Call(first, network.GetCookies, network.GetCookiesParams{URLs: []string{ta.srv.URL}})
	if err != nil {
		t.Fatalf("read the browser's cookie store: %v", err)
	}
	if !slices.ContainsFunc(stored.Cookies, func(c *network.Cookie) bool { return c.Name == cookieName+"-device" }) {
		t.Errorf("after logging out, the browser has no device cookie")
	}
	do(t, first, "log in again",
		chromedp.SendKeys("#login-form input[name=username]", "alice"),
		chromedp.SendKeys("#login-form input[name=password]", "correct horse battery"),
		chromedp.Click("#login-form button"),
		chromedp.WaitVisible("#history"),
	)
	if got := value(t, first, "read the newest event", chromedp.Text("#history tbody tr td.agent")); got != "Signed in with password" {
		t.Errorf("the sign-in after a logout is in the history as %q, want a plain sign-in", got)
	}

	// 6. The second context is signed out on its next load.
	do(t, second, "reload the second context", chromedp.Reload(), chromedp.WaitVisible("#login-form"))
	if signedIn := value(t, second, "look for who am I", chromedp.Evaluate[bool](`document.querySelector("#whoami") !== null`)); signedIn {
		t.Errorf("the second context is still signed in after logging out everywhere")
	}

	// 7. The longest name there can be, signed in from the browser and from
	// a client whose User-Agent is one long word: the page still fits.
	long := strings.Repeat("w", maxUsername)
	do(t, second, "sign up with the longest name",
		chromedp.SendKeys("#signup-form input[name=username]", long),
		chromedp.SendKeys("#signup-form input[name=password]", "correct horse battery"),
		chromedp.Click("#signup-form button"),
		chromedp.WaitVisible("#whoami"),
	)
	ta.apiClient("tool/"+strings.Repeat("x", 200)).login(long, "correct horse battery")
	do(t, second, "reload", chromedp.Reload(), chromedp.WaitVisible("#sessions"))
	checkWidths(t, second, "long-name")
}

// startChromium starts headless Chromium, for at most two minutes of the
// test, and returns its first tab, at 1280 px wide, with url loaded. The
// browser ends with the test. It fails the test, never skips it, without
// Debian's chromium package.
func startChromium(t *testing.T, url string) context.Context {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("this test drives headless Chromium, which was not found (%v).\nInstall Debian's chromium package: apt-get install chromium", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	var browserOutput syncBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(&browserOutput),
		chromedp.Headless,
		chromedp.NoSandbox, // tests may run as root, where the sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.IgnoreCertErrors, // httptest's self-signed certificate
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)

	// The first action starts the browser.
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(url)); err != nil {
		t.Fatalf("Chromium (%s) did not start or did not load the app: %v\n"+
			"Install Debian's chromium package (apt-get install chromium).\nBrowser output:\n%s", chromium, err, browserOutput.String())
	}
	return tab
}

// checkWidths looks at the page the tab shows at 1280, 390 and 320 px
// wide, the last two as a phone (a mobile viewport): at none of them may it
// scroll sideways. At 1280 and 390 px it keeps a picture of the page, in
// screenshots/<name>-<width>.png (gitignored), for a reviewer to open.
func checkWidths(t *testing.T, tab context.Context, name string) {
	t.Helper()
	for _, width := range []int64{1280, 390, 320} {
		var opts []chromedp.EmulateViewportOption
		if width < 1000 {
			opts = append(opts, chromedp.EmulateMobile)
		}
		step := fmt.Sprintf("%s at %d px", name, width)
		do(t, tab, step, chromedp.EmulateViewport(width, 800, opts...))
		if wide := value(t, tab, step, chromedp.Evaluate[[]string](fmt.Sprintf(overflowJS, width))); len(wide) > 0 {
			t.Errorf("the %s page at %d px scrolls sideways: %s", name, width, strings.Join(wide, "; "))
		}
		if width != 320 {
			saveScreenshot(t, fmt.Sprintf("%s-%d.png", name, width), value(t, tab, step, chromedp.FullScreenshot(100))) // 100: PNG
		}
	}
	do(t, tab, name+" back at 1280 px", chromedp.EmulateViewport(1280, 800))
}

// overflowJS, with the viewport's width, is empty if the page fits in it,
// and otherwise says by how much, and which elements stick out. A phone's
// browser widens its layout to fit a page that is too wide, then shows it
// zoomed out, so there innerWidth grows past the screen's width rather than
// scrollWidth past innerWidth: the check looks for both.
const overflowJS = `((width) => {
  const page = document.documentElement;
  if (page.scrollWidth <= innerWidth && innerWidth === width) return [];
  const out = ["scrollWidth " + page.scrollWidth + ", innerWidth " + innerWidth + ", screen " + width];
  for (const el of document.querySelectorAll("body *")) {
    const right = el.getBoundingClientRect().right;
    if (right > width + 0.5 && out.length < 8) {
      out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : "") + " ends at " + Math.round(right));
    }
  }
  return out;
})(%d)`

// do runs browser actions, failing the test with the step's name.
func do(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// value runs one browser action that returns a value.
func value[T any](t *testing.T, ctx context.Context, step string, action chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return v
}

// saveScreenshot writes png to screenshots/name (gitignored).
func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("screenshots", name))
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}
