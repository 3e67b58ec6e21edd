package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ErrNoSession is returned by [Manager.Check] for a token that is malformed,
// unknown, expired or revoked, or whose user no longer exists. It does not
// say which: callers treat them all as "signed out".
var ErrNoSession = errors.New("ddbsession: no valid session")

// Manager keeps sessions for users of type U in one DynamoDB table and guards
// handlers with them. It is safe for concurrent use.
type Manager[U any] struct {
	cfg Config[U]
}

// New validates cfg once, fills in its defaults and returns a Manager. The
// error names the first invalid field.
func New[U any](cfg Config[U]) (*Manager[U], error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager[U]{cfg: cfg}
	if m.cfg.LoadUser == nil {
		m.cfg.LoadUser = m.loadUserItem
	}
	return m, nil
}

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

// RequireSession lets a request through only with a valid session, and puts
// the session and its user in the request context. Any other request gets
// [Config.Unauthorized], and a store failure gets [Config.StoreUnavailable].
//
// A request costs two strongly consistent GetItems, the session and its
// user, and once per [Config.RefreshInterval] two UpdateItems (the session
// and its per-user index item) that move the expiry forward; that response
// re-sends the cookie.
func (m *Manager[U]) RequireSession(next http.Handler) http.Handler {
	return m.middleware(next, true)
}

// LoadSession is [Manager.RequireSession] for pages that anonymous visitors
// may see too: a request without a valid session goes through without a
// user in its context. A store failure still fails the request closed, since
// the session it carries might be valid.
func (m *Manager[U]) LoadSession(next http.Handler) http.Handler {
	return m.middleware(next, false)
}

func (m *Manager[U]) middleware(next http.Handler, required bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The response depends on the cookie whatever happens next.
		addVaryCookie(w.Header())
		st, err := m.authenticate(w, r)
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey[U]{m}, st)))
		case errors.Is(err, ErrNoSession) && required:
			m.cfg.Unauthorized.ServeHTTP(w, r)
		case errors.Is(err, ErrNoSession):
			next.ServeHTTP(w, r)
		default:
			// A client that hung up is no store outage: it stays refused,
			// but must not flood the error log.
			level := slog.LevelError
			if r.Context().Err() != nil {
				level = slog.LevelDebug
			}
			m.cfg.Logger.Log(r.Context(), level, "ddbsession: cannot check session, failing closed", "err", err)
			m.cfg.StoreUnavailable.ServeHTTP(w, r)
		}
	})
}

// authenticate checks the request's session, refreshes it when due, and
// clears the cookie of a session that is not valid.
func (m *Manager[U]) authenticate(w http.ResponseWriter, r *http.Request) (*requestState[U], error) {
	token, present := m.requestToken(r)
	if token == "" {
		if present {
			m.clearCookie(w)
		}
		return nil, ErrNoSession
	}
	ctx, cancel := context.WithTimeout(r.Context(), m.cfg.StoreTimeout)
	defer cancel()
	now := m.cfg.Now()
	pk := m.sessionPK(token)
	s, u, err := m.check(ctx, pk, now)
	if err != nil {
		if errors.Is(err, ErrNoSession) {
			m.clearCookie(w)
		}
		return nil, err
	}
	if refreshed, ok := m.refresh(ctx, pk, s, now); ok {
		s = refreshed
		m.setCookie(w, token, now, s.ExpiresAt)
	}
	return &requestState[U]{session: s, user: u}, nil
}

// Check does the middleware's work without HTTP, for a token that arrived
// some other way (a WebSocket upgrade, a test). It returns [ErrNoSession]
// for any token that does not grant a session, and another error only when
// the store failed. It does not refresh the session.
func (m *Manager[U]) Check(ctx context.Context, token string) (Session, U, error) {
	if !validToken(token) {
		var zero U
		return Session{}, zero, ErrNoSession
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	return m.check(ctx, m.sessionPK(token), m.cfg.Now())
}

// check loads the session under pk and its user, and decides whether the
// session is valid at now. A panic, say in a LoadUser of the app's, becomes
// an error so that it fails the request closed instead of escaping.
func (m *Manager[U]) check(ctx context.Context, pk string, now time.Time) (s Session, u U, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ddbsession: panic while checking a session: %v", p)
		}
	}()
	s, ok, err := m.getSession(ctx, pk)
	if err != nil {
		return Session{}, u, err
	}
	// TTL deletion lags by up to 48 hours: a present item is not a valid one.
	// The absolute lifetime is checked too, so that lowering it takes effect
	// at once for sessions written under a longer one.
	if !ok || s.ExpiresAt.Unix() <= now.Unix() || !now.Before(s.CreatedAt.Add(m.cfg.AbsoluteLifetime)) {
		return Session{}, u, ErrNoSession
	}
	u, validAfter, err := m.cfg.LoadUser(ctx, s.User)
	if errors.Is(err, ErrUserNotFound) {
		return Session{}, u, ErrNoSession
	}
	if err != nil {
		return Session{}, u, fmt.Errorf("ddbsession: load user: %w", err)
	}
	if s.CreatedAt.Before(validAfter) {
		return Session{}, u, ErrNoSession
	}
	return s, u, nil
}

// loadUserItem is the default [Config.LoadUser]: one strongly consistent
// GetItem of the user's item in the sessions table.
func (m *Manager[U]) loadUserItem(ctx context.Context, key UserKey) (u U, validAfter time.Time, err error) {
	out, err := m.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &m.cfg.Table,
		Key:            m.userKey(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return u, validAfter, fmt.Errorf("get user: %w", err)
	}
	if out.Item == nil {
		return u, validAfter, ErrUserNotFound
	}
	if err := attributevalue.UnmarshalMap(out.Item, &u); err != nil {
		return u, validAfter, fmt.Errorf("decode user item: %w", err)
	}
	if _, present := out.Item[m.cfg.ValidAfterAttribute]; present {
		ms, ok := getNum(out.Item, m.cfg.ValidAfterAttribute)
		if !ok {
			return u, validAfter, fmt.Errorf("user item's %s is not epoch milliseconds", m.cfg.ValidAfterAttribute)
		}
		validAfter = time.UnixMilli(ms)
	}
	return u, validAfter, nil
}
