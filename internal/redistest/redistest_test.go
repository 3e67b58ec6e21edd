package redistest_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/redistest"
)

// A started server stores and returns a value; after its test's cleanup it
// takes no connection: it was stopped, not left running.
func TestStart(t *testing.T) {
	var addr string
	t.Run("server", func(t *testing.T) {
		addr = redistest.Start(t)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		for _, step := range []struct{ send, want string }{
			{"SET k v\r\n", "+OK\r\n"},
			{"GET k\r\n", "$1\r\n"},
		} {
			if _, err := c.Write([]byte(step.send)); err != nil {
				t.Fatal(err)
			}
			if got, err := r.ReadString('\n'); err != nil || got != step.want {
				t.Fatalf("%q answered %q (%v), want %q", step.send, got, err, step.want)
			}
		}
		if got, _ := r.ReadString('\n'); got != "v\r\n" {
			t.Fatalf("GET k: %q, want v", got)
		}
	})
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still takes connections after the test that started it ended", addr)
	}
}

// Two tests get two servers: one's data is not the other's.
func TestStartTwo(t *testing.T) {
	if a, b := redistest.Start(t), redistest.Start(t); a == b {
		t.Fatalf("two servers on one address %s", a)
	}
}

// Without redis-server on PATH the test fails, never skips, and says how to
// install it. The test runs itself again with an empty PATH.
func TestStartWithoutServer(t *testing.T) {
	if os.Getenv("REDISTEST_NO_SERVER") == "1" {
		redistest.Start(t)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestStartWithoutServer$", "-test.v")
	cmd.Env = append(os.Environ(), "REDISTEST_NO_SERVER=1", "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "apt-get install redis-server") {
		t.Fatalf("without redis-server: %v\n%s\nwant a failure naming apt-get install redis-server", err, out)
	}
}
