package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
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

	// insecureOnce makes the warning of warnIfDropped once, doubleOnce
	// that of a handler guarded twice.
	insecureOnce, doubleOnce sync.Once

	// limit is Limits.MaxSessions (0: no limit) and RefuseAtMaxSessions.
	limit struct {
		max    int
		refuse bool
	}
	// onItsWay is how young a slot or an index item without its session
	// item must be to count as a login on its way: StoreTimeout and
	// inFlight.
	onItsWay time.Duration

	keepSignedIn                   func(*http.Request) bool // Cookie.KeepSignedIn, or nil
	clearSiteData                  string                   // Logout's Clear-Site-Data header, or ""
	unauthorized, storeUnavailable http.Handler
	stepUp                         http.Handler  // Config.StepUp
	timeout                        time.Duration // Limits.StoreTimeout
	now                            func() time.Time
	logger                         *slog.Logger
}

// storeContext bounds the DynamoDB work of one call by StoreTimeout: every
// call below it shares its deadline. Only a refresh written after the
// response bounds each of its steps on its own (refresh.go).
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

	// Layout is the table's shape: key names, prefixes, the TTL and
	// version attributes, the optional expiry index, and whether it is a
	// global table in multi-Region eventual consistency.
	Layout Layout

	// LoadUser loads a user kept outside Table, with the user's sessions
	// version, a number the app's store changes to end the user's sessions,
	// read with the credential in one strongly consistent read. It returns
	// [ErrUserNotFound] for a user that does not exist; any other error
	// fails the request closed. The default reads the user item in Table
	// into U with attributevalue, and its Layout.VersionAttribute.
	LoadUser func(ctx context.Context, key UserKey) (user U, version int64, err error)

	// Cookie is the session cookie: its name, and what it carries.
	Cookie Cookie

	// Limits bound how long sessions live, how many a user may hold, and
	// how long the Manager waits for DynamoDB.
	Limits Limits

	// BearerTokens makes RequireSession and LoadSession also accept the
	// "Authorization: Bearer" credentials of [Manager.LoginBearer], for
	// clients without cookies. A request with both is refused with 400.
	BearerTokens bool

	// Unauthorized answers a request without a valid session, once the
	// cookie is cleared and a bearer request told WWW-Authenticate: Bearer
	// error="invalid_token". Default: 401. [Redirect] sends browsers to a
	// login page and back.
	Unauthorized http.Handler

	// StepUp answers a request that [Manager.RequireAuthentication] found
	// not recently or not strongly enough authenticated, once a bearer
	// request is told RFC 9470's insufficient_user_authentication
	// challenge. The session lives on. Default: 401. [Redirect] sends
	// browsers to a re-authentication page and back.
	StepUp http.Handler

	// StoreUnavailable answers a request whose session could not be checked
	// because DynamoDB failed or timed out. The request is never let
	// through. Default: 503.
	StoreUnavailable http.Handler

	// DeviceBinding offers Device Bound Session Credentials (DBSC) to
	// browsers that support them: see [DeviceBinding]. Off by default.
	DeviceBinding DeviceBinding

	// WriteBeforeResponse makes a request's refresh write finish before
	// its handler runs, at the write's latency, for platforms that freeze
	// the process once the response is out. It is on, whatever this says,
	// on AWS Lambda (AWS_LAMBDA_FUNCTION_NAME set); elsewhere a refresh
	// writes after the response, and [Manager.Wait] waits for it.
	WriteBeforeResponse bool

	// OnEvent, if set, is told what sessions do ([Event]), never with a
	// token. It runs on the request's goroutine (or a refresh's), so it
	// must not block; unset, it costs nothing.
	OnEvent func(context.Context, Event)

	// Logger receives store failures, never a token. Default slog.Default().
	Logger *slog.Logger

	// Now is the clock. Default time.Now. Tests inject their own.
	Now func() time.Time
}

// Cookie configures the session cookie.
type Cookie struct {
	// Name is the cookie's name, "__Host-session" by default. The "__Host-"
	// prefix is added if missing: browsers then refuse the cookie unless it
	// is Secure, host-only and on Path=/.
	Name string

	// InsecureDevMode drops the Secure attribute and the "__Host-" prefix
	// so that the cookie works on plain-HTTP localhost. Never in
	// production: the cookie then travels in clear text. No environment
	// variable switches it on.
	InsecureDevMode bool

	// HideUserKey keeps the user's key out of the cookie, where it lets a
	// request read the session and the user in one BatchGetItem. Set it
	// where keys are themselves sensitive (an email address): each request
	// then makes two reads in turn. LoadUser's users are never in the
	// cookie, so New refuses it with LoadUser.
	HideUserKey bool

	// KeepSignedIn, if set, decides per login whether the cookie outlives
	// the browser (true, as without it) or ends with it. A "keep me signed
	// in" box:
	//
	//	KeepSignedIn: func(r *http.Request) bool { return r.PostFormValue("remember") == "on" },
	KeepSignedIn func(r *http.Request) bool

	// ClearSiteData, if set, makes Logout's response ask the browser to
	// clear what it names, in a Clear-Site-Data header (OWASP ASVS 5.0
	// 14.3.1): "cache", "cookies", "storage", "executionContexts", or "*".
	// Browsers apply "cookies" and "storage" to the whole registrable
	// domain, so it is off by default.
	ClearSiteData []string
}

// Limits bound sessions and the Manager's waits. Each zero field takes
// its default; [New] refuses values out of range.
type Limits struct {
	// IdleTimeout is how long a session lives without requests. Default
	// 24h, or the AAL's bound; never longer than AbsoluteLifetime.
	IdleTimeout time.Duration

	// RefreshInterval is how often, at most, a request moves a session's
	// expiry forward; the requests in between cost no writes. Default
	// IdleTimeout/24. It must be shorter than IdleTimeout.
	RefreshInterval time.Duration

	// AbsoluteLifetime caps a session's life from its creation, however
	// active it is. Default 30 days, or the AAL's bound.
	AbsoluteLifetime time.Duration

	// AAL names the NIST SP 800-63B-4 assurance level (1, 2 or 3) whose
	// session bounds apply as defaults and maxima: AAL1 30 days overall,
	// AAL2 an hour idle and 24 hours overall, AAL3 15 minutes and 12 hours.
	// Its authenticators are the app's to ask for: for AAL2, a password and
	// a one-time code, or a passkey with user verification (docs/step-up.md).
	AAL int

	// PendingLifetime is how long a two-step login waits for its second
	// factor after [Manager.BeginLogin]: default 5 minutes, between 10
	// seconds and an hour.
	PendingLifetime time.Duration

	// MaxSessions, if set, caps how many sessions a user may hold at once
	// (OWASP ASVS 5.0 7.1.2), at most 100. A login beyond it ends the
	// user's oldest session, or, with RefuseAtMaxSessions, fails with
	// [ErrTooManySessions]. Racing logins never leave more alive. It needs
	// a sort key, and costs logins a read and a write, requests nothing.
	MaxSessions         int
	RefuseAtMaxSessions bool

	// StoreTimeout bounds the DynamoDB work of one call (a request's
	// check, a login), and each write of a refresh. Default 2s.
	StoreTimeout time.Duration

	// RevokeEveryoneWithin bounds how long after [Manager.RevokeEveryone]
	// this instance may accept a session made before it: a request re-reads
	// the global generation with its session once this instance's copy is
	// that old. Default 10 seconds; at least a second.
	RevokeEveryoneWithin time.Duration
}

// New validates cfg once, fills in its defaults and returns a Manager. The
// error names the first invalid field, in the order of the Config's fields.
func New[U any](cfg Config[U]) (*Manager[U], error) {
	layout, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lim := cfg.Limits
	st := newStore(cfg.Client, cfg.Table, layout, cfg.Logger)
	ev := events{on: cfg.OnEvent, logger: cfg.Logger}
	life := lifetimes{idle: lim.IdleTimeout, refresh: lim.RefreshInterval, absolute: lim.AbsoluteLifetime, pending: lim.PendingLifetime}
	m := &Manager[U]{core{
		store: st,
		users: users{store: st, decoder: attributevalue.NewDecoder(), mrec: layout.MREC, newUser: func() any { return new(U) }},
		cookies: cookies{
			name:     cfg.Cookie.Name,
			secure:   !cfg.Cookie.InsecureDevMode,
			withUser: cfg.LoadUser == nil && !cfg.Cookie.HideUserKey,
			pending:  cfg.Cookie.Name + pendingSuffix,
			bearer:   cfg.BearerTokens,
			layout:   &st.Layout,
		},
		life:             life,
		refresh:          &refresher{store: st, life: life, timeout: lim.StoreTimeout, events: ev, logger: cfg.Logger, inline: cfg.WriteBeforeResponse || onLambda()},
		events:           ev,
		binding:          cfg.DeviceBinding,
		everyone:         &everyone{within: lim.RevokeEveryoneWithin, clock: mono},
		keepSignedIn:     cfg.Cookie.KeepSignedIn,
		clearSiteData:    clearSiteData(cfg.Cookie.ClearSiteData),
		unauthorized:     cfg.Unauthorized,
		storeUnavailable: cfg.StoreUnavailable,
		stepUp:           cfg.StepUp,
		timeout:          lim.StoreTimeout,
		now:              cfg.Now,
		logger:           cfg.Logger,
	}}
	m.limit.max, m.limit.refuse = lim.MaxSessions, lim.RefuseAtMaxSessions
	m.onItsWay = lim.StoreTimeout + inFlight
	if load := cfg.LoadUser; load != nil {
		m.users.custom = func(ctx context.Context, key UserKey, out any) (int64, error) {
			u, version, err := load(ctx, key)
			if p, ok := out.(*U); ok && err == nil {
				*p = u
			}
			return version, err
		}
	}
	return m, nil
}

// onLambda reports whether the process runs on AWS Lambda, which freezes
// it once a response is out: the runtime sets AWS_LAMBDA_FUNCTION_NAME.
func onLambda() bool { return os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != "" }

// clearSiteData is the Clear-Site-Data header of directives: each a quoted
// string, as the header's grammar wants.
func clearSiteData(directives []string) string {
	quoted := make([]string, len(directives))
	for i, d := range directives {
		quoted[i] = strconv.Quote(d)
	}
	return strings.Join(quoted, ", ")
}

// withDefaults fills in every unset field of c and returns its layout as
// the store uses it, or an error naming the first invalid field, checked
// in the order the fields are declared.
func (c *Config[U]) withDefaults() (item.Layout, error) {
	if c.Client == nil {
		return item.Layout{}, errors.New("ddbsession: Config.Client is nil")
	}
	if c.Table == "" {
		return item.Layout{}, errors.New("ddbsession: Config.Table is empty")
	}
	layout, err := item.Layout(c.Layout).WithDefaults()
	if err != nil {
		return layout, fmt.Errorf("ddbsession: Config.%w", err)
	}
	if err := c.Cookie.withDefaults(c.LoadUser != nil); err != nil {
		return layout, err
	}
	if err := c.Limits.withDefaults(layout); err != nil {
		return layout, err
	}
	if c.Unauthorized == nil {
		c.Unauthorized = textHandler(http.StatusUnauthorized, "unauthorized")
	}
	if c.StepUp == nil {
		c.StepUp = textHandler(http.StatusUnauthorized, "authenticate again to continue")
	}
	if c.StoreUnavailable == nil {
		c.StoreUnavailable = textHandler(http.StatusServiceUnavailable, "session store unavailable, try again")
	}
	if err := c.DeviceBinding.withDefaults(c.Cookie.InsecureDevMode, c.Cookie.Name); err != nil {
		return layout, err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return layout, nil
}

// withDefaults fills in and checks the cookie's settings; custom says that
// users come from Config.LoadUser.
func (c *Cookie) withDefaults(custom bool) error {
	setDefault(&c.Name, hostPrefix+"session")
	c.Name = cookieName(c.Name, c.InsecureDevMode)
	if err := (&http.Cookie{Name: c.Name, Value: "x"}).Valid(); err != nil {
		return fmt.Errorf("ddbsession: Config.Cookie.Name %q: %w", c.Name, err)
	}
	if c.HideUserKey && custom {
		return errors.New("ddbsession: Config.Cookie.HideUserKey is set with a LoadUser, whose users' keys are never in the cookie: drop it")
	}
	for _, d := range c.ClearSiteData {
		if !slices.Contains([]string{"cache", "cookies", "storage", "executionContexts", "*"}, d) {
			return fmt.Errorf("ddbsession: Config.Cookie.ClearSiteData %q: not a Clear-Site-Data directive (cache, cookies, storage, executionContexts, *)", d)
		}
	}
	return nil
}

// maxSessionsLimit bounds Limits.MaxSessions: the slots item, which a login
// under the limit reads and writes, holds 40 bytes a slot and stays within
// the 4 KB of one read unit.
const maxSessionsLimit = 100

// inFlight is the margin by which a slot or an index item must be older
// than StoreTimeout before a missing session item means no login is on its
// way: both are written before the session item, within the login's
// StoreTimeout. The margin covers the clocks of two instances disagreeing.
const inFlight = 30 * time.Second

// aalBounds are the NIST SP 800-63B-4 session bounds of each assurance
// level (sections 2.1.3, 2.2.3 and 2.3.3), which Limits.AAL names: the
// inactivity timeout (0: none) and the overall timeout.
var aalBounds = map[int]struct{ idle, absolute time.Duration }{
	1: {0, 30 * 24 * time.Hour},
	2: {time.Hour, 24 * time.Hour},
	3: {15 * time.Minute, 12 * time.Hour},
}

// withDefaults fills in and checks the limits, within the bounds of the
// assurance level named, if any, and the session limit against layout.
func (l *Limits) withDefaults(layout item.Layout) error {
	aal, ok := aalBounds[l.AAL]
	if !ok && l.AAL != 0 {
		return fmt.Errorf("ddbsession: Config.Limits.AAL %d: must be 1, 2 or 3 (NIST SP 800-63B-4), or 0 for none", l.AAL)
	}
	if l.AbsoluteLifetime == 0 {
		l.AbsoluteLifetime = cmp.Or(aal.absolute, 30*24*time.Hour)
	}
	if l.AbsoluteLifetime < time.Second {
		return fmt.Errorf("ddbsession: Config.Limits.AbsoluteLifetime %v: must be at least a second", l.AbsoluteLifetime)
	}
	if l.IdleTimeout == 0 {
		// Never past the absolute lifetime, which would end every session
		// first.
		l.IdleTimeout = min(cmp.Or(aal.idle, 24*time.Hour), l.AbsoluteLifetime)
	}
	if l.IdleTimeout < time.Second {
		return fmt.Errorf("ddbsession: Config.Limits.IdleTimeout %v: must be at least a second", l.IdleTimeout)
	}
	if l.IdleTimeout > l.AbsoluteLifetime {
		return fmt.Errorf("ddbsession: Config.Limits.IdleTimeout %v is longer than AbsoluteLifetime %v, which ends every session first: "+
			"lower IdleTimeout, or raise AbsoluteLifetime", l.IdleTimeout, l.AbsoluteLifetime)
	}
	if l.RefreshInterval == 0 {
		l.RefreshInterval = l.IdleTimeout / 24
	}
	if l.RefreshInterval < 0 || l.RefreshInterval >= l.IdleTimeout {
		return fmt.Errorf("ddbsession: Config.Limits.RefreshInterval %v: must be positive and shorter than IdleTimeout %v", l.RefreshInterval, l.IdleTimeout)
	}
	if aal.idle > 0 && l.IdleTimeout > aal.idle {
		return fmt.Errorf("ddbsession: Config.Limits.IdleTimeout %v: AAL%d allows at most %v", l.IdleTimeout, l.AAL, aal.idle)
	}
	if aal.absolute > 0 && l.AbsoluteLifetime > aal.absolute {
		return fmt.Errorf("ddbsession: Config.Limits.AbsoluteLifetime %v: AAL%d allows at most %v", l.AbsoluteLifetime, l.AAL, aal.absolute)
	}
	if l.PendingLifetime == 0 {
		l.PendingLifetime = 5 * time.Minute
	}
	if l.PendingLifetime < 10*time.Second || l.PendingLifetime > time.Hour {
		return fmt.Errorf("ddbsession: Config.Limits.PendingLifetime %v: must be between 10s and 1h", l.PendingLifetime)
	}
	switch {
	case l.MaxSessions < 0 || l.MaxSessions > maxSessionsLimit:
		return fmt.Errorf("ddbsession: Config.Limits.MaxSessions %d: must be between 1 and %d, or 0 for no limit", l.MaxSessions, maxSessionsLimit)
	case l.MaxSessions > 0 && layout.HashOnly:
		return errors.New("ddbsession: Config.Limits.MaxSessions needs a table with a sort key, for the user's state item (Layout.HashOnly is set)")
	case l.RefuseAtMaxSessions && l.MaxSessions == 0:
		return errors.New("ddbsession: Config.Limits.RefuseAtMaxSessions is set without a MaxSessions")
	}
	if l.StoreTimeout == 0 {
		l.StoreTimeout = 2 * time.Second
	}
	if l.StoreTimeout < 0 {
		return fmt.Errorf("ddbsession: Config.Limits.StoreTimeout %v: must be positive", l.StoreTimeout)
	}
	if l.RevokeEveryoneWithin == 0 {
		l.RevokeEveryoneWithin = 10 * time.Second
	}
	if l.RevokeEveryoneWithin < time.Second {
		return fmt.Errorf("ddbsession: Config.Limits.RevokeEveryoneWithin %v: must be at least a second", l.RevokeEveryoneWithin)
	}
	return nil
}
