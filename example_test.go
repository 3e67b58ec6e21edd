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
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ddbsession/ddbsession"
)

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
		if err := sessions.Login(w, r, ddbsession.UserKey{PK: alice.PK, SK: alice.SK}); err != nil {
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
