package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/scsstore"
)

// appConfig is what the flags set.
type appConfig struct {
	// Client makes the table and keeps the sessions: CreateTable needs
	// the table methods of *dynamodb.Client, besides ddbsession.Client's.
	Client      *dynamodb.Client
	Table       string
	Dev         bool
	IdleTimeout time.Duration
	Lifetime    time.Duration
}

// newApp creates the table if it is missing and returns the app's handler.
// Any number of apps may share the table.
func newApp(ctx context.Context, cfg appConfig) (http.Handler, error) {
	// The table is the core's: its Manager creates it, with TTL where the
	// engine has it, and creates and revokes the users, whose items are in
	// it too. This app keeps no core sessions in it.
	core, err := ddbsession.New(ddbsession.Config[user]{Client: cfg.Client, Table: cfg.Table})
	if err != nil {
		return nil, err
	}
	if err := core.CreateTable(ctx); err != nil {
		return nil, err
	}
	store, err := scsstore.New(scsstore.Config{Client: cfg.Client, Table: cfg.Table})
	if err != nil {
		return nil, err
	}

	sessions := scs.New()
	sessions.Store = store
	sessions.IdleTimeout = cfg.IdleTimeout
	sessions.Lifetime = cfg.Lifetime
	// scs's defaults already give HttpOnly, SameSite=Lax and Path=/. The
	// __Host- prefix makes browsers insist on Secure, Path=/ and no Domain.
	sessions.Cookie.Name = "__Host-session"
	sessions.Cookie.Secure = true
	if cfg.Dev {
		// Plain-HTTP localhost: browsers drop Secure cookies there.
		sessions.Cookie.Name = "session"
		sessions.Cookie.Secure = false
	}
	// Store failures end here: the request fails, nothing goes on without
	// its session. The error never holds a token.
	sessions.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		slog.ErrorContext(r.Context(), "session store", "method", r.Method, "path", r.URL.Path, "err", err)
		http.Error(w, "session store unavailable, try again", http.StatusInternalServerError)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /put", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || !r.PostForm.Has("msg") {
			http.Error(w, "form field msg is missing", http.StatusBadRequest)
			return
		}
		sessions.Put(r.Context(), "msg", r.PostForm.Get("msg"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /get", func(w http.ResponseWriter, r *http.Request) {
		if !sessions.Exists(r.Context(), "msg") {
			http.Error(w, "no message in this session", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, sessions.GetString(r.Context(), "msg"))
	})
	mux.HandleFunc("POST /renew", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.RenewToken(r.Context()); err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("renew token: %w", err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /destroy", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.Destroy(r.Context()); err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("destroy: %w", err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		name := r.PostFormValue("user")
		if !validName(name) {
			http.Error(w, "form field user: want 1 to 32 lowercase letters and digits", http.StatusBadRequest)
			return
		}
		key := userKey(name)
		// A demo signs anyone up on first login; a real app has a sign-up
		// and checks a password in Login's verify.
		err := core.CreateUser(r.Context(), user{PK: key.PK, SK: key.SK, Name: name})
		if err == nil || errors.Is(err, ddbsession.ErrUserExists) {
			err = store.Login(r.Context(), sessions, key, nil, nil)
		}
		if err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("login: %w", err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /me", func(w http.ResponseWriter, r *http.Request) {
		var u user
		if _, ok, err := store.LoadUser(r.Context(), sessions, &u); err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("load user: %w", err))
		} else if !ok {
			http.Error(w, "not signed in", http.StatusUnauthorized)
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, u.Name)
		}
	})
	mux.HandleFunc("POST /logout-everywhere", func(w http.ResponseWriter, r *http.Request) {
		key, ok, err := store.LoadUser(r.Context(), sessions, nil)
		switch {
		case err != nil:
			sessions.ErrorFunc(w, r, fmt.Errorf("load user: %w", err))
			return
		case !ok:
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		// Every session of the user ends, on every instance, this one too;
		// then this browser signs in again, after the revocation.
		err = core.RevokeAll(r.Context(), key)
		if err == nil {
			err = store.Login(r.Context(), sessions, key, nil, nil)
		}
		if err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("log out everywhere: %w", err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// Cross-origin POSTs from browsers are refused; curl and same-origin
	// requests pass.
	return http.NewCrossOriginProtection().Handler(sessions.LoadAndSave(mux)), nil
}

// user is the app's user item, in the sessions' table.
type user struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

func userKey(name string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
}

// validName reports whether name is 1 to 32 lowercase letters and digits.
func validName(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
