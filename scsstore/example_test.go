package scsstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/scsstore"
)

// Krab is the app's user item, in the same table as the sessions.
type Krab struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
	// SessionsVersion is the user's sessions version, the attribute that
	// ddbsession's Layout.VersionAttribute names. RevokeAll raises it to
	// the time of the call in epoch milliseconds: sessions created before
	// it are dead.
	SessionsVersion int64 `dynamodbav:"sessionsVersion"`
}

// A sign-in on scs with Krabber's rules: the token rotates on login and
// logout (RenewToken), each session keeps its creation time, and "log out
// everywhere" raises the user's sessions version to the time of the call,
// so that every session created before it is logged out on its next
// request, with one write and no scan. The core's Manager creates the table
// and raises the version; scs and the Store keep the sessions.
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
	alice, _ := attributevalue.MarshalMap(Krab{PK: "KRAB#alice", SK: "PROFILE", Name: "alice"})
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: alice}); err != nil {
		log.Fatal(err)
	}

	store, err := scsstore.New(scsstore.Config{Client: client, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	sessions := scs.New()
	sessions.Store = store
	sessions.IdleTimeout = 20 * time.Minute
	sessions.Lifetime = 7 * 24 * time.Hour
	sessions.Cookie.Name = "__Host-session" // Secure, Path=/, no Domain
	sessions.Cookie.Secure = true           // HttpOnly and SameSite=Lax are scs's defaults

	// signIn starts a new session for the krab: a new token, the krab's
	// key, and the session's creation time, for the version to compare with.
	signIn := func(ctx context.Context, pk string) error {
		if err := sessions.RenewToken(ctx); err != nil {
			return err
		}
		sessions.Put(ctx, "krab", pk)
		sessions.Put(ctx, "createdAt", time.Now().UnixMilli())
		return nil
	}
	// requireKrab loads the session's krab with one consistent GetItem and
	// rejects a session created before the krab's sessions version.
	requireKrab := func(next func(http.ResponseWriter, *http.Request, Krab)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			pk := sessions.GetString(ctx, "krab")
			if pk == "" {
				http.Error(w, "log in", http.StatusUnauthorized)
				return
			}
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      &table,
				Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "PROFILE"}},
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				http.Error(w, "try again", http.StatusServiceUnavailable)
				return
			}
			var krab Krab
			if err := attributevalue.UnmarshalMap(out.Item, &krab); err != nil || out.Item == nil ||
				sessions.GetInt64(ctx, "createdAt") < krab.SessionsVersion {
				// Logged out everywhere since this session began (or gone).
				if err := sessions.Destroy(ctx); err != nil {
					http.Error(w, "try again", http.StatusServiceUnavailable)
					return
				}
				http.Error(w, "log in", http.StatusUnauthorized)
				return
			}
			next(w, r, krab)
		})
	}

	mux := http.NewServeMux()
	mux.Handle("GET /me", requireKrab(func(w http.ResponseWriter, r *http.Request, krab Krab) {
		fmt.Fprintf(w, "hello, %s", krab.Name)
	}))
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		// A real app checks a password here.
		if err := signIn(r.Context(), "KRAB#alice"); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.RenewToken(r.Context()); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		sessions.Remove(r.Context(), "krab")
		sessions.Remove(r.Context(), "createdAt")
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	mux.Handle("POST /logout-everywhere", requireKrab(func(w http.ResponseWriter, r *http.Request, krab Krab) {
		// Every session created before now dies, this one too; then this
		// device signs in again, with a session created after the version.
		err := core.RevokeAll(r.Context(), ddbsession.UserKey{PK: krab.PK, SK: krab.SK})
		if err == nil {
			err = signIn(r.Context(), krab.PK)
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
	show("laptop")(laptop.Get(srv.URL + "/me"))
	show("laptop")(laptop.Post(srv.URL+"/login", "", nil))
	show("phone ")(phone.Post(srv.URL+"/login", "", nil))
	show("laptop")(laptop.Post(srv.URL+"/logout-everywhere", "", nil))
	show("phone ")(phone.Get(srv.URL + "/me"))
	show("laptop")(laptop.Get(srv.URL + "/me"))
	show("laptop")(laptop.Post(srv.URL+"/logout", "", nil))
	// Output:
	// laptop GET /me: 401 log in
	// laptop GET /me: 200 hello, alice
	// phone  GET /me: 200 hello, alice
	// laptop GET /me: 200 hello, alice
	// phone  GET /me: 401 log in
	// laptop GET /me: 200 hello, alice
	// laptop GET /me: 401 log in
}
