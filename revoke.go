package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file serves a "where you're signed in" page and its operators: list
// a user's sessions, end one of them, end them all, and end everyone's.

// errNoSortKey is List's and Revoke's answer in a hash-only table, which
// cannot hold the per-user index they read.
var errNoSortKey = errors.New("listing and revoking single sessions need a table with a sort key (Layout.HashOnly is set)")

// List returns user's live sessions, newest first, for a "where you're
// signed in" page: never one that expired or that a revocation ended, and
// always one created a moment ago (a strongly consistent Query of the
// user's own index partition, and the user's read). Never a Scan.
//
//	s, _ := sessions.Session(r.Context())
//	list, err := sessions.List(r.Context(), s.User)
func (m *Manager[U]) List(ctx context.Context, user UserKey) ([]Session, error) {
	current, _ := m.Session(ctx)
	list, err := m.list(ctx, user, current.ID)
	return list, wrap("list sessions", err)
}

func (c *core) list(ctx context.Context, user UserKey, current string) ([]Session, error) {
	if c.store.HashOnly {
		return nil, errNoSortKey
	}
	if err := c.users.checkKey(user); err != nil {
		return nil, err
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	now := c.now()
	indexed, err := c.store.queryIndex(ctx, user.PK, user.SK, now)
	if err != nil {
		return nil, err
	}
	withGlobal, began := c.everyone.stale(), c.everyone.clock()
	rev, sessions, ended, err := c.readListed(ctx, user, indexed, withGlobal)
	if errors.Is(err, ErrUserNotFound) {
		return nil, nil
	}
	if rev.globalRead {
		c.everyone.seen(rev.global, began)
	}
	if err != nil {
		return nil, err
	}
	var list []Session
	var stale []item.Session
	for _, idx := range indexed { // newest first
		// The session item, not the index item, says whether the session
		// lives: an index item outlives a session that expired, was
		// revoked, or never was written (a Login that failed half-way).
		// A young one without its session item is a Login on its way,
		// which writes its index item first: not listed, not dropped.
		s, ok := sessions[idx.SessionPK]
		if !ok && now.Sub(idx.CreatedAt) <= c.onItsWay {
			continue
		}
		if !ok || s.ID != idx.ID || userOf(s) != user || !c.life.live(s, now) || c.revoked(s, rev.version, ended[idx.SessionPK]) != "" {
			stale = append(stale, idx)
			continue
		}
		e := sessionOf(s)
		e.Data = nil // the session's own, for its own requests
		e.Current = s.ID == current
		list = append(list, e)
	}
	c.dropIndexItems(ctx, stale)
	return list, nil
}

// readListed reads, in one round trip, user's revocation state and the
// session items (in MREC with their end records) that indexed point to.
func (c *core) readListed(ctx context.Context, user UserKey, indexed []item.Session, withGlobal bool) (revocation, map[string]item.Session, map[string]bool, error) {
	var keys []map[string]types.AttributeValue
	for _, idx := range indexed {
		keys = append(keys, c.store.SessionKey(idx.SessionPK))
		if c.users.mrec {
			keys = append(keys, c.store.EndKey(idx.SessionPK))
		}
	}
	var rev revocation
	var err error
	if !c.users.inTable() {
		// Users elsewhere: the loader is a read of its own.
		if rev, err = c.users.load(ctx, user, nil, false, withGlobal); err != nil {
			return rev, nil, nil, err
		}
	} else {
		keys = append(keys, c.store.userKeys(user.PK, user.SK, false, withGlobal)...)
	}
	found, err := c.store.batchGetMany(ctx, keys)
	if err != nil {
		return rev, nil, nil, err
	}
	sessions, ended := map[string]item.Session{}, map[string]bool{}
	u := userItems{globalRead: withGlobal}
	for _, av := range found {
		switch {
		case attrS(av, item.AttrKind) == item.KindSession && strings.HasPrefix(attrS(av, c.store.PartitionKey), c.store.SessionPrefix):
			if s, ok := c.store.decodeSession(ctx, av); ok {
				sessions[s.SessionPK] = s
			}
		case attrS(av, item.AttrKind) == item.KindEnded:
			ended[c.store.sessionPKOfEnd(av)] = true
		default:
			c.store.sort(&u, av, "", user.PK, user.SK)
		}
	}
	if c.users.inTable() {
		if u.user == nil {
			return rev, nil, nil, ErrUserNotFound
		}
		if rev, err = c.users.decode(u, nil); err != nil {
			return rev, nil, nil, err
		}
	}
	return rev, sessions, ended, nil
}

// dropIndexItems deletes the index items of sessions that can no longer
// be used, which List has just found, so that the next List reads them no
// more: side by side, on a deadline of their own, and a failure is only
// logged.
func (c *core) dropIndexItems(ctx context.Context, stale []item.Session) {
	if len(stale) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range stale {
		wg.Go(func() {
			if err := c.store.deleteIndex(ctx, s); err != nil {
				c.logger.ErrorContext(ctx, "ddbsession: delete the index item of an ended session", "sid", s.ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// Revoke ends one of user's sessions by its public ID, as a "sign out that
// device" button does. The session dies on its next request. Pass the
// signed-in user's key from [Manager.Session], never one taken from the
// request: an ID that is not one of user's sessions gets
// [ErrNoSession], exactly as an unknown one does.
//
//	s, _ := sessions.Session(r.Context())
//	err := sessions.Revoke(r.Context(), s.User, r.FormValue("id"))
//	if errors.Is(err, ddbsession.ErrNoSession) { /* 404 */ }
func (m *Manager[U]) Revoke(ctx context.Context, user UserKey, id string) error {
	return wrap("revoke session", m.revoke(ctx, user, id))
}

func (c *core) revoke(ctx context.Context, user UserKey, id string) error {
	if c.store.HashOnly {
		return errNoSortKey
	}
	if err := c.users.checkKey(user); err != nil {
		return err
	}
	if !item.ValidID(id) {
		return ErrNoSession
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	// The index item lives in user's own index partition, so finding it
	// there is what proves the session is theirs.
	s, ok, err := c.store.getIndex(ctx, user.PK, user.SK, id)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNoSession
	}
	// A session item already gone leaves a stale index item, which this
	// deletes too (a failure to is logged).
	err = c.recordEnd(ctx, s)
	if err == nil {
		_, _, err = c.store.deleteSession(ctx, s)
	}
	if err == nil {
		c.events.emit(ctx, Event{Kind: EventRevoked, SessionID: id, User: user})
	}
	return err
}

// RevokeAll logs user out everywhere with one write and no scan: it
// changes the user's sessions version, so every session made before it is
// rejected on its next request, on any instance, and a login that reads the
// user after it lives. No clock takes part. It returns [ErrUserNotFound] if
// the user has no item in the table; with a custom [Config.LoadUser], change
// the version where the loader reads it instead.
//
// To change a password: write the new credential, call RevokeAll, then
// Login again to keep the current browser signed in. A login that races the
// change ends with the others if it checked the password in Login's verify.
func (m *Manager[U]) RevokeAll(ctx context.Context, user UserKey) error {
	return wrap("revoke all sessions", m.revokeAll(ctx, user))
}

func (c *core) revokeAll(ctx context.Context, user UserKey) error {
	if err := c.users.checkKey(user); err != nil {
		return err
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	found, err := c.changeVersion(ctx, user, c.now().UnixMilli())
	switch {
	case err != nil:
		return err
	case !found:
		return ErrUserNotFound
	}
	c.events.emit(ctx, Event{Kind: EventRevokedAll, User: user})
	return nil
}

// changeVersion changes user's sessions version: the user item's, or in
// MREC the revocation item's, which only revocations write. It reports
// false if the user has no item.
func (c *core) changeVersion(ctx context.Context, user UserKey, ms int64) (found bool, err error) {
	if !c.users.mrec {
		return c.store.bumpVersion(ctx, user.PK, user.SK, ms)
	}
	items, err := c.store.getUser(ctx, user.PK, user.SK, false, false)
	if err != nil || items.user == nil {
		return false, err
	}
	return true, c.store.raiseRevocation(ctx, user.PK, user.SK, ms)
}

// RevokeEveryone ends every session of every user with one write, for an
// incident such as a leak of the table (OWASP ASVS 5.0 7.4.5): it raises the
// table's global revocation generation, which every session copied at its
// login. This instance applies it at once, every other within
// [Limits.RevokeEveryoneWithin] (a login there meanwhile ends with it), and
// another Region within the replication lag besides.
func (m *Manager[U]) RevokeEveryone(ctx context.Context) error {
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	if err := m.store.revokeEveryone(ctx); err != nil {
		return wrap("revoke everyone", err)
	}
	if err := m.readEveryone(ctx); err != nil {
		return wrap("revoke everyone", fmt.Errorf("written, but not read back: %w", err))
	}
	m.events.emit(ctx, Event{Kind: EventRevokedEveryone})
	return nil
}

// readEveryone reads the global revocation generation into this
// instance's copy.
func (c *core) readEveryone(ctx context.Context) error {
	began := c.everyone.clock()
	av, err := c.store.getGlobal(ctx)
	if err != nil {
		return err
	}
	gen, err := item.DecodeGlobal(av)
	if err != nil {
		return fmt.Errorf("the global revocation item: %w", err)
	}
	c.everyone.seen(gen, began)
	return nil
}
