package ddbsessiontest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// Account is an app's user item.
type Account struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// An integration test's body. The package's TestMain calls Main, which
// found or started the engine; the app's own set-up code, which builds its
// client from the SDK's configuration as its main does, reaches that
// engine, with dummy credentials. Here alice signs in and sees her page.
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
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := sessions.CreateUser(ctx, Account{PK: alice.PK, SK: alice.SK, Name: "alice"}); err != nil {
		log.Fatal(err)
	}
	accountPage := sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, _ := sessions.User(r.Context())
		fmt.Fprintf(w, "hello, %s", account.Name)
	}))

	// https:// requests, for the Secure __Host- cookie.
	login := httptest.NewRecorder()
	if err := sessions.Login(login, httptest.NewRequest("POST", "https://app.example/login", nil), alice, nil); err != nil {
		log.Fatal(err)
	}
	r := httptest.NewRequest("GET", "https://app.example/account", nil)
	for _, c := range login.Result().Cookies() {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	accountPage.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Body)
	// Output: 200 hello, alice
}

// A handler unit test needs no engine: NewContext puts the signed-in
// session and user into the request's context, where RequireSession would
// put them.
func Example_handlerUnitTest() {
	sessions, err := ddbsession.New(ddbsession.Config[Account]{
		Client: dynamodb.New(dynamodb.Options{}), // never called
		Table:  "app",
	})
	if err != nil {
		log.Fatal(err)
	}
	accountPage := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, _ := sessions.User(r.Context())
		fmt.Fprintf(w, "hello, %s", account.Name)
	})

	r := httptest.NewRequest("GET", "/account", nil)
	r = r.WithContext(sessions.NewContext(r.Context(), ddbsession.Session{ID: "test"}, Account{Name: "alice"}))
	w := httptest.NewRecorder()
	accountPage.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Body)
	// Output: 200 hello, alice
}
