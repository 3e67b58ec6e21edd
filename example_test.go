package ddbsession_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// The README's recipes run as written: its usage block and its test file
// go into a module of their own that requires this checkout; go test runs
// the test file there (a handler unit test and the sign-in against the
// engine), and the README's command runs the program, which signs alice
// up and in, and stops on SIGINT with its port freed.
func TestREADMEUsageRuns(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
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
	command := regexp.MustCompile("(?m)^(go run github.com/ddbsession/ddbsession/ddbsessiontest/run go run \\.)   #").FindSubmatch(readme)
	if command == nil {
		t.Fatal("README.md's Usage does not give the command that runs the program")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The example module pins golang.org/x/crypto, which the block uses for
	// bcrypt; its go.sum and the root's hold every hash the build needs.
	exampleMod, err := os.ReadFile(filepath.Join(root, "example", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	crypto := regexp.MustCompile(`golang.org/x/crypto (v\S+)`).FindSubmatch(exampleMod)
	if crypto == nil {
		t.Fatal("example/go.mod does not require golang.org/x/crypto")
	}
	var sums []byte
	for _, f := range []string{"go.sum", "example/go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
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

// runREADMECommand runs the README's command in dir, signs alice up and in
// through the program, and stops it as a terminal's Ctrl-C does (SIGINT to
// the whole foreground process group) or as an IDE's stop button does
// (SIGTERM to the go run process alone): the program must stop, its port
// freed.
func runREADMECommand(t *testing.T, dir, command string, env []string, stop string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := strings.Fields(command)
	run := exec.Command(goTool(t), args[1:]...)
	var logs syncBuffer
	run.Dir, run.Env, run.Stdout, run.Stderr = dir, append(env, "ADDR="+addr), &logs, &logs
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	defer syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
	base := "http://" + addr
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		res, err := http.Get(base + "/")
		if err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program never answered on %s:\n%s", addr, &logs)
		}
	}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	name := "alice-" + strings.ToLower(rand.Text()[:6]) // the program's table "app" outlives a run
	creds := url.Values{"name": {name}, "password": {"correct horse"}}
	if res, err := noRedirects.PostForm(base+"/signup", creds); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /signup: %v %v\n%s", res, err, &logs)
	}
	res, err := noRedirects.PostForm(base+"/login", creds)
	if err != nil || res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/account" {
		t.Fatalf("POST /login: %v %v\n%s", res, err, &logs)
	}
	// A browser keeps the Secure cookie on 127.0.0.1; Go's cookie jar
	// does not, so the test carries it.
	r, _ := http.NewRequest("GET", base+"/account", nil)
	for _, c := range res.Cookies() {
		r.AddCookie(c)
	}
	account, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(account.Body)
	account.Body.Close()
	if account.StatusCode != http.StatusOK || string(body) != "hello, "+name {
		t.Errorf("GET /account with the cookie: %d %q", account.StatusCode, body)
	}
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

// Account is an app's user item, in the same table as the sessions.
type Account struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// A whole sign-in flow: a protected page, Login, Logout. The client comes
// from the SDK's own configuration, so AWS_ENDPOINT_URL_DYNAMODB picks the
// engine.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(awsCfg)
	table := "example-" + strings.ToLower(rand.Text()[:8])
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table})

	sessions, err := ddbsession.New(ddbsession.Config[Account]{Client: client, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	if err := sessions.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	alice := Account{PK: "USER#alice", SK: "PROFILE", Name: "alice"}
	item, _ := attributevalue.MarshalMap(alice)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /account", sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, _ := sessions.User(r.Context())
		fmt.Fprintf(w, "hello, %s", account.Name)
	})))
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		// A real app checks a password here.
		if err := sessions.Login(w, r, ddbsession.UserKey{PK: alice.PK, SK: alice.SK}, nil); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/account", http.StatusSeeOther)
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.Logout(w, r); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/account", http.StatusSeeOther)
	})

	// The __Host- cookie is Secure, so the browser needs HTTPS.
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	browser := srv.Client()
	browser.Jar, _ = cookiejar.New(nil)
	show := func(res *http.Response, err error) {
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		fmt.Printf("%s %s: %d %s\n", res.Request.Method, res.Request.URL.Path, res.StatusCode, strings.TrimSpace(string(body)))
	}
	show(browser.Get(srv.URL + "/account"))
	show(browser.PostForm(srv.URL+"/login", url.Values{}))
	show(browser.PostForm(srv.URL+"/logout", url.Values{}))
	// Output:
	// GET /account: 401 unauthorized
	// GET /account: 200 hello, alice
	// GET /account: 401 unauthorized
}
