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
	"runtime"
	"slices"
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

// fakeNPM returns the path of a stand-in for npm: a shell script that,
// after a moment, leaves what npm ci leaves, or fails saying so. The real
// npm ci takes seconds of CPU, which tests that run beside these, against
// one engine, would feel.
func fakeNPM(t *testing.T, fail bool) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in for npm is a shell script")
	}
	if fakeNPMErr != nil {
		t.Fatal(fakeNPMErr)
	}
	if fail {
		return filepath.Join(fakeNPMDir, "npm-fail")
	}
	return filepath.Join(fakeNPMDir, "npm")
}

// The stand-ins are written once, before any test runs: executing a file
// that was just written while another goroutine forked fails now and then
// with "text file busy", since the child holds the written file open for a
// moment (golang.org/issue/22315). TestMain removes them.
var fakeNPMDir, fakeNPMErr = func() (string, error) {
	dir, err := os.MkdirTemp("", "ddbtest-npm-")
	if err != nil {
		return "", err
	}
	for name, script := range map[string]string{
		"npm":      "#!/bin/sh\nsleep 0.2\nmkdir -p node_modules/dynalite && echo {} >node_modules/dynalite/package.json && echo {} >node_modules/.package-lock.json\n",
		"npm-fail": "#!/bin/sh\necho 'npm error code E404' >&2\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			return dir, err
		}
	}
	return dir, nil
}()

func TestInstallDynalite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Test binaries that install at once into an empty cache all end with
	// the same whole install, and leave no partial one behind.
	t.Run("concurrently", func(t *testing.T) {
		t.Parallel()
		root, npm := t.TempDir(), fakeNPM(t, false)
		dirs := make([]string, 4)
		var wg sync.WaitGroup
		for i := range dirs {
			wg.Go(func() {
				dir, err := ddbtest.InstallDynaliteWith(ctx, root, npm)
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
		wantOnly(t, filepath.Dir(dirs[0]), filepath.Base(dirs[0]))
		wantOnly(t, dirs[0], "dynalite.js", "node_modules", "package-lock.json", "package.json")
	})

	t.Run("once", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		dir, err := ddbtest.InstallDynaliteWith(ctx, root, fakeNPM(t, false))
		if err != nil {
			t.Fatal(err)
		}
		again, err := ddbtest.InstallDynaliteWith(ctx, root, filepath.Join(t.TempDir(), "no-npm-here"))
		if err != nil || again != dir {
			t.Errorf("installing again, with no npm: %q, %v; want %q from the first install", again, err, dir)
		}
	})

	t.Run("over an incomplete install", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		dir, err := ddbtest.InstallDynaliteWith(ctx, root, fakeNPM(t, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, "node_modules", "dynalite")); err != nil {
			t.Fatal(err)
		}
		if again, err := ddbtest.InstallDynaliteWith(ctx, root, fakeNPM(t, false)); err != nil || again != dir {
			t.Fatalf("installing again: %q, %v; want %q", again, err, dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "dynalite", "package.json")); err != nil {
			t.Errorf("the incomplete install was not replaced: %v", err)
		}
	})

	t.Run("npm fails", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		_, err := ddbtest.InstallDynaliteWith(ctx, root, fakeNPM(t, true))
		if err == nil || !strings.Contains(err.Error(), "npm ci of dynalite") || !strings.Contains(err.Error(), "npm error code E404") {
			t.Errorf("error %v, want one that says npm ci failed and shows its output", err)
		}
		entries, _ := os.ReadDir(filepath.Join(root, "ddbsession"))
		if len(entries) != 0 {
			t.Errorf("a failed install left %v behind", entries)
		}
	})

	t.Run("no npm", func(t *testing.T) {
		t.Parallel()
		_, err := ddbtest.InstallDynaliteWith(ctx, t.TempDir(), filepath.Join(t.TempDir(), "npm"))
		if err == nil || !strings.Contains(err.Error(), "no npm on PATH") {
			t.Errorf("error %v, want one that names npm as missing", err)
		}
	})
}

// wantOnly fails t unless dir holds exactly the entries named.
func wantOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %q, want %q", dir, got, names)
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
