package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionotel"
)

// appConfig is what main takes from its flags and environment. Tests fill
// it in directly, with a client of their own.
type appConfig struct {
	Client           ddbsession.Client
	Table            string
	Dev              bool          // ddbsession.Config.Cookie.InsecureDevMode
	IdleTimeout      time.Duration // zero values take ddbsession's defaults
	RefreshInterval  time.Duration
	AbsoluteLifetime time.Duration
	// StoreTimeout bounds the DynamoDB work of a request's steps, ddbsession's
	// (Config.Limits.StoreTimeout) and the app's own. Default 2s.
	StoreTimeout time.Duration
	Logger       *slog.Logger // default slog.Default()
	// UserLimit and AddrLimit limit failed password checks per username (in
	// the table, for every instance together) and per client address (in
	// each instance): an IPv4 address or an IPv6 /64. Prefix56Limit and
	// Prefix48Limit limit those of each IPv6 /56 and /48 (see limits.go).
	// Zero values take the defaults.
	UserLimit, AddrLimit         rateLimit
	Prefix56Limit, Prefix48Limit rateLimit
	// TrustedProxies are the address ranges of the reverse proxies in
	// front of the app. X-Forwarded-For is read only on a connection from
	// one of them, and the client is the rightmost entry outside them (see
	// clientAddr). None: the connection's own address, and the header is
	// ignored, since any client can send it.
	TrustedProxies []netip.Prefix
	// Place, if set, names where an IP address is ("Berlin, Germany"), for
	// the sessions list: the app's own lookup, from a geolocation service
	// of its choosing; "" for unknown. ddbsession records addresses only.
	Place func(addr string) string
	// Now is the clock of the limits and of ddbsession. Default time.Now.
	Now func() time.Time
	// HashSlots is how many password hashes run at once, default
	// GOMAXPROCS; HashQueue how many more requests may wait for one,
	// default 8 per slot. Past that, logins and sign-ups get 503.
	HashSlots, HashQueue int
	// HashCost is argon2id's work per password hash, default OWASP's
	// minimum (2 passes over 19 MiB). The tests lower it: under the race
	// detector a hash at the default takes about 70ms of a core, and the
	// suite hashes hundreds of passwords.
	HashCost argonCost
	// DeviceBinding offers browsers to bind their sessions to a device key
	// (DBSC), with bound cookies of BoundLifetime (default ddbsession's).
	// It needs HTTPS: not with Dev.
	DeviceBinding bool
	BoundLifetime time.Duration
	// OnEvent, if set, is told every session event, after the debug log.
	// Tests watch sessions with it.
	OnEvent func(context.Context, ddbsession.Event)
	// Reauth is how recent an authentication the sensitive actions need
	// (logging out everywhere, revoking a session, setting up or removing
	// one-time codes): a session whose user proved themselves longer ago
	// is sent to re-authenticate first. Default 10 minutes.
	Reauth time.Duration
	// MaxSessions caps a user's sessions (ddbsession's Config.Limits.MaxSessions):
	// a login beyond it ends the user's oldest session. 0: no limit.
	MaxSessions int
	// PasskeyOrigin is the origin browsers open the app at
	// (https://app.example.com): the passkeys' relying party, whose host is
	// their RP ID. Default https://localhost (http:// with Dev).
	PasskeyOrigin string
	// Telemetry has the providers that session metrics and the spans of
	// session checks go to (ddbsessionotel); zero: OpenTelemetry's global
	// ones, which do nothing unless set.
	Telemetry ddbsessionotel.Config
	// OIDC is single sign-on through an OpenID Connect provider (oidc.go);
	// zero: off.
	OIDC oidcConfig
	// NewDeviceCode makes a password sign-in from a device new to the
	// account need a second factor, as Clerk does (devices.go).
	NewDeviceCode bool
}

// defaultReauth is appConfig.Reauth's default, and -reauth's.
const defaultReauth = 10 * time.Minute

// maxBody caps every request body. The largest form, a password change,
// holds two 1 KiB passwords that URL encoding can triple.
const maxBody = 16 << 10

// app holds what the handlers share.
type app struct {
	handler  http.Handler // routes(), behind the security middlewares
	sessions *ddbsession.Manager[User]
	tel      *ddbsessionotel.Telemetry // metrics of sessions, spans of their checks
	users    users
	dev      bool // appConfig.Dev
	hasher   *hasher
	passkeys *webauthn.WebAuthn // the relying party of passkeys.go
	// storeTimeout bounds the app's own DynamoDB work in a request.
	storeTimeout  time.Duration
	reauthWithin  time.Duration    // appConfig.Reauth
	now           func() time.Time // appConfig.Now: one-time codes' clock
	limits        *limits
	sso           *sso                     // single sign-on; nil when off
	place         func(addr string) string // appConfig.Place, or nil
	trusted       []netip.Prefix           // appConfig.TrustedProxies
	newDeviceCode bool                     // appConfig.NewDeviceCode
	log           *slog.Logger
	// dummyHash is verified against when a login names an unknown user, so
	// that it costs as much as a wrong password for a real one.
	dummyHash passwordHash
}

// newApp prepares the table and returns the app, whose ServeHTTP is its
// whole handler, so that main and the tests serve exactly the same thing.
func newApp(ctx context.Context, cfg appConfig) (*app, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Reauth <= 0 {
		cfg.Reauth = defaultReauth
	}
	for _, l := range []struct {
		name  string
		limit *rateLimit
		def   rateLimit
	}{
		{"UserLimit", &cfg.UserLimit, defaultUserLimit},
		{"AddrLimit", &cfg.AddrLimit, defaultAddrLimit},
		{"Prefix56Limit", &cfg.Prefix56Limit, defaultPrefix56Limit},
		{"Prefix48Limit", &cfg.Prefix48Limit, defaultPrefix48Limit},
	} {
		if *l.limit == (rateLimit{}) {
			*l.limit = l.def
		}
		// The table counts in milliseconds (userlimit.go).
		if l.limit.Every < time.Millisecond || l.limit.Burst < 1 {
			return nil, fmt.Errorf("appConfig.%s %+v: want an Every of a millisecond or more, and a positive Burst", l.name, *l.limit)
		}
	}
	if cfg.HashSlots <= 0 {
		cfg.HashSlots = runtime.GOMAXPROCS(0)
	}
	if cfg.HashQueue <= 0 {
		cfg.HashQueue = 8 * cfg.HashSlots
	}
	if cfg.HashCost == (argonCost{}) {
		cfg.HashCost = owaspCost
	}
	if cfg.HashCost.Time < 1 || cfg.HashCost.Memory < 8*argonThreads {
		return nil, fmt.Errorf("appConfig.HashCost %+v: want a Time of 1 or more and a Memory of 8 KiB or more", cfg.HashCost)
	}
	tel, err := ddbsessionotel.New(cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	passkeys, err := newRelyingParty(cmp.Or(cfg.PasskeyOrigin, passkeyOrigin(cfg.Dev)))
	if err != nil {
		return nil, err
	}
	// The app is made first, so that the session guard's page answers are
	// its own; the rest is filled in below.
	a := &app{
		tel:           tel,
		users:         users{client: cfg.Client, table: cfg.Table},
		log:           log,
		dev:           cfg.Dev,
		storeTimeout:  cfg.StoreTimeout,
		reauthWithin:  cfg.Reauth,
		now:           cfg.Now,
		passkeys:      passkeys,
		place:         cfg.Place,
		trusted:       cfg.TrustedProxies,
		newDeviceCode: cfg.NewDeviceCode,
	}
	sessions, err := ddbsession.New(ddbsession.Config[User]{
		Client: cfg.Client,
		Table:  cfg.Table,
		Cookie: ddbsession.Cookie{
			InsecureDevMode: cfg.Dev,
			KeepSignedIn:    keepSignedIn,
			// Logging out (and out everywhere) also asks the browser to
			// drop what it kept of the site (see logoutClears).
			ClearSiteData: logoutClears,
			// A long-lived device cookie recognises the browsers each
			// user signs in from: the history and the account page say
			// when one is new (devices.go).
			RememberDevices: true,
		},
		Limits: ddbsession.Limits{
			IdleTimeout:      cfg.IdleTimeout,
			RefreshInterval:  cfg.RefreshInterval,
			AbsoluteLifetime: cfg.AbsoluteLifetime,
			StoreTimeout:     cfg.StoreTimeout,
			MaxSessions:      cfg.MaxSessions,
		},
		// Clients without cookies (a CLI, a script) log in at POST
		// /api/login and send the token in an Authorization header. One
		// that sends a DPoP proof gets a token bound to its key, which
		// each request then proves (docs/dpop.md; dpopclient is one).
		// Each Manager makes its own DPoP nonce key; several instances
		// behind one name would share DeviceBinding.DPoPNonceKeys.
		BearerTokens: true,
		// A page that needs a session sends the browser to log in, and
		// back here after; the API answers in JSON instead.
		Unauthorized: apiOr(apiAnswer(http.StatusUnauthorized, "unauthorized"), toLogin),
		StoreUnavailable: apiOr(apiAnswer(http.StatusServiceUnavailable, "session store unavailable, try again"),
			a.pageAnswer(http.StatusServiceUnavailable, "The session store is unavailable. Try again in a moment.")),
		// A sensitive action from a session whose authentication is older
		// than Reauth sends the browser to confirm the password (and code),
		// and back to a page that asks for the action again (stepUp); the
		// API gets RFC 9470's challenge, from ddbsession, and
		// re-authenticates at POST /api/reauth.
		StepUp: apiOr(apiAnswer(http.StatusUnauthorized, "authenticate again to continue: POST /api/reauth"),
			http.HandlerFunc(stepUp)),
		// A browser with DBSC that signs in with a cookie is offered to
		// bind the session to a key of its own, and must then prove that
		// it holds the key to refresh a short-lived bound cookie: a copy of
		// its cookies works only until that cookie expires.
		DeviceBinding: ddbsession.DeviceBinding{Enabled: cfg.DeviceBinding, CookieLifetime: cfg.BoundLifetime},
		OnEvent: func(ctx context.Context, e ddbsession.Event) {
			tel.OnEvent(ctx, e)
			logEvent(ctx, log, e)
			if cfg.OnEvent != nil {
				cfg.OnEvent(ctx, e)
			}
		},
		Logger: log,
		Now:    cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	// CreateTable makes a missing table and checks one that exists. dynalite
	// has no TTL, which it logs: sessions still expire, because ddbsession
	// checks expiry in code; only the clean-up of old items is missing.
	if err := sessions.CreateTable(ctx); err != nil {
		return nil, err
	}
	h := newHasher(cfg.HashSlots, cfg.HashQueue, cfg.HashCost)
	slot, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	a.dummyHash = slot.hash(rand.Text())
	slot.release()
	a.sessions, a.hasher = sessions, h
	a.limits = &limits{
		byUser:         userFailures{client: cfg.Client, table: cfg.Table, limit: cfg.UserLimit},
		byAddr:         newFailureLimiter(cfg.AddrLimit, maxLimiterKeys),
		by56:           newFailureLimiter(cfg.Prefix56Limit, maxLimiterKeys),
		by48:           newFailureLimiter(cfg.Prefix48Limit, maxLimiterKeys),
		trustedProxies: cfg.TrustedProxies,
		now:            cfg.Now,
	}
	if a.sso, err = newSSO(ctx, cfg, a); err != nil {
		return nil, err
	}
	a.handler = a.routes()
	return a, nil
}

// logoutClears is what a logout's Clear-Site-Data header asks the browser
// to clear (ddbsession's Config.Cookie.ClearSiteData): all storage of the
// site. Browsers apply it to the whole registrable domain, which is this
// app's alone when it has a host of its own. Cookies are left out: the
// device cookie must outlive a logout to recognise the browser at the next
// sign-in, and Logout clears the session's own cookies (the session's, the
// pending login's, the bound one); the app's others, a passkey ceremony's
// and single sign-on's, live minutes. So is the cache: every response is
// no-store (securityHeaders), so it holds nothing of the app's, and
// clearing it can hold a logout's page in Chromium for seconds.
var logoutClears = []string{"storage"}

// keepSignedIn is ddbsession's Config.Cookie.KeepSignedIn: the "keep me signed in"
// box of the log-in and sign-up forms decides whether the cookie outlives
// the browser. The other sign-in, after a password change, has no box and
// keeps the persistent cookie, since it cannot tell which kind the browser
// had.
func keepSignedIn(r *http.Request) bool {
	switch r.URL.Path {
	case "/login", "/signup":
		return r.PostFormValue("remember") == "on"
	}
	return true
}

// logEvent logs what ddbsession did with a session, at debug level: the
// story of a session when one needs telling, and nothing otherwise.
// Events never hold a token.
func logEvent(ctx context.Context, log *slog.Logger, e ddbsession.Event) {
	if !log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("kind", string(e.Kind))}
	if e.SessionID != "" {
		attrs = append(attrs, slog.String("session", e.SessionID))
	}
	if e.User.PK != "" {
		attrs = append(attrs, slog.String("user", e.User.PK))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(e.Reason)))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("err", e.Err))
	}
	log.LogAttrs(ctx, slog.LevelDebug, "session event", attrs...)
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// shutdown waits for the session refreshes that requests started, which
// ddbsession writes after their responses.
func (a *app) shutdown(ctx context.Context) error { return a.sessions.Wait(ctx) }

func (a *app) routes() http.Handler {
	// Pages and the API share the guard; the Config's answers tell them
	// apart by path (apiOr). Each check is a span of its own.
	require := a.tel.Guard(a.sessions.RequireSession, a.sessions.Session)
	load := a.tel.Guard(a.sessions.LoadSession, a.sessions.Session)
	signedIn := func(h http.HandlerFunc) http.Handler { return require(h) }
	// The actions that could lock the user out or let someone in need a
	// recent authentication too, whoever holds the session now.
	recent := a.ssoRecent(a.sessions.RequireAuthentication(a.reauthWithin))
	sensitive := func(h http.HandlerFunc) http.Handler { return require(recent(h)) }

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", load(http.HandlerFunc(a.index)))
	mux.Handle("GET /login", load(http.HandlerFunc(a.loginPage)))
	// The account alone, at an address that needs a session: a link to it
	// (or a bookmark) goes through the login page and comes back.
	mux.Handle("GET /account", signedIn(a.index))
	mux.HandleFunc("POST /signup", a.signup)
	mux.HandleFunc("POST /login", a.login)
	// The second step of a login with a one-time code: the pending login
	// of BeginLogin, in its own cookie, is the credential here.
	mux.HandleFunc("POST /login/code", a.loginCode)
	// Logout needs no valid session: it ends whatever the request carries,
	// so a stale tab's "log out" button still clears the cookie.
	logout := http.Handler(http.HandlerFunc(a.logout))
	if a.sso != nil {
		logout = load(logout) // the provider's logout needs the session (ssoLogout)
	}
	mux.Handle("POST /logout", logout)
	mux.Handle("POST /logout-everywhere", sensitive(a.logoutEverywhere))
	// Each sensitive action's confirm page, the GET of its path, where a
	// re-authentication for it comes back to (reauth.go's resumable).
	mux.Handle("GET /logout-everywhere", signedIn(a.confirmPage(confirmLogoutEverywhere)))
	mux.Handle("GET /sessions/revoke", signedIn(a.confirmRevoke))
	mux.Handle("GET /totp/enrol", signedIn(a.confirmPage(confirmTOTPEnrol)))
	mux.Handle("GET /totp/confirm", sensitive(a.totpSetupPage))
	mux.Handle("GET /totp/remove", signedIn(a.confirmPage(confirmTOTPRemove)))
	// The password change asks for the current password itself, and signs
	// in again with it: a re-authentication of its own.
	mux.Handle("POST /password", signedIn(a.changePassword))
	mux.Handle("POST /sessions/revoke", sensitive(a.revokeSession))
	mux.Handle("POST /totp/enrol", sensitive(a.totpEnrol))
	mux.Handle("POST /totp/confirm", sensitive(a.totpConfirm))
	mux.Handle("POST /totp/remove", sensitive(a.totpRemove))
	mux.Handle("GET "+reauthPath, signedIn(a.reauthPage))
	mux.Handle("POST "+reauthPath, signedIn(a.reauthenticate))
	a.passkeyRoutes(mux, signedIn, sensitive)
	mux.HandleFunc("POST /api/login", a.apiLogin)
	mux.Handle("POST /api/reauth", signedIn(a.apiReauthenticate))
	mux.Handle("GET /api/me", signedIn(a.me))
	mux.Handle("GET /api/sessions", signedIn(a.listSessions))
	mux.Handle("DELETE /api/sessions/{id}", sensitive(a.apiRevokeSession))
	// Device binding's registration and refresh, where a browser proves it
	// holds its key. Not behind RequireSession: a browser refreshes exactly
	// when its bound cookie has expired, which RequireSession refuses. The
	// handler answers 404 while device binding is off.
	mux.Handle("POST /dbsc/", a.sessions.DeviceBindingHandler())
	// Sign in with the provider, its callback and its back-channel logout,
	// with -oidc-issuer.
	a.ssoRoutes(mux)

	// SameSite=Lax already keeps the cookie off most cross-site POSTs;
	// CrossOriginProtection refuses them outright (403) from the browser's
	// Sec-Fetch-Site and Origin headers, with no CSRF tokens to manage.
	// A client that is no browser sends neither header, so its POST
	// /api/login goes through; its requests then carry a bearer token,
	// which no other site can make a browser send.
	//
	// Requests that no route takes get the app's page, not the mux's text.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(apiOr(apiAnswer(http.StatusForbidden, "cross-origin request refused"),
		a.pageAnswer(http.StatusForbidden, "This form was sent from another site, so it was refused. To do this, use the form on this site.")))
	// The provider's back-channel logout is a server's POST with no
	// cookie: exempt, on its route alone (why: exemptBackChannel).
	a.exemptBackChannel(cop)
	var h http.Handler = cop.Handler(a.routeErrors(mux))
	h = http.MaxBytesHandler(h, maxBody)
	// The client's address, not a proxy's, is what ddbsession records of
	// a session, and what the limits count.
	h = clientRemoteAddr(h, a.trusted)
	return securityHeaders(h, a.dev, a.csp())
}

// contentSecurityPolicy is every page's: no images (the one-time-code
// set-up adds its QR code's data: image), styles inline, scripts from this
// app alone, which serves one, /passkeys.js, and fetches from it alone (no
// inline script; nosniff keeps any other answer from running as one).
// With single sign-on, form-action allows the provider too (app.csp).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets headers every response of this app should carry.
// Its pages are personal, so nothing may be cached; their one script is the app's own,
// and no other site may frame them (a framed "log out everywhere" button
// could be clicked by a trick). Outside dev mode the app is served over
// HTTPS only (its cookie is Secure), so Strict-Transport-Security tells
// browsers never to try plain HTTP, where an active attacker could answer
// first; dev mode is plain HTTP on localhost, where the header would pin
// every app on that host to HTTPS.
func securityHeaders(next http.Handler, dev bool, csp string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if !dev {
			h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		}
		next.ServeHTTP(w, r)
	})
}
