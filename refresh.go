package ddbsession

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file slides a valid session's expiry forward, at most once per
// Limits.RefreshInterval, with a write that runs after the response, or
// before the handler with Config.WriteBeforeResponse.

// refresher writes refreshes, and keeps track of the ones in flight.
type refresher struct {
	store   *store
	life    lifetimes
	timeout time.Duration // Limits.StoreTimeout, for each write on its own
	events  events
	logger  *slog.Logger
	flights flights
	// inline is Config.WriteBeforeResponse: the write runs in the request,
	// before its handler.
	inline bool
}

// start starts moving a valid session's expiry forward when it is due,
// recording addr as the address it was last seen at, and
// reports the session as it will be, and true, if this request started the
// write; the caller sends the cookie with the new expiry at once. The write
// runs off the request path, so the refresh costs the request no latency,
// bounded by StoreTimeout on its own; [Manager.Wait] waits for it. Inline,
// it runs in the request instead, before the handler, within what is left
// of the request's own StoreTimeout (ctx's deadline): a request waits for
// its store at most once that long, and a refresh that finds no time left
// is tried again by the next request.
//
// Of the requests on one session in this process, one writes: the others,
// which read the same expiry while its write was in flight or just after,
// skip theirs. Across processes the write's condition (item.Layout.Refresh)
// lets one win. A write that fails is logged and leaves the session as it
// was; its cookie then promises a little more than the table holds, which
// the table, not the cookie, decides.
func (f *refresher) start(ctx context.Context, sessionPK string, s item.Session, addr string, now time.Time) (item.Session, bool) {
	next, due := f.life.refreshed(s, addr, now)
	if !due || !f.flights.start(sessionPK, s.ExpiresAt) {
		return s, false
	}
	if f.inline {
		ctx, cancel := detach(ctx)
		defer cancel()
		f.write(ctx, func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }, sessionPK, s, next, now)
	} else {
		bound := func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, f.timeout)
		}
		go f.write(context.WithoutCancel(ctx), bound, sessionPK, s, next, now)
	}
	return next, true
}

// write is the refresh's write: the session item alone (List reads the
// session items, so the index item needs no copy of the expiry), each of
// its steps bounded by bound.
func (f *refresher) write(ctx context.Context, bound func(context.Context) (context.Context, context.CancelFunc), sessionPK string, old, next item.Session, now time.Time) {
	began := time.Now()
	wctx, cancel := bound(ctx)
	err := f.store.refreshSession(wctx, sessionPK, old, next, now)
	cancel()
	if err != nil && !errors.Is(err, errRefreshLost) && f.landed(ctx, bound, sessionPK, next) {
		err = nil // the response was lost, not the write
	}
	if err != nil && !errors.Is(err, errRefreshLost) {
		f.logger.ErrorContext(ctx, "ddbsession: refresh session", "sid", old.ID, "err", err)
	}
	if err == nil {
		f.events.emit(ctx, Event{Kind: EventRefreshed, SessionID: next.ID, User: userOf(next), Elapsed: time.Since(began)})
	}
	// The expiry moved, here or elsewhere, unless the write failed: then
	// the next request may try again at once.
	f.flights.finish(sessionPK, err == nil || errors.Is(err, errRefreshLost), f.timeout)
}

// landed reports whether a session write whose outcome is unknown (an
// error that may have come after DynamoDB applied it) did land, so that the
// write is not tried again at once.
func (f *refresher) landed(ctx context.Context, bound func(context.Context) (context.Context, context.CancelFunc), sessionPK string, next item.Session) bool {
	ctx, cancel := bound(ctx)
	defer cancel()
	s, found, err := f.store.getSession(ctx, sessionPK)
	return err == nil && found && s.ExpiresAt.Equal(next.ExpiresAt) && s.RefreshedAt.Equal(next.RefreshedAt)
}

// flights tracks this process's refresh writes: at most one per session in
// flight. A write is remembered for StoreTimeout after it ends, with the
// expiry it started from, so that a request that read that same expiry
// before the write landed does not write again (its read was bounded by the
// same timeout); a request that read the new expiry is not held back.
type flights struct {
	mu       sync.Mutex
	sessions map[string]flight // by session key
	inFlight int
	idle     chan struct{} // closed when inFlight drops to 0
}

type flight struct {
	from     int64 // the expiry, in epoch seconds, that the write replaces
	inFlight bool
}

// start reports whether the caller may refresh the session under key,
// whose expiry it read as from, and if so marks the session in flight.
func (fl *flights) start(key string, from time.Time) bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if mark, ok := fl.sessions[key]; ok && (mark.inFlight || mark.from == from.Unix()) {
		return false
	}
	if fl.sessions == nil {
		fl.sessions = map[string]flight{}
	}
	fl.sessions[key] = flight{from: from.Unix(), inFlight: true}
	if fl.inFlight == 0 {
		fl.idle = make(chan struct{})
	}
	fl.inFlight++
	return true
}

// finish ends the write under key. If the expiry moved, it remembers the
// write for linger; otherwise it forgets it at once.
func (fl *flights) finish(key string, moved bool, linger time.Duration) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.inFlight--; fl.inFlight == 0 {
		close(fl.idle)
	}
	if !moved {
		delete(fl.sessions, key)
		return
	}
	done := flight{from: fl.sessions[key].from}
	fl.sessions[key] = done
	time.AfterFunc(linger, func() {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if fl.sessions[key] == done {
			delete(fl.sessions, key)
		}
	})
}

// wait waits until no write is in flight, or ctx ends.
func (fl *flights) wait(ctx context.Context) error {
	fl.mu.Lock()
	idle := fl.idle
	pending := fl.inFlight > 0
	fl.mu.Unlock()
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
