package ddbsession

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Manager keeps sessions for users of type U in one DynamoDB table and guards
// handlers with them. It is safe for concurrent use. [New] makes one.
//
// A request flows through the files of this package in one direction:
// http.go (the middleware reads the cookie) → session.go (the validity
// rules: expiry, lifetime, the user's cutoff, when to refresh) → store.go
// (the DynamoDB calls) → internal/item (the item format).
type Manager[U any] struct {
	cfg      Config[U]
	store    *store
	life     lifetimes
	loadUser func(ctx context.Context, key UserKey) (U, time.Time, error)
	// decoder decodes user items into U; one for all requests, as
	// attributevalue.UnmarshalMap would make one per call.
	decoder *attributevalue.Decoder

	refreshes refreshes
}

// UserKey is the primary key of the user's item: the app's own PK and, in a
// table with a sort key, SK. A session stores it so that authenticating a
// request needs no secondary index.
type UserKey struct {
	PK string
	SK string
}

// Session describes one signed-in session. It never holds the token.
type Session struct {
	// ID is the session's public identifier: random, unrelated to the
	// token and its hash, and safe to show on a "your devices" page.
	ID          string
	User        UserKey
	CreatedAt   time.Time
	RefreshedAt time.Time
	ExpiresAt   time.Time // whole seconds, as stored for TTL
	UserAgent   string
	// DeviceBound says that the session is bound to a key on its device
	// ([DeviceBinding]): its cookie alone, copied elsewhere, is not enough.
	DeviceBound bool
}

// sessionOf converts a decoded item to the public Session.
func sessionOf(s item.Session) Session {
	return Session{
		ID:          s.ID,
		User:        UserKey{PK: s.UserPK, SK: s.UserSK},
		CreatedAt:   s.CreatedAt,
		RefreshedAt: s.RefreshedAt,
		ExpiresAt:   s.ExpiresAt,
		UserAgent:   s.UserAgent,
		DeviceBound: s.DeviceBound,
	}
}

// ErrNoSession is returned by [Manager.Check] for a token that is malformed,
// unknown, expired or revoked, or whose user no longer exists. It does not
// say which: callers treat them all as "signed out".
var ErrNoSession = errors.New("ddbsession: no valid session")

// CookieName returns the name of the session cookie, with the "__Host-"
// prefix unless in dev mode.
func (m *Manager[U]) CookieName() string { return m.cfg.CookieName }

// ctxKey keys the request state by its Manager, so that an app with two
// Managers (users and admins, say) never reads one's user through the other.
type ctxKey[U any] struct{ m *Manager[U] }

// requestState is what the middleware puts in the request context.
type requestState[U any] struct {
	session Session
	user    U
}

// User returns the signed-in user that [Manager.RequireSession] or
// [Manager.LoadSession] put in ctx.
func (m *Manager[U]) User(ctx context.Context) (U, bool) {
	st, _ := ctx.Value(ctxKey[U]{m}).(*requestState[U])
	if st == nil {
		var zero U
		return zero, false
	}
	return st.user, true
}

// Session returns the session that [Manager.RequireSession] or
// [Manager.LoadSession] put in ctx.
func (m *Manager[U]) Session(ctx context.Context) (Session, bool) {
	st, _ := ctx.Value(ctxKey[U]{m}).(*requestState[U])
	if st == nil {
		return Session{}, false
	}
	return st.session, true
}

// NewContext returns ctx carrying s and u as the signed-in session and
// user, as [Manager.RequireSession] puts them there, so that [Manager.User]
// and [Manager.Session] find them. It is for an app's handler unit tests,
// which then need no DynamoDB:
//
//	r = r.WithContext(sessions.NewContext(r.Context(), ddbsession.Session{ID: "test"}, User{Name: "alice"}))
//	handler.ServeHTTP(w, r)
func (m *Manager[U]) NewContext(ctx context.Context, s Session, u U) context.Context {
	return context.WithValue(ctx, ctxKey[U]{m}, &requestState[U]{session: s, user: u})
}

// storeContext bounds the DynamoDB work of one call by StoreTimeout. It is
// the only place that starts that bound: everything below it shares its
// deadline.
func (m *Manager[U]) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.StoreTimeout)
}

// detach keeps ctx's deadline but drops its cancellation, for writes that
// must not be lost to a client that hangs up (Logout, a refresh's second
// write, an undo) and must still end within the request's one bound.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}
