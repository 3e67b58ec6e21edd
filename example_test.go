package ddbsession_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// The README's usage block compiles as written: it is copied into a module
// of its own that requires this checkout, and built.
func TestREADMEUsageCompiles(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, usage, ok := strings.Cut(string(readme), "## Usage\n")
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(usage)
	if !ok || block == nil || !strings.HasPrefix(block[1], "package main") {
		t.Fatal("README.md has no ```go block of a whole program under ## Usage")
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
		"main.go": block[1],
		"go.mod": "module example.com/readme\n\ngo 1.26.0\n\nrequire (\n\t" + rootModule + " v0.0.0-00010101000000-000000000000\n" +
			"\tgolang.org/x/crypto " + string(crypto[1]) + "\n)\n\nreplace " + rootModule + " => " + root + "\n",
		"go.sum": string(sums),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool(t), "build", "-mod=mod", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's usage does not build: %v\n%s", err, out)
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
