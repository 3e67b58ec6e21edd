package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// start runs the app as main does, on a free port, and returns its URL. It
// stops when the test ends, and the test checks that it stopped cleanly.
// The client is built from the SDK's environment, which ddbtest.Main
// points at the test engine.
func start(t *testing.T, args ...string) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout, io.Discard)
		stdout.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		t.Fatalf("reading the URL that run prints: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, out)
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "serving on ")
	if !ok || !strings.HasPrefix(base, "http://localhost:") {
		stop()
		t.Fatalf("run printed %q, want \"serving on http://localhost:<port>/\"", line)
	}
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run after its context ended: %v, want a clean shutdown", err)
		}
	})
	return base
}

// newTable returns the name of a table that does not exist yet, and is
// deleted when the test ends.
func newTable(t *testing.T) string {
	t.Helper()
	return ddbtest.TableName(t, ddbtest.Client(t))
}

type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar}}
}

// call sends a request to base+path, a form for POST, and fails the test
// unless the answer is want (and, for 200, wantBody).
func (b *browser) call(base, method, path string, form url.Values, want int, wantBody string) *http.Response {
	b.t.Helper()
	var res *http.Response
	var err error
	if method == http.MethodPost {
		res, err = b.client.PostForm(base+strings.TrimPrefix(path, "/"), form)
	} else {
		res, err = b.client.Get(base + strings.TrimPrefix(path, "/"))
	}
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != want || (want == http.StatusOK && string(body) != wantBody) {
		b.t.Errorf("%s %s: %d %q, want %d %q", method, path, res.StatusCode, body, want, wantBody)
	}
	return res
}

// Two instances on one table, in dev mode: every route, each seen from the
// other instance.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	one := start(t, "-table", table, "-dev", "-idle", "20m", "-lifetime", "2h")
	two := start(t, "-table", table, "-dev", "-idle", "20m", "-lifetime", "2h")
	b := newBrowser(t)

	b.call(one, "GET", "/get", nil, http.StatusNotFound, "")
	b.call(one, "POST", "/put", url.Values{"msg": {"hello from one"}}, http.StatusNoContent, "")
	b.call(two, "GET", "/get", nil, http.StatusOK, "hello from one")
	u, _ := url.Parse(one)
	cookies := b.client.Jar.Cookies(u)
	if len(cookies) != 1 || cookies[0].Name != "session" {
		t.Fatalf("cookies in dev mode: %v, want one named session", cookies)
	}
	old := cookies[0].Value

	b.call(two, "POST", "/renew", nil, http.StatusNoContent, "")
	if c := b.client.Jar.Cookies(u); len(c) != 1 || c[0].Value == old {
		t.Errorf("RenewToken did not change the token")
	}
	b.call(one, "GET", "/get", nil, http.StatusOK, "hello from one")
	thief := newBrowser(t)
	thief.client.Jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: old}})
	thief.call(one, "GET", "/get", nil, http.StatusNotFound, "")
	thief.call(two, "GET", "/get", nil, http.StatusNotFound, "")

	b.call(one, "POST", "/put", url.Values{"msg": {"changed on one"}}, http.StatusNoContent, "")
	b.call(two, "GET", "/get", nil, http.StatusOK, "changed on one")
	b.call(one, "POST", "/destroy", nil, http.StatusNoContent, "")
	b.call(two, "GET", "/get", nil, http.StatusNotFound, "")
	b.call(one, "GET", "/get", nil, http.StatusNotFound, "")

	b.call(two, "POST", "/put", nil, http.StatusBadRequest, "")
}

// Log out everywhere on one instance ends the user's sessions on both, and
// no other user's; the browser that asked stays signed in, and so does a
// login after it.
func TestLogOutEverywhere(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	one := start(t, "-table", table, "-dev")
	two := start(t, "-table", table, "-dev")
	laptop, phone, other := newBrowser(t), newBrowser(t), newBrowser(t)

	laptop.call(one, "GET", "/me", nil, http.StatusUnauthorized, "")
	laptop.call(one, "POST", "/login", url.Values{"user": {"alice"}}, http.StatusNoContent, "")
	phone.call(two, "POST", "/login", url.Values{"user": {"alice"}}, http.StatusNoContent, "")
	other.call(two, "POST", "/login", url.Values{"user": {"bob"}}, http.StatusNoContent, "")
	phone.call(one, "POST", "/put", url.Values{"msg": {"alice's draft"}}, http.StatusNoContent, "")
	for _, base := range []string{one, two} {
		laptop.call(base, "GET", "/me", nil, http.StatusOK, "alice")
		phone.call(base, "GET", "/me", nil, http.StatusOK, "alice")
		other.call(base, "GET", "/me", nil, http.StatusOK, "bob")
	}

	laptop.call(two, "POST", "/logout-everywhere", nil, http.StatusNoContent, "")
	phone.call(one, "GET", "/me", nil, http.StatusUnauthorized, "")
	phone.call(two, "GET", "/get", nil, http.StatusNotFound, "") // destroyed, its data with it
	for _, base := range []string{one, two} {
		laptop.call(base, "GET", "/me", nil, http.StatusOK, "alice")
		other.call(base, "GET", "/me", nil, http.StatusOK, "bob")
	}
	phone.call(one, "POST", "/login", url.Values{"user": {"alice"}}, http.StatusNoContent, "")
	phone.call(two, "GET", "/me", nil, http.StatusOK, "alice")

	newBrowser(t).call(one, "POST", "/logout-everywhere", nil, http.StatusUnauthorized, "")
	for _, bad := range []string{"", "Alice", "a b", strings.Repeat("a", 33)} {
		newBrowser(t).call(one, "POST", "/login", url.Values{"user": {bad}}, http.StatusBadRequest, "")
	}
}

// Outside dev mode the cookie is __Host-session, Secure, HttpOnly,
// SameSite=Lax, Path=/, and lives as long as -idle says.
func TestSecureCookie(t *testing.T) {
	t.Parallel()
	base := start(t, "-table", newTable(t), "-idle", "20m", "-lifetime", "2h")
	// The server does not care that this is plain HTTP; a browser would
	// not send the cookie back, so look at what is set.
	res, err := http.PostForm(base+"put", url.Values{"msg": {"m"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /put: %d", res.StatusCode)
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("Set-Cookie: %v, want one cookie", res.Header.Values("Set-Cookie"))
	}
	c := cookies[0]
	if c.Name != "__Host-session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
		t.Errorf("cookie %s, want __Host-session; Path=/; HttpOnly; Secure; SameSite=Lax; no Domain", c)
	}
	if c.MaxAge < 19*60 || c.MaxAge > 20*60+1 {
		t.Errorf("cookie Max-Age %d, want the idle timeout, 1200", c.MaxAge)
	}
}

// Cross-origin form posts from a browser are refused before they touch
// the session.
func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	base := start(t, "-table", newTable(t), "-dev")
	req, _ := http.NewRequest("POST", base+"put", strings.NewReader("msg=evil"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST /put: %d, want 403", res.StatusCode)
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-idle", "soon"}, {"-nope"}, {"extra"}, {"-idle", "-1m"}, {"-lifetime", "0"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
