//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The Lambda runtime interface emulator, which runs a provided.al2023
// function's bootstrap as Lambda's Init and Invoke phases do, behind the
// invocation endpoint of Lambda's API. Its module has no release tags that
// the module proxy serves (go list -m -versions lists none), so it is
// pinned at the pseudo-version of its latest commit there.
const (
	rieModule  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"
)

// emulatorBuilds are the emulator and the function's bootstrap, built once
// per test binary into buildDir, which TestMain removes.
var emulatorBuilds struct {
	once           sync.Once
	rie, bootstrap string
	err            error
}

// emulatorBinaries installs the emulator with go install from the module
// proxy, and builds the bootstrap for this machine with the emulator's
// test hooks (hooks_emulatortest.go).
func emulatorBinaries(t *testing.T) (rie, bootstrap string) {
	t.Helper()
	b := &emulatorBuilds
	b.once.Do(func() {
		dir, err := buildDir()
		if err != nil {
			b.err = err
			return
		}
		install := exec.Command("go", "install", rieModule+"/cmd/aws-lambda-rie@"+rieVersion)
		install.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "CGO_ENABLED=0")
		if out, err := install.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go install the emulator: %v\n%s", err, out)
			return
		}
		build := exec.Command("go", "build", "-tags", "lambda.norpc,emulatortest", "-o", filepath.Join(dir, "bootstrap"), ".")
		build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build the bootstrap: %v\n%s", err, out)
			return
		}
		b.rie, b.bootstrap = filepath.Join(dir, "aws-lambda-rie"), filepath.Join(dir, "bootstrap")
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.rie, b.bootstrap
}

var builds struct {
	mu  sync.Mutex
	dir string
}

// buildDir is the test binary's directory for the emulator's binaries.
func buildDir() (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "ddbsession-lambda-emulator-")
		if err != nil {
			return "", err
		}
		builds.dir = dir
	}
	return builds.dir, nil
}

func init() {
	afterTests = append(afterTests, func() {
		builds.mu.Lock()
		defer builds.mu.Unlock()
		if builds.dir != "" {
			os.RemoveAll(builds.dir)
		}
	})
}

// environment is one execution environment under the emulator: the
// emulator's process, and the function's, which it starts on the first
// invocation and which the test freezes between invocations, as Lambda
// does once a response is out.
type environment struct {
	t      *testing.T
	rie    *exec.Cmd
	invoke string // the invocation endpoint
	logs   *lockedBuffer
	fn     int // the function's process, once started
}

// startEnvironment starts the emulator on bootstrap with env, the
// function's whole environment, on two free loopback ports.
func startEnvironment(t *testing.T, rie, bootstrap string, env []string) *environment {
	t.Helper()
	for attempt := 1; ; attempt++ {
		e := &environment{t: t, logs: &lockedBuffer{}}
		apiPort, invokePort := freePort(t), freePort(t)
		e.rie = exec.Command(rie,
			"--runtime-interface-emulator-address", "127.0.0.1:"+invokePort,
			"--runtime-api-address", "127.0.0.1:"+apiPort,
			bootstrap)
		e.rie.Dir, e.rie.Env = filepath.Dir(bootstrap), env
		e.rie.Stdout, e.rie.Stderr = e.logs, e.logs
		// Its own process group, which the function's process joins: the
		// test ends both, and a test binary that dies takes the emulator
		// along.
		e.rie.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := e.rie.Start(); err != nil {
			t.Fatalf("start the emulator: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			e.rie.Wait()
			close(exited)
		}()
		e.invoke = "http://127.0.0.1:" + invokePort + "/2015-03-31/functions/function/invocations"
		t.Cleanup(func() { e.stop(exited) })
		if err := e.waitListening(invokePort, exited); err == nil {
			return e
		} else if attempt == 5 || !strings.Contains(e.logs.String(), "address already in use") {
			t.Fatalf("the emulator did not start: %v\n%s", err, e.logs)
		}
		// A port was taken between the probe and the emulator's bind.
	}
}

// waitListening waits until the emulator accepts connections on port, or
// exits.
func (e *environment) waitListening(port string, exited <-chan struct{}) error {
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited: %v", e.rie.ProcessState)
		case <-time.After(pause):
		}
	}
}

// stop kills the environment, the emulator and the function together,
// and waits until the emulator is gone.
func (e *environment) stop(exited <-chan struct{}) {
	syscall.Kill(-e.rie.Process.Pid, syscall.SIGKILL)
	<-exited
}

// function returns the function's process: the emulator's one child.
func (e *environment) function() int {
	e.t.Helper()
	if e.fn != 0 {
		return e.fn
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", e.rie.Process.Pid))
	if err != nil {
		e.t.Fatal(err)
	}
	var children []int
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that ended
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			children = append(children, pid)
		}
	}
	if len(children) != 1 {
		e.t.Fatalf("the emulator has children %v, want the function's alone", children)
	}
	e.fn = children[0]
	return e.fn
}

// state is the function's process state: 'T' stopped, 'S' sleeping...
func (e *environment) state() byte {
	e.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.function()))
	if err != nil {
		e.t.Fatal(err)
	}
	// pid (comm) state ...: comm may hold spaces, so after the last ')'.
	rest := b[bytes.LastIndexByte(b, ')')+1:]
	return bytes.TrimSpace(rest)[0]
}

// freeze stops the function's process, as Lambda freezes an environment
// whose response is out, and waits until it is stopped.
func (e *environment) freeze() {
	e.t.Helper()
	if err := syscall.Kill(e.function(), syscall.SIGSTOP); err != nil {
		e.t.Fatal(err)
	}
	for e.state() != 'T' {
		runtime.Gosched()
	}
}

// thaw lets a frozen function run again, before an invocation.
func (e *environment) thaw() {
	e.t.Helper()
	if e.fn != 0 {
		if err := syscall.Kill(e.fn, syscall.SIGCONT); err != nil {
			e.t.Fatal(err)
		}
	}
}

// kill kills the function's process, as Lambda recycles an environment,
// and the emulator with it.
func (e *environment) kill() {
	e.t.Helper()
	if err := syscall.Kill(e.function(), syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	syscall.Kill(-e.rie.Process.Pid, syscall.SIGKILL)
}

// call posts ev to the invocation endpoint, as a Function URL does, and
// returns the response the function streamed.
func (e *environment) call(ev *events.LambdaFunctionURLRequest) (response, error) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return response{}, err
	}
	res, err := http.Post(e.invoke, "application/json", bytes.NewReader(payload))
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	if res.StatusCode != http.StatusOK {
		return response{}, fmt.Errorf("invocation: %s: %s", res.Status, body)
	}
	// A streamed Function URL response: the JSON prelude, eight NUL bytes,
	// then the body.
	prelude, rest, ok := bytes.Cut(body, make([]byte, 8))
	if !ok {
		return response{}, fmt.Errorf("invocation: not a streamed Function URL response: %q", body)
	}
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Cookies    []string          `json:"cookies"`
	}
	if err := json.Unmarshal(prelude, &p); err != nil {
		return response{}, fmt.Errorf("invocation's prelude %q: %v", prelude, err)
	}
	return newResponse(e.t, p.StatusCode, p.Headers, p.Cookies, rest), nil
}

// do invokes the function, thawed, with c's request, and keeps the cookies
// of the response.
func (e *environment) do(c *client, method, target string, form url.Values) response {
	e.t.Helper()
	e.thaw()
	r, err := e.call(c.request(method, target, form, nil))
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s", method, target, err, e.logs)
	}
	c.keep(r)
	return r
}

// coldStart is the function's log line of what its Init took, with the
// emulator's report of the Init phase's duration as Lambda bills it.
//
// The function's output reaches the logs through the emulator's pipe, on
// its own time: a response can arrive before the line that the function
// wrote before it. So this waits for the line, failing only if it never
// comes (a minute, which no busy machine takes to copy a line).
func (e *environment) coldStart() map[string]any {
	e.t.Helper()
	for waited, pause := time.Duration(0), time.Millisecond; ; waited, pause = waited+pause, min(2*pause, 100*time.Millisecond) {
		var found map[string]any
		var report string
		sc := bufio.NewScanner(strings.NewReader(e.logs.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "cold start" {
				found = line
			}
			if _, after, ok := strings.Cut(sc.Text(), "INIT REPORT(durationMs: "); ok {
				report, _, _ = strings.Cut(after, ")")
			}
		}
		if found != nil {
			found["emulator_init_ms"] = report
			return found
		}
		if waited > time.Minute {
			e.t.Fatalf("no cold start line in the function's logs:\n%s", e.logs)
		}
		time.Sleep(pause)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// layoutWrite reports whether c is the write of the table's layout record.
func layoutWrite(c ddbtest.FrontCall) bool {
	var in struct {
		Item struct{ Kind struct{ S string } }
	}
	return c.Action == "dynamodb:PutItem" && json.Unmarshal(c.Body, &in) == nil && in.Item.Kind.S == "ddbsession-layout"
}

// sessionWrite reports whether c is a write of a session item.
func sessionWrite(c ddbtest.FrontCall) bool {
	var in struct {
		Key struct{ PK struct{ S string } }
	}
	return c.Action == "dynamodb:UpdateItem" && json.Unmarshal(c.Body, &in) == nil && strings.HasPrefix(in.Key.PK.S, "SESSION#")
}

// Under the emulator, frozen after every response and killed after the
// refresh-due one, the function keeps the refresh: its write was done
// before the response, so the table holds the new expiry, and a new
// environment accepts the cookie past the old one.
func TestEmulatorFrozenEnvironmentKeepsTheRefresh(t *testing.T) {
	t.Parallel()
	runFrozen(t, false)
}

// The same, with the refresh written after the response (as off Lambda):
// the freeze catches the write on its way, the kill loses it, and a new
// environment refuses the cookie past the old expiry. This is what the
// freeze-safe mode is for.
func TestEmulatorFreezeLosesARefreshWrittenAfterTheResponse(t *testing.T) {
	t.Parallel()
	runFrozen(t, true)
}

// whileHeld is how long the freeze-safe test waits, with the refresh's
// write held, for an answer that must not come.
const whileHeld = 2 * time.Second

func runFrozen(t *testing.T, afterResponse bool) {
	rie, bootstrap := emulatorBinaries(t)
	table, ttl := deployTemplate(t, "")

	// The refresh's write is held on its way, at the front, until the test
	// lets it go or its caller dies: where it is when the environment
	// freezes decides whether it lands.
	var armed atomic.Bool
	held, dropped, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	var calls sync.Map // action -> *atomic.Int32
	var layoutWrites atomic.Int32
	front := ddbtest.NewFront(t, ddbtest.Policy{Actions: functionActions(t), Resources: []string{ddbtest.TableARN(table)}},
		ddbtest.FrontTTL(ttl),
		ddbtest.FrontHold(func(ctx context.Context, c ddbtest.FrontCall) bool {
			n, _ := calls.LoadOrStore(c.Action, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			if layoutWrite(c) {
				layoutWrites.Add(1)
			}
			if !sessionWrite(c) || !armed.CompareAndSwap(true, false) {
				return true
			}
			held <- struct{}{}
			select {
			case <-release:
				return true
			case <-ctx.Done():
				dropped <- struct{}{}
				return false
			}
		}))
	count := func(action string) int32 {
		n, ok := calls.Load(action)
		if !ok {
			return 0
		}
		return n.(*atomic.Int32).Load()
	}
	t.Cleanup(func() {
		for _, c := range front.Refused() {
			t.Errorf("the function called %s, which its policy lacks", c.Action)
		}
	})

	clockFile := filepath.Join(t.TempDir(), "now")
	setClock := func(at time.Time) {
		if err := os.WriteFile(clockFile, []byte(at.Format(time.RFC3339Nano)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setClock(start)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"TABLE=" + table, "IDLE_TIMEOUT=1h", "REFRESH_INTERVAL=10m", "STORE_TIMEOUT=1m",
		// The SDK's own settings: the front, and dummy credentials.
		"AWS_ENDPOINT_URL_DYNAMODB=" + front.URL, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=ddbtest", "AWS_SECRET_ACCESS_KEY=ddbtest", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/nonexistent/config", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/credentials",
		"AWS_LAMBDA_FUNCTION_NAME=ddbsession-example",
		"TEST_CLOCK_FILE=" + clockFile,
	}
	if afterResponse {
		env = append(env, "TEST_REFRESH_AFTER_RESPONSE=1")
	}

	first := startEnvironment(t, rie, bootstrap, env)
	b := newClient()
	// The cold start: the signed-out page needs no call, so every call so
	// far is the Init's. It is the deployment's first, on a table without
	// a layout record, so the table check writes the record.
	if r := first.do(b, "GET", "/", nil); r.status != http.StatusOK {
		t.Fatalf("GET /: %d", r.status)
	}
	first.freeze()
	if used := front.Used(); !slices.Equal(used, []string{"dynamodb:BatchGetItem", "dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive", "dynamodb:PutItem"}) || layoutWrites.Load() != 1 {
		t.Errorf("the cold start's calls: %v, %d of them the layout record's write; want the table check's, and the record's one write", used, layoutWrites.Load())
	}
	t.Logf("cold start: %v", first.coldStart())

	if r := first.do(b, "POST", "/signup", url.Values{"username": {"alice"}, "password": {"correct horse"}, "remember": {"on"}}); r.status != http.StatusSeeOther {
		t.Fatalf("sign-up: %d %q\n%s", r.status, r.body, first.logs)
	}
	first.freeze()
	setClock(start.Add(time.Second))
	if r := first.do(b, "POST", "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}}); r.status != http.StatusSeeOther {
		t.Fatalf("login: %d %q", r.status, r.body)
	}
	first.freeze()
	loggedIn := time.Unix(start.Add(time.Second+time.Hour).Unix(), 0) // the login's expiry
	setClock(start.Add(time.Minute))
	if r := first.do(b, "GET", "/account", nil); r.status != http.StatusOK || r.cookie(sessionCookie) != nil {
		t.Fatalf("a guarded request: %d, cookie %v", r.status, r.cookie(sessionCookie))
	}
	first.freeze()

	// Past REFRESH_INTERVAL: the request moves the expiry forward.
	due := start.Add(15 * time.Minute)
	refreshed := time.Unix(due.Add(time.Hour).Unix(), 0)
	setClock(due)
	armed.Store(true)
	first.thaw()
	answered := make(chan response, 1)
	go func() {
		r, err := first.call(b.request("GET", "/account", nil, nil))
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	var r response
	if afterResponse {
		r = <-answered // while the write is on its way, held
		<-held
	} else {
		<-held
		// The write is held on its way. Written before the response, it
		// keeps the function from answering until it lands; written after,
		// it would not. A function that writes first passes however long
		// this waits: the wait bounds only how surely one that writes after
		// the response is caught.
		select {
		case <-answered:
			t.Fatal("the function answered while its refresh's write was on its way: the write runs after the response")
		case <-time.After(whileHeld):
		}
		close(release)
		r = <-answered
	}
	b.keep(r)
	if c := r.cookie(sessionCookie); r.status != http.StatusOK || c == nil || due.Add(time.Duration(c.MaxAge)*time.Second).Unix() != refreshed.Unix() {
		t.Fatalf("the refresh-due request: %d, cookie %v; want one until %v", r.status, c, refreshed)
	}
	// Lambda recycles the environment: what was still to run never runs.
	first.kill()
	if afterResponse {
		<-dropped
	}
	sessions := sessionItemsIn(t, ttl.Client, table)
	if len(sessions) != 1 {
		t.Fatalf("%d sessions in the table, want 1", len(sessions))
	}
	want := refreshed
	if afterResponse {
		want = loggedIn
	}
	if got := sessions[0].ExpiresAt; !got.Equal(want) {
		t.Errorf("the table's expiry after the kill: %v, want %v", got, want)
	}
	if n := count("dynamodb:DescribeTable"); n != 1 {
		t.Errorf("the first environment checked the table %d times over 5 invocations, want once: the Manager is made per invocation", n)
	}

	// A new environment, past the login's expiry and before the refreshed
	// one.
	setClock(loggedIn.Add(5 * time.Minute))
	second := startEnvironment(t, rie, bootstrap, env)
	r = second.do(b, "GET", "/account", nil)
	second.freeze()
	switch {
	case !afterResponse && r.status != http.StatusOK:
		t.Errorf("the new environment refused the refreshed session: %d, Location %q", r.status, r.header.Get("Location"))
	case afterResponse && (r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next=%2Faccount"):
		t.Errorf("the new environment, the refresh lost: %d, Location %q; want 303 to log in", r.status, r.header.Get("Location"))
	}
	if r := second.do(b, "POST", "/logout", url.Values{}); r.status != http.StatusSeeOther || b.cookies[sessionCookie] != "" {
		t.Errorf("logout: %d, cookies %v", r.status, b.cookies)
	}
	second.freeze()
	// The refreshed session is gone with the logout; the one whose refresh
	// was lost expired, and TTL removes it.
	for _, s := range sessionItemsIn(t, ttl.Client, table) {
		if !afterResponse || s.ExpiresAt.After(loggedIn) {
			t.Errorf("a session left after the logout, until %v", s.ExpiresAt)
		}
	}
	if r := second.do(newClient(), "GET", "/", nil); r.status != http.StatusOK {
		t.Errorf("GET / after the logout: %d", r.status)
	}
	if n := count("dynamodb:DescribeTable"); n != 2 {
		t.Errorf("two environments checked the table %d times, want twice", n)
	}
	if n := layoutWrites.Load(); n != 1 {
		t.Errorf("the layout record was written %d times, want once: the second environment's check finds it", n)
	}
	t.Logf("second cold start: %v", second.coldStart())
}
