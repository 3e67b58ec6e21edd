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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestRun runs the app as main does, in dev mode over plain HTTP, and shuts
// it down the way Ctrl-C does.
func TestRun(t *testing.T) {
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	// run finds the engine as main does, through the SDK's environment.
	if ep := aws.ToString(client.Options().BaseEndpoint); ep != "" {
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", ep)
	}
	for name, value := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"} {
		if os.Getenv(name) == "" {
			t.Setenv(name, value)
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-table", table, "-dev", "-idle", "1h", "-refresh", "5m"}, stdout, io.Discard)
		stdout.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL that run prints: %v (run: %v)", err, <-done)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "open ")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("run printed %q, want \"open http://127.0.0.1:<port>/\"", line)
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
	// Dev mode: a plain-HTTP cookie without the __Host- prefix.
	u, _ := url.Parse(base)
	if cookies := jar.Cookies(u); len(cookies) != 1 || cookies[0].Name != "session" {
		t.Errorf("cookies after sign-up in dev mode: %v, want one named session", cookies)
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
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after its context ended: %v, want a clean shutdown", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	// An ended context and a free port: a run that wrongly accepted the
	// flags returns at once instead of serving on a fixed port.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"-idle", "1h", "-refresh", "2h"}, // refresh must be shorter than idle
		{"-idle", "soon"},
		{"-proxies", "-1"},
		{"-no-such-flag"},
	} {
		args = append([]string{"-addr", "127.0.0.1:0", "-table", ddbtest.TableName(t, ddbtest.Client(t))}, args...)
		if err := run(ctx, args, io.Discard, io.Discard); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
