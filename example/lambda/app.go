package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession"
)

// appConfig is what newApp takes: main fills it in from the environment,
// tests with a client of their own.
type appConfig struct {
	Client   ddbsession.Client
	Settings settings
	Now      func() time.Time // default time.Now
	Logger   *slog.Logger     // default slog.Default()
}

// app holds what the handlers share, for the life of an execution
// environment.
type app struct {
	handler  http.Handler
	sessions *ddbsession.Manager[User]
	failures failures
	reauth   time.Duration
	timeout  time.Duration // the app's own DynamoDB work in a request
	now      func() time.Time
	log      *slog.Logger
	// startup is what newApp's two steps took, for the cold start's log.
	startup struct{ newTook, checkTook time.Duration }
}

// newApp makes the Manager and checks the table, once per execution
// environment, and returns the app, whose ServeHTTP is the whole function.
func newApp(ctx context.Context, cfg appConfig) (*app, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := cfg.Settings
	a := &app{
		failures: failures{client: cfg.Client, table: s.Table, every: time.Minute, burst: 10},
		reauth:   s.Reauth,
		timeout:  s.StoreTimeout,
		now:      cfg.Now,
		log:      cfg.Logger,
	}
	began := time.Now()
	sessions, err := ddbsession.New(ddbsession.Config[User]{
		Client: cfg.Client,
		Table:  s.Table,
		// The example server's cookie: __Host-session, and "keep me signed
		// in" deciding whether it outlives the browser.
		Cookie: ddbsession.Cookie{KeepSignedIn: keepSignedIn},
		Limits: ddbsession.Limits{
			IdleTimeout:      s.IdleTimeout,
			RefreshInterval:  s.RefreshInterval,
			AbsoluteLifetime: s.AbsoluteLifetime,
			StoreTimeout:     s.StoreTimeout,
		},
		BearerTokens:     true,
		Unauthorized:     apiOr(apiAnswer(http.StatusUnauthorized, "unauthorized"), ddbsession.Redirect("/login")),
		StoreUnavailable: apiOr(apiAnswer(http.StatusServiceUnavailable, "session store unavailable, try again"), pageAnswer(http.StatusServiceUnavailable, "The session store is unavailable. Try again in a moment.")),
		StepUp: apiOr(apiAnswer(http.StatusUnauthorized, "authenticate again to continue: POST /api/reauth"),
			http.RedirectHandler(reauthPath+"?next=/account", http.StatusSeeOther)),
		// On Lambda (AWS_LAMBDA_FUNCTION_NAME set) a refresh's write runs
		// before the handler, inside the invocation: nothing is left to run
		// when the environment is frozen after the response.
		Logger: cfg.Logger,
		Now:    cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	a.startup.newTook = time.Since(began)
	// The table is the template's: CreateTable only checks it (a
	// DescribeTable, a DescribeTimeToLive, and a BatchGetItem of the
	// global revocation item and the table's layout record, which the
	// deployment's first start writes), and fails the Init on a table that
	// does not fit or records another layout.
	began = time.Now()
	if err := sessions.CreateTable(ctx); err != nil {
		return nil, err
	}
	a.startup.checkTook = time.Since(began)
	a.sessions = sessions
	a.handler = a.routes()
	return a, nil
}

// keepSignedIn is the "keep me signed in" box of the log-in and sign-up
// forms; a re-authentication keeps the kind of cookie the browser had.
func keepSignedIn(r *http.Request) bool {
	switch r.URL.Path {
	case "/login", "/signup":
		return r.PostFormValue("remember") == "on"
	}
	return true
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// reauthPath is the re-authentication page, where StepUp sends browsers.
const reauthPath = "/reauth"

// maxBody caps every request body.
const maxBody = 16 << 10

func (a *app) routes() http.Handler {
	require, load := a.sessions.RequireSession, a.sessions.LoadSession
	recent := a.sessions.RequireAuthentication(a.reauth)
	sensitive := func(h http.HandlerFunc) http.Handler { return require(recent(h)) }

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", load(http.HandlerFunc(a.index)))
	mux.Handle("GET /login", load(http.HandlerFunc(a.loginPage)))
	mux.Handle("GET /account", require(http.HandlerFunc(a.index)))
	mux.HandleFunc("POST /signup", a.signup)
	mux.HandleFunc("POST /login", a.login)
	mux.HandleFunc("POST /logout", a.logout)
	mux.Handle("POST /logout-everywhere", sensitive(a.logoutEverywhere))
	mux.Handle("POST /sessions/revoke", sensitive(a.revokeSession))
	mux.Handle("GET "+reauthPath, require(http.HandlerFunc(a.reauthPage)))
	mux.Handle("POST "+reauthPath, require(http.HandlerFunc(a.reauthenticate)))
	mux.HandleFunc("POST /api/login", a.apiLogin)
	mux.Handle("POST /api/reauth", require(http.HandlerFunc(a.apiReauthenticate)))
	mux.Handle("GET /api/me", require(http.HandlerFunc(a.me)))
	mux.Handle("GET /api/sessions", require(http.HandlerFunc(a.listSessions)))
	mux.Handle("DELETE /api/sessions/{id}", sensitive(a.apiRevokeSession))

	// Cross-site form posts are refused from the browser's Sec-Fetch-Site
	// and Origin headers, which a Function URL passes on; API clients send
	// neither, and authenticate with a bearer token no other site can make
	// a browser send.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(apiOr(apiAnswer(http.StatusForbidden, "cross-origin request refused"),
		pageAnswer(http.StatusForbidden, "This form was sent from another site, so it was refused.")))
	return securityHeaders(http.MaxBytesHandler(cop.Handler(mux), maxBody))
}

// securityHeaders sets what every response carries: personal pages, not
// cached, not framed, no scripts, HTTPS only (a Function URL is HTTPS).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		next.ServeHTTP(w, r)
	})
}

// apiOr answers requests under /api/ with api and the others with page.
func apiOr(api, page http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			api.ServeHTTP(w, r)
			return
		}
		page.ServeHTTP(w, r)
	})
}

// storeFailed answers 503 for a DynamoDB failure and logs it; the error
// never holds a token.
func (a *app) storeFailed(w http.ResponseWriter, r *http.Request, op string, err error, answer answerFunc) {
	a.log.ErrorContext(r.Context(), "dynamodb request failed", "op", op, "err", err)
	answer(w, http.StatusServiceUnavailable, "The session store is unavailable. Try again in a moment.")
}

// answerFunc answers a failed request with code and a message for the
// user: a page for a browser, JSON for an API client.
type answerFunc func(w http.ResponseWriter, code int, msg string)

// storeContext bounds the app's own DynamoDB work in a request.
func (a *app) storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), a.timeout)
}
