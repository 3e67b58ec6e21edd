package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
// second signed out. It needs Debian's chromium package and fails, never
// skips, without it.
func TestBrowser(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("this test drives headless Chromium, which was not found (%v).\nInstall Debian's chromium package: apt-get install chromium", err)
	}
	ta := newTestApp(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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
	defer cancelAlloc()
	first, cancelFirst := chromedp.NewContext(allocCtx)
	defer cancelFirst()

	// The first action starts the browser.
	if err := chromedp.Do(first, chromedp.EmulateViewport(1000, 700), chromedp.Navigate(ta.srv.URL)); err != nil {
		t.Fatalf("Chromium (%s) did not start or did not load the app: %v\n"+
			"Install Debian's chromium package (apt-get install chromium).\nBrowser output:\n%s", chromium, err, browserOutput.String())
	}

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
		chromedp.EmulateViewport(1000, 700),
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
	saveScreenshot(t, value(t, first, "screenshot", chromedp.FullScreenshot(100))) // 100: PNG

	// 5. Log out everywhere from the first context.
	do(t, first, "log out everywhere", chromedp.Click("#logout-everywhere"), chromedp.WaitVisible("#signup-form"))

	// 6. The second context is signed out on its next load.
	do(t, second, "reload the second context", chromedp.Reload(), chromedp.WaitVisible("#login-form"))
	if signedIn := value(t, second, "look for who am I", chromedp.Evaluate[bool](`document.querySelector("#whoami") !== null`)); signedIn {
		t.Errorf("the second context is still signed in after logging out everywhere")
	}
}

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

// saveScreenshot writes png to screenshots/signed-in.png (gitignored) for a
// reviewer to open.
func saveScreenshot(t *testing.T, png []byte) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("screenshots", "signed-in.png"))
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot of the signed-in page: %s", path)
}
