//go:build unix

package ddbtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// Run gives the command the engine and dummy credentials, and its exit
// status comes back.
func TestRunPassesTheEngineAndTheStatus(t *testing.T) {
	want := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	code := ddbtest.Harness{Name: "test"}.Run([]string{"sh", "-c",
		`test "$AWS_ENDPOINT_URL_DYNAMODB" = "` + want + `" && test "$AWS_ACCESS_KEY_ID" = ddbtest && test -n "$AWS_REGION" && exit 3`})
	if code != 3 {
		t.Errorf("Run = %d, want the command's 3 (it checks the engine, credentials and Region)", code)
	}
	if code := (ddbtest.Harness{Name: "test"}).Run(nil); code != 2 {
		t.Errorf("Run without a command = %d, want 2", code)
	}
}

// A SIGTERM or SIGINT to the runner reaches the whole process group of
// the command, as "go run ." needs: a grandchild (the program go run
// built) stops too, and the runner exits with the command's status.
func TestRunForwardsSignalsToTheGroup(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "run")
	build := exec.Command("go", "build", "-o", bin, "github.com/ddbsession/ddbsession/ddbsessiontest/run")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "grandchild")
			// The command, like go run, catches the signal and passes it
			// on to no one; its child, like the program go run built,
			// leaves on it. The command waits for its child, then exits.
			script := `trap : INT TERM; sh -c 'trap "exit 0" INT TERM; echo $$ > ` + pidFile + `; while :; do sleep 0.05; done'; exit 5`
			runner := exec.Command(bin, "sh", "-c", script)
			if err := runner.Start(); err != nil {
				t.Fatal(err)
			}
			var grandchild int
			for deadline := time.Now().Add(30 * time.Second); grandchild == 0; time.Sleep(20 * time.Millisecond) {
				if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
					grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				if time.Now().After(deadline) {
					runner.Process.Kill()
					t.Fatal("the command never started its child")
				}
			}
			runner.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- runner.Wait() }()
			select {
			case err := <-done:
				var exit *exec.ExitError
				if err == nil || !errorsAs(err, &exit) || exit.ExitCode() != 5 {
					t.Errorf("runner after %v: %v, want the command's exit status 5", sig, err)
				}
			case <-time.After(30 * time.Second):
				runner.Process.Kill()
				t.Fatalf("the runner did not stop on %v", sig)
			}
			if err := syscall.Kill(grandchild, 0); err == nil {
				syscall.Kill(grandchild, syscall.SIGKILL)
				t.Errorf("the program the command started outlived %v", sig)
			}
		})
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*target = e
	return ok
}
