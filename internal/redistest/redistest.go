// Package redistest starts Debian's redis-server for tests, the way
// internal/ddbtest starts dynalite: a real server of its own per test, on a
// free loopback port, in a process group of its own, stopped by its PID
// when the test ends. It never skips: without redis-server on PATH the test
// fails and says how to install it.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Bounds of the wait for a started server: pingTries connections, each
// pingWait apart, each with pingTimeout to answer. Not a sleep that guesses
// how long the server takes: the first answer ends the wait.
const (
	pingTries   = 200
	pingWait    = 25 * time.Millisecond
	pingTimeout = time.Second
	startTries  = 5 // ports to try when another process took the free one first
)

// Start starts a redis-server on a free loopback port, with no persistence,
// and returns its address (127.0.0.1:port) once it answers PING. t.Cleanup
// kills its process group and waits for it.
func Start(t testing.TB) (addr string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: no redis-server on PATH (%v): install it (Debian: apt-get install redis-server)", err)
	}
	var last error
	for range startTries {
		addr, err := start(t, bin)
		if err == nil {
			return addr
		}
		last = err
	}
	t.Fatalf("redistest: %v", last)
	return ""
}

// start starts one server on a port that was free a moment ago; the caller
// tries again if another process took it meanwhile.
func start(t testing.TB, bin string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var out strings.Builder
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = ownGroup()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		killGroup(cmd.Process.Pid)
		<-exited
	}
	for range pingTries {
		if ping(addr) == nil {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("redis-server on %s said:\n%s", addr, out.String())
				}
			})
			return addr, nil
		}
		select {
		case <-exited:
			return "", fmt.Errorf("redis-server on port %d exited before it answered PING:\n%s", port, out.String())
		case <-time.After(pingWait):
		}
	}
	stop()
	return "", fmt.Errorf("redis-server on %s did not answer PING after %d tries:\n%s", addr, pingTries, out.String())
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ping sends PING on a new connection and wants +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, pingTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(pingTimeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
