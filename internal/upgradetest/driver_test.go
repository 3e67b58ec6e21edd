package upgradetest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file gets the two versions of the driver (testdata/driver) built,
// starts instances of them, and talks to them over HTTP.

// released is the release that the rolling upgrade starts from.
const released = "v0.1.0"

// drivers are the driver's binaries: built against the released code and
// against this checkout's.
type drivers struct{ old, new string }

// buildDrivers builds the driver twice: against a checkout of the released
// commit and against this checkout (the module's ../.., uncommitted changes
// included). One after the other: the second build finds the AWS SDK in
// the build cache, where two side by side would both compile it.
func buildDrivers(t *testing.T) drivers {
	t.Helper()
	current, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	releasedCode := checkoutRelease(t, current, released)
	dir := t.TempDir()
	bins := drivers{old: filepath.Join(dir, "driver-"+released), new: filepath.Join(dir, "driver-new")}
	if err := buildDriver(filepath.Join(dir, "old"), releasedCode, bins.old); err != nil {
		t.Fatal(err)
	}
	if err := buildDriver(filepath.Join(dir, "new"), current, bins.new); err != nil {
		t.Fatal(err)
	}
	return bins
}

// checkoutRelease checks version's commit, as CHANGELOG.md names it, out
// into a worktree of the repository at repo of its own, removed when t
// ends, and returns its directory.
func checkoutRelease(t *testing.T, repo, version string) string {
	t.Helper()
	changelog, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`(?m)^\[` + regexp.QuoteMeta(version) + `\]: \S+ "commit ([0-9a-f]{40})"$`)
	m := ref.FindSubmatch(changelog)
	if m == nil {
		t.Fatalf("CHANGELOG.md names no commit for %[1]s: its link reference must read\n"+
			"  [%[1]s]: https://github.com/ddbsession/ddbsession/releases/tag/%[1]s \"commit <40 hex digits>\"", version)
	}
	commit := string(m[1])
	if out, err := exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		shallow, _ := exec.Command("git", "-C", repo, "rev-parse", "--is-shallow-repository").Output()
		if strings.TrimSpace(string(shallow)) == "true" {
			t.Fatalf("%s's commit %s, which CHANGELOG.md names, is not in this clone: it is a shallow one. "+
				"Fetch the full history to run this test (git fetch --unshallow; in CI, a checkout with fetch-depth: 0).", version, commit)
		}
		t.Fatalf("%s's commit %s, which CHANGELOG.md names, is not in this clone (%v: %s). "+
			"Fetch the full history to run this test (git fetch origin).", version, commit, err, bytes.TrimSpace(out))
	}
	dir := filepath.Join(t.TempDir(), version)
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", dir, commit).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", version, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("git", "-C", repo, "worktree", "remove", "--force", dir).CombinedOutput(); err != nil {
			t.Errorf("git worktree remove %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// buildDriver builds testdata/driver, in a module of its own in dir whose
// ddbsession is the code in code, into bin: with the workspace off, so
// that the code is that directory's and nothing else of go.work's.
func buildDriver(dir, code, bin string) error {
	source, err := os.ReadFile(filepath.Join("testdata", "driver", "main.go"))
	if err != nil {
		return err
	}
	gomod := fmt.Sprintf("module upgradedriver\n\nrequire github.com/ddbsession/ddbsession %s\n\nreplace github.com/ddbsession/ddbsession => %s\n",
		released, code)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "main.go": source} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", bin, "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("the driver against %s: go %s: %v\n%s", code, strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// An instance is one running driver: one app instance of a version.
type instance struct {
	name   string // "old" (the release) or "new"
	url    string
	out    *output
	cmd    *exec.Cmd
	stdin  io.Closer
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited, once it has
	once   sync.Once
}

// startupBound is how long an instance may take to print its address: its
// CreateTable, which may create the table and wait for it.
const startupBound = 30 * time.Second

// start starts an instance of bin on table, with the driver's flags, and
// waits until it listens. It is stopped when t ends, and its output is
// logged if t failed.
func start(t *testing.T, name, bin, table string, flags []string) *instance {
	t.Helper()
	in := &instance{name: name, out: newOutput(), exited: make(chan struct{})}
	in.cmd = exec.Command(bin, append([]string{"-table", table}, flags...)...)
	in.cmd.Stdout, in.cmd.Stderr = in.out, in.out
	stdin, err := in.cmd.StdinPipe() // it exits when this closes, even if the test binary dies
	if err != nil {
		t.Fatal(err)
	}
	in.stdin = stdin
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		in.err = in.cmd.Wait()
		close(in.exited)
	}()
	t.Cleanup(func() {
		in.stop()
		if t.Failed() {
			t.Logf("the %s instance's output:\n%s", name, in.out)
		}
	})
	select {
	case addr := <-in.out.addr:
		in.url = "http://" + addr
	case <-in.exited:
		t.Fatalf("the %s instance exited (%v) before it listened:\n%s", name, in.err, in.out)
	case <-time.After(startupBound):
		t.Fatalf("the %s instance did not print its address within %v:\n%s", name, startupBound, in.out)
	}
	return in
}

// stop ends the instance at once, as a deploy ends an old instance whose
// requests have drained, and waits until it has exited.
func (in *instance) stop() {
	in.once.Do(func() {
		in.stdin.Close()
		_ = in.cmd.Process.Kill()
	})
	<-in.exited
}

// stopped reports whether the instance has exited.
func (in *instance) stopped() bool {
	select {
	case <-in.exited:
		return true
	default:
		return false
	}
}

// output collects an instance's stdout and stderr, and picks out the
// address that it prints once it listens.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	scanned int
	addr    chan string
}

var listening = regexp.MustCompile(`^listening on http://(127\.0\.0\.1:[0-9]+)$`)

func newOutput() *output { return &output{addr: make(chan string, 1)} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	for {
		rest := o.buf.Bytes()[o.scanned:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			return len(p), nil
		}
		if m := listening.FindSubmatch(rest[:end]); m != nil {
			select {
			case o.addr <- string(m[1]):
			default:
			}
		}
		o.scanned += end + 1
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

var client = &http.Client{Timeout: 30 * time.Second}

// call sends a request to the instance, with cookie as the Cookie header
// if not empty, and returns the response's status and body, and the
// cookies it set, as a browser would send them back.
func (in *instance) call(t *testing.T, method, path string, query url.Values, cookie string) (status int, body []byte, setCookie string) {
	t.Helper()
	u := in.url + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s on the %s instance: %v", method, path, in.name, err)
	}
	defer res.Body.Close()
	body, err = io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s on the %s instance: %v", method, path, in.name, err)
	}
	var kept []string
	for _, c := range res.Cookies() {
		if c.MaxAge >= 0 && c.Value != "" { // not one the response deletes
			kept = append(kept, c.Name+"="+c.Value)
		}
	}
	return res.StatusCode, bytes.TrimSpace(body), strings.Join(kept, "; ")
}

// A verdict is an instance's answer to a request that carries a session.
type verdict struct {
	status    int
	name, id  string // the user and the session it let through
	expires   int64  // the session's expiry, in epoch seconds
	refreshed bool   // the response set the cookie anew: a refresh
	body      string
}

func (v verdict) accepted() bool { return v.status == http.StatusOK }

func (v verdict) String() string {
	if v.accepted() {
		return fmt.Sprintf("200 as %s's session %q", v.name, v.id)
	}
	return fmt.Sprintf("%d %q", v.status, v.body)
}

// me asks the instance whose session cookie is.
func (in *instance) me(t *testing.T, cookie string) verdict {
	t.Helper()
	status, body, set := in.call(t, http.MethodGet, "/me", nil, cookie)
	v := verdict{status: status, body: string(body), refreshed: set != ""}
	if status == http.StatusOK {
		var me struct {
			Name, ID string
			Expires  int64
		}
		if err := json.Unmarshal(body, &me); err != nil {
			t.Fatalf("GET /me on the %s instance: %v: %s", in.name, err, body)
		}
		v.name, v.id, v.expires = me.Name, me.ID, me.Expires
	}
	return v
}

// list returns the IDs of user's sessions that the instance lists.
func (in *instance) list(t *testing.T, user string) ([]string, error) {
	t.Helper()
	status, body, _ := in.call(t, http.MethodGet, "/list", url.Values{"name": {user}}, "")
	if status != http.StatusOK {
		return nil, fmt.Errorf("%d %s", status, body)
	}
	var ids []string
	if err := json.Unmarshal(body, &ids); err != nil {
		t.Fatalf("GET /list on the %s instance: %v: %s", in.name, err, body)
	}
	return ids, nil
}

// post sends a POST and returns nil for a 2xx answer, or an error that
// gives the status and body.
func (in *instance) post(t *testing.T, path string, query url.Values, cookie string) error {
	t.Helper()
	status, body, _ := in.call(t, http.MethodPost, path, query, cookie)
	if status/100 != 2 {
		return fmt.Errorf("POST %s on the %s instance: %d %s", path, in.name, status, body)
	}
	return nil
}
