package scsstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
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

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/scsstore"
)

// Krab is the app's user item, in the same table as the sessions.
type Krab struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	Name         string `dynamodbav:"name"`
	PasswordHash []byte `dynamodbav:"passwordHash"`
}

// A sign-in on scs with Krabber's rules, on ddbsession's revocation: Login
// reads the krab with its stamp (what can end its sessions), checks the
// password, rotates the token and records the stamp in the session;
// LoadUser reads the krab back on each request and destroys a session that
// a RevokeAll (log out everywhere), a RevokeEveryone or a new
// credentialVersion (a password change) came after. The core's Manager
// creates the table and the krab, and revokes; scs and the Store keep the
// sessions.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx) // honours AWS_ENDPOINT_URL_DYNAMODB
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(awsCfg)
	table := "example-" + strings.ToLower(rand.Text()[:8])
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table})

	core, err := ddbsession.New(ddbsession.Config[Krab]{Client: client, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	if err := core.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	// CreateUser stamps the krab with a sessions version of its own. A
	// real app hashes passwords with bcrypt or argon2id, not SHA-256.
	hash := sha256.Sum256([]byte("clam chowder"))
	if err := core.CreateUser(ctx, Krab{PK: "KRAB#alice", SK: "PROFILE", Name: "alice", PasswordHash: hash[:]}); err != nil {
		log.Fatal(err)
	}

	store, err := scsstore.New(scsstore.Config{Sessions: core.Table()}) // the Manager's client, table and layout
	if err != nil {
		log.Fatal(err)
	}
	sessions := scs.New()
	sessions.Store = store
	sessions.IdleTimeout = 20 * time.Minute
	sessions.Lifetime = 7 * 24 * time.Hour
	sessions.Cookie.Name = "__Host-session" // Secure, Path=/, no Domain
	sessions.Cookie.Secure = true           // HttpOnly and SameSite=Lax are scs's defaults

	// requireKrab loads the session's krab, with its stamp, in one
	// consistent read beside scs's read of the session.
	requireKrab := func(next func(http.ResponseWriter, *http.Request, Krab)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var krab Krab
			_, ok, err := store.LoadUser(r.Context(), sessions, &krab)
			switch {
			case err != nil:
				http.Error(w, "try again", http.StatusServiceUnavailable)
			case !ok: // never signed in, or logged out everywhere since
				http.Error(w, "log in", http.StatusUnauthorized)
			default:
				next(w, r, krab)
			}
		})
	}
	mux := http.NewServeMux()
	mux.Handle("GET /me", requireKrab(func(w http.ResponseWriter, r *http.Request, krab Krab) {
		fmt.Fprintf(w, "hello, %s", krab.Name)
	}))
	errWrongPassword := errors.New("wrong name or password")
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		key := ddbsession.UserKey{PK: "KRAB#" + r.PostFormValue("name"), SK: "PROFILE"}
		var krab Krab
		err := store.Login(r.Context(), sessions, key, &krab, func() error {
			given := sha256.Sum256([]byte(r.PostFormValue("password")))
			if subtle.ConstantTimeCompare(krab.PasswordHash, given[:]) != 1 {
				return errWrongPassword
			}
			return nil
		})
		switch {
		case errors.Is(err, errWrongPassword), errors.Is(err, ddbsession.ErrUserNotFound):
			http.Error(w, errWrongPassword.Error(), http.StatusUnauthorized)
		case err != nil:
			http.Error(w, "try again", http.StatusServiceUnavailable)
		default:
			http.Redirect(w, r, "/me", http.StatusSeeOther)
		}
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.Destroy(r.Context()); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	mux.Handle("POST /logout-everywhere", requireKrab(func(w http.ResponseWriter, r *http.Request, krab Krab) {
		// Every session of the krab dies, this one too; then this device
		// signs in again, with the version RevokeAll left.
		key := ddbsession.UserKey{PK: krab.PK, SK: krab.SK}
		err := core.RevokeAll(r.Context(), key)
		if err == nil {
			err = store.Login(r.Context(), sessions, key, &krab, nil)
		}
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	}))

	// The cookie is Secure, so the browsers need HTTPS.
	srv := httptest.NewTLSServer(sessions.LoadAndSave(mux))
	defer srv.Close()
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Transport: srv.Client().Transport, Jar: jar}
	}
	laptop, phone := browser(), browser()
	show := func(device string) func(*http.Response, error) {
		return func(res *http.Response, err error) {
			if err != nil {
				log.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			fmt.Printf("%s %s %s: %d %s\n", device, res.Request.Method, res.Request.URL.Path, res.StatusCode, strings.TrimSpace(string(body)))
		}
	}
	password := func(p string) url.Values { return url.Values{"name": {"alice"}, "password": {p}} }
	show("laptop")(laptop.Get(srv.URL + "/me"))
	show("laptop")(laptop.PostForm(srv.URL+"/login", password("clam")))
	show("laptop")(laptop.PostForm(srv.URL+"/login", password("clam chowder")))
	show("phone ")(phone.PostForm(srv.URL+"/login", password("clam chowder")))
	show("laptop")(laptop.Post(srv.URL+"/logout-everywhere", "", nil))
	show("phone ")(phone.Get(srv.URL + "/me"))
	show("laptop")(laptop.Get(srv.URL + "/me"))
	show("laptop")(laptop.Post(srv.URL+"/logout", "", nil))
	// Output:
	// laptop GET /me: 401 log in
	// laptop POST /login: 401 wrong name or password
	// laptop GET /me: 200 hello, alice
	// phone  GET /me: 200 hello, alice
	// laptop GET /me: 200 hello, alice
	// phone  GET /me: 401 log in
	// laptop GET /me: 200 hello, alice
	// laptop GET /me: 401 log in
}
