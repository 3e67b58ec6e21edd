package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/alexedwards/scs/redisstore"
	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/gomodule/redigo/redis"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/scsstore"
)

// appConfig is what the flags set.
type appConfig struct {
	Redis string // the old store's address; "" in dynamodb-only
	Table string
	Phase scsstore.Phase
	Dev   bool
	// Client keeps the new store, and makes its table. The old phase
	// writes there only the tombstones of the sessions it destroys.
	Client *dynamodb.Client
}

// lifetime and idleTimeout are scs's, and the Migration's: the longest a
// session lives, and lives without a request.
const (
	lifetime    = 24 * time.Hour
	idleTimeout = 2 * time.Hour
)

// Bounds of what the forms may hold.
const (
	maxName = 64
	maxNote = 1024
)

func (c *appConfig) checkPhase() error {
	switch c.Phase {
	case scsstore.PhaseOld, scsstore.PhaseDual, scsstore.PhaseDynamoDBFirst, scsstore.PhaseDynamoDBOnly:
		return nil
	}
	return fmt.Errorf("want old, dual, dynamodb-first or dynamodb-only")
}

// newApp returns the app's handler on the store that cfg.Phase chooses,
// creating the table if it is missing.
func newApp(ctx context.Context, cfg appConfig) (http.Handler, error) {
	sessions := scs.New()
	sessions.Lifetime = lifetime
	sessions.IdleTimeout = idleTimeout
	store, err := newStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sessions.Store = store
	// scs's defaults already give HttpOnly, SameSite=Lax and Path=/. The
	// __Host- prefix makes browsers insist on Secure, Path=/ and no Domain.
	// Both versions use the same cookie: it carries the session across.
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
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		name := r.PostFormValue("name")
		if !validText(name, maxName) {
			http.Error(w, fmt.Sprintf("form field name: want 1 to %d bytes of printable UTF-8", maxName), http.StatusBadRequest)
			return
		}
		// A demo signs anyone in; a real app checks a password here. A
		// new token at sign-in keeps a planted one from being signed in.
		if err := sessions.RenewToken(r.Context()); err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("login: %w", err))
			return
		}
		sessions.Put(r.Context(), "name", name)
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /me", func(w http.ResponseWriter, r *http.Request) {
		name := sessions.GetString(r.Context(), "name")
		if name == "" {
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, name)
	})
	mux.HandleFunc("POST /note", func(w http.ResponseWriter, r *http.Request) {
		text := r.PostFormValue("text")
		if !validText(text, maxNote) {
			http.Error(w, fmt.Sprintf("form field text: want 1 to %d bytes of printable UTF-8", maxNote), http.StatusBadRequest)
			return
		}
		sessions.Put(r.Context(), "note", text)
		http.Redirect(w, r, "/note", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /note", func(w http.ResponseWriter, r *http.Request) {
		if !sessions.Exists(r.Context(), "note") {
			http.Error(w, "no note in this session", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, sessions.GetString(r.Context(), "note"))
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.Destroy(r.Context()); err != nil {
			sessions.ErrorFunc(w, r, fmt.Errorf("logout: %w", err))
			return
		}
		http.Redirect(w, r, "/me", http.StatusSeeOther)
	})
	return sessions.LoadAndSave(mux), nil
}

// newStore returns the scs store of cfg.Phase: a Migration from scs's
// redisstore to a scsstore.Store. Its old phase is the app as it was but
// for the tombstone a destroy leaves in DynamoDB, which the dual phase
// deployed after it needs (docs/migrate.md).
func newStore(ctx context.Context, cfg appConfig) (scs.Store, error) {
	var old scs.Store
	if cfg.Redis != "" && cfg.Phase != scsstore.PhaseDynamoDBOnly {
		pool := &redis.Pool{
			MaxIdle:     10,
			IdleTimeout: 4 * time.Minute,
			Dial: func() (redis.Conn, error) {
				return redis.Dial("tcp", cfg.Redis, redis.DialConnectTimeout(5*time.Second),
					redis.DialReadTimeout(5*time.Second), redis.DialWriteTimeout(5*time.Second))
			},
		}
		old = redisstore.New(pool)
	}
	// The table is the core's: its Manager creates it, with TTL where the
	// engine has it.
	core, err := ddbsession.New(ddbsession.Config[struct{}]{Client: cfg.Client, Table: cfg.Table})
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
	return scsstore.NewMigration(scsstore.MigrationConfig{
		Old: old, New: store, Phase: cfg.Phase, Lifetime: lifetime, IdleTimeout: idleTimeout,
	})
}

// validText reports whether s is 1 to max bytes of UTF-8 without control
// characters.
func validText(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
