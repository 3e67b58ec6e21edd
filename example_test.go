package ddbsession_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
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
	if err := sessions.CreateUser(ctx, Account{PK: "USER#alice", SK: "PROFILE", Name: "alice"}); err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /account", sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, _ := sessions.User(r.Context())
		fmt.Fprintf(w, "hello, %s", account.Name)
	})))
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		// A real app checks a password here.
		if err := sessions.Login(w, r, ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}, nil); err != nil {
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

// The per-task examples share this set-up: a Manager on a table of its
// own, on the engine that the SDK's configuration names (the tests' one,
// through AWS_ENDPOINT_URL_DYNAMODB), with alice's user item in it. An app
// builds its Manager once, at start-up, as Example does.
func exampleSessions(mutate ...func(*ddbsession.Config[Account])) (*ddbsession.Manager[Account], ddbsession.UserKey) {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(awsCfg)
	cfg := ddbsession.Config[Account]{Client: client, Table: "example-" + strings.ToLower(rand.Text()[:8])}
	for _, f := range mutate {
		f(&cfg)
	}
	sessions, err := ddbsession.New(cfg)
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
	return sessions, alice
}

// exampleRequest is a request to the app over HTTPS (the session cookie is
// Secure) carrying cookies.
func exampleRequest(method, path string, cookies ...*http.Cookie) *http.Request {
	r := httptest.NewRequest(method, "https://app.example"+path, nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return r
}

// signIn signs alice in and returns her session cookie.
func signIn(sessions *ddbsession.Manager[Account], alice ddbsession.UserKey) *http.Cookie {
	w := httptest.NewRecorder()
	if err := sessions.Login(w, exampleRequest("POST", "/login"), alice, nil, "password"); err != nil {
		log.Fatal(err)
	}
	return w.Result().Cookies()[0]
}

// RequireSession guards a handler: the request without a session gets
// 401 (or Config.LoginPath), the signed-in one reaches the handler with
// its user in the context.
func ExampleManager_RequireSession() {
	sessions, alice := exampleSessions()
	account := sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := sessions.User(r.Context())
		fmt.Fprintf(w, "hello, %s", a.Name)
	}))
	for _, r := range []*http.Request{exampleRequest("GET", "/account"), exampleRequest("GET", "/account", signIn(sessions, alice))} {
		w := httptest.NewRecorder()
		account.ServeHTTP(w, r)
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 401 unauthorized
	// 200 hello, alice
}

// Login with a password: verify checks it against the user item that
// Login reads, in the same call, and its error refuses the login.
func ExampleManager_Login() {
	sessions, alice := exampleSessions()
	errWrong := errors.New("wrong password")
	check := func(password string) func(Account) error {
		return func(a Account) error {
			if password != "correct horse" { // a real app compares a.PasswordHash, with bcrypt or argon2
				return errWrong
			}
			return nil
		}
	}
	for _, password := range []string{"guess", "correct horse"} {
		w := httptest.NewRecorder()
		err := sessions.Login(w, exampleRequest("POST", "/login"), alice, check(password), "password")
		fmt.Printf("%q: %v, %d cookie(s)\n", password, err, len(w.Result().Cookies()))
	}
	// Output:
	// "guess": wrong password, 0 cookie(s)
	// "correct horse": <nil>, 1 cookie(s)
}

// A client without cookies (a CLI, a script) gets a bearer token, which
// RequireSession accepts with Config.BearerTokens.
func ExampleManager_LoginBearer() {
	sessions, alice := exampleSessions(func(c *ddbsession.Config[Account]) { c.BearerTokens = true })
	token, _, err := sessions.LoginBearer(exampleRequest("POST", "/api/login"), alice, nil, "password")
	if err != nil {
		log.Fatal(err)
	}
	me := sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := sessions.User(r.Context())
		fmt.Fprintf(w, `{"name":%q}`, a.Name)
	}))
	r := exampleRequest("GET", "/api/me")
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	me.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Body)
	// Output: 200 {"name":"alice"}
}

// A "where you're signed in" page: List gives the user's live sessions,
// newest first, marking the request's own; Revoke ends one of them.
func ExampleManager_List() {
	sessions, alice := exampleSessions()
	phone := signIn(sessions, alice)
	laptop := signIn(sessions, alice)
	page := sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := sessions.Session(r.Context())
		list, err := sessions.List(r.Context(), s.User)
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		for _, e := range list {
			fmt.Fprintf(w, "%v %v\n", e.Current, e.Methods)
		}
		if err := sessions.Revoke(r.Context(), s.User, list[len(list)-1].ID); err != nil { // the oldest: the phone
			http.Error(w, "try again", http.StatusServiceUnavailable)
		}
	}))
	for _, c := range []*http.Cookie{laptop, phone} {
		w := httptest.NewRecorder()
		page.ServeHTTP(w, exampleRequest("GET", "/sessions", c))
		fmt.Print(w.Code, "\n", w.Body)
	}
	// Output:
	// 200
	// true [password]
	// false [password]
	// 401
	// unauthorized
}

// Log out everywhere: one write, and every session of the user is
// rejected on its next request, on every instance.
func ExampleManager_RevokeAll() {
	sessions, alice := exampleSessions()
	phone, laptop := signIn(sessions, alice), signIn(sessions, alice)
	if err := sessions.RevokeAll(context.Background(), alice); err != nil {
		log.Fatal(err)
	}
	for _, c := range []*http.Cookie{phone, laptop} {
		_, _, err := sessions.Authenticate(context.Background(), c.Value)
		fmt.Println(err)
	}
	// Output:
	// ddbsession: no valid session
	// ddbsession: no valid session
}

// Device binding (DBSC): a browser that supports it is offered, at login,
// to bind the session to a key of its own; the app serves the binding's
// endpoints with DeviceBindingHandler.
func ExampleManager_DeviceBindingHandler() {
	sessions, alice := exampleSessions(func(c *ddbsession.Config[Account]) { c.DeviceBinding.Enabled = true })
	mux := http.NewServeMux()
	mux.Handle("/", sessions.DeviceBindingHandler()) // serves its RegistrationPath and RefreshPath
	w := httptest.NewRecorder()
	if err := sessions.Login(w, exampleRequest("POST", "/login"), alice, nil); err != nil {
		log.Fatal(err)
	}
	offer := w.Header().Get("Secure-Session-Registration")
	fmt.Println(strings.HasPrefix(offer, "(ES256 RS256);path="))
	// Output: true
}

// A sensitive action asks for an authentication within the last ten
// minutes: past that, the browser goes to re-authenticate (Config.ReauthPath)
// and back; a Login on the signed-in request gives it a fresh session.
func ExampleManager_RequireAuthentication() {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	sessions, alice := exampleSessions(func(c *ddbsession.Config[Account]) {
		c.StepUp = ddbsession.Redirect("/reauth")
		c.Now = func() time.Time { return now }
	})
	recent := sessions.RequireAuthentication(10 * time.Minute)
	deleteAccount := sessions.RequireSession(recent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "deleted")
	})))
	serve := func(c *http.Cookie) {
		w := httptest.NewRecorder()
		r := exampleRequest("POST", "/account/delete", c)
		r.Header.Set("Referer", "https://app.example/account")
		deleteAccount.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Location")+w.Body.String())
	}
	c := signIn(sessions, alice)
	now = now.Add(20 * time.Minute)
	serve(c)
	w := httptest.NewRecorder() // the re-authentication page checks the password again
	if err := sessions.Login(w, exampleRequest("POST", "/reauth", c), alice, nil, "password"); err != nil {
		log.Fatal(err)
	}
	serve(w.Result().Cookies()[0])
	// Output:
	// 303 /reauth?next=%2Faccount
	// 200 deleted
}

// A two-step login: the password, then a one-time code, in two requests
// from the same browser; the session knows both.
func ExampleManager_BeginLogin() {
	sessions, alice := exampleSessions()
	w := httptest.NewRecorder()
	if err := sessions.BeginLogin(w, exampleRequest("POST", "/login"), alice, nil, "password"); err != nil {
		log.Fatal(err)
	}
	pending := w.Result().Cookies()[0]
	code := func(entered string) func(Account) error {
		return func(Account) error { // a real app checks a TOTP code against the user's secret
			if entered != "123456" {
				return errors.New("wrong code")
			}
			return nil
		}
	}
	for _, entered := range []string{"000000", "123456"} {
		w := httptest.NewRecorder()
		err := sessions.CompleteLogin(w, exampleRequest("POST", "/login/code", pending), code(entered), "otp")
		fmt.Println(entered, err)
		if err == nil {
			s, _, _ := sessions.Authenticate(context.Background(), w.Result().Cookies()[0].Value)
			fmt.Println(s.Methods)
		}
	}
	// Output:
	// 000000 wrong code
	// 123456 <nil>
	// [password otp]
}

// The app keeps a small value in the session: read with it, written when
// it changes.
func ExampleManager_UpdateData() {
	sessions, alice := exampleSessions()
	type Cart struct{ Items []string }
	add := sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := sessions.UpdateData(r.Context(), func(old json.RawMessage) (any, error) {
			var cart Cart
			if old != nil {
				if err := json.Unmarshal(old, &cart); err != nil {
					return nil, err
				}
			}
			cart.Items = append(cart.Items, r.FormValue("item"))
			return cart, nil
		})
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
		}
	}))
	c := signIn(sessions, alice)
	for _, item := range []string{"tea", "biscuits"} {
		add.ServeHTTP(httptest.NewRecorder(), exampleRequest("POST", "/cart?item="+item, c))
	}
	s, _, _ := sessions.Authenticate(context.Background(), c.Value)
	fmt.Println(string(s.Data))
	// Output: {"Items":["tea","biscuits"]}
}
