package ddbsession_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// noAWSChildEnv marks the copies of this test binary that TestNoAWS
// starts, so that they do not start copies of their own.
const noAWSChildEnv = "DDBSESSION_NOAWS_CHILD"

// TestNoAWS runs this whole test binary again the way a developer might by
// mistake: no local engine, no Node.js, their real AWS settings in the
// environment. Every connection the process attempts goes to a recording
// proxy. ddbtest.Main must stop the run before any test (the
// runnable Example builds its client from the SDK's configuration) with
// instructions that name what is missing, and nothing may have been
// contacted.
func TestNoAWS(t *testing.T) {
	if os.Getenv(noAWSChildEnv) != "" {
		t.Skip("this is TestNoAWS's child process")
	}
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("this test runs a copy of itself with node alone on PATH, and needs Node.js: %v", err)
	}
	for _, tc := range []struct {
		name, endpoint, want string
		pathWithNode         bool // else PATH has neither node nor npm
	}{
		{name: "no engine", want: `no Node.js on PATH (exec: "node": executable file not found in $PATH)`},
		{name: "Node.js without npm, dynalite not installed", want: `no npm on PATH (exec: "npm": executable file not found in $PATH) to install dynalite`, pathWithNode: true},
		{name: "an AWS endpoint", endpoint: "https://dynamodb.eu-west-1.amazonaws.com", want: "is an AWS endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := startRecordingProxy(t)
			// An empty directory for PATH, and for HOME, so that no cached
			// dynalite is found either.
			path, home := t.TempDir(), t.TempDir()
			if tc.pathWithNode {
				if err := os.Symlink(node, filepath.Join(path, filepath.Base(node))); err != nil {
					t.Fatal(err)
				}
			}
			env := withEnv(developerEnv(t, proxy.url), "PATH="+path, "HOME="+home, "XDG_CACHE_HOME=", "LOCALAPPDATA="+home)
			if tc.endpoint != "" {
				env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+tc.endpoint)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.count=1", "-test.timeout=2m")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			targets := proxy.stop()

			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
				t.Errorf("the run ended with %v, want a non-zero exit", err)
			}
			for _, want := range []string{tc.want, "No test ran.", "Node.js 20 or later, with npm, on PATH",
				"AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 go test ./..."} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the run's output lacks %q", want)
				}
			}
			for line := range strings.Lines(string(out)) {
				if line = strings.TrimSpace(line); line == "PASS" || line == "FAIL" || strings.HasPrefix(line, "--- ") {
					t.Errorf("tests ran: %q", line)
				}
			}
			checkNoConnections(t, targets)
			if t.Failed() {
				t.Logf("the run's output:\n%s", out)
			}
		})
	}
}

// TestNoAWSWithNode runs the runnable Example again with a developer's AWS
// settings and Node.js on PATH, but no engine named: Main
// must start the pinned dynalite (from the cache, installed here first)
// and publish it, so that the Example's client, built from the SDK's
// configuration, reaches dynalite on loopback, and nothing through the
// proxy. dynalite must be gone when the run is.
func TestNoAWSWithNode(t *testing.T) {
	if os.Getenv(noAWSChildEnv) != "" {
		t.Skip("this is TestNoAWSWithNode's child process")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// With this process's own environment (and npm's access to its
	// registry), not the child's, whose proxy refuses everything.
	if _, err := ddbtest.InstallDynalite(ctx); err != nil {
		t.Fatalf("InstallDynalite: %v", err)
	}
	proxy := startRecordingProxy(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^Example$", "-test.count=1", "-test.timeout=2m", "-test.v")
	cmd.Env = developerEnv(t, proxy.url)
	out, err := cmd.CombinedOutput()
	targets := proxy.stop()

	if err != nil || !strings.Contains(string(out), "--- PASS: Example") {
		t.Errorf("the run ended with %v, want the Example to pass", err)
	}
	if strings.Contains(string(out), "installing dynalite") {
		t.Error("the run installed dynalite again, want it to use the cache")
	}
	started := regexp.MustCompile(`(?m)^ddbtest: dynalite \S+ listening on http://(127\.0\.0\.1:[0-9]+)$`).FindSubmatch(out)
	if started == nil {
		t.Error("the run did not say that it started dynalite")
	} else if conn, err := net.DialTimeout("tcp", string(started[1]), time.Second); err == nil {
		conn.Close()
		t.Errorf("dynalite at %s still accepts connections after the run", started[1])
	}
	checkNoConnections(t, targets)
	if t.Failed() {
		t.Logf("the run's output:\n%s", out)
	}
}

// checkNoConnections fails t if the proxy saw any connection.
func checkNoConnections(t *testing.T, targets []string) {
	t.Helper()
	for _, target := range targets {
		if strings.Contains(target, "amazonaws") {
			t.Errorf("the run tried to reach AWS: %s", target)
		}
	}
	if len(targets) > 0 {
		t.Errorf("the run made %d connection(s) through the proxy, want none: %q", len(targets), targets)
	}
}

// withEnv returns env with each name=value of set in place of any earlier
// value of that name.
func withEnv(env []string, set ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(set, func(s string) bool { return strings.HasPrefix(s, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// developerEnv is this process's environment without any AWS or proxy
// settings, plus a developer's real-looking AWS keys, session token,
// profile and region (with the shared files that define the profile), and
// every proxy variable pointing at proxyURL.
func developerEnv(t *testing.T, proxyURL string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if strings.HasPrefix(upper, "AWS_") || strings.HasSuffix(upper, "_PROXY") {
			continue
		}
		env = append(env, kv)
	}
	dir := t.TempDir()
	configFile, credentialsFile := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	for name, content := range map[string]string{
		configFile:      "[profile production]\nregion = eu-west-1\n",
		credentialsFile: "[production]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return append(env,
		noAWSChildEnv+"=1",
		"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEXAMPLETOKEN",
		"AWS_PROFILE=production",
		"AWS_REGION=eu-west-1",
		"AWS_CONFIG_FILE="+configFile,
		"AWS_SHARED_CREDENTIALS_FILE="+credentialsFile,
		"HTTP_PROXY="+proxyURL, "HTTPS_PROXY="+proxyURL,
		"http_proxy="+proxyURL, "https_proxy="+proxyURL,
	)
}

// recordingProxy accepts connections on loopback, notes the target of each
// (the CONNECT authority, or the host of a plain proxied request), refuses
// it, and never forwards anything.
type recordingProxy struct {
	url      string
	listener *net.TCPListener
	accepted chan struct{} // closed when the accept loop ends
	handlers sync.WaitGroup

	mu      sync.Mutex
	targets []string
}

func startRecordingProxy(t *testing.T) *recordingProxy {
	t.Helper()
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{url: "http://" + l.Addr().String(), listener: l, accepted: make(chan struct{})}
	t.Cleanup(func() { p.stop() })
	go func() {
		defer close(p.accepted)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			p.handlers.Go(func() { p.handle(conn) })
		}
	}()
	return p
}

func (p *recordingProxy) handle(conn net.Conn) {
	defer conn.Close()
	target := "(no request) from " + conn.RemoteAddr().String()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
		target = req.Method + " " + req.Host
	}
	p.mu.Lock()
	p.targets = append(p.targets, target)
	p.mu.Unlock()
	conn.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}

// stop accepts what is still queued for a moment, closes the listener,
// waits for the handlers, and returns every target seen.
func (p *recordingProxy) stop() []string {
	p.listener.SetDeadline(time.Now().Add(200 * time.Millisecond))
	<-p.accepted
	p.listener.Close()
	p.handlers.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}
