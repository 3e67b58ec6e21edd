// The driver is one instance of an app on ddbsession, for
// TestRollingUpgradeFromV010: the test builds it against v0.1.0 and against
// the current code, and runs both on one table. So it uses only API that
// both have.
//
// It serves ddbsession's calls over HTTP on a free loopback port, which it
// prints as "listening on http://ADDR" once its table is ready, against the
// engine that AWS_ENDPOINT_URL_DYNAMODB names (it refuses to start without
// one, so that it never reaches AWS). It exits when its stdin closes, so
// that a test that dies takes it along.
//
//	POST /users?name=N           CreateUser           201, or 409 if the user exists
//	POST /delete-user?name=N     DeleteItem of the user item, as an app that closes an account does
//	POST /login?name=N           Login, nil verify    200 and the cookie, or 404 for no user
//	GET  /me                     RequireSession       200 {"name", "id", "expires"}, or the library's answer
//	POST /logout                 Logout               200
//	GET  /list?name=N            List                 200 ["id", ...], newest first
//	POST /revoke?name=N&id=I     Revoke               200, or 404 for no such session
//	POST /revoke-all?name=N      RevokeAll            200
//	POST /revoke-everyone        RevokeEveryone       200
//	POST /restart                a new Manager, whose CreateTable reads the global revocation generation
//	POST /advance?by=D           moves the Manager's clock (Config.Now) D ahead
//	POST /wait                   Wait, for the refresh writes after the responses
//
// Any other failure is a 500 whose body is the error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// user is the app's user item, in the session table.
type user struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

func key(name string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
}

func main() {
	table := flag.String("table", "", "the session table's name")
	mrec := flag.Bool("mrec", false, "set Config.Layout.MREC")
	maxSessions := flag.Int("max-sessions", 0, "set Config.Limits.MaxSessions")
	flag.Parse()
	if *table == "" {
		log.Fatal("driver: -table is required")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		log.Fatal("driver: AWS_ENDPOINT_URL_DYNAMODB is not set; the driver runs against a local engine only")
	}
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(awsCfg)
	cfg := ddbsession.Config[user]{
		Client: client,
		Table:  *table,
		Layout: ddbsession.Layout{MREC: *mrec},
		Cookie: ddbsession.Cookie{InsecureDevMode: true}, // plain HTTP on loopback
		Limits: ddbsession.Limits{MaxSessions: *maxSessions},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	a := &app{cfg: cfg, client: client}
	a.cfg.Now = func() time.Time { return time.Now().Add(time.Duration(a.ahead.Load())) }
	if err := a.restart(ctx); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

// app serves the routes of its current Manager; a restart replaces both,
// as a new process would.
type app struct {
	cfg     ddbsession.Config[user]
	client  *dynamodb.Client // the app's own calls
	current atomic.Pointer[http.ServeMux]
	ahead   atomic.Int64 // how far the clock is ahead of the machine's
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.current.Load().ServeHTTP(w, r)
}

// restart makes a new Manager, and its CreateTable checks the table (or
// creates it, for the first instance) and reads the global revocation
// generation, as at an instance's start.
func (a *app) restart(ctx context.Context) error {
	m, err := ddbsession.New(a.cfg)
	if err != nil {
		return err
	}
	if err := m.CreateTable(ctx); err != nil {
		return err
	}
	a.current.Store(a.routes(m))
	return nil
}

func (a *app) routes(m *ddbsession.Manager[user]) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /users", func(w http.ResponseWriter, r *http.Request) {
		name := r.FormValue("name")
		k := key(name)
		err := m.CreateUser(r.Context(), user{PK: k.PK, SK: k.SK, Name: name})
		if errors.Is(err, ddbsession.ErrUserExists) {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		reply(w, err, http.StatusCreated, nil)
	})
	mux.HandleFunc("POST /delete-user", func(w http.ResponseWriter, r *http.Request) {
		k := key(r.FormValue("name"))
		_, err := a.client.DeleteItem(r.Context(), &dynamodb.DeleteItemInput{
			TableName: &a.cfg.Table,
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: k.PK},
				"sk": &types.AttributeValueMemberS{Value: k.SK},
			},
		})
		reply(w, err, http.StatusOK, nil)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		err := m.Login(w, r, key(r.FormValue("name")), nil)
		if errors.Is(err, ddbsession.ErrUserNotFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		reply(w, err, http.StatusOK, nil)
	})
	mux.Handle("GET /me", m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := m.User(r.Context())
		s, _ := m.Session(r.Context())
		reply(w, nil, http.StatusOK, map[string]any{"name": u.Name, "id": s.ID, "expires": s.ExpiresAt.Unix()})
	})))
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		reply(w, m.Logout(w, r), http.StatusOK, nil)
	})
	mux.HandleFunc("GET /list", func(w http.ResponseWriter, r *http.Request) {
		list, err := m.List(r.Context(), key(r.FormValue("name")))
		ids := []string{}
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		reply(w, err, http.StatusOK, ids)
	})
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
		err := m.Revoke(r.Context(), key(r.FormValue("name")), r.FormValue("id"))
		if errors.Is(err, ddbsession.ErrNoSession) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		reply(w, err, http.StatusOK, nil)
	})
	mux.HandleFunc("POST /revoke-all", func(w http.ResponseWriter, r *http.Request) {
		reply(w, m.RevokeAll(r.Context(), key(r.FormValue("name"))), http.StatusOK, nil)
	})
	mux.HandleFunc("POST /revoke-everyone", func(w http.ResponseWriter, r *http.Request) {
		reply(w, m.RevokeEveryone(r.Context()), http.StatusOK, nil)
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		reply(w, a.restart(r.Context()), http.StatusOK, nil)
	})
	mux.HandleFunc("POST /advance", func(w http.ResponseWriter, r *http.Request) {
		by, err := time.ParseDuration(r.FormValue("by"))
		if err == nil {
			a.ahead.Add(int64(by))
		}
		reply(w, err, http.StatusOK, nil)
	})
	mux.HandleFunc("POST /wait", func(w http.ResponseWriter, r *http.Request) {
		reply(w, m.Wait(r.Context()), http.StatusOK, nil)
	})
	return mux
}

// reply answers with status and v as JSON, or with a 500 that says err.
func reply(w http.ResponseWriter, err error, status int, v any) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}
