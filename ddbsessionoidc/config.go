package ddbsessionoidc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// Config configures a [Provider]: one OpenID provider, the app's client
// registered there, and the Manager that its users sign in to. Sessions,
// Issuer, ClientID, RedirectURL and User have no default and must be set;
// every other field may be left zero for its default, which [New] fills in
// when it validates the Config, once.
type Config[U any] struct {
	// Sessions is the app's Manager, which signs the users in
	// ([ddbsession.Manager.Login]) and ends their sessions.
	Sessions *ddbsession.Manager[U]

	// Client, Table and Layout are the Manager's, which they default to
	// (ddbsession.Manager.Table): the module keeps its items beside the
	// sessions, in the same table. Set, Table and Layout must be the
	// Manager's, or New fails naming the field; a Client set (one that
	// counts calls, say) is used as it is. The Provider's first call that
	// touches the table checks Layout against the layout that the table
	// records (a BatchGetItem, once), and refuses a mismatch with an error
	// that names each field with both values.
	Client Client
	Table  string
	Layout ddbsession.Layout

	// Prefix starts the partition key of each of the module's items.
	// Default "OIDC#". Change it only where the app's own items use it,
	// or to keep two providers' items apart (their keys differ anyway,
	// since each names its issuer).
	Prefix string

	// Issuer is the provider's issuer URL, exactly as its discovery
	// document says it ("https://accounts.google.com"); New reads
	// Issuer + "/.well-known/openid-configuration".
	Issuer string

	// ClientID and ClientSecret are the app's client at the provider. A
	// public client (no secret) relies on PKCE alone, which the module
	// always uses.
	ClientID     string
	ClientSecret string

	// RedirectURL is the absolute https URL of the route that serves
	// [Provider.Callback], as registered at the provider.
	RedirectURL string

	// PostLogoutRedirectURL is where [Provider.Logout] sends the browser
	// once signed out: through the provider's end-session endpoint, which
	// must have it registered, or straight there. Default: the site's
	// root, from RedirectURL.
	PostLogoutRedirectURL string

	// Scopes are asked for besides "openid", which is always: "email" and
	// "profile" put those claims into the ID token, for User to read.
	Scopes []string

	// User maps the provider's user to the app's: the key of the user
	// item that [ddbsession.Manager.Login] signs in, which must exist
	// (User may create it, with Manager.CreateUser). An error refuses the
	// sign-in, and reaches SignInFailed as it is. Key on the provider's
	// issuer and subject, which never change, not on an email address,
	// which may be reassigned.
	User func(ctx context.Context, id Identity) (ddbsession.UserKey, error)

	// Method names the provider in [ddbsession.Session.Methods], for
	// RequireAuthentication: default "oidc". Up to 32 printable ASCII
	// characters.
	Method string

	// FreshMethod names, in Session.Methods beside Method, a sign-in for
	// which the user logged in at the provider during the sign-in's
	// attempt (the ID token's iat - auth_time no more than the attempt's
	// age and a few seconds, [Provider.Reauthenticate] says how): every
	// one of Reauthenticate, which requires it, and a [Provider.SignIn]
	// whose user logged in then. A SignIn that the provider answered from
	// a session it already held, however recent, gets Method alone: its
	// AuthenticatedAt is the time of the app's sign-in, not of any login,
	// so a RequireAuthentication that guards a sensitive action must ask
	// such sessions for FreshMethod, or a plain SignIn passes where
	// Reauthenticate would have asked the user. Default Method +
	// "-fresh"; the same bounds as Method.
	FreshMethod string

	// SessionLifetime is the Manager's Limits.AbsoluteLifetime, which it
	// defaults to: how long the module keeps, for a back-channel logout,
	// what a sign-in recorded. Shorter than the Manager's, a back-channel
	// logout misses sessions older than it.
	SessionLifetime time.Duration

	// AttemptLifetime bounds how long a sign-in may take at the provider,
	// from [Provider.SignIn] to the callback. A login counts for
	// FreshMethod only if it happened within the attempt, so a longer
	// lifetime gives the user more time, not an older provider session a
	// pass. Default 10 minutes, between a minute and an hour.
	AttemptLifetime time.Duration

	// Timeout bounds the work of one request to the module's handlers:
	// the calls to DynamoDB and to the provider (the code's exchange, the
	// provider's keys). Default 10 seconds.
	Timeout time.Duration

	// CookieName names the cookie that binds a sign-in attempt to the
	// browser. Default "__Host-" + Method + "-signin". InsecureDevMode drops
	// its Secure attribute and "__Host-" prefix, for plain-HTTP localhost,
	// as the Manager's Cookie.InsecureDevMode does; never in production.
	CookieName      string
	InsecureDevMode bool

	// HTTPClient reaches the provider. Default a client with Timeout.
	HTTPClient *http.Client

	// SignInFailed answers a callback that did not sign the user in: an
	// attempt unknown, expired, used or of another browser, the provider's
	// refusal, a token that does not verify, User's error, or a failure of
	// DynamoDB or the provider. err says which, never with a token.
	// Default: 400, 403 for User's refusal, 502 or 503 for a failure.
	SignInFailed func(w http.ResponseWriter, r *http.Request, err error)

	// Logger receives failures the handlers cannot report to anyone (a
	// sign-in's undo that failed). Default slog.Default().
	Logger *slog.Logger

	// Now is the clock, the verifiers' too. Default time.Now.
	Now func() time.Time
}

// Identity is the provider's user, from a verified ID token, for
// [Config.User].
type Identity struct {
	Issuer  string
	Subject string
	// SessionID is the ID token's sid claim, the user's session at the
	// provider; "" if the provider sends none.
	SessionID string
	// IDToken is the verified token: IDToken.Claims(&v) reads the other
	// claims (email, email_verified, name).
	IDToken *oidc.IDToken
}

// Provider signs users in through one OpenID provider and ends their
// sessions when the provider says so. It is safe for concurrent use.
// [New] makes one.
type Provider[U any] struct {
	sessions        *ddbsession.Manager[U]
	store           store
	issuer          string
	oauth           oauth2.Config
	idTokens        *oidc.IDTokenVerifier
	endSession      string // the provider's end_session_endpoint, or ""
	postLogout      string
	user            func(context.Context, Identity) (ddbsession.UserKey, error)
	method          string
	freshMethod     string
	sessionLifetime time.Duration
	attemptLifetime time.Duration
	timeout         time.Duration
	cookie          string
	secure          bool
	http            *http.Client
	failed          func(http.ResponseWriter, *http.Request, error)
	logger          *slog.Logger
	now             func() time.Time
}

// New validates cfg, reads the provider's discovery document (with ctx,
// bounded by cfg.Timeout) and returns a Provider. The error names the
// first invalid field.
func New[U any](ctx context.Context, cfg Config[U]) (*Provider[U], error) {
	layout, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The key set outlives this call: go-oidc fetches the provider's keys
	// with this context when a token names a key it has not seen.
	keysCtx := oidc.ClientContext(context.WithoutCancel(ctx), cfg.HTTPClient)
	discoverCtx, cancel := context.WithTimeout(oidc.ClientContext(ctx, cfg.HTTPClient), cfg.Timeout)
	defer cancel()
	discovered, err := oidc.NewProvider(discoverCtx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("ddbsessionoidc: Config.Issuer %q: %w", cfg.Issuer, err)
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := discovered.Claims(&meta); err != nil {
		return nil, fmt.Errorf("ddbsessionoidc: Config.Issuer %q: the discovery document: %w", cfg.Issuer, err)
	}
	if meta.EndSession != "" {
		if u, err := url.Parse(meta.EndSession); err != nil || u.Scheme != "https" && !cfg.InsecureDevMode {
			return nil, fmt.Errorf("ddbsessionoidc: Config.Issuer %q: end_session_endpoint %q is not an https URL", cfg.Issuer, meta.EndSession)
		}
	}
	records, err := ddbitem.NewReader(ddbitem.ReaderConfig{Client: cfg.Client, Table: cfg.Table, Layout: layout})
	if err != nil {
		return nil, fmt.Errorf("ddbsessionoidc: %w", err)
	}
	p := &Provider[U]{
		sessions: cfg.Sessions,
		store:    store{client: cfg.Client, table: cfg.Table, layout: layout, prefix: cfg.Prefix, records: records},
		issuer:   cfg.Issuer,
		oauth: oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			Endpoint:     discovered.Endpoint(),
			RedirectURL:  cfg.RedirectURL,
			Scopes:       append([]string{oidc.ScopeOpenID}, cfg.Scopes...),
		},
		idTokens:        discovered.VerifierContext(keysCtx, &oidc.Config{ClientID: cfg.ClientID, Now: cfg.Now}),
		endSession:      meta.EndSession,
		postLogout:      cfg.PostLogoutRedirectURL,
		user:            cfg.User,
		method:          cfg.Method,
		freshMethod:     cfg.FreshMethod,
		sessionLifetime: cfg.SessionLifetime,
		attemptLifetime: cfg.AttemptLifetime,
		timeout:         cfg.Timeout,
		cookie:          cfg.CookieName,
		secure:          !cfg.InsecureDevMode,
		http:            cfg.HTTPClient,
		failed:          cfg.SignInFailed,
		logger:          cfg.Logger,
		now:             cfg.Now,
	}
	return p, nil
}

// withDefaults fills in every unset field of c and returns the table's
// layout, resolved, or an error naming the first invalid field.
func (c *Config[U]) withDefaults() (ddbsession.Layout, error) {
	fail := func(format string, args ...any) (ddbsession.Layout, error) {
		return ddbsession.Layout{}, fmt.Errorf("ddbsessionoidc: Config."+format, args...)
	}
	if c.Sessions == nil {
		return fail("Sessions is nil")
	}
	ref := c.Sessions.Table()
	if c.Client == nil {
		c.Client, _ = ref.Client.(Client)
	}
	switch {
	case c.Client == nil:
		return fail("Client is nil, and the Manager's lacks a method of ddbsessionoidc.Client")
	case c.Table == "":
		c.Table = ref.Name
	case c.Table != ref.Name:
		return fail("Table %q is not the Manager's %q: leave it unset", c.Table, ref.Name)
	}
	if c.Layout == (ddbsession.Layout{}) {
		c.Layout = ddbsession.Layout(ref.Layout)
	}
	layout, err := ddbitem.Resolve(c.Layout)
	if err != nil {
		return fail("%w", err) // Resolve names the field as "Layout.<Field>"
	}
	if layout.HashOnly {
		return fail("Layout.HashOnly: a back-channel logout ends single sessions (Manager.Revoke), which needs a table with a sort key")
	}
	if layout != ddbsession.Layout(ref.Layout) {
		return fail("Layout %+v is not the Manager's %+v: leave it unset", layout, ref.Layout)
	}
	setDefault(&c.Prefix, "OIDC#")
	for _, core := range []string{layout.SessionPrefix, layout.UserSessionsPrefix} {
		if strings.HasPrefix(c.Prefix, core) || strings.HasPrefix(core, c.Prefix) {
			return fail("Prefix %q overlaps the core's prefix %q", c.Prefix, core)
		}
	}
	issuer, err := url.Parse(c.Issuer)
	if c.Issuer == "" || err != nil || issuer.Host == "" {
		return fail("Issuer %q: want the provider's https URL", c.Issuer)
	}
	if issuer.Scheme != "https" && !c.InsecureDevMode {
		return fail("Issuer %q: want an https URL; a local test provider on plain HTTP needs Config.InsecureDevMode, never in production", c.Issuer)
	}
	if c.ClientID == "" {
		return fail("ClientID is empty")
	}
	redirect, err := url.Parse(c.RedirectURL)
	if err != nil || !redirect.IsAbs() || redirect.Host == "" || redirect.Fragment != "" {
		return fail("RedirectURL %q: want the absolute https URL of the callback", c.RedirectURL)
	}
	if redirect.Scheme != "https" && !c.InsecureDevMode {
		return fail("RedirectURL %q: want an https URL; plain HTTP on localhost needs Config.InsecureDevMode, never in production", c.RedirectURL)
	}
	setDefault(&c.PostLogoutRedirectURL, (&url.URL{Scheme: redirect.Scheme, Host: redirect.Host, Path: "/"}).String())
	if u, err := url.Parse(c.PostLogoutRedirectURL); err != nil || !u.IsAbs() || u.Host == "" {
		return fail("PostLogoutRedirectURL %q: want an absolute URL", c.PostLogoutRedirectURL)
	}
	if c.User == nil {
		return fail("User is nil")
	}
	setDefault(&c.Method, "oidc")
	if !methodShape(c.Method) {
		return fail("Method %q: want 1 to 32 printable ASCII characters", c.Method)
	}
	setDefault(&c.FreshMethod, c.Method+"-fresh")
	if !methodShape(c.FreshMethod) || c.FreshMethod == c.Method {
		return fail("FreshMethod %q: want 1 to 32 printable ASCII characters, not Method", c.FreshMethod)
	}
	if c.SessionLifetime == 0 {
		c.SessionLifetime = ref.AbsoluteLifetime
	}
	if c.SessionLifetime < time.Minute {
		return fail("SessionLifetime %v: want the Manager's Limits.AbsoluteLifetime", c.SessionLifetime)
	}
	if c.AttemptLifetime == 0 {
		c.AttemptLifetime = 10 * time.Minute
	}
	if c.AttemptLifetime < time.Minute || c.AttemptLifetime > time.Hour {
		return fail("AttemptLifetime %v: want between a minute and an hour", c.AttemptLifetime)
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Timeout < 0 {
		return fail("Timeout %v: must be positive", c.Timeout)
	}
	setDefault(&c.CookieName, "__Host-"+c.Method+"-signin")
	if c.InsecureDevMode {
		c.CookieName = strings.TrimPrefix(c.CookieName, "__Host-")
	} else if !strings.HasPrefix(c.CookieName, "__Host-") {
		c.CookieName = "__Host-" + c.CookieName
	}
	if err := (&http.Cookie{Name: c.CookieName, Value: "x"}).Valid(); err != nil {
		return fail("CookieName %q: %w", c.CookieName, err)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.Timeout}
	}
	if c.SignInFailed == nil {
		c.SignInFailed = signInFailed
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return layout, nil
}

// methodShape reports whether m is a method that Manager.Login takes: 1
// to 32 printable ASCII characters. New checks it so that a bad Method
// fails at start-up rather than at every sign-in.
func methodShape(m string) bool {
	return m != "" && len(m) <= 32 && !strings.ContainsFunc(m, func(r rune) bool { return r < '!' || r > '~' })
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

// failure is why a handler of the module did not do its work: the status
// it answers, and the cause, which never holds a token.
type failure struct {
	status int
	msg    string
	err    error
}

func (f *failure) Error() string {
	if f.err == nil {
		return "ddbsessionoidc: " + f.msg
	}
	return "ddbsessionoidc: " + f.msg + ": " + f.err.Error()
}

func (f *failure) Unwrap() error { return f.err }

func refused(msg string, err error) error { return &failure{http.StatusBadRequest, msg, err} }

func unavailable(msg string, err error) error {
	return &failure{http.StatusServiceUnavailable, msg, err}
}

// signInFailed is the default SignInFailed: a short page with the status
// of the failure, which says what to do without a token or a detail an
// attacker could use.
func signInFailed(w http.ResponseWriter, r *http.Request, err error) {
	status, text := http.StatusBadRequest, "sign-in did not complete: go back and sign in again"
	var f *failure
	if errors.As(err, &f) {
		status = f.status
	}
	switch status {
	case http.StatusForbidden:
		text = "sign-in refused for this account"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		text = "sign-in is unavailable right now: try again in a moment"
	}
	http.Error(w, text, status)
}
