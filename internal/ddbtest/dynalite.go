package ddbtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// dynaliteFiles is the pin of dynalite and the script that starts it: the
// same files that scripts/lib.bash installs with npm ci and runs, so that
// both pin one version.
//
//go:embed dynalite/package.json dynalite/package-lock.json dynalite/dynalite.js
var dynaliteFiles embed.FS

var dynaliteFileNames = []string{"package.json", "package-lock.json", "dynalite.js"}

// minNodeVersion is the oldest Node.js that the pinned dynalite supports
// (its package's engines field).
const minNodeVersion = "20"

// installTimeout bounds installing dynalite (npm ci, which downloads it the
// first time) and starting it.
const installTimeout = 5 * time.Minute

// dynaliteVersion returns the version of dynalite that the lockfile pins.
func dynaliteVersion() string {
	b, err := dynaliteFiles.ReadFile("dynalite/package-lock.json")
	if err != nil {
		panic(err) // embedded: it is there
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil || lock.Packages["node_modules/dynalite"].Version == "" {
		return "(see its package-lock.json)"
	}
	return lock.Packages["node_modules/dynalite"].Version
}

// dynaliteDir is where the pinned dynalite is installed: a directory of the
// user's cache (the temporary directory if there is none) named by a digest
// of the pin, so that one machine installs each pin once and a changed pin
// anew.
func dynaliteDir() (string, error) { return dynaliteDirIn(cacheRoot()) }

func cacheRoot() string {
	root, err := os.UserCacheDir()
	if err != nil {
		return os.TempDir()
	}
	return root
}

func dynaliteDirIn(cacheRoot string) (string, error) {
	h := sha256.New()
	for _, name := range dynaliteFileNames {
		b, err := dynaliteFiles.ReadFile("dynalite/" + name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return filepath.Join(cacheRoot, "ddbsession", "dynalite-"+hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// InstallDynalite installs the pinned dynalite with npm ci into the user's
// cache directory, unless it is there already, and returns that directory.
// npm needs the npm registry (or its own cache) the first time only.
func InstallDynalite(ctx context.Context) (dir string, err error) {
	return installDynalite(ctx, cacheRoot(), "npm", project.Name)
}

// installDynalite installs into cacheRoot with the command npm (tests name
// a stand-in), and names the package logName in the line it prints when it
// installs. Test binaries that install at once (go test runs packages in
// parallel) each install into a directory of their own and rename it into
// place: the directory appears whole or not at all, the first rename wins,
// and the others use it.
func installDynalite(ctx context.Context, cacheRoot, npm, logName string) (string, error) {
	dir, err := dynaliteDirIn(cacheRoot)
	if err != nil {
		return "", err
	}
	if dynaliteInstalled(dir) {
		return dir, nil
	}
	npm, err = exec.LookPath(npm)
	if err != nil {
		return "", fmt.Errorf("no npm on PATH (%v) to install dynalite %s into %s", err, dynaliteVersion(), dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("installing dynalite: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		return "", fmt.Errorf("installing dynalite: %w", err)
	}
	defer os.RemoveAll(tmp) // gone already once renamed
	for _, name := range dynaliteFileNames {
		b, err := dynaliteFiles.ReadFile("dynalite/" + name)
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, name), b, 0o644)
		}
		if err != nil {
			return "", fmt.Errorf("installing dynalite: %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s: installing dynalite %s into %s with npm ci, once\n", logName, dynaliteVersion(), dir)
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	cmd.WaitDelay = 5 * time.Second // npm's own children may hold the output open
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci of dynalite %s failed (%v):\n%s", dynaliteVersion(), err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if dynaliteInstalled(dir) {
			return dir, nil // another test binary was first
		}
		// What is there is incomplete (removed in part by hand): replace it.
		os.RemoveAll(dir)
		if err := os.Rename(tmp, dir); err != nil && !dynaliteInstalled(dir) {
			return "", fmt.Errorf("installing dynalite: %w", err)
		}
	}
	return dir, nil
}

// dynaliteInstalled reports whether dir holds an installed dynalite and
// its start script.
func dynaliteInstalled(dir string) bool {
	for _, name := range []string{"dynalite.js", "node_modules/dynalite/package.json", "node_modules/.package-lock.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// startDynalite installs dynalite if need be and starts it with Node on a
// free loopback port, and returns its endpoint and a function that stops
// it. stop is never nil.
func startDynalite(ctx context.Context, logName string) (endpoint string, stop func(), err error) {
	noop := func() {}
	// Node first: without it, npm and the cache do not matter.
	if _, err := exec.LookPath("node"); err != nil {
		return "", noop, fmt.Errorf("no Node.js on PATH (%v)", err)
	}
	dir, err := installDynalite(ctx, cacheRoot(), "npm", logName)
	if err != nil {
		return "", noop, err
	}
	p, err := startDynaliteIn(ctx, dir)
	if err != nil {
		return "", noop, err
	}
	fmt.Fprintf(os.Stderr, "%s: dynalite %s listening on %s\n", logName, dynaliteVersion(), p.Endpoint)
	return p.Endpoint, p.Stop, nil
}

// dynaliteProcess is a running dynalite.
type dynaliteProcess struct {
	Endpoint string // http://127.0.0.1:port
	cmd      *exec.Cmd
	stdin    io.Closer
	waited   chan struct{} // closed when cmd.Wait has returned
	waitErr  error
}

// startDynaliteIn starts the dynalite installed in dir (see
// [InstallDynalite]) on a free loopback port, and returns once it listens
// or ctx ends. dynalite's stderr is the test binary's. It keeps running
// until Stop or until this process ends, however it ends: it holds the
// write end of dynalite's stdin, which the kernel closes then, and
// dynalite exits when its stdin closes.
func startDynaliteIn(ctx context.Context, dir string) (*dynaliteProcess, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("no Node.js on PATH (%v)", err)
	}
	cmd := exec.Command(node, "dynalite.js", "--until-stdin-closes")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting dynalite with %s: %w", node, err)
	}
	d := &dynaliteProcess{cmd: cmd, stdin: stdin, waited: make(chan struct{})}
	// dynalite prints its port once it listens, and nothing else.
	port := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		port <- strings.TrimSpace(line)
	}()
	go func() {
		d.waitErr = cmd.Wait()
		close(d.waited)
	}()
	select {
	case p := <-port:
		if n, err := strconv.Atoi(p); err != nil || n <= 0 {
			d.Stop()
			return nil, fmt.Errorf("dynalite (%s %s in %s) exited before it listened (%v); its own errors, if any, are above",
				node, strings.Join(cmd.Args[1:], " "), dir, d.waitErr)
		}
		d.Endpoint = "http://127.0.0.1:" + p
		return d, nil
	case <-ctx.Done():
		d.Stop()
		return nil, fmt.Errorf("dynalite did not start listening: %w", ctx.Err())
	}
}

// Stop stops dynalite and waits for it to exit: it closes dynalite's stdin,
// and kills it if it has not exited five seconds later.
func (d *dynaliteProcess) Stop() {
	d.stdin.Close()
	select {
	case <-d.waited:
	case <-time.After(5 * time.Second):
		d.cmd.Process.Kill()
		<-d.waited
	}
}
