package main

import (
	"context"
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
	// engine has it. This app keeps no core sessions in it.
	tables, err := ddbsession.New(ddbsession.Config[struct{}]{Client: cfg.Client, Table: cfg.Table})
	if err != nil {
		return nil, err
	}
	if err := tables.CreateTable(ctx); err != nil {
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
	// Cross-origin POSTs from browsers are refused; curl and same-origin
	// requests pass.
	return http.NewCrossOriginProtection().Handler(sessions.LoadAndSave(mux)), nil
}
