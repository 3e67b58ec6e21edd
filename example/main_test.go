package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestRun runs the app as main does, in dev mode over plain HTTP, and shuts
// it down the way Ctrl-C does.
func TestRun(t *testing.T) {
	table := ddbtest.TableName(t, ddbtest.Client(t))
	base, stop := startRun(t, "-table", table, "-dev", "-idle", "1h", "-refresh", "5m")
	if !strings.HasPrefix(base, "http://localhost:") { // where browsers make passkeys
		t.Fatalf("run serves at %q, want http://localhost:<port>/", base)
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(base+"signup", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK { // after following the 303 to /
		t.Fatalf("sign-up: %d", res.StatusCode)
	}
	// Dev mode: plain-HTTP cookies without the __Host- prefix, the
	// session's and the device's.
	u, _ := url.Parse(base)
	var names []string
	for _, c := range jar.Cookies(u) {
		names = append(names, c.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"session", "session-device"}) {
		t.Errorf("cookies after sign-up in dev mode: %v, want session and session-device", names)
	}
	res, err = c.Get(base + "api/me")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /api/me over plain HTTP in dev mode: %d, want 200", res.StatusCode)
	}
	stop()
}

// TestRunDeviceBinding runs the app as main does over HTTPS with -dbsc, and
// binds a session from a Go client that signs as Chromium does.
func TestRunDeviceBinding(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.issueFiles(t, "localhost", "127.0.0.1")
	table := ddbtest.TableName(t, ddbtest.Client(t))
	base, stop := startRun(t, "-table", table, "-tls-cert", certFile, "-tls-key", keyFile, "-dbsc", "-bound", "30s")
	if !strings.HasPrefix(base, "https://localhost:") {
		t.Fatalf("run serves at %q, want https://localhost:<port>/", base)
	}
	c := newGoClient(t, ca, strings.TrimSuffix(base, "/"))
	res := c.postForm("/signup", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	session := findCookie(res.Cookies(), cookieName)
	offer, err := dbsctest.ParseOffer(res.Header.Get("Secure-Session-Registration"))
	if res.StatusCode != http.StatusSeeOther || session == nil || err != nil {
		t.Fatalf("sign-up: %d, session cookie %v, offer: %v", res.StatusCode, session, err)
	}

	c.cookies = []*http.Cookie{session}
	device := dbsctest.NewES256()
	r, _ := http.NewRequest("POST", c.base+offer.Path, nil)
	r.Header.Set("Secure-Session-Response", device.Registration(offer.Challenge))
	res = c.send(r)
	bound := findCookie(res.Cookies(), boundCookieName)
	// -bound 30s: the table keeps the cookie 30 s, rounded down to the
	// second; the browser is told 5 s less, so it refreshes in time.
	if res.StatusCode != http.StatusOK || bound == nil || bound.MaxAge < 24 || bound.MaxAge > 25 {
		t.Fatalf("POST %s: %d, bound cookie %v; want 200 and a cookie of 24 to 25 s (-bound 30s less 5 s)", offer.Path, res.StatusCode, bound)
	}
	if code := c.get("/api/me").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("GET /api/me with the session cookie alone, once bound: %d, want 401", code)
	}
	c.cookies = append(c.cookies, bound)
	res = c.get("/api/sessions")
	var list []sessionJSON
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || len(list) != 1 || !list[0].DeviceBound {
		t.Errorf("GET /api/sessions with both cookies: %d, %+v (%v); want one device-bound session", res.StatusCode, list, err)
	}
	// The sessions list on the page says so too, and what it means.
	res = c.get("/")
	page, _ := io.ReadAll(res.Body)
	for _, want := range []string{`<span class="badge">this browser</span><span class="badge bound">device-bound</span>`, `id="device-bound-hint"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("GET / with both cookies: %d, the page lacks %s:\n%s", res.StatusCode, want, page)
		}
	}
	stop()
}

func findCookie(cookies []*http.Cookie, name string) *http.Cookie {
	for _, c := range cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// startRun runs the app as main does with args, on a free port, until stop,
// which checks that it shut down cleanly. It returns the URL that run
// prints.
func startRun(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	base, rest, stop := startRunOutput(t, args...)
	// Read on, so that run never blocks on its output.
	go io.Copy(io.Discard, rest)
	return base, stop
}

// startRunOutput is startRun, and returns what run prints after the URL,
// which the caller must read on to its end.
func startRunOutput(t *testing.T, args ...string) (base string, rest *bufio.Reader, stop func()) {
	t.Helper()
	// run finds the engine as main does, through the SDK's environment.
	if ep := aws.ToString(ddbtest.Client(t).Options().BaseEndpoint); ep != "" {
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", ep)
	}
	for name, value := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"} {
		if os.Getenv(name) == "" {
			t.Setenv(name, value)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout, io.Discard)
		stdout.Close()
	}()
	t.Cleanup(cancel)
	rest = bufio.NewReader(out)
	line, err := rest.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL that run prints: %v (run: %v)", err, <-done)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "open ")
	if !ok {
		t.Fatalf("run printed %q, want \"open <url>\"", line)
	}
	return base, rest, func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after its context ended: %v, want a clean shutdown", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("run did not return after its context ended")
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	ca := newTestCA(t)
	certFile, keyFile := ca.issueFiles(t, "127.0.0.1")
	table := ddbtest.TableName(t, ddbtest.Client(t))
	for _, tc := range []struct {
		name string
		args []string
		want string // part of the error
	}{
		{"refresh longer than idle", []string{"-idle", "1h", "-refresh", "2h"}, "RefreshInterval"},
		{"bad duration", []string{"-idle", "soon"}, "invalid value"},
		{"a count of proxies", []string{"-proxies", "1"}, "-proxies (a count of proxies) is not supported, since it would believe X-Forwarded-For from any client: pass -trusted-proxies"},
		{"a trusted proxy range that is none", []string{"-trusted-proxies", "10.0.0.0/8,10.0.0/8"}, `invalid value "10.0.0.0/8,10.0.0/8" for flag -trusted-proxies: "10.0.0/8" is neither`},
		{"unknown flag", []string{"-no-such-flag"}, "not defined"},
		{"stray argument", []string{"-dbsc", "false"}, `unexpected arguments ["false"]`},
		{"cert without key", []string{"-tls-cert", certFile}, "-tls-cert and -tls-key go together"},
		{"key without cert", []string{"-tls-key", keyFile}, "-tls-cert and -tls-key go together"},
		{"unreadable cert", []string{"-tls-cert", certFile + ".missing", "-tls-key", keyFile}, "no such file"},
		{"key of another cert", []string{"-tls-cert", certFile, "-tls-key", certFile}, "-tls-key"},
		{"dev with HTTPS", []string{"-dev", "-tls-cert", certFile, "-tls-key", keyFile}, "-dev is plain-HTTP mode"},
		{"dbsc without HTTPS", []string{"-dbsc"}, "-dbsc needs HTTPS: pass -tls-cert and -tls-key"},
		{"dbsc in dev mode", []string{"-dbsc", "-dev"}, "-dbsc needs HTTPS, and -dev is plain HTTP"},
		{"bound without dbsc", []string{"-bound", "1m", "-tls-cert", certFile, "-tls-key", keyFile}, "-bound is the lifetime of device binding's cookie: it needs -dbsc"},
		{"bound too short", []string{"-dbsc", "-bound", "5s", "-tls-cert", certFile, "-tls-key", keyFile}, "-bound 5s: want at least 10s"},
		{"bound negative", []string{"-dbsc", "-bound", "-1m", "-tls-cert", certFile, "-tls-key", keyFile}, "-bound -1m0s: want at least 10s"},
		{"reauth zero", []string{"-reauth", "0"}, "-reauth 0s: want a second or more"},
		{"reauth under a second", []string{"-reauth", "500ms"}, "-reauth 500ms: want a second or more"},
		{"max-sessions negative", []string{"-max-sessions", "-1"}, "-max-sessions -1: want 0 (no limit) to 100"},
		{"max-sessions over 100", []string{"-max-sessions", "101"}, "-max-sessions 101: want 0 (no limit) to 100"},
		{"metrics on every interface", []string{"-metrics-addr", ":9464"}, `-metrics-addr ":9464": metrics are served on a loopback address only`},
		{"metrics on a public address", []string{"-metrics-addr", "192.0.2.1:9464"}, "loopback address only"},
		{"metrics on a host name", []string{"-metrics-addr", "metrics.example:9464"}, "loopback address only"},
		{"metrics without a port", []string{"-metrics-addr", "127.0.0.1"}, "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An ended context and a free port: a run that wrongly accepted
			// the flags returns at once instead of serving on a fixed port.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			args := append([]string{"-addr", "127.0.0.1:0", "-table", table}, tc.args...)
			err := run(ctx, args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run %q: error %v, want one that says %q", args, err, tc.want)
			}
		})
	}
}

// TestParseFlags: the step-up flags' defaults, and what they set.
func TestParseFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args        []string
		reauth      time.Duration
		maxSessions int
	}{
		{nil, 10 * time.Minute, 0},
		{[]string{"-reauth", "90s", "-max-sessions", "3"}, 90 * time.Second, 3},
		{[]string{"-reauth", "1s", "-max-sessions", "100"}, time.Second, 100},
	} {
		opts, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Errorf("parseFlags(%q): %v", tc.args, err)
			continue
		}
		if opts.app.Reauth != tc.reauth || opts.app.MaxSessions != tc.maxSessions {
			t.Errorf("parseFlags(%q): Reauth %v, MaxSessions %d; want %v and %d", tc.args, opts.app.Reauth, opts.app.MaxSessions, tc.reauth, tc.maxSessions)
		}
	}
}

// TestRunMaxSessions runs the app as main does with -max-sessions 1: a
// second login of a user ends the first one's session.
func TestRunMaxSessions(t *testing.T) {
	table := ddbtest.TableName(t, ddbtest.Client(t))
	base, stop := startRun(t, "-table", table, "-dev", "-max-sessions", "1")
	var clients []*http.Client
	for i, path := range []string{"signup", "login"} {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		res, err := c.PostForm(base+path, url.Values{"username": {"alice"}, "password": {"correct horse"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK { // after following the 303 to /
			t.Fatalf("POST /%s (client %d): %d", path, i, res.StatusCode)
		}
		clients = append(clients, c)
	}
	for i, want := range []int{http.StatusUnauthorized, http.StatusOK} {
		res, err := clients[i].Get(base + "api/me")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET /api/me of the session of client %d of 2: %d, want %d", i, res.StatusCode, want)
		}
	}
	stop()
}
