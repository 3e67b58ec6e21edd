package main

import (
	"crypto/rand"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The README's recipes run as written: its usage block and its test file
// go into a module of their own that requires this checkout; go test runs
// the test file there (a handler unit test and the sign-in against the
// engine), and the README's command runs the program, which headless
// Chromium clicks through page by page, and which stops on SIGINT with its
// port freed. It lives in this module, which has the browser driver, so
// that the core's module needs none. It runs before the parallel tests,
// not beside them: its builds of a module from scratch would starve the
// other browser tests, whose steps wait on the browser's events.
func TestREADMEUsageRuns(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	goBlock := regexp.MustCompile("(?s)```go\n(.*?)```")
	section := func(heading string) string {
		t.Helper()
		_, rest, ok := strings.Cut(string(readme), heading+"\n")
		block := goBlock.FindStringSubmatch(rest)
		if !ok || block == nil || !strings.HasPrefix(block[1], "package main") {
			t.Fatalf("README.md has no ```go block of a whole file under %s", heading)
		}
		return block[1]
	}
	command := regexp.MustCompile(`(?m)^(go run github.com/ddbsession/ddbsession/ddbsessiontest/run go run \.)   #`).FindSubmatch(readme)
	if command == nil {
		t.Fatal("README.md's Usage does not give the command that runs the program")
	}
	// This module pins golang.org/x/crypto, which the block uses for
	// bcrypt; its go.sum and the root's hold every hash the build needs.
	exampleMod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	crypto := regexp.MustCompile(`golang.org/x/crypto (v\S+)`).FindSubmatch(exampleMod)
	if crypto == nil {
		t.Fatal("example/go.mod does not require golang.org/x/crypto")
	}
	var sums []byte
	for _, f := range []string{filepath.Join(root, "go.sum"), "go.sum"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	const rootModule = "github.com/ddbsession/ddbsession"
	dir := t.TempDir()
	files := map[string]string{
		"main.go":      section("## Usage"),
		"main_test.go": section("## Testing an app that uses ddbsession"),
		"go.mod": "module example.com/readme\n\ngo 1.26.0\n\nrequire (\n\t" + rootModule + " v0.0.0-00010101000000-000000000000\n" +
			"\tgolang.org/x/crypto " + string(crypto[1]) + "\n)\n\nreplace " + rootModule + " => " + root + "\n",
		"go.sum": string(sums),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	test := exec.Command(goTool(t), "test", "-count=1", "-v", "./...")
	test.Dir, test.Env = dir, env
	out, err := test.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's test file fails against its usage block: %v\n%s", err, out)
	}
	for _, name := range []string{"TestAccountPage", "TestSignIn"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Errorf("go test did not pass %s:\n%s", name, out)
		}
	}

	// The command, as written, from the module's directory.
	for _, stop := range []string{"Ctrl-C", "SIGTERM to go run alone"} {
		t.Run(stop, func(t *testing.T) { runREADMECommand(t, dir, string(command[1]), env, stop) })
	}
}

// runREADMECommand runs the README's command in dir, walks the program in
// headless Chromium (walkREADMEProgram), and stops it as a terminal's
// Ctrl-C does (SIGINT to the whole foreground process group) or as an
// IDE's stop button does (SIGTERM to the go run process alone): the
// program must stop, its port freed.
func runREADMECommand(t *testing.T, dir, command string, env []string, stop string) {
	args := strings.Fields(command)
	run := exec.Command(goTool(t), args[1:]...)
	var logs syncBuffer
	// Port 0, and the program says which it got: a port picked here and
	// freed for it could be taken by another test meanwhile.
	run.Dir, run.Env, run.Stdout, run.Stderr = dir, append(env, "ADDR=127.0.0.1:0"), &logs, &logs
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	defer syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
	serving := regexp.MustCompile(`serving (http://localhost:(\d+))/`)
	var base, port string
	for deadline := time.Now().Add(5 * time.Minute); base == ""; time.Sleep(100 * time.Millisecond) {
		if m := serving.FindStringSubmatch(logs.String()); m != nil {
			base, port = m[1], m[2]
		}
		select {
		case err := <-done:
			t.Fatalf("the command ended before serving: %v\n%s", err, &logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program never said where it serves:\n%s", &logs)
		}
	}
	walkREADMEProgram(t, base, &logs)
	if stop == "Ctrl-C" {
		syscall.Kill(-run.Process.Pid, syscall.SIGINT)
	} else {
		run.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("go run did not end on %s:\n%s", stop, &logs)
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the program still listens on %s a minute after %s:\n%s", addr, stop, &logs)
		}
	}
}

// walkREADMEProgram clicks through the README's program at base, the URL
// it printed, in headless Chromium, as a newcomer would: sign up, be sent
// from the guarded page to log in and back, log out, log in again, log out
// everywhere. Every page must arrive as HTML, where it is the one expected.
func walkREADMEProgram(t *testing.T, base string, logs *syncBuffer) {
	t.Helper()
	tab := startChromium(t, "about:blank")
	name := "alice-" + strings.ToLower(rand.Text()[:6]) // the program's table "app" outlives a run
	step := func(what, wantPage string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		res, err := chromedp.RunResponse(tab, actions...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, logs)
		}
		u, err := url.Parse(res.URL)
		if err != nil || res.Status != 200 || res.MimeType != "text/html" || u.RequestURI() != wantPage {
			t.Fatalf("%s: %d %s at %s, want an HTML page at %s\n%s", what, res.Status, res.MimeType, res.URL, wantPage, logs)
		}
	}
	fill := func(form string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.SendKeys(form+" input[name=name]", name),
			chromedp.SendKeys(form+" input[name=password]", "correct horse"),
			chromedp.Click(form + " button"),
		}
	}
	const signUp, logIn, toLogin = `form[action="/signup"]`, `form[action^="/login"]`, "/?next=%2Faccount"
	step("open the app", "/", chromedp.Navigate(base+"/"))
	step("sign up", "/", fill(signUp)...)
	step("open the guarded page", toLogin, chromedp.Navigate(base+"/account"))
	step("log in", "/account", fill(logIn)...)
	if got := value(t, tab, "read the greeting", chromedp.Text("p")); got != "hello, "+name {
		t.Errorf("the account page says %q, want hello, %s", got, name)
	}
	step("log out", "/", chromedp.Click(`form[action="/logout"] button`))
	step("open the guarded page, signed out", toLogin, chromedp.Navigate(base+"/account"))
	step("log in again", "/account", fill(logIn)...)
	step("log out everywhere", "/", chromedp.Click(`form[action="/logout-everywhere"] button`))
	step("open the guarded page after logging out everywhere", toLogin, chromedp.Navigate(base+"/account"))
}

// goTool finds the go command: on PATH, as go test has it, or else in the
// GOROOT that built this test.
func goTool(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	//lint:ignore SA1019 only a fallback: the test binary runs on the machine that built it.
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
