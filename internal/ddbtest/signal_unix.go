//go:build unix

package ddbtest

import (
	"bufio"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SignalStops builds the command in the test's directory and runs it as a
// process of its own, with args and "-addr 127.0.0.1:0", as a user's shell
// would; it must print a first line that ends "on http://ADDR/". Then it
// stops it the way Ctrl-C and kill do, with SIGINT and with SIGTERM: it
// must close its listener and exit 0. The process inherits the engine that
// Main publishes in the environment. The command is built and run, not run
// through go run, which passes neither signal on: go run ignores SIGINT and
// dies of SIGTERM, and the program it started lives on.
func SignalStops(t *testing.T, args ...string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "command")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for name, sig := range map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the command's stderr:\n%s", stderr.String())
				}
			})
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			line, err := bufio.NewReader(stdout).ReadString('\n')
			go func() { exited <- cmd.Wait() }()
			_, base, _ := strings.Cut(strings.TrimSpace(line), " on ")
			addr := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")
			if err != nil || !takesConnections(addr) {
				cmd.Process.Kill()
				<-exited
				t.Fatalf("the command printed %q (%v), and %q takes no connection", line, err, addr)
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("after %s: %v, want exit status 0", name, err)
				}
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 15s after %s", name)
			}
			if takesConnections(addr) {
				t.Errorf("%s still takes connections after the command exited", addr)
			}
		})
	}
}

// takesConnections reports whether addr takes a TCP connection.
func takesConnections(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
	}
	return err == nil
}
