package ddbtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The version in messages is the lockfile's, and the one package.json
// asks for: the scripts and the Go side install from these files.
func TestDynalitePin(t *testing.T) {
	t.Parallel()
	b, err := ddbtest.DynaliteFiles.ReadFile("dynalite/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Dependencies map[string]string }
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	if got, want := ddbtest.DynaliteVersion(), pkg.Dependencies["dynalite"]; got != want || want == "" {
		t.Errorf("the lockfile pins dynalite %q, package.json asks for %q", got, want)
	}
}

// needNode fails t, rather than skipping it, where Node.js is missing: the
// project's tests need it (scripts/test runs dynalite with it).
func needNode(t *testing.T) {
	t.Helper()
	for _, command := range []string{"node", "npm"} {
		if _, err := exec.LookPath(command); err != nil {
			t.Fatalf("this test runs dynalite with Node.js, and needs node and npm on PATH: %v", err)
		}
	}
}

// installed installs dynalite in the user's cache, as Main does, or fails t.
func installed(t *testing.T) string {
	t.Helper()
	needNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := ddbtest.InstallDynalite(ctx)
	if err != nil {
		t.Fatalf("InstallDynalite: %v", err)
	}
	return dir
}

// Test binaries that install at once into an empty cache all end with the
// same whole install, and leave no partial one behind.
func TestInstallDynaliteConcurrently(t *testing.T) {
	t.Parallel()
	needNode(t)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dirs := make([]string, 2)
	var wg sync.WaitGroup
	for i := range dirs {
		wg.Go(func() {
			dir, err := ddbtest.InstallDynaliteIn(ctx, root)
			if err != nil {
				t.Errorf("install %d: %v", i, err)
			}
			dirs[i] = dir
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, dir := range dirs[1:] {
		if dir != dirs[0] {
			t.Errorf("installs into %q and %q, want one directory", dirs[0], dir)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(dirs[0]))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := filepath.Base(dirs[0]); len(names) != 1 || names[0] != want {
		t.Errorf("the cache holds %q, want only %q", names, want)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "node_modules", "dynalite", "package.json")); err != nil {
		t.Errorf("dynalite is not installed: %v", err)
	}
}

func TestStartDynaliteAndStop(t *testing.T) {
	t.Parallel()
	dir := installed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := ddbtest.StartDynaliteIn(ctx, dir)
	if err != nil {
		t.Fatalf("StartDynaliteIn: %v", err)
	}
	if !accepts(d.Endpoint) {
		t.Fatalf("dynalite at %s refuses connections", d.Endpoint)
	}
	d.Stop()
	if accepts(d.Endpoint) {
		t.Errorf("dynalite at %s still accepts connections after Stop", d.Endpoint)
	}
}

func TestStartDynaliteReportsAnEarlyExit(t *testing.T) {
	t.Parallel()
	needNode(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dynalite.js"), []byte("process.exit(3)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := ddbtest.StartDynaliteIn(ctx, dir)
	if err == nil {
		d.Stop()
		t.Fatal("StartDynaliteIn of a script that exits: no error")
	}
	if !strings.Contains(err.Error(), "exited before it listened (exit status 3)") {
		t.Errorf("error %q, want it to say that dynalite exited with status 3", err)
	}
}

// dynaliteChildEnv marks the copy of this test binary that
// TestDynaliteStopsWithItsTestBinary starts and kills.
const dynaliteChildEnv = "DDBTEST_DYNALITE_CHILD"

// A test binary that dies without running any deferred code (SIGKILL, as
// go test's -timeout and an IDE's hard stop end one) leaves no dynalite
// running: dynalite exits when its stdin, a pipe from the test binary,
// closes.
func TestDynaliteStopsWithItsTestBinary(t *testing.T) {
	if os.Getenv(dynaliteChildEnv) != "" {
		runDynaliteChild(t)
		return
	}
	t.Parallel()
	installed(t) // so that the child need not install it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDynaliteStopsWithItsTestBinary$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), dynaliteChildEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var endpoint string
	for scanner := bufio.NewScanner(stdout); scanner.Scan(); {
		if e, ok := strings.CutPrefix(scanner.Text(), "dynalite at "); ok {
			endpoint = e
			break
		}
	}
	if endpoint == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not report dynalite's endpoint:\n%s", stderr.String())
	}
	if !accepts(endpoint) {
		t.Fatalf("dynalite at %s refuses connections while its test binary runs", endpoint)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for accepts(endpoint) {
		if time.Now().After(deadline) {
			t.Fatalf("dynalite at %s still accepts connections 10s after its test binary was killed", endpoint)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runDynaliteChild is the child's half: start dynalite, say where, and
// wait to be killed.
func runDynaliteChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := ddbtest.StartDynaliteIn(ctx, installed(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop() // never runs: the parent kills this process
	fmt.Printf("dynalite at %s\n", d.Endpoint)
	time.Sleep(time.Minute)
	t.Error("the parent did not kill this process within a minute")
}

// accepts reports whether something accepts TCP connections at endpoint's
// host and port.
func accepts(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		var opErr *net.OpError
		return !errors.As(err, &opErr) // any other error: say yes, and look again
	}
	conn.Close()
	return true
}
