//go:build unix

package main

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDemoStops runs ./scripts/demo and stops it the way an IDE's stop
// button, timeout and `kill $!` do: with one signal to the script's PID
// alone, not to its process group. The script must pass the signal on to
// the app, wait for the app's graceful shutdown, stop dynalite and exit,
// leaving no process behind.
func TestDemoStops(t *testing.T) {
	t.Parallel()
	// One after the other: each run builds the app and starts a dynalite.
	for name, sig := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT} {
		t.Run(name, func(t *testing.T) {
			run := startScript(t, "demo", "-addr", "127.0.0.1:0")
			// The first run builds the app from a cold cache.
			appAddr := run.await(t, "the app's URL", run.out.app, startupBound(t))
			dynaliteAddr := run.await(t, "dynalite's address", run.out.dynalite, 0)
			waitForHTTP(t, "http://"+appAddr+"/", run.out)

			if err := run.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// The app exits 0 after its graceful shutdown.
			run.assertExit(t, 0)
			run.assertGone(t, "the app", appAddr)
			run.assertGone(t, "dynalite", dynaliteAddr)
		})
	}
}

// TestWithDynaliteCommandSignalled signals the command that
// scripts/with-dynalite runs, not the script: the script must exit with
// the command's status and stop dynalite.
func TestWithDynaliteCommandSignalled(t *testing.T) {
	t.Parallel()
	run := startScript(t, "with-dynalite", "sh", "-c", `echo "command $$"; exec sleep 600`)
	pid, err := strconv.Atoi(run.await(t, "the command's PID", run.out.command, startupBound(t)))
	if err != nil {
		t.Fatal(err)
	}
	dynaliteAddr := run.await(t, "dynalite's address", run.out.dynalite, 0)
	if !accepts(dynaliteAddr) {
		t.Fatalf("dynalite at %s refuses connections while its command runs", dynaliteAddr)
	}

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	run.assertExit(t, 128+int(syscall.SIGTERM))
	run.assertGone(t, "dynalite", dynaliteAddr)
}

// scriptRun is one run of a script of scripts/, in a process group of its
// own.
type scriptRun struct {
	cmd    *exec.Cmd
	out    *scriptOutput
	exited chan error
}

func startScript(t *testing.T, name string, args ...string) *scriptRun {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "scripts", name))
	if err != nil {
		t.Fatal(err)
	}
	run := &scriptRun{cmd: exec.Command(path, args...), out: newScriptOutput(), exited: make(chan error, 1)}
	run.cmd.Stdout, run.cmd.Stderr = run.out, run.out
	// A process group of its own for the script and everything it starts,
	// so that the test can tell when all of them are gone, and kill what is
	// left if it fails. The signals under test go to single processes.
	run.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process left behind that holds the output open must not hang Wait.
	run.cmd.WaitDelay = 2 * time.Second
	if err := startWithSIGINT(run.cmd); err != nil {
		t.Fatal(err)
	}
	group := run.cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-group, syscall.SIGKILL) })
	go func() { run.exited <- run.cmd.Wait() }()
	return run
}

// startWithSIGINT starts cmd with SIGINT at its default disposition. A
// shell cannot trap a signal that it was started with ignored, and this
// test may have been started so itself, as a background job of a
// non-interactive shell is. exec resets a caught signal to its default but
// leaves an ignored one ignored: so SIGINT is caught while cmd starts.
// (signal.Ignored cannot tell: it reports false once Notify and Stop have
// restored an ignored SIGINT.)
func startWithSIGINT(cmd *exec.Cmd) error {
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT)
	defer signal.Stop(caught)
	return cmd.Start()
}

// await returns the first value found on the script's output, waiting at
// most bound for it; with a bound of 0 it must have been printed already,
// before what the test awaited last.
func (r *scriptRun) await(t *testing.T, what string, found <-chan string, bound time.Duration) string {
	t.Helper()
	if bound == 0 {
		select {
		case v := <-found:
			return v
		default:
			t.Fatalf("scripts/%s did not print %s first:\n%s", filepath.Base(r.cmd.Path), what, r.out)
		}
	}
	select {
	case v := <-found:
		return v
	case err := <-r.exited:
		r.exited <- err // for assertExit
		t.Fatalf("scripts/%s exited (%v) before printing %s:\n%s", filepath.Base(r.cmd.Path), err, what, r.out)
	case <-time.After(bound):
		t.Fatalf("scripts/%s did not print %s within %v:\n%s", filepath.Base(r.cmd.Path), what, bound, r.out)
	}
	return ""
}

// assertExit checks that the script exits promptly with code.
func (r *scriptRun) assertExit(t *testing.T, code int) {
	t.Helper()
	// Enough for the app's shutdown with no requests in flight, and for
	// dynalite to close.
	const bound = 15 * time.Second
	select {
	case err := <-r.exited:
		var exit *exec.ExitError
		switch {
		case errors.Is(err, exec.ErrWaitDelay):
			t.Errorf("the script exited, but a process it started still holds its output open:\n%s", r.out)
		case err == nil && code == 0:
		case errors.As(err, &exit) && exit.ExitCode() == code:
		default:
			t.Errorf("the script exited with %v, want exit code %d:\n%s", err, code, r.out)
		}
	case <-time.After(bound):
		t.Fatalf("the script still runs %v after the signal:\n%s", bound, r.out)
	}
	// The script waits for what it started, so nothing of its group is
	// left; a moment's grace for the kernel all the same.
	group := r.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-group, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("processes of the script's group still run after it exited:\n%s", r.out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// assertGone checks that what listened at addr no longer accepts
// connections.
func (r *scriptRun) assertGone(t *testing.T, what, addr string) {
	t.Helper()
	if accepts(addr) {
		t.Errorf("%s at %s still accepts connections after the script exited", what, addr)
	}
}

// startupBound is how long a script may take to start: a few minutes,
// since the demo builds the app, less if the test's deadline comes sooner.
func startupBound(t *testing.T) time.Duration {
	bound := 4 * time.Minute
	if d, ok := t.Deadline(); ok {
		bound = min(bound, time.Until(d)-30*time.Second)
	}
	return bound
}

// waitForHTTP waits, for at most 30 seconds, until url answers a GET.
func waitForHTTP(t *testing.T, url string, out *scriptOutput) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := client.Get(url)
		if err == nil {
			res.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v\n%s", url, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// accepts reports whether addr accepts a TCP connection.
func accepts(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// scriptOutput collects a script's stdout and stderr, and picks out what
// the tests need as its lines arrive: the first of each kind counts.
type scriptOutput struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	scanned  int
	app      chan string // the app's address, from "open http://<address>/"
	dynalite chan string // from "dynalite listening on http://<address>"
	command  chan string // a PID, from "command <pid>"
}

var (
	appLine      = regexp.MustCompile(`^open http://(localhost:[0-9]+)/$`)
	dynaliteLine = regexp.MustCompile(`^dynalite listening on http://(127\.0\.0\.1:[0-9]+)$`)
	commandLine  = regexp.MustCompile(`^command ([0-9]+)$`)
)

func newScriptOutput() *scriptOutput {
	return &scriptOutput{app: make(chan string, 1), dynalite: make(chan string, 1), command: make(chan string, 1)}
}

func (o *scriptOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	for {
		rest := o.buf.Bytes()[o.scanned:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			return len(p), nil
		}
		line := rest[:end]
		o.scanned += end + 1
		for re, found := range map[*regexp.Regexp]chan string{appLine: o.app, dynaliteLine: o.dynalite, commandLine: o.command} {
			if m := re.FindSubmatch(line); m != nil {
				select {
				case found <- string(m[1]):
				default:
				}
			}
		}
	}
}

func (o *scriptOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
