package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The command as the package documentation runs it: in dev mode, with each
// router, a login and the guarded page over plain HTTP, then a clean
// shutdown. The client is built from the SDK's environment, which
// ddbtest.Main points at the test engine.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, r := range routers {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			table := ddbtest.TableName(t, ddbtest.Client(t))
			base := start(t, "-router", r.name, "-table", table, "-dev", "-user", "bob")
			jar, _ := cookiejar.New(nil)
			client := &http.Client{Jar: jar} // follows the login's redirect to /me
			res, err := client.PostForm(base+"login", url.Values{"name": {"bob"}, "password": {demoPassword}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(body) != "signed in as bob\n" {
				t.Errorf("POST /login, then its redirect: %d %q, want 200 \"signed in as bob\"", res.StatusCode, body)
			}
		})
	}
}

// start runs the command as main does, on a free port, and returns its
// URL. It stops when the test ends, and the test checks that it stopped
// cleanly.
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
	_, base, _ := strings.Cut(strings.TrimSpace(line), " on ")
	if !strings.HasPrefix(base, "http://localhost:") {
		stop()
		t.Fatalf("run printed %q, want \"serving <router> on http://localhost:<port>/\"", line)
	}
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run after its context ended: %v, want a clean shutdown", err)
		}
	})
	return base
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-router", "httprouter"}, {"-router", ""}, {"-nope"}, {"extra"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}
