package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Manager keeps sessions for users of type U in one DynamoDB table and guards
// handlers with them. It is safe for concurrent use. [New] makes one.
//
// U appears at the surface only: in the user that the middleware puts in
// the context (User, NewContext), in the check of Login and LoginBearer,
// and in Check's result. Everything below works on the non-generic core,
// which decodes users through a pointer.
type Manager[U any] struct {
	core
}

// core is a Manager without its user type: the validated Config, in the
// parts that do the work. The package documentation maps how a request
// passes through them.
type core struct {
	store    *store
	users    users
	cookies  cookies
	life     lifetimes
	refresh  *refresher
	events   events
	binding  DeviceBinding
	everyone *everyone

	// noTTL says that CreateTable found the engine without
	// UpdateTimeToLive, for CheckTable.
	noTTL atomic.Bool
	// insecureOnce makes the warning of warnIfDropped once.
	insecureOnce sync.Once

	limit *sessionLimit

	keepSignedIn                   func(*http.Request) bool // Config.KeepSignedIn, or nil
	clearSiteData                  string                   // Logout's Clear-Site-Data header, or ""
	unauthorized, storeUnavailable http.Handler
	stepUp                         http.Handler  // Config.StepUp
	timeout                        time.Duration // Config.StoreTimeout
	now                            func() time.Time
	logger                         *slog.Logger
}

// storeContext bounds the DynamoDB work of one call by StoreTimeout: every
// call below it shares its deadline. Only a refresh, whose writes run after
// the response, bounds each of its steps on its own (refresh.go).
func (c *core) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// Config configures a [Manager]. Client and Table have no default and must
// be set; every other field may be left zero for a secure default, which
// [New] fills in when it validates the Config, once.
type Config[U any] struct {
	// Client talks to DynamoDB. Build it from the SDK's own configuration
	// (config.LoadDefaultConfig), which also honours AWS_ENDPOINT_URL_DYNAMODB.
	Client Client

	// Table is the name of the table that holds sessions.
	Table string

	// Layout is where sessions live in Table: key names, prefixes, the
	// TTL attribute, the user's cutoff attribute and the optional expiry
	// index. The zero Layout is the default of each.
	Layout Layout

	// LoadUser loads the user a session belongs to, with the user's
	// sessions-valid-after cutoff. It returns [ErrUserNotFound] for a user
	// that does not exist, which rejects the session; any other error fails
	// the request closed. The default reads the user's item from Table with
	// one strongly consistent GetItem, decodes it into U with
	// attributevalue.UnmarshalMap, and takes the cutoff from
	// Layout.ValidAfterAttribute. Set it when users live elsewhere.
	//
	// The cutoff is a version, read with the credential, not a time to
	// compare with a clock: a session lives while its user's cutoff is the
	// one its login read. A store of the app's own raises it to end a
	// user's sessions, and never lowers it; RevokeAll raises the one of a
	// user item in Table, so with users elsewhere the app raises its own.
	LoadUser func(ctx context.Context, key UserKey) (user U, validAfter time.Time, err error)

	// HideUserKey keeps the user's key out of the session cookie. By
	// default, when users live in Table (LoadUser is nil), the cookie
	// carries the user item's key next to the token, so that a request
	// reads the session and the user in one BatchGetItem: one round trip
	// instead of two. The key is visible to whoever holds the cookie, who
	// holds the session anyway; set HideUserKey where user keys are
	// themselves sensitive (an email address, say), and requests make two
	// sequential GetItems. Cookies of either form are accepted whatever
	// the setting, which also makes it the switch for a rolling deploy:
	// see "Rolling deploys" in the package documentation.
	HideUserKey bool

	// BearerTokens makes RequireSession and LoadSession also accept a
	// session credential in an "Authorization: Bearer" header, for clients
	// without cookies; [Manager.LoginBearer] issues them. A request with
	// both a session cookie and a bearer token is refused with 400. Off by
	// default, so that an Authorization header meant for something else is
	// never read.
	BearerTokens bool

	// CookieName is the session cookie's name. The "__Host-" prefix is
	// added if missing, because it makes browsers refuse the cookie unless
	// it is Secure, host-only and on Path=/, and taken off in
	// InsecureDevMode: the cookie a browser gets is "__Host-session" by
	// default, or "session" in dev mode.
	CookieName string

	// InsecureDevMode drops the Secure attribute and the "__Host-" prefix
	// so that the cookie works on plain-HTTP localhost. Never in production:
	// the cookie then travels in clear text. The package does not read
	// APP_ENV or any other variable to switch this on; a production host with
	// a stray variable must not silently downgrade its cookies.
	InsecureDevMode bool

	// IdleTimeout is how long a session lives without requests. Default
	// 24h (AAL's bound with AAL set), or AbsoluteLifetime if that is
	// shorter; never longer than AbsoluteLifetime.
	IdleTimeout time.Duration

	// RefreshInterval is how often, at most, a request moves a session's
	// expiry forward. Requests in between cost no writes. Default
	// IdleTimeout/24 (an hour for the default IdleTimeout). It must be
	// shorter than IdleTimeout.
	RefreshInterval time.Duration

	// AbsoluteLifetime caps a session's life from its creation, however
	// active it is (OWASP's absolute timeout). Default 30 days (AAL's
	// bound with AAL set).
	AbsoluteLifetime time.Duration

	// StoreTimeout bounds the DynamoDB work of one request. A refresh's
	// writes run after the response, each of its steps (the session item;
	// a check of it when its write's answer was lost; the index item)
	// bounded by StoreTimeout on its own. Default 2s.
	StoreTimeout time.Duration

	// LoginPath, if set, is the app's login page, a path on this site: the
	// default Unauthorized answers a browser with 303 See Other to it,
	// passing the page it was going to (a GET's or HEAD's path and query)
	// in the "next" parameter, for the login handler to send it back with
	// [ReturnPath]. A request with a bearer token gets 401 all the same.
	LoginPath string

	// Unauthorized answers a request without a valid session. The cookie
	// has already been cleared, and a request with a bearer token has been
	// told WWW-Authenticate: Bearer error="invalid_token". Default: a
	// redirect to LoginPath if set, 401 with a short body otherwise. An
	// app that also serves an API answers its routes in a handler of its
	// own:
	//
	//	cfg.Unauthorized = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	//		if strings.HasPrefix(r.URL.Path, "/api/") {
	//			writeAPIError(w, http.StatusUnauthorized) // the app's own JSON
	//			return
	//		}
	//		next := url.Values{"next": {r.URL.RequestURI()}}.Encode()
	//		http.Redirect(w, r, "/login?"+next, http.StatusSeeOther)
	//	})
	Unauthorized http.Handler

	// StoreUnavailable answers a request whose session could not be checked
	// because DynamoDB failed or timed out. The request is never let
	// through. Default: 503 with a short body.
	StoreUnavailable http.Handler

	// OnEvent, if set, is told what sessions do: created, refreshed,
	// rotated, ended, revoked, rejected (with the reason) and store
	// failures, with the session's public ID where there is one and never
	// a token or its hash. It runs on the request's goroutine (a refresh's,
	// after the response), so it must be quick and must not block; it adds
	// no DynamoDB call, and nothing at all when unset. See the package
	// documentation for OpenTelemetry counters.
	OnEvent func(context.Context, Event)

	// KeepSignedIn, if set, decides per login whether the cookie outlives
	// the browser: true gives a persistent cookie (Max-Age, as without
	// KeepSignedIn), false a browser-session cookie (no Max-Age, no
	// Expires) that the browser drops when it closes. The server-side idle
	// and absolute limits hold either way, and a refresh keeps the kind
	// the session started with. A "keep me signed in" box:
	//
	//	KeepSignedIn: func(r *http.Request) bool { return r.PostFormValue("remember") == "on" },
	KeepSignedIn func(r *http.Request) bool

	// AAL names the NIST SP 800-63B-4 authentication assurance level whose
	// session bounds this Manager keeps: 1, 2 or 3, or 0 for none. It fills
	// in IdleTimeout and AbsoluteLifetime where they are unset, and New
	// refuses ones beyond the level's bounds (the inactivity timeout and the
	// overall timeout, after which the user must authenticate again):
	//
	//	AAL1: AbsoluteLifetime at most 30 days (default 30 days, IdleTimeout 24h)
	//	AAL2: IdleTimeout at most 1 hour, AbsoluteLifetime at most 24 hours (the defaults)
	//	AAL3: IdleTimeout at most 15 minutes, AbsoluteLifetime at most 12 hours (the defaults)
	//
	// The level's authenticators are the app's to ask for: at AAL2 two
	// factors (a password and a one-time code, with BeginLogin and
	// CompleteLogin) or a multi-factor one such as a passkey, at AAL3 a
	// phishing-resistant, hardware-bound one. The preset bounds the time.
	AAL int

	// MaxSessions, if set, caps how many sessions a user may have at once
	// (OWASP ASVS 5.0 7.1.2). A login beyond it ends the user's oldest
	// session, or, with RefuseAtMaxSessions, is refused with
	// [ErrTooManySessions] and writes no session. Logins racing on several
	// instances never leave more than MaxSessions alive: the user's state
	// item lists the sessions that count, each login takes its slot there
	// with a conditional write, and a session lives only while listed. It
	// costs one more read unit per request (the state item, in the same
	// round trip as the session), and a login one write of the state item;
	// a login at the limit also queries the user's index partition, to
	// drop the slots of sessions that ended otherwise. Sessions created
	// before it was set are not counted. At most 100; it needs a table with
	// a sort key, as List does.
	MaxSessions int

	// RefuseAtMaxSessions makes a login beyond MaxSessions fail instead of
	// ending the oldest session.
	RefuseAtMaxSessions bool

	// PendingLifetime is how long a two-step login waits for its second
	// factor after [Manager.BeginLogin]: default 5 minutes, between 10
	// seconds and an hour.
	PendingLifetime time.Duration

	// ReauthPath, if set, is the app's re-authentication page, a path on
	// this site: the default StepUp answers a browser that
	// [Manager.RequireAuthentication] turned away with 303 See Other to it,
	// passing the page to come back to in the "next" parameter (a GET's
	// path and query; for another method, the page that sent it, from a
	// same-origin Referer), for the page to send it back with [ReturnPath].
	ReauthPath string

	// StepUp answers a request with a session that
	// [Manager.RequireAuthentication] found not recently or not strongly
	// enough authenticated. A request with a bearer token has been told
	// WWW-Authenticate: Bearer error="insufficient_user_authentication",
	// with max_age (RFC 9470). The session is never ended. Default: a
	// redirect to ReauthPath if set, 401 with a short body otherwise.
	StepUp http.Handler

	// RevokeEveryoneWithin bounds how long after [Manager.RevokeEveryone]
	// this instance may still accept a session created before it: a
	// request reads the table's global revocation generation anew, in the
	// same round trip as its session, once this instance's copy is that
	// old, so one request per instance per RevokeEveryoneWithin reads one
	// more item. Default 10 seconds; at least a second.
	RevokeEveryoneWithin time.Duration

	// ClearSiteData, if set, makes Logout's response ask the browser to
	// clear what it names besides the session cookie, in a Clear-Site-Data
	// header (OWASP ASVS 5.0 14.3.1): any of "cache", "cookies", "storage",
	// "executionContexts", or "*" for every kind. Off by default, since
	// browsers clear "cookies" and "storage" for the whole registrable
	// domain (every subdomain's, not this app's alone) and
	// "executionContexts" reloads every open tab of the site; an app that
	// owns its domain turns it on. Browsers heed it over HTTPS and on
	// localhost only.
	ClearSiteData []string

	// MREC says that Table is a DynamoDB global table in multi-Region
	// eventual consistency (MREC), where strongly consistent reads and
	// conditions are Region-local and concurrent writes of one item in two
	// Regions are settled whole-item, last writer wins. The user's
	// revocation state then moves to an item of the library's own, next to
	// the user's per-user index items, which no write of the app's can
	// undo: each request reads it with the session and the user (three
	// items, one round trip, one more read unit), Logout, Revoke and the
	// rotation of Login record the sessions they end there, and a session
	// that has not reached a Region yet is refused there without clearing
	// its cookie. Leave it off for a single-Region table and for multi-Region
	// strong consistency (MRSC). See "Multi-Region" in the package
	// documentation. Turn it on only once every instance runs a release that
	// knows it.
	MREC bool

	// DeviceBinding offers Device Bound Session Credentials (DBSC) to
	// browsers that support them: see [DeviceBinding]. Off by default.
	DeviceBinding DeviceBinding

	// Logger receives store failures. Tokens never appear in its records.
	// Default slog.Default().
	Logger *slog.Logger

	// Now is the clock. Default time.Now. Tests inject their own.
	Now func() time.Time
}

// New validates cfg once, fills in its defaults and returns a Manager. The
// error names the first invalid field.
func New[U any](cfg Config[U]) (*Manager[U], error) {
	cfg, layout, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st := newStore(cfg.Client, cfg.Table, layout, cfg.MREC || cfg.MaxSessions > 0, cfg.Logger)
	ev := events{on: cfg.OnEvent, logger: cfg.Logger}
	life := lifetimes{idle: cfg.IdleTimeout, refresh: cfg.RefreshInterval, absolute: cfg.AbsoluteLifetime, pending: cfg.PendingLifetime}
	m := &Manager[U]{core{
		store: st,
		users: users{store: st, decoder: attributevalue.NewDecoder(), mrec: cfg.MREC, newUser: func() any { return new(U) }},
		cookies: cookies{
			name:     cfg.CookieName,
			secure:   !cfg.InsecureDevMode,
			withUser: cfg.LoadUser == nil && !cfg.HideUserKey,
			pending:  cfg.CookieName + pendingSuffix,
			bearer:   cfg.BearerTokens,
			layout:   &st.Layout,
		},
		life:     life,
		refresh:  &refresher{store: st, life: life, timeout: cfg.StoreTimeout, events: ev, logger: cfg.Logger},
		events:   ev,
		binding:  cfg.DeviceBinding,
		everyone: &everyone{within: cfg.RevokeEveryoneWithin},
		limit: &sessionLimit{
			max: cfg.MaxSessions, refuse: cfg.RefuseAtMaxSessions,
			store: st, life: life, young: cfg.StoreTimeout + inFlight, events: ev, logger: cfg.Logger,
		},
		keepSignedIn:     cfg.KeepSignedIn,
		clearSiteData:    clearSiteData(cfg.ClearSiteData),
		unauthorized:     cfg.Unauthorized,
		storeUnavailable: cfg.StoreUnavailable,
		stepUp:           cfg.StepUp,
		timeout:          cfg.StoreTimeout,
		now:              cfg.Now,
		logger:           cfg.Logger,
	}}
	if load := cfg.LoadUser; load != nil {
		m.users.custom = func(ctx context.Context, key UserKey, out any) (int64, error) {
			u, validAfter, err := load(ctx, key)
			if p, ok := out.(*U); ok && err == nil {
				*p = u
			}
			if validAfter.IsZero() {
				return 0, err
			}
			return validAfter.UnixMilli(), err
		}
	}
	return m, nil
}

// clearSiteData is the Clear-Site-Data header of directives: each a quoted
// string, as the header's grammar wants.
func clearSiteData(directives []string) string {
	quoted := make([]string, len(directives))
	for i, d := range directives {
		quoted[i] = strconv.Quote(d)
	}
	return strings.Join(quoted, ", ")
}

// withDefaults returns c with every unset field filled in, and its layout
// as the store uses it, or an error naming the first field that is invalid.
func (c Config[U]) withDefaults() (Config[U], item.Layout, error) {
	if c.Client == nil {
		return c, item.Layout{}, errors.New("ddbsession: Config.Client is nil")
	}
	if c.Table == "" {
		return c, item.Layout{}, errors.New("ddbsession: Config.Table is empty")
	}
	layout, err := item.Layout(c.Layout).WithDefaults()
	if err != nil {
		return c, layout, fmt.Errorf("ddbsession: Config.%w", err)
	}
	setDefault(&c.CookieName, hostPrefix+"session")
	c.CookieName = cookieName(c.CookieName, c.InsecureDevMode)
	if err := (&http.Cookie{Name: c.CookieName, Value: "x"}).Valid(); err != nil {
		return c, layout, fmt.Errorf("ddbsession: Config.CookieName %q: %w", c.CookieName, err)
	}
	if err := c.lifetimesWithDefaults(); err != nil {
		return c, layout, err
	}
	if err := c.DeviceBinding.withDefaults(c.InsecureDevMode, c.CookieName); err != nil {
		return c, layout, err
	}
	for _, d := range c.ClearSiteData {
		if !slices.Contains([]string{"cache", "cookies", "storage", "executionContexts", "*"}, d) {
			return c, layout, fmt.Errorf("ddbsession: Config.ClearSiteData %q: not a Clear-Site-Data directive (cache, cookies, storage, executionContexts, *)", d)
		}
	}
	for name, path := range map[string]string{"LoginPath": c.LoginPath, "ReauthPath": c.ReauthPath} {
		if path != "" && !localPath(path) {
			return c, layout, fmt.Errorf("ddbsession: Config.%s %q: not a path on this site", name, path)
		}
	}
	switch {
	case c.Unauthorized != nil:
	case c.LoginPath != "":
		c.Unauthorized = redirectTo(c.LoginPath)
	default:
		c.Unauthorized = textHandler(http.StatusUnauthorized, "unauthorized")
	}
	switch {
	case c.StepUp != nil:
	case c.ReauthPath != "":
		c.StepUp = redirectBack(c.ReauthPath)
	default:
		c.StepUp = textHandler(http.StatusUnauthorized, "authenticate again to continue")
	}
	if err := c.limitWithDefaults(layout); err != nil {
		return c, layout, err
	}
	if c.StoreUnavailable == nil {
		c.StoreUnavailable = textHandler(http.StatusServiceUnavailable, "session store unavailable, try again")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, layout, nil
}

// aalBounds are the NIST SP 800-63B-4 session bounds of each assurance
// level (sections 2.1.3, 2.2.3 and 2.3.3), which Config.AAL names: the
// inactivity timeout (0: none) and the overall timeout.
var aalBounds = map[int]struct{ idle, absolute time.Duration }{
	1: {0, 30 * 24 * time.Hour},
	2: {time.Hour, 24 * time.Hour},
	3: {15 * time.Minute, 12 * time.Hour},
}

// limitWithDefaults checks the session limit against the layout.
func (c *Config[U]) limitWithDefaults(layout item.Layout) error {
	switch {
	case c.MaxSessions < 0 || c.MaxSessions > maxSessionsLimit:
		return fmt.Errorf("ddbsession: Config.MaxSessions %d: must be between 1 and %d, or 0 for no limit", c.MaxSessions, maxSessionsLimit)
	case c.MaxSessions > 0 && layout.HashOnly:
		return errors.New("ddbsession: Config.MaxSessions needs a table with a sort key, for the user's state item (Layout.HashOnly is set)")
	case c.RefuseAtMaxSessions && c.MaxSessions == 0:
		return errors.New("ddbsession: Config.RefuseAtMaxSessions is set without a MaxSessions")
	}
	return nil
}

// lifetimesWithDefaults fills in and checks the durations, within the
// bounds of the assurance level named, if any.
func (c *Config[U]) lifetimesWithDefaults() error {
	aal, ok := aalBounds[c.AAL]
	if !ok && c.AAL != 0 {
		return fmt.Errorf("ddbsession: Config.AAL %d: must be 1, 2 or 3 (NIST SP 800-63B-4), or 0 for none", c.AAL)
	}
	if c.AbsoluteLifetime == 0 {
		c.AbsoluteLifetime = cmp.Or(aal.absolute, 30*24*time.Hour)
	}
	if c.AbsoluteLifetime < time.Second {
		return fmt.Errorf("ddbsession: Config.AbsoluteLifetime %v: must be at least a second", c.AbsoluteLifetime)
	}
	if c.IdleTimeout == 0 {
		// Never past the absolute lifetime, which would end every session
		// first.
		c.IdleTimeout = min(cmp.Or(aal.idle, 24*time.Hour), c.AbsoluteLifetime)
	}
	if c.IdleTimeout < time.Second {
		return fmt.Errorf("ddbsession: Config.IdleTimeout %v: must be at least a second", c.IdleTimeout)
	}
	if c.IdleTimeout > c.AbsoluteLifetime {
		return fmt.Errorf("ddbsession: Config.IdleTimeout %v is longer than AbsoluteLifetime %v, which ends every session first: "+
			"lower IdleTimeout, or raise AbsoluteLifetime", c.IdleTimeout, c.AbsoluteLifetime)
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = c.IdleTimeout / 24
	}
	if c.RefreshInterval < 0 || c.RefreshInterval >= c.IdleTimeout {
		return fmt.Errorf("ddbsession: Config.RefreshInterval %v: must be positive and shorter than IdleTimeout %v", c.RefreshInterval, c.IdleTimeout)
	}
	if aal.idle > 0 && c.IdleTimeout > aal.idle {
		return fmt.Errorf("ddbsession: Config.IdleTimeout %v: AAL%d allows at most %v", c.IdleTimeout, c.AAL, aal.idle)
	}
	if aal.absolute > 0 && c.AbsoluteLifetime > aal.absolute {
		return fmt.Errorf("ddbsession: Config.AbsoluteLifetime %v: AAL%d allows at most %v", c.AbsoluteLifetime, c.AAL, aal.absolute)
	}
	if c.PendingLifetime == 0 {
		c.PendingLifetime = 5 * time.Minute
	}
	if c.PendingLifetime < 10*time.Second || c.PendingLifetime > time.Hour {
		return fmt.Errorf("ddbsession: Config.PendingLifetime %v: must be between 10s and 1h", c.PendingLifetime)
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 2 * time.Second
	}
	if c.StoreTimeout < 0 {
		return fmt.Errorf("ddbsession: Config.StoreTimeout %v: must be positive", c.StoreTimeout)
	}
	if c.RevokeEveryoneWithin == 0 {
		c.RevokeEveryoneWithin = 10 * time.Second
	}
	if c.RevokeEveryoneWithin < time.Second {
		return fmt.Errorf("ddbsession: Config.RevokeEveryoneWithin %v: must be at least a second", c.RevokeEveryoneWithin)
	}
	return nil
}
