package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/table"
)

// Manager keeps sessions for users of type U in one DynamoDB table and guards
// handlers with them. It is safe for concurrent use. [New] makes one.
type Manager[U any] struct {
	core
}

// core is a Manager without its user type: the validated Config, in the
// parts that do the work. The package documentation maps how a request
// passes through them. U appears at the surface only: in the user that the
// middleware puts in the context (User, NewContext), in the verify of Login
// and LoginBearer, and in Authenticate's result. Everything below works on
// core, which decodes users through a pointer.
type core struct {
	store   *store
	read    *decide.Reader // every read that decides whether a session stands
	users   users
	cookies cookies
	life    lifetimes
	refresh *refresher
	events  events
	binding DeviceBinding
	dpop    *dpop // DPoP proofs of bearer sessions (DeviceBinding's DPoP fields)

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
	// keepHistory is Limits.HistoryRetention: negative for no history.
	keepHistory time.Duration

	ref                            table.Ref                // what Table returns
	keepSignedIn                   func(*http.Request) bool // Cookie.KeepSignedIn, or nil
	clearSiteData                  string                   // Logout's Clear-Site-Data header, or ""
	unauthorized, storeUnavailable http.Handler
	stepUp                         http.Handler  // Config.StepUp
	timeout                        time.Duration // Limits.StoreTimeout
	now                            func() time.Time
	logger                         *slog.Logger
}

// storeContext bounds the DynamoDB work of one call by StoreTimeout: every
// call below it shares its deadline, its clean-up included (see
// workContext). Only a refresh written after the response bounds each of
// its steps on its own (refresh.go).
func (c *core) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// workContext is ctx, a call's storeContext, with a deadline a quarter of
// StoreTimeout earlier, for the call's work: what is left is its clean-up's
// (a failed login's undo, say), so that a call whose writes retry until
// their deadline (MRSC's write conflicts) still cleans up, and returns,
// within StoreTimeout.
func (c *core) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline.Add(-c.timeout/4))
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

	// Layout is the table's shape: keys, prefixes, attributes, replication.
	Layout Layout

	// LoadUser loads a user kept outside Table, with their sessions version
	// in the same strongly consistent read: non-zero, changed whenever the
	// user is made anew, changes credential or is logged out everywhere.
	// [ErrUserNotFound] says no such user; another error fails closed.
	// Default: the user item in Table.
	LoadUser func(ctx context.Context, key UserKey) (user U, version int64, err error)

	// Cookie is the session cookie: its name, and what it carries.
	Cookie Cookie

	// Limits bound sessions' lives and numbers, and the waits for DynamoDB.
	Limits Limits

	// BearerTokens makes the middleware accept [Manager.LoginBearer]'s
	// bearer tokens too; a request with a cookie and a token gets 400.
	BearerTokens bool

	// Unauthorized answers a request without a valid session, its cookie
	// cleared (a bearer one told error="invalid_token"). Default: 401, JSON
	// to a program; [Redirect] sends browsers to log in and back.
	Unauthorized http.Handler

	// StepUp answers a request that [Manager.RequireAuthentication] found
	// not recently or strongly enough authenticated (a bearer request told
	// RFC 9470's challenge first); the session lives on. Default: 401, as
	// Unauthorized's. [Redirect] sends browsers to re-authenticate and back.
	StepUp http.Handler

	// StoreUnavailable answers, never letting it through, a request whose
	// session DynamoDB failed to check, or in time. Default: 503.
	StoreUnavailable http.Handler

	// DeviceBinding binds sessions to their device's key (DBSC, DPoP).
	DeviceBinding DeviceBinding

	// WriteBeforeResponse writes a due refresh before the handler, for
	// platforms that freeze the process once the response is out; always on
	// AWS Lambda. Else it follows the response, and [Manager.Wait] waits.
	WriteBeforeResponse bool

	// OnEvent, if set, is told what sessions do ([Event]), never a token,
	// on the request's (or a refresh's) goroutine: it must not block.
	OnEvent func(context.Context, Event)

	// Logger receives store failures, never a token. Default slog.Default().
	Logger *slog.Logger

	// Now is the clock. Default time.Now. Tests inject their own.
	Now func() time.Time
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
		read:  decide.New(st.reads, layout, lim.RevokeEveryoneWithin, mono),
		users: users{store: st, decoder: attributevalue.NewDecoder(), custom: cfg.LoadUser != nil, newUser: func() any { return new(U) }},
		cookies: cookies{
			name:     cfg.Cookie.Name,
			path:     cfg.Cookie.Path,
			secure:   !cfg.Cookie.InsecureDevMode,
			withUser: cfg.LoadUser == nil && !cfg.Cookie.HideUserKey,
			pending:  cfg.Cookie.Name + pendingSuffix,
			device:   deviceCookie(cfg.Cookie),
			bearer:   cfg.BearerTokens,
			layout:   &st.Layout,
		},
		life:             life,
		refresh:          &refresher{store: st, life: life, timeout: lim.StoreTimeout, events: ev, logger: cfg.Logger, inline: cfg.WriteBeforeResponse || onLambda()},
		events:           ev,
		binding:          cfg.DeviceBinding,
		dpop:             newDPoP(cfg.DeviceBinding, !cfg.Cookie.InsecureDevMode),
		keepSignedIn:     cfg.Cookie.KeepSignedIn,
		clearSiteData:    clearSiteData(cfg.Cookie.ClearSiteData),
		unauthorized:     cfg.Unauthorized,
		storeUnavailable: cfg.StoreUnavailable,
		stepUp:           cfg.StepUp,
		timeout:          lim.StoreTimeout,
		now:              cfg.Now,
		logger:           cfg.Logger,
	}}
	m.cookies.keys = m.read.CookieKeys
	m.cookies.warnPlain = sync.OnceFunc(func() {
		m.logger.Warn("ddbsession: the table has no cookie key, so session cookies carry the user's key in the plain; once every instance runs this release, add one (docs/item-format.md#tokens-and-the-cookie)", "table", cfg.Table)
	})
	m.ref = table.Ref{Client: cfg.Client, Name: cfg.Table, Layout: layout, AbsoluteLifetime: lim.AbsoluteLifetime}
	m.limit.max, m.limit.refuse = lim.MaxSessions, lim.RefuseAtMaxSessions
	m.onItsWay = lim.StoreTimeout + inFlight
	m.keepHistory = lim.HistoryRetention
	if m.cookies.device != "" && m.keepHistory <= 0 {
		return nil, errors.New("ddbsession: Config.Cookie.RememberDevices needs the history, which is off (Limits.HistoryRetention is negative, or the table has no sort key)")
	}
	m.read.Warn = func(ctx context.Context, err error) {
		m.logger.WarnContext(ctx, "ddbsession: ignoring a session item in an unknown format", "err", err)
	}
	m.read.OnRecord = func(ctx context.Context) {
		m.logger.InfoContext(ctx, "ddbsession: recorded the layout in the table, which had none", "table", cfg.Table)
	}
	if load := cfg.LoadUser; load != nil {
		m.read.Load = func(ctx context.Context, pk, sk string, out any) (int64, bool, error) {
			u, version, err := load(ctx, UserKey{PK: pk, SK: sk})
			if errors.Is(err, ErrUserNotFound) {
				return 0, false, nil
			}
			if p, ok := out.(*U); ok && err == nil {
				*p = u
			}
			return version, true, err
		}
	}
	return m, nil
}

// Table returns m's table as the sibling modules (ddbsessionoidc, scsstore)
// take it, in place of copies of its Client, Table, Layout and limits.
func (m *Manager[U]) Table() table.Ref { return m.ref }

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
		c.Unauthorized = unauthorized
	}
	c.Unauthorized = withPrefix(c.Unauthorized, c.Cookie.Path)
	if c.StepUp == nil {
		c.StepUp = refusal(http.StatusUnauthorized, "authenticate again to continue")
	}
	c.StepUp = withPrefix(c.StepUp, c.Cookie.Path)
	if c.StoreUnavailable == nil {
		c.StoreUnavailable = refusal(http.StatusServiceUnavailable, "session store unavailable, try again")
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
