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
	"github.com/ddbsession/ddbsession/internal/redistest"
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
	base, _, _ = strings.Cut(base, " ")
	if !ok || !strings.HasPrefix(base, "http://localhost:") {
		stop()
		t.Fatalf("run printed %q, want \"serving on http://localhost:<port>/ (phase ...)\"", line)
	}
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run after its context ended: %v, want a clean shutdown", err)
		}
	})
	return base
}

// browser is a client with a cookie jar that does not follow redirects.
// Cookies do not depend on the port: one browser carries its session to
// every instance.
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// call sends a request to base+path, a form for POST, and fails the test
// unless the answer is want (and, for 200, wantBody).
func (b *browser) call(base, method, path string, form url.Values, want int, wantBody string) {
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
		b.t.Errorf("%s %s%s: %d %q, want %d %q", method, base, strings.TrimPrefix(path, "/"), res.StatusCode, body, want, wantBody)
	}
}

// token returns the session cookie's value, and setToken puts one back, as
// a thief replaying it would.
func (b *browser) token(base string) string {
	u, _ := url.Parse(base)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "session" {
			return c.Value
		}
	}
	return ""
}

func (b *browser) setToken(base, token string) {
	u, _ := url.Parse(base)
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: token, Path: "/"}})
}

// signedIn checks that b is signed in as name with note on each of bases.
func (b *browser) signedIn(name, note string, bases ...string) {
	b.t.Helper()
	for _, base := range bases {
		b.call(base, "GET", "/me", nil, http.StatusOK, name)
		b.call(base, "GET", "/note", nil, http.StatusOK, note)
	}
}

// A browser signed in on the old version (Redis alone) stays signed in,
// its note kept, through a rolling deploy of each phase, served in turns by
// an instance of the phase before and one of the next, and after Redis is
// switched off. In each overlap, a browser signed in on either side and
// logged out on the other is refused on both, its token replayed.
func TestRollingDeploy(t *testing.T) {
	t.Parallel()
	table := ddbtest.TableName(t, ddbtest.Client(t))
	alice := newBrowser(t)
	note := "written on old"
	t.Run("with Redis", func(t *testing.T) {
		redisAddr := redistest.Start(t) // stopped when this subtest ends
		instance := func(phase string) string {
			return start(t, "-dev", "-redis", redisAddr, "-table", table, "-phase", phase)
		}
		prev := instance("old")
		alice.call(prev, "GET", "/me", nil, http.StatusUnauthorized, "")
		alice.call(prev, "POST", "/login", url.Values{"name": {"alice"}}, http.StatusSeeOther, "")
		alice.call(prev, "POST", "/note", url.Values{"text": {note}}, http.StatusSeeOther, "")
		alice.signedIn("alice", note, prev)
		for _, phase := range []string{"dual", "dynamodb-first", "dynamodb-only"} {
			next := instance(phase)
			alice.signedIn("alice", note, next, prev, next)
			note = "written on " + phase
			alice.call(next, "POST", "/note", url.Values{"text": {note}}, http.StatusSeeOther, "")
			alice.signedIn("alice", note, prev, next)

			for _, sides := range [][2]string{{prev, next}, {next, prev}} {
				bob := newBrowser(t)
				bob.call(sides[0], "POST", "/login", url.Values{"name": {"bob"}}, http.StatusSeeOther, "")
				bob.call(sides[1], "GET", "/me", nil, http.StatusOK, "bob")
				token := bob.token(sides[0])
				bob.call(sides[1], "POST", "/logout", nil, http.StatusSeeOther, "")
				for _, base := range sides {
					bob.setToken(base, token)
					bob.call(base, "GET", "/me", nil, http.StatusUnauthorized, "")
				}
			}
			prev = next
		}
	})
	only := start(t, "-dev", "-table", table, "-phase", "dynamodb-only")
	alice.signedIn("alice", note, only)
	alice.call(only, "POST", "/logout", nil, http.StatusSeeOther, "")
	alice.call(only, "GET", "/me", nil, http.StatusUnauthorized, "")
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-phase", "both"}, `invalid value "both" for flag -phase: want old, dual, dynamodb-first or dynamodb-only`},
		{[]string{"-phase", "dual"}, "-phase dual reads the old store: -redis is required"},
		{[]string{}, "-phase old reads the old store: -redis is required"},
		{[]string{"-from-gorilla", "not hex"}, "-from-gorilla: want the CookieStore's hash key in hex, 32 bytes or more"},
		{[]string{"-from-gorilla", "00112233"}, "-from-gorilla: want the CookieStore's hash key in hex, 32 bytes or more"},
		{[]string{"-from-gorilla", strings.Repeat("ab", 32), "-redis", "127.0.0.1:6379"}, "-from-gorilla takes the place of -redis and -phase: the app runs on ddbsession's own sessions"},
	} {
		err := run(context.Background(), c.args, io.Discard, io.Discard)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
