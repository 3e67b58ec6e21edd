package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ddbsession/ddbsession/internal/decide"
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
	if err := c.users.checkKey(user, false); err != nil {
		return nil, err
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	work, cancelWork := c.workContext(ctx)
	defer cancelWork()
	now := c.now()
	indexed, err := c.store.queryIndex(work, user.PK, user.SK, now)
	if err != nil {
		return nil, err
	}
	// The session items, not the index items, say whether the sessions
	// live: read them with the user, in one round trip.
	pks := make([]string, len(indexed))
	for i, idx := range indexed {
		pks[i] = idx.SessionPK
	}
	f, err := c.read.Read(work, decide.Query{Sessions: pks, UserPK: user.PK, UserSK: user.SK})
	if err != nil {
		return nil, err
	}
	if !f.UserFound {
		return nil, nil
	}
	if err := c.users.decode(&f, nil); err != nil {
		return nil, err
	}
	var list []Session
	var stale []item.Session
	for _, idx := range indexed { // newest first
		// An index item outlives a session that expired, was revoked, or
		// never was written (a Login that failed half-way). A young one
		// without its session item is a Login on its way, which writes
		// its index item first: not listed, not dropped.
		s, ok := f.Session(idx.SessionPK)
		if !ok && !f.Voided(idx.SessionPK) && now.Sub(idx.CreatedAt) <= c.onItsWay {
			continue
		}
		if !ok || s.ID != idx.ID || userOf(s) != user || !c.life.live(s, now) || c.judge(&f, s) != "" {
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

// dropIndexItems deletes the index items of sessions that can no longer
// be used, which List has just found, so that the next List reads them no
// more: side by side, within the call's deadline (what its work left of
// it), and a failure is only logged.
func (c *core) dropIndexItems(ctx context.Context, stale []item.Session) {
	if len(stale) == 0 {
		return
	}
	ctx, cancel := detach(ctx)
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
	if err := c.users.checkKey(user, false); err != nil {
		return err
	}
	if !item.ValidID(id) {
		return ErrNoSession
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return err
	}
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
		c.recordOrLog(ctx, EventRevoked, user, s)
	}
	return err
}

// RevokeAll logs user out everywhere with one write and no scan: it
// changes the user's sessions version, so every session made before it is
// rejected on its next request, on any instance, and a login that reads the
// user after it lives. No clock takes part. It returns [ErrUserNotFound] if
// the user has no item in the table. With a custom [Config.LoadUser] it
// fails unless the version the loader returns changes with its write (as
// ddbitem.User.Version does): change the version where the loader reads
// it instead.
func (m *Manager[U]) RevokeAll(ctx context.Context, user UserKey) error {
	return wrap("revoke all sessions", m.revokeAll(ctx, user))
}

func (c *core) revokeAll(ctx context.Context, user UserKey) error {
	if err := c.users.checkKey(user, false); err != nil {
		return err
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return err
	}
	var loaded int64
	if c.users.custom {
		version, found, err := c.read.Load(ctx, user.PK, user.SK, c.users.newUser())
		if err != nil || !found {
			return cmp.Or(err, ErrUserNotFound)
		}
		loaded = version
	}
	found, err := c.changeVersion(ctx, user)
	switch {
	case err != nil:
		return err
	case !found && c.users.custom:
		return fmt.Errorf("no user item %s in table %q, and users come from Config.LoadUser: end their sessions by changing the version it returns", keyString(user), c.store.table)
	case !found:
		return ErrUserNotFound
	}
	if c.users.custom {
		if err := c.loaderSaw(ctx, user, loaded); err != nil {
			return err
		}
	}
	c.events.emit(ctx, Event{Kind: EventRevokedAll, User: user})
	c.recordOrLog(ctx, EventRevokedAll, user, item.Session{})
	return nil
}

// loaderSaw checks that Config.LoadUser returns another version for user
// than before, the version it returned before RevokeAll's write: the
// sessions end only if it does. A loader over the table's user items that
// returns sessionsVersion sees the write outside MREC, and one that returns
// ddbitem.User.Version in every mode; a loader that reads elsewhere, or
// caches, does not, and RevokeAll says so rather than report success. (A
// change of the version by another writer between the two loads passes
// for this write's; it ends the sessions all the same.)
func (c *core) loaderSaw(ctx context.Context, user UserKey, before int64) error {
	after, found, err := c.read.Load(ctx, user.PK, user.SK, c.users.newUser())
	switch {
	case err != nil:
		return fmt.Errorf("written, but Config.LoadUser failed to read it back: %w", err)
	case found && after == before:
		return fmt.Errorf("RevokeAll wrote the table's version of user %s, but Config.LoadUser still returns version %d, and the sessions stand while it does: "+
			"return ddbitem.User.Version of a ddbitem.Reader's read, or end the sessions by changing the version the loader returns "+
			"(https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md#user-items)", keyString(user), after)
	}
	return nil
}

// changeVersion changes user's sessions version: the user item's, or in
// MREC the revocation item's, which only revocations write. It reports
// false if the user has no item in the table. In MREC it never writes the
// user item, even one without a sessions version (which no login accepts
// until the app gives it one): a Region's write of it settles whole, over
// the app's writes in another (a new password) within the lag.
func (c *core) changeVersion(ctx context.Context, user UserKey) (found bool, err error) {
	if !c.store.MREC {
		return c.store.changeVersion(ctx, user.PK, user.SK, c.now())
	}
	av, err := c.store.get(ctx, c.store.Key(user.PK, user.SK))
	if av == nil || err != nil {
		return false, err
	}
	return true, c.store.changeRevocation(ctx, user.PK, user.SK, c.now())
}

// RevokeEveryone ends every session of every user with one write, for an
// incident such as a leak of the table (OWASP ASVS 5.0 7.4.5): it changes
// the table's global revocation generation, which every session copied at
// its login. This instance applies it at once, every other within
// [Limits.RevokeEveryoneWithin] (a login there meanwhile ends with it), and
// another Region within the replication lag besides.
func (m *Manager[U]) RevokeEveryone(ctx context.Context) error {
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	if err := m.read.CheckLayout(ctx); err != nil {
		return wrap("revoke everyone", err)
	}
	if err := m.store.revokeEveryone(ctx, m.now()); err != nil {
		return wrap("revoke everyone", err)
	}
	if _, err := m.read.ReadAgain(ctx); err != nil {
		return wrap("revoke everyone", fmt.Errorf("written, but not read back: %w", err))
	}
	m.events.emit(ctx, Event{Kind: EventRevokedEveryone})
	return nil
}
