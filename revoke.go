package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file serves a "where you're signed in" page and its operators: list
// a user's sessions, end one of them, end them all, and find the sessions
// about to expire.

// errNoSortKey is List's and Revoke's answer in a hash-only table, which
// cannot hold the per-user index they read.
var errNoSortKey = errors.New("ddbsession: listing and revoking single sessions need a table with a sort key (Layout.HashOnly is set)")

// List returns user's live sessions, newest first, for a "where you're
// signed in" page. It leaves out sessions that have expired but that TTL has
// not deleted yet, and sessions older than the user's sessions-valid-after
// cutoff. A session created a moment ago is in the list: it is one strongly
// consistent Query on the user's own index partition, plus the user read
// that yields the cutoff. Never a Scan.
//
//	s, _ := sessions.Session(r.Context())
//	list, err := sessions.List(r.Context(), s.User)
//	for _, e := range list {
//		fmt.Fprintln(w, e.ID, e.UserAgent, e.ExpiresAt, e.Current)
//	}
func (m *Manager[U]) List(ctx context.Context, user UserKey) ([]Session, error) {
	if m.store.HashOnly {
		return nil, errNoSortKey
	}
	if err := m.users.checkKey(user); err != nil {
		return nil, fmt.Errorf("ddbsession: list sessions: %w", err)
	}
	current, _ := m.Session(ctx)
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	withGlobal, began := m.everyone.stale(), mono()
	rev, err := m.users.load(ctx, user, nil, withGlobal)
	if errors.Is(err, ErrUserNotFound) {
		return nil, nil
	}
	if rev.globalRead {
		m.everyone.seen(rev.global, began)
	}
	if err != nil {
		return nil, fmt.Errorf("ddbsession: list sessions: load user: %w", err)
	}
	now := m.now()
	// A valid session was created after the cutoff it copied (see
	// revoked), so the query starts there.
	found, err := m.store.queryIndex(ctx, user.PK, user.SK, time.UnixMilli(rev.Cutoff), now)
	if err != nil {
		return nil, fmt.Errorf("ddbsession: list sessions: %w", err)
	}
	var list []Session
	for _, s := range found { // newest first
		// The query's filter ran at the engine's "now"; this check runs at
		// ours, and also drops the sessions that RevokeAll has ended.
		if userOf(s) != user || !m.life.live(s, now) || m.revoked(s, rev.State, now) != "" {
			continue
		}
		e := sessionOf(s)
		e.Current = s.ID == current.ID
		list = append(list, e)
	}
	return list, nil
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
	if m.store.HashOnly {
		return errNoSortKey
	}
	if err := m.users.checkKey(user); err != nil {
		return fmt.Errorf("ddbsession: revoke session: %w", err)
	}
	if !item.ValidID(id) {
		return ErrNoSession
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	// The index item lives in user's own index partition, so finding it
	// there is what proves the session is theirs.
	s, ok, err := m.store.getIndex(ctx, user.PK, user.SK, id)
	if err != nil {
		return fmt.Errorf("ddbsession: revoke session: %w", err)
	}
	if !ok {
		return ErrNoSession
	}
	// A session item already gone leaves a stale index item, which this
	// deletes too (a failure to is logged).
	_, _, err = m.store.deleteSession(ctx, s)
	if err == nil {
		err = m.recordEnd(ctx, s)
	}
	if err == nil {
		m.events.emit(ctx, Event{Kind: EventRevoked, SessionID: id, User: user})
	}
	return err
}

// RevokeAll logs user out everywhere, with one write and no scan: it raises
// the user item's sessions-valid-after cutoff, the user's revocation
// version. Every session created before it is rejected on its next
// request, on any instance: a session lives only while the cutoff is the
// one its login read with the credential. A login that reads the user after
// RevokeAll copies the new cutoff, and lives. No clock takes part: an
// instance whose clock is minutes off revokes, and signs in, as any other.
//
// The cutoff never moves backwards: RevokeAll sets it to the current time in
// epoch milliseconds, or one millisecond on where it is there or later
// already, so that releases before this one, which compare it with
// sessions' creation times, read it as they always have. It returns
// [ErrUserNotFound] if the user has no item in the table; with a custom
// [Config.LoadUser], raise the cutoff where the loader reads it instead. In
// MREC mode ([Config.MREC]) it raises the cutoff of the user's state item
// and leaves the user item, the app's, alone: a write of it here would
// undo a concurrent write of the app's in another Region.
//
// To change a credential (a password), write the new credential first and
// call RevokeAll after it, then Login again to keep the current browser
// signed in with a fresh session; a login that races the change must check
// the credential in [Manager.Login]'s verify, which sees the credential
// and the cutoff of one read, to be sure to end with the others.
func (m *Manager[U]) RevokeAll(ctx context.Context, user UserKey) error {
	if err := m.users.checkKey(user); err != nil {
		return fmt.Errorf("ddbsession: revoke all sessions: %w", err)
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	found, err := m.raiseCutoff(ctx, user, m.now().UnixMilli())
	switch {
	case err != nil:
		return fmt.Errorf("ddbsession: revoke all sessions: %w", err)
	case !found:
		return ErrUserNotFound
	}
	m.events.emit(ctx, Event{Kind: EventRevokedAll, User: user})
	return nil
}

// raiseCutoff raises user's revocation version to ms, or one on from
// where it is: the user item's, or in MREC mode the state item's. It
// reports false if the user has no item.
func (c *core) raiseCutoff(ctx context.Context, user UserKey, ms int64) (found bool, err error) {
	if !c.users.mrec {
		return c.store.raiseCutoff(ctx, user.PK, user.SK, ms)
	}
	items, err := c.store.getUser(ctx, user.PK, user.SK, false, false)
	if err != nil || items.user == nil {
		return false, err
	}
	return true, c.store.raiseStateCutoff(ctx, user.PK, user.SK, ms)
}

// RevokeEveryone ends every session of every user, with one write and no
// scan, for an incident such as a leak of the table or of a secret its
// sessions rest on (OWASP ASVS 5.0 7.4.5): it raises the table's global
// revocation generation, which every session copied at its login. This
// instance applies it at once; every other instance of the app within
// [Config.RevokeEveryoneWithin] (10 seconds by default), when its copy of
// the generation is that old and its next request reads it anew, and in a
// global table within the replication lag besides. A login after it lives.
// Users sign in again; nothing else about them changes.
func (m *Manager[U]) RevokeEveryone(ctx context.Context) error {
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	if err := m.store.revokeEveryone(ctx); err != nil {
		return fmt.Errorf("ddbsession: %w", err)
	}
	if err := m.readEveryone(ctx); err != nil {
		return fmt.Errorf("ddbsession: revoke everyone: written, but not read back: %w", err)
	}
	m.events.emit(ctx, Event{Kind: EventRevokedEveryone})
	return nil
}

// readEveryone reads the global revocation generation into this
// instance's copy.
func (c *core) readEveryone(ctx context.Context) error {
	began := mono()
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

// errNoExpiryIndex is Expiring's answer without Layout.ExpiryIndex.
var errNoExpiryIndex = errors.New("ddbsession: Expiring needs an expiry index, and Config.Layout.ExpiryIndex is not set")

// maxParallelQueries bounds how many index partitions Expiring reads at once.
const maxParallelQueries = 16

// maxExpiringWindow bounds the hours, and so the index partitions, that one
// call to Expiring may read.
const maxExpiringWindow = 24 * time.Hour

// Expiring returns the sessions whose expiry falls in [from, to], soonest
// first, for warm-up or pre-expiry notices. It needs the opt-in
// [Layout.ExpiryIndex] and queries each hour's shards in parallel, so a
// window may span at most 24 hours. It reads the index alone: a session that
// RevokeAll ended but that has not expired can still be listed.
//
//	soon, err := sessions.Expiring(ctx, time.Now(), time.Now().Add(15*time.Minute))
//	for _, s := range soon {
//		notify(s.User, s.ExpiresAt)
//	}
//
// The index costs writes: Login writes one more index entry, Logout deletes
// it, and every refresh moves the session to a new sort key (and, across an
// hour, a new partition), which DynamoDB bills as a delete and a put on the
// index: two extra write units per refresh for items under 1 KB.
func (m *Manager[U]) Expiring(ctx context.Context, from, to time.Time) ([]Session, error) {
	if m.store.ExpiryIndex == "" {
		return nil, errNoExpiryIndex
	}
	if to.Before(from) || to.Sub(from) > maxExpiringWindow {
		return nil, fmt.Errorf("ddbsession: Expiring window %v to %v: must be ordered and at most %v", from, to, maxExpiringWindow)
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()

	// Expiries are whole seconds: the first one in the window is from
	// rounded up, or a session that expired a fraction before from, and is
	// already rejected, would be listed.
	first := from.Unix()
	if from.After(time.Unix(first, 0)) {
		first++
	}
	var buckets []string
	for hour := from.UTC().Truncate(time.Hour); !hour.After(to); hour = hour.Add(time.Hour) {
		for shard := range m.store.ExpiryIndexShards {
			buckets = append(buckets, item.Bucket(hour, shard))
		}
	}
	var (
		mu       sync.Mutex
		sessions []Session
		errs     []error
		wg       sync.WaitGroup
	)
	limit := make(chan struct{}, maxParallelQueries)
	for _, bucket := range buckets {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			found, err := m.store.queryExpiry(ctx, m.store.ExpiryIndex, bucket, first, to.Unix())
			mu.Lock()
			defer mu.Unlock()
			for _, s := range found {
				sessions = append(sessions, sessionOf(s))
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ddbsession: expiring sessions: %w", err)
	}
	slices.SortFunc(sessions, func(a, b Session) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	return sessions, nil
}
