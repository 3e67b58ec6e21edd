package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds the rules that decide whether a session is valid and when
// it moves forward. The DynamoDB calls they need are in store.go.

// lifetimes are a Manager's time limits, validated by [New].
type lifetimes struct {
	idle     time.Duration // Config.IdleTimeout
	refresh  time.Duration // Config.RefreshInterval
	absolute time.Duration // Config.AbsoluteLifetime
}

// newSession returns a session for user created at now. Times are stored
// in milliseconds and the expiry in whole seconds, so they are rounded here
// the way they will be read back.
func (l lifetimes) newSession(user UserKey, agent string, now time.Time) item.Session {
	created := time.UnixMilli(now.UnixMilli())
	return item.Session{
		ID:          item.NewID(created),
		UserPK:      user.PK,
		UserSK:      user.SK,
		CreatedAt:   created,
		RefreshedAt: created,
		ExpiresAt:   time.Unix(now.Add(min(l.idle, l.absolute)).Unix(), 0),
		UserAgent:   agent,
	}
}

// live reports whether s is within its expiry and its absolute lifetime at
// now.
func (l lifetimes) live(s item.Session, now time.Time) bool { return l.ended(s, now) == 0 }

// ended says why s is over at now, or 0 if it is not. TTL deletion lags by
// up to 48 hours, so a present item is not a valid one; and the lifetime is
// checked on every read, so that lowering it takes effect at once for
// sessions written under a longer one.
func (l lifetimes) ended(s item.Session, now time.Time) Reason {
	switch {
	case s.ExpiresAt.Unix() <= now.Unix():
		return ReasonExpired
	case !now.Before(s.CreatedAt.Add(l.absolute)):
		return ReasonAbsoluteLifetime
	}
	return 0
}

// refreshed returns s with its expiry slid forward to now+idle, capped by
// the absolute lifetime, if a refresh is due: at most once per refresh
// interval, and never when the expiry would not move.
func (l lifetimes) refreshed(s item.Session, now time.Time) (item.Session, bool) {
	if now.Sub(s.RefreshedAt) < l.refresh {
		return s, false
	}
	expires := now.Add(l.idle)
	if limit := s.CreatedAt.Add(l.absolute); expires.After(limit) {
		expires = limit
	}
	expires = time.Unix(expires.Unix(), 0)
	if !expires.After(s.ExpiresAt) {
		return s, false // at the absolute cap: nothing to write
	}
	next := s
	next.ExpiresAt = expires
	next.RefreshedAt = time.UnixMilli(now.UnixMilli())
	return next, true
}

// Check does the middleware's work without HTTP, for a session cookie's
// value or token that arrived some other way (a WebSocket upgrade, a test).
// It returns [ErrNoSession] for any value that does not grant a session, and
// another error only when the store failed. It does not refresh the session,
// so a session used only through Check expires after [Config.IdleTimeout];
// it never writes. A router's middleware (gin's, say) must therefore wrap
// RequireSession, as example/routers does, not call Check. A device-bound
// session is never valid through Check, which has no bound cookie to see:
// a WebSocket upgrade from its browser goes through RequireSession.
func (m *Manager[U]) Check(ctx context.Context, token string) (Session, U, error) {
	cred, ok := m.store.ParseCredential(token)
	if !ok {
		var zero U
		return Session{}, zero, ErrNoSession
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	s, u, err := m.check(ctx, cred, m.store.SessionPK(cred.Token), m.cfg.Now())
	if err == nil && s.DeviceBound {
		err = rejected(ReasonNotBound) // proof of the device comes with a request only
	}
	switch {
	case errors.Is(err, ErrNoSession):
		var zero U
		return Session{}, zero, ErrNoSession
	case err != nil:
		var zero U
		return Session{}, zero, err
	}
	return sessionOf(s), u, nil
}

// check reads the session of cred, under sessionPK, and its user, and
// decides whether the session is valid at now: present, live, naming the
// credential's user if the credential names one, and created after its
// user's sessions-valid-after cutoff (strictly: a session of the cutoff's
// millisecond is ended with the others). A session that is not valid comes
// with an error that is ErrNoSession and says why (see rejected), and with
// what was read of it, for events. A panic, say in a LoadUser of the app's,
// becomes an error so that it fails the request closed instead of escaping.
func (m *Manager[U]) check(ctx context.Context, cred item.Credential, sessionPK string, now time.Time) (s item.Session, u U, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{value: p, stack: debug.Stack()}
		}
	}()
	var validAfter time.Time
	if cred.HasUser() && m.cfg.LoadUser == nil {
		s, u, validAfter, err = m.readTogether(ctx, cred, sessionPK, now)
	} else {
		s, u, validAfter, err = m.readInTurn(ctx, cred, sessionPK, now)
	}
	if err != nil {
		return s, u, err
	}
	if !s.CreatedAt.After(validAfter) {
		return s, u, rejected(ReasonCutoff)
	}
	return s, u, nil
}

// readTogether reads the session and the user item that cred names in one
// round trip.
func (m *Manager[U]) readTogether(ctx context.Context, cred item.Credential, sessionPK string, now time.Time) (s item.Session, u U, validAfter time.Time, err error) {
	s, found, userItem, err := m.store.getSessionAndUser(ctx, sessionPK, cred.UserPK, cred.UserSK)
	if err != nil {
		return s, u, validAfter, err
	}
	if reason := m.reject(s, found, cred, now); reason != 0 {
		return s, u, validAfter, rejected(reason)
	}
	if userItem == nil {
		return s, u, validAfter, rejected(ReasonUserMissing)
	}
	u, validAfter, err = m.decodeUser(userItem)
	if err != nil {
		return s, u, validAfter, fmt.Errorf("ddbsession: load user: %w", err)
	}
	return s, u, validAfter, nil
}

// readInTurn reads the session, then its user through LoadUser: two round
// trips, for credentials without a user key and for users kept elsewhere.
func (m *Manager[U]) readInTurn(ctx context.Context, cred item.Credential, sessionPK string, now time.Time) (s item.Session, u U, validAfter time.Time, err error) {
	s, found, err := m.store.getSession(ctx, sessionPK)
	if err != nil {
		return s, u, validAfter, err
	}
	if reason := m.reject(s, found, cred, now); reason != 0 {
		return s, u, validAfter, rejected(reason)
	}
	u, validAfter, err = m.loadUser(ctx, UserKey{PK: s.UserPK, SK: s.UserSK})
	if errors.Is(err, ErrUserNotFound) {
		return s, u, validAfter, rejected(ReasonUserMissing)
	}
	if err != nil {
		return s, u, validAfter, fmt.Errorf("ddbsession: load user: %w", err)
	}
	return s, u, validAfter, nil
}

// reject says why a session read for cred cannot be accepted at now, or
// returns 0: it must be present, live, and, if cred names a user, that
// user's, so that a valid token is never paired with someone else's user.
func (m *Manager[U]) reject(s item.Session, found bool, cred item.Credential, now time.Time) Reason {
	switch {
	case !found:
		return ReasonUnknown
	case cred.HasUser() && (s.UserPK != cred.UserPK || s.UserSK != cred.UserSK):
		return ReasonUserMismatch
	}
	return m.life.ended(s, now)
}

// panicError is a panic recovered while checking a session, with the stack
// where it happened, which the middleware logs.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return fmt.Sprintf("ddbsession: panic while checking a session: %v", p.value)
}

// refresh starts moving a valid session's expiry forward when it is due,
// and reports the session as it will be, and true, if this request started
// the write; the caller sends the cookie with the new expiry at once. The
// write runs off the request path, so the refresh costs the request no
// latency, bounded by StoreTimeout on its own; [Manager.Wait] waits for it.
//
// Of the requests on one session in this process, one writes: the others,
// which read the same expiry while its write was in flight or just after,
// skip theirs. Across processes the write's condition (see store.refresh)
// lets one win. A write that fails is logged and leaves the session as it
// was; its cookie then promises a little more than the table holds, which
// the table, not the cookie, decides.
func (m *Manager[U]) refresh(ctx context.Context, sessionPK string, s item.Session, now time.Time) (item.Session, bool) {
	next, due := m.life.refreshed(s, now)
	if !due || !m.refreshes.start(sessionPK, s.ExpiresAt) {
		return s, false
	}
	go m.writeRefresh(context.WithoutCancel(ctx), sessionPK, s, next, now)
	return next, true
}

// writeRefresh is refresh's writes, after the response: the session item,
// then its index item, each bounded by StoreTimeout.
func (m *Manager[U]) writeRefresh(ctx context.Context, sessionPK string, old, next item.Session, now time.Time) {
	wctx, cancel := m.storeContext(ctx)
	err := m.store.refreshSession(wctx, sessionPK, old, next, now)
	cancel()
	if err != nil && !errors.Is(err, errRefreshLost) && m.refreshLanded(ctx, sessionPK, next) {
		err = nil // the response was lost, not the write
	}
	if err != nil && !errors.Is(err, errRefreshLost) {
		m.cfg.Logger.ErrorContext(ctx, "ddbsession: refresh session", "sid", old.ID, "err", err)
	}
	if err == nil && !m.cfg.HashOnly {
		ictx, cancel := m.storeContext(ctx)
		if err := m.store.refreshIndex(ictx, sessionPK, next); err != nil {
			m.cfg.Logger.ErrorContext(ctx, "ddbsession: refresh session index item", "sid", old.ID, "err", err)
		}
		cancel()
	}
	if err == nil && m.cfg.OnEvent != nil {
		m.emit(ctx, Event{Kind: EventRefreshed, SessionID: next.ID, User: UserKey{PK: next.UserPK, SK: next.UserSK}})
	}
	// The expiry moved, here or elsewhere, unless the write failed: then
	// the next request may try again at once.
	m.refreshes.finish(sessionPK, err == nil || errors.Is(err, errRefreshLost), m.cfg.StoreTimeout)
}

// refreshLanded reports whether a session write whose outcome is unknown
// (an error that may have come after DynamoDB applied it) did land, so
// that the index item follows: otherwise List would hide a live session
// once the index item's old expiry passed.
func (m *Manager[U]) refreshLanded(ctx context.Context, sessionPK string, next item.Session) bool {
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	s, found, err := m.store.getSession(ctx, sessionPK)
	return err == nil && found && s.ExpiresAt.Equal(next.ExpiresAt) && s.RefreshedAt.Equal(next.RefreshedAt)
}

// Wait waits until the session refreshes that requests have started are
// written, or ctx ends. Call it on shutdown, after http.Server.Shutdown has
// let the last requests finish, so that no refresh is cut off.
func (m *Manager[U]) Wait(ctx context.Context) error { return m.refreshes.wait(ctx) }

// refreshes tracks this process's refresh writes: at most one per session
// in flight. A write is remembered for StoreTimeout after it ends, with the
// expiry it started from, so that a request that read that same expiry
// before the write landed does not write again (its read was bounded by the
// same timeout); a request that read the new expiry is not held back.
type refreshes struct {
	mu       sync.Mutex
	sessions map[string]refreshMark // by session key
	inFlight int
	idle     chan struct{} // closed when inFlight drops to 0
}

type refreshMark struct {
	from     int64 // the expiry, in epoch seconds, that the write replaces
	inFlight bool
}

// start reports whether the caller may refresh the session under key,
// whose expiry it read as from, and if so marks the session in flight.
func (r *refreshes) start(key string, from time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mark, ok := r.sessions[key]; ok && (mark.inFlight || mark.from == from.Unix()) {
		return false
	}
	if r.sessions == nil {
		r.sessions = map[string]refreshMark{}
	}
	r.sessions[key] = refreshMark{from: from.Unix(), inFlight: true}
	if r.inFlight == 0 {
		r.idle = make(chan struct{})
	}
	r.inFlight++
	return true
}

// finish ends the write under key. If the expiry moved, it remembers the
// write for linger; otherwise it forgets it at once.
func (r *refreshes) finish(key string, moved bool, linger time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight--; r.inFlight == 0 {
		close(r.idle)
	}
	if !moved {
		delete(r.sessions, key)
		return
	}
	done := refreshMark{from: r.sessions[key].from}
	r.sessions[key] = done
	time.AfterFunc(linger, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.sessions[key] == done {
			delete(r.sessions, key)
		}
	})
}

func (r *refreshes) wait(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	pending := r.inFlight > 0
	r.mu.Unlock()
	if !pending {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
