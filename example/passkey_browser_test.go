package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestBrowserPasskey walks passkeys in headless Chromium, whose DevTools
// WebAuthn domain gives the page a virtual CTAP2 authenticator, built in
// (transport internal), with resident keys and user verification that
// succeeds: sign up, add a passkey from the account page, log out, sign
// in with the passkey alone (no username typed), let -reauth go by on the
// app's fake clock, remove the passkey and be sent to re-authenticate,
// do so with the passkey, remove it from the confirm page, and be signed
// out with every session of the account, then sign in with the password. The
// buttons show only once /passkeys.js runs, so each click also shows that
// the page's Content-Security-Policy lets the app's script run and fetch.
// Every page on the way is checked at 1280, 390 and 320 px (checkWidths).
//
// Browsers allow passkeys on a host name only (never an IP address) over
// a certificate they trust: the app is served at https://localhost:<port>
// with a certificate of a test CA that Chromium's NSS database trusts, as
// TestBrowserDeviceBinding does. It needs Debian's chromium and
// libnss3-tools packages and fails, never skips, without them.
func TestBrowserPasskey(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("this test drives headless Chromium, which was not found (%v).\nInstall Debian's chromium package: apt-get install chromium", err)
	}
	certutil, err := exec.LookPath("certutil")
	if err != nil {
		t.Fatalf("this test trusts a test CA in Chromium's NSS database with certutil, which was not found (%v).\nInstall Debian's libnss3-tools package: apt-get install libnss3-tools", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "https://localhost:" + strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	clock := ddbtest.NewClock(time.Now())
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	var logs syncBuffer
	a, err := newApp(context.Background(), appConfig{
		Client:        client,
		Table:         table,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		StoreTimeout:  15 * time.Second, // see startApp
		HashCost:      testCost,
		PasskeyOrigin: base,
		Now:           clock.Now,
		Reauth:        time.Minute,
	})
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	t.Cleanup(func() { a.shutdown(context.Background()) })
	ca := newTestCA(t)
	cert, _, _ := ca.issue(t, "localhost")
	srv := httptest.NewUnstartedServer(a)
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	home := t.TempDir()
	trustInNSS(t, certutil, home, ca)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var browserOutput syncBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("HOME="+home), // where Chromium finds .pki/nssdb
		chromedp.CombinedOutput(&browserOutput),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // tests may run as root, where the sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("app logs:\n%s", logs.String())
			t.Logf("browser output:\n%s", browserOutput.String())
		}
	})
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("Chromium (%s) did not start or did not load the app: %v\nBrowser output:\n%s", chromium, err, browserOutput.String())
	}
	if _, err := chromedp.Call(tab, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	authenticator, err := chromedp.Call(tab, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol:                    webauthn.AuthenticatorProtocolCtap2,
		Transport:                   webauthn.AuthenticatorTransportInternal,
		HasResidentKey:              true,
		HasUserVerification:         true,
		IsUserVerified:              true,
		AutomaticPresenceSimulation: true,
	}})
	if err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	authenticatorID := authenticator.AuthenticatorID
	credentials := func() []*webauthn.Credential {
		t.Helper()
		res, err := chromedp.Call(tab, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: authenticatorID})
		if err != nil {
			t.Fatalf("WebAuthn.getCredentials: %v", err)
		}
		return res.Credentials
	}
	methods := func(when string, want ...string) {
		t.Helper()
		list, err := a.sessions.List(t.Context(), userKey("alice"))
		if err != nil || len(list) != 1 || !slices.Equal(list[0].Methods, want) {
			t.Errorf("alice's sessions %s: %+v, %v; want one, with methods %v", when, list, err, want)
		}
	}

	do(t, tab, "see the passkey button", chromedp.WaitVisible("#passkey-signin"))
	checkWidths(t, tab, "passkey-signed-out")
	do(t, tab, "sign up",
		chromedp.SendKeys("#signup-form input[name=username]", "alice"),
		chromedp.SendKeys("#signup-form input[name=password]", "correct horse battery"),
		chromedp.Click("#signup-form button"),
		chromedp.WaitVisible("#passkey-add-form"),
	)
	checkWidths(t, tab, "passkey-none")

	// 1. Register a passkey.
	do(t, tab, "add a passkey",
		chromedp.SendKeys("#passkey-add-form input[name=name]", "laptop"),
		chromedp.Click("#passkey-add"),
		chromedp.WaitVisible("#passkeys"),
	)
	if name := value(t, tab, "read the passkey's name", chromedp.Evaluate[string](`document.querySelector("#passkeys input[name=name]").value`)); name != "laptop" {
		t.Errorf("the passkeys list names it %q, want laptop", name)
	}
	if creds := credentials(); len(creds) != 1 || !creds[0].IsResidentCredential || creds[0].RpID != "localhost" {
		t.Fatalf("the authenticator holds %+v, want one resident credential for localhost", creds)
	}
	checkWidths(t, tab, "passkey-listed")

	// 2. Log out, and sign in with the passkey alone.
	do(t, tab, "log out", chromedp.Click("#logout"), chromedp.WaitVisible("#passkey-signin"))
	do(t, tab, "sign in with the passkey", chromedp.Click("#passkey-signin"), chromedp.WaitVisible("#whoami"))
	methods("after the passkey sign-in", methodPasskey)
	if how := value(t, tab, "read how the session signed in", chromedp.Text("#sessions td.how")); how != "passkey" {
		t.Errorf("the sessions list says the session signed in with %q, want passkey", how)
	}
	if last := value(t, tab, "read when the passkey was used", chromedp.Text("#passkeys td.how")); last == "never" {
		t.Errorf("the passkeys list says the passkey was never used, after a sign-in with it")
	}

	// 3. Too long after: removing it is a sensitive action, and the
	// passkey re-authenticates for it.
	clock.Advance(2 * time.Minute)
	do(t, tab, "remove the passkey, too long after signing in", chromedp.Click("#passkeys .passkey-remove"), chromedp.WaitVisible("#passkey-reauth"))
	if at := value(t, tab, "read the address", chromedp.Evaluate[string](`location.pathname`)); at != reauthPath {
		t.Errorf("removing the passkey went to %s, want %s", at, reauthPath)
	}
	checkWidths(t, tab, "passkey-reauth")
	before, _ := a.sessions.List(t.Context(), userKey("alice"))
	do(t, tab, "re-authenticate with the passkey", chromedp.Click("#passkey-reauth"), chromedp.WaitVisible("#confirm-form"))
	if at := value(t, tab, "read the address", chromedp.Evaluate[string](`location.pathname`)); at != "/passkeys/remove" {
		t.Errorf("the re-authentication came back to %s, want the confirm page /passkeys/remove", at)
	}
	methods("after the passkey step-up", methodPasskey)
	if after, _ := a.sessions.List(t.Context(), userKey("alice")); len(before) != 1 || len(after) != 1 || after[0].ID == before[0].ID {
		t.Errorf("the step-up did not replace the session: before %+v, after %+v", before, after)
	}
	checkWidths(t, tab, "passkey-remove-confirm")

	// 4. Remove it: the account has none, and no session, this one's
	// included, outlives it: the browser is sent to log in.
	do(t, tab, "press Remove", chromedp.Click("#confirm"), chromedp.WaitVisible("#login-form"))
	if u := (&testApp{t: t, client: client, table: table}).userItemOf("alice"); len(u.Passkeys) != 0 {
		t.Errorf("alice has %d passkeys after removing hers", len(u.Passkeys))
	}
	if list, err := a.sessions.List(t.Context(), userKey("alice")); err != nil || len(list) != 0 {
		t.Errorf("alice's sessions after removing the passkey: %+v, %v; want none", list, err)
	}
	checkWidths(t, tab, "passkey-removed")
	do(t, tab, "log in with the password",
		chromedp.SendKeys("#login-form input[name=username]", "alice"),
		chromedp.SendKeys("#login-form input[name=password]", "correct horse battery"),
		chromedp.Click("#login-form button"),
		chromedp.WaitVisible("#passkey-add-form"),
	)
	methods("after logging in again", methodPassword)
}
