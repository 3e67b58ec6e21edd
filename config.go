package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Client is the part of the DynamoDB client that a [Manager] uses.
// *dynamodb.Client satisfies it; tests may wrap it to count calls or inject
// faults.
type Client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
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

	// PartitionKey and SortKey name the table's key attributes. They
	// default to "pk" and "sk". Set HashOnly for a table without a sort
	// key; such a table cannot hold the per-user index, so [Manager.List]
	// and [Manager.Revoke] return [ErrNoSortKey] there.
	PartitionKey string
	SortKey      string
	HashOnly     bool

	// SessionPrefix starts the partition key of every session item, which
	// is SessionPrefix followed by base64url(SHA-256(token)). Default
	// "SESSION#". UserSessionsPrefix starts the partition key of the
	// per-user index items, default "USERSESSIONS#". Change them only where
	// the app's own items in a shared table already use these prefixes.
	SessionPrefix      string
	UserSessionsPrefix string

	// TTLAttribute names the Number attribute that holds a session's expiry
	// in epoch seconds and on which the table's TTL is enabled. A table has
	// one TTL attribute, so a shared table may need its existing name.
	// Default "expiresAt".
	TTLAttribute string

	// ValidAfterAttribute names the Number attribute of the user item that
	// holds the user's sessions-valid-after cutoff in epoch milliseconds.
	// [Manager.RevokeAll] sets it. Default "sessionsValidAfter".
	ValidAfterAttribute string

	// LoadUser loads the user a session belongs to, with the user's
	// sessions-valid-after cutoff. It returns [ErrUserNotFound] for a user
	// that does not exist, which rejects the session; any other error fails
	// the request closed. The default reads the user's item from Table with
	// one strongly consistent GetItem, decodes it into U with
	// attributevalue.UnmarshalMap, and takes the cutoff from
	// ValidAfterAttribute. Set it when users live elsewhere.
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
	// it is Secure, host-only and on Path=/. Default "__Host-session".
	CookieName string

	// InsecureDevMode drops the Secure attribute and the "__Host-" prefix
	// so that the cookie works on plain-HTTP localhost. Never in production:
	// the cookie then travels in clear text. The package does not read
	// APP_ENV or any other variable to switch this on; a production host with
	// a stray variable must not silently downgrade its cookies.
	InsecureDevMode bool

	// IdleTimeout is how long a session lives without requests. Default 24h.
	IdleTimeout time.Duration

	// RefreshInterval is how often, at most, a request moves a session's
	// expiry forward. Requests in between cost no writes. Default
	// IdleTimeout/24 (an hour for the default IdleTimeout). It must be
	// shorter than IdleTimeout.
	RefreshInterval time.Duration

	// AbsoluteLifetime caps a session's life from its creation, however
	// active it is (OWASP's absolute timeout). Default 30 days.
	AbsoluteLifetime time.Duration

	// StoreTimeout bounds the DynamoDB work of one request. A refresh's
	// writes run after the response, each of its steps (the session item;
	// a check of it when its write's answer was lost; the index item)
	// bounded by StoreTimeout on its own. Default 2s.
	StoreTimeout time.Duration

	// ExpiryIndex names an optional global secondary index on
	// (expiryBucket, TTLAttribute) that [Manager.Expiring] queries.
	// Empty (the default) leaves it off, and session writes stay cheaper.
	// ExpiryIndexShards spreads each hour's sessions over that many index
	// partitions; default 8.
	ExpiryIndex       string
	ExpiryIndexShards int

	// Unauthorized answers a request without a valid session. The cookie
	// has already been cleared. Default: 401 with a short body. Use
	// [RedirectToLogin] to send browsers to a login page and back, and
	// [Manager.RequireSessionWith] for routes that answer otherwise (an
	// API's JSON, [APIAnswers]).
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

	// DeviceBinding offers Device Bound Session Credentials (DBSC) to
	// browsers that support them: see [DeviceBinding]. Off by default.
	DeviceBinding DeviceBinding

	// Logger receives store failures. Tokens never appear in its records.
	// Default slog.Default().
	Logger *slog.Logger

	// Now is the clock. Default time.Now. Tests inject their own.
	Now func() time.Time
}

// DeviceBinding configures Device Bound Session Credentials (DBSC, W3C
// webappsec-dbsc). With Enabled, a cookie Login offers the browser to bind
// the new session to a private key that never leaves the device; a browser
// that accepts proves possession of the key, through the handler that
// [Manager.DeviceBindingHandler] returns, each time it needs a fresh bound
// cookie. From then on the session is valid only with both cookies: a copy
// of the session cookie, taken off the machine, stops working when the
// bound cookie it came with expires. Browsers without DBSC ignore the offer.
// See "Device-bound sessions" in the package documentation.
type DeviceBinding struct {
	// Enabled offers binding on cookie logins. Sessions bound while it was
	// on stay bound when it is turned off: they then end at their bound
	// cookie's expiry, for want of a handler to refresh it.
	Enabled bool

	// RegistrationPath and RefreshPath are the URL paths at which the
	// handler answers, where the app mounts it. Defaults "/dbsc/register"
	// and "/dbsc/refresh".
	RegistrationPath string
	RefreshPath      string

	// CookieName names the bound cookie. The "__Host-" prefix is added if
	// missing. Default "__Host-bound".
	CookieName string

	// CookieLifetime is how long a bound cookie is valid: the most that a
	// stolen copy of the cookies stays useful. Browsers refresh it ahead of
	// its expiry (Chromium within 2 minutes of it), signing with the device
	// key each time, and limit how often they sign (Chromium 6 times in 9
	// minutes per site), so below about 5 minutes a busy page refreshes on
	// most requests and runs out of signatures. Default 10 minutes; at
	// least 10 seconds, for tests, and at most an hour.
	CookieLifetime time.Duration
}

const hostPrefix = "__Host-"

// New validates cfg once, fills in its defaults and returns a Manager. The
// error names the first invalid field.
func New[U any](cfg Config[U]) (*Manager[U], error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager[U]{
		cfg: cfg,
		store: &store{
			client: namedTableClient{cfg.Client, cfg.Table},
			table:  cfg.Table,
			logger: cfg.Logger,
			Layout: item.Layout{
				PartitionKey:  cfg.PartitionKey,
				SortKey:       cfg.SortKey,
				SessionPrefix: cfg.SessionPrefix,
				IndexPrefix:   cfg.UserSessionsPrefix,
				TTL:           cfg.TTLAttribute,
				ValidAfter:    cfg.ValidAfterAttribute,
			},
		},
		life:    lifetimes{idle: cfg.IdleTimeout, refresh: cfg.RefreshInterval, absolute: cfg.AbsoluteLifetime},
		decoder: attributevalue.NewDecoder(),
	}
	if cfg.ExpiryIndex != "" {
		m.store.ExpiryShards = cfg.ExpiryIndexShards
	}
	m.store.pairs.New = func() any { return m.store.newPairRead() }
	m.loadUser = cfg.LoadUser
	if m.loadUser == nil {
		m.loadUser = m.loadUserItem
	}
	return m, nil
}

// withDefaults returns c with every unset field filled in, or an error
// naming the first field that is invalid.
func (c Config[U]) withDefaults() (Config[U], error) {
	if c.Client == nil {
		return c, errors.New("ddbsession: Config.Client is nil")
	}
	if c.Table == "" {
		return c, errors.New("ddbsession: Config.Table is empty")
	}
	d := item.Default
	setDefault(&c.PartitionKey, d.PartitionKey)
	if c.HashOnly {
		if c.SortKey != "" {
			return c, fmt.Errorf("ddbsession: Config.SortKey %q is set but Config.HashOnly is true", c.SortKey)
		}
	} else {
		setDefault(&c.SortKey, d.SortKey)
	}
	if c.PartitionKey == c.SortKey {
		return c, fmt.Errorf("ddbsession: Config.PartitionKey and Config.SortKey are both %q", c.SortKey)
	}
	for _, key := range []string{c.PartitionKey, c.SortKey} {
		if item.Reserved(key) {
			return c, fmt.Errorf("ddbsession: key attribute name %q clashes with a session attribute", key)
		}
	}
	setDefault(&c.SessionPrefix, d.SessionPrefix)
	setDefault(&c.UserSessionsPrefix, d.IndexPrefix)
	if c.SessionPrefix == c.UserSessionsPrefix {
		return c, fmt.Errorf("ddbsession: Config.SessionPrefix and Config.UserSessionsPrefix are both %q", c.SessionPrefix)
	}
	setDefault(&c.TTLAttribute, d.TTL)
	setDefault(&c.ValidAfterAttribute, d.ValidAfter)
	for _, name := range []string{c.TTLAttribute, c.ValidAfterAttribute} {
		if name == c.PartitionKey || name == c.SortKey || item.Reserved(name) {
			return c, fmt.Errorf("ddbsession: attribute name %q clashes with a key or a session attribute", name)
		}
	}

	setDefault(&c.CookieName, hostPrefix+"session")
	if c.InsecureDevMode {
		c.CookieName = strings.TrimPrefix(c.CookieName, hostPrefix)
	} else if !strings.HasPrefix(c.CookieName, hostPrefix) {
		c.CookieName = hostPrefix + c.CookieName
	}
	if err := (&http.Cookie{Name: c.CookieName, Value: "x"}).Valid(); err != nil {
		return c, fmt.Errorf("ddbsession: Config.CookieName %q: %w", c.CookieName, err)
	}

	if c.IdleTimeout == 0 {
		c.IdleTimeout = 24 * time.Hour
	}
	if c.IdleTimeout < time.Second {
		return c, fmt.Errorf("ddbsession: Config.IdleTimeout %v: must be at least a second", c.IdleTimeout)
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = c.IdleTimeout / 24
	}
	if c.RefreshInterval < 0 || c.RefreshInterval >= c.IdleTimeout {
		return c, fmt.Errorf("ddbsession: Config.RefreshInterval %v: must be positive and shorter than IdleTimeout %v", c.RefreshInterval, c.IdleTimeout)
	}
	if c.AbsoluteLifetime == 0 {
		c.AbsoluteLifetime = 30 * 24 * time.Hour
	}
	if c.AbsoluteLifetime < time.Second {
		return c, fmt.Errorf("ddbsession: Config.AbsoluteLifetime %v: must be at least a second", c.AbsoluteLifetime)
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 2 * time.Second
	}
	if c.StoreTimeout < 0 {
		return c, fmt.Errorf("ddbsession: Config.StoreTimeout %v: must be positive", c.StoreTimeout)
	}
	if c.ExpiryIndexShards == 0 {
		c.ExpiryIndexShards = 8
	}
	if c.ExpiryIndexShards < 1 || c.ExpiryIndexShards > 100 {
		return c, fmt.Errorf("ddbsession: Config.ExpiryIndexShards %d: must be between 1 and 100", c.ExpiryIndexShards)
	}

	if err := c.DeviceBinding.withDefaults(c.InsecureDevMode, c.CookieName); err != nil {
		return c, err
	}

	if c.Unauthorized == nil {
		c.Unauthorized = textHandler(http.StatusUnauthorized, "unauthorized")
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
	return c, nil
}

func (d *DeviceBinding) withDefaults(insecure bool, sessionCookie string) error {
	setDefault(&d.RegistrationPath, "/dbsc/register")
	setDefault(&d.RefreshPath, "/dbsc/refresh")
	for _, p := range []string{d.RegistrationPath, d.RefreshPath} {
		if !validBindingPath(p) {
			return fmt.Errorf("ddbsession: Config.DeviceBinding path %q: must start with / and hold only letters, digits and -._~/!$&'()*+=:@%%", p)
		}
	}
	if d.RegistrationPath == d.RefreshPath {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.RegistrationPath and RefreshPath are both %q", d.RefreshPath)
	}
	setDefault(&d.CookieName, hostPrefix+"bound")
	if !strings.HasPrefix(d.CookieName, hostPrefix) {
		d.CookieName = hostPrefix + d.CookieName
	}
	if err := (&http.Cookie{Name: d.CookieName, Value: "x"}).Valid(); err != nil {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.CookieName %q: %w", d.CookieName, err)
	}
	if d.CookieName == sessionCookie || d.CookieName == hostPrefix+sessionCookie {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.CookieName %q is the session cookie's name", d.CookieName)
	}
	if d.CookieLifetime == 0 {
		d.CookieLifetime = 10 * time.Minute
	}
	if d.CookieLifetime < 10*time.Second || d.CookieLifetime > time.Hour {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.CookieLifetime %v: must be between 10s and 1h: a stolen copy of the cookies works that long", d.CookieLifetime)
	}
	if d.Enabled && insecure {
		// Browsers bind sessions only on secure origins, and a bound
		// cookie in clear text would be as easy to copy as the other.
		return errors.New("ddbsession: Config.DeviceBinding.Enabled needs HTTPS; it cannot be combined with InsecureDevMode")
	}
	return nil
}

// validBindingPath reports whether p is an absolute URL path of ASCII
// path characters (RFC 3986 pchar and "/"), without query or fragment: it
// goes into a structured-field string of the offer, which Chromium drops,
// silently, if it is not one.
func validBindingPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-._~/!$&'()*+=:@%", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}
