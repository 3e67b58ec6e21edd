package ddbsession

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file keeps each user's security history (Limits.HistoryRetention):
// what signed them in, failed to, signed them out or ended their sessions,
// written in the call that did it, and read back a page at a time.

// historyPage is how many events a page of History holds at most.
const historyPage = 25

// History returns a page of user's security history, newest first, and the
// next ("" after the last); page "" is the first (docs/security.md#history).
func (m *Manager[U]) History(ctx context.Context, user UserKey, page string) ([]Event, string, error) {
	events, next, err := m.history(ctx, user, page)
	return events, next, wrap("history", err)
}

func (c *core) history(ctx context.Context, user UserKey, page string) ([]Event, string, error) {
	if c.keepHistory <= 0 {
		return nil, "", errors.New("the history is off (Limits.HistoryRetention is negative, or the table has no sort key)")
	}
	if err := c.users.checkKey(user, false); err != nil {
		return nil, "", err
	}
	if page != "" && !item.ValidHistoryCursor(page) {
		return nil, "", ErrBadPage
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return nil, "", err
	}
	now := c.now()
	// The last RevokeEveryone's time comes from this instance's copy of
	// the global item, read anew beside the Query only if stale: every
	// instance shares that item, which a read per History would make hot.
	var refreshErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, refreshErr = c.read.Refresh(ctx, false) })
	entries, next, err := c.store.queryHistory(ctx, user, page, historyPage, now)
	wg.Wait()
	if err = errors.Join(err, refreshErr); err != nil {
		return nil, "", err
	}
	everyone := c.read.EveryoneAt()
	events := make([]Event, 0, len(entries)+1)
	for _, e := range entries {
		events = append(events, Event{
			Kind: EventKind(e.Event), SessionID: e.ID, User: user, Time: e.At,
			Address: e.Address, UserAgent: e.UserAgent, Device: e.Device, Methods: e.Methods, Count: int(e.Count),
		})
	}
	// RevokeEveryone is one write for every user, so no user's partition
	// holds it: the global item's time goes in the page it falls in, if the
	// user has history before it, which it ended, and it is still kept.
	if !everyone.IsZero() && now.Sub(everyone) < c.keepHistory && (page == "" || everyone.Before(item.HistoryCursorTime(page))) {
		for i, e := range events {
			if e.Time.Before(everyone) {
				events = append(events[:i], append([]Event{{Kind: EventRevokedEveryone, User: user, Time: everyone}}, events[i:]...)...)
				break
			}
		}
	}
	return events, next, nil
}

// record writes an event of user's into their history, if it is kept, at
// now: about session s, if it is not the zero Session, from its last
// address and User-Agent, with its methods if it signed in, and from
// device (deviceDigest), for a new device's.
func (c *core) record(ctx context.Context, kind EventKind, user UserKey, s item.Session, device string, now time.Time) error {
	if c.keepHistory <= 0 {
		return nil
	}
	e := item.HistoryEntry{
		Event: string(kind), At: time.UnixMilli(now.UnixMilli()), ID: s.ID,
		Address: s.LastAddress, UserAgent: s.UserAgent, Device: device,
		Expires: time.Unix(now.Add(c.keepHistory).Unix(), 0),
	}
	if e.Address == "" {
		e.Address = s.Address // an index item has the sign-in's alone
	}
	switch kind {
	case EventCreated, EventReauthenticated, EventAdopted, EventNewDevice:
		e.Methods = s.Methods
	}
	return c.store.putHistory(ctx, user, e)
}

// recordOrLog records an event of an ending that happened whatever its
// record does: a record that fails is logged, and the call goes on.
func (c *core) recordOrLog(ctx context.Context, kind EventKind, user UserKey, s item.Session) {
	if err := c.record(ctx, kind, user, s, "", c.now()); err != nil {
		c.logger.ErrorContext(ctx, "ddbsession: write a history event", "kind", kind, "sid", s.ID, "err", err)
	}
}

// recordRefusal records what the proof of a sign-in of user from r refused
// with err: a verify that refused, a failed sign-in, unless it wraps
// ErrSecondStep; a user who does not exist, for a sign-in with a verify,
// recordUnknown's refused write.
func (c *core) recordRefusal(ctx context.Context, user UserKey, verified bool, r *http.Request, now time.Time, err error) {
	switch {
	case errors.As(err, new(*appError)) && !errors.Is(err, ErrSecondStep):
		c.recordFailed(ctx, user, r, now)
	case errors.Is(err, ErrUserNotFound) && verified:
		c.recordUnknown(ctx, user, r, now)
	}
}

// recordFailed reports a failed sign-in of user, from request r, and
// counts it in the history item of its hour; a failure to is logged.
func (c *core) recordFailed(ctx context.Context, user UserKey, r *http.Request, now time.Time) {
	e := c.failedEntry(r, now)
	c.events.emit(ctx, Event{Kind: EventSignInFailed, User: user, Time: now, Address: e.Address, UserAgent: e.UserAgent})
	if c.keepHistory <= 0 {
		return
	}
	if err := c.store.countFailed(ctx, user, e); err != nil {
		c.logger.ErrorContext(ctx, "ddbsession: count a failed sign-in in the history", "err", err)
	}
}

// recordUnknown is recordFailed's write for a sign-in with a verify whose
// user does not exist, refused: it writes and reports nothing, but costs
// the round trip that a wrong password of a user who exists does, so that
// the response time does not tell who has an account. (Without a verify,
// nothing is counted for a user who exists either.)
func (c *core) recordUnknown(ctx context.Context, user UserKey, r *http.Request, now time.Time) {
	if c.keepHistory <= 0 {
		return
	}
	if err := c.store.countNone(ctx, user, c.failedEntry(r, now)); err != nil {
		c.logger.ErrorContext(ctx, "ddbsession: an unknown user's refused history write", "err", err)
	}
}

// failedEntry is the history entry of a failed sign-in from r at now.
func (c *core) failedEntry(r *http.Request, now time.Time) item.HistoryEntry {
	return item.HistoryEntry{
		Event: string(EventSignInFailed), At: now, Address: clientAddress(r), UserAgent: userAgent(r),
		Expires: now.Add(c.keepHistory),
	}
}
