package ddbsession

import (
	"context"
	"errors"
	"fmt"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file serves a "where you're signed in" page: list a user's sessions,
// end one of them, or end them all.

// ErrSessionNotFound is returned by [Manager.Revoke] for a session ID that is
// unknown, malformed or another user's: the three are not told apart.
var ErrSessionNotFound = errors.New("ddbsession: session not found")

// ErrNoSortKey is returned by [Manager.List] and [Manager.Revoke] in a
// hash-only table, which cannot hold the per-user index they read.
var ErrNoSortKey = errors.New("ddbsession: listing and revoking single sessions need a table with a sort key")

// SessionInfo is one entry of [Manager.List].
type SessionInfo struct {
	Session
	// Current is true for the session of the request whose context was
	// passed to List.
	Current bool
}

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
func (m *Manager[U]) List(ctx context.Context, user UserKey) ([]SessionInfo, error) {
	if m.cfg.HashOnly {
		return nil, ErrNoSortKey
	}
	current, _ := m.Session(ctx)
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	_, validAfter, err := m.loadUser(ctx, user)
	if errors.Is(err, ErrUserNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ddbsession: list sessions: load user: %w", err)
	}
	now := m.cfg.Now()
	found, err := m.store.queryIndex(ctx, user.PK, user.SK, validAfter, now)
	if err != nil {
		return nil, fmt.Errorf("ddbsession: list sessions: %w", err)
	}
	var list []SessionInfo
	for _, s := range found { // newest first
		// The query's filter ran at the engine's "now"; this check runs at
		// ours, and also drops legacy sessions that RevokeAll has ended.
		if s.UserPK != user.PK || s.UserSK != user.SK || !m.life.live(s, now) || !s.CreatedAt.After(validAfter) {
			continue
		}
		list = append(list, SessionInfo{Session: sessionOf(s), Current: s.ID == current.ID})
	}
	return list, nil
}

// Revoke ends one of user's sessions by its public ID, as a "sign out that
// device" button does. The session dies on its next request. Pass the
// signed-in user's key from [Manager.Session], never one taken from the
// request: an ID that is not one of user's sessions gets
// [ErrSessionNotFound], exactly as an unknown one does.
//
//	s, _ := sessions.Session(r.Context())
//	err := sessions.Revoke(r.Context(), s.User, r.FormValue("id"))
//	if errors.Is(err, ddbsession.ErrSessionNotFound) { /* 404 */ }
func (m *Manager[U]) Revoke(ctx context.Context, user UserKey, id string) error {
	if m.cfg.HashOnly {
		return ErrNoSortKey
	}
	if !item.ValidID(id) {
		return ErrSessionNotFound
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
		return ErrSessionNotFound
	}
	_, found, err := m.store.deleteSession(ctx, s.SessionPK)
	if err == nil && !found {
		// The session item was already gone; drop its stale index item too.
		if err = m.store.deleteItem(ctx, m.store.IndexKey(s)); err != nil {
			err = fmt.Errorf("ddbsession: revoke session: %w", err)
		}
	}
	if err == nil && m.cfg.OnEvent != nil {
		m.emit(ctx, Event{Kind: EventRevoked, SessionID: id, User: user})
	}
	return err
}

// RevokeAll logs user out everywhere: it sets the user item's
// sessions-valid-after cutoff to now, in epoch milliseconds. Every session
// created up to it, this millisecond included, is rejected on its next
// request, on any instance, with no scan and no query; [Manager.Login] and
// [Manager.LoginWith] stamp the sessions they create after it.
//
// The cutoff never moves backwards: a call that finds it at or after now
// moves it one millisecond on instead, so that every call ends the sessions
// created before it. RevokeAll returns [ErrUserNotFound] if the user has no
// item in the table; with a custom [Config.LoadUser], keep the cutoff where
// the loader reads it instead.
//
// To change a credential (a password), write the new credential first and
// call RevokeAll after it, then Login again to keep the current browser
// signed in with a fresh session; a login that races the change must use
// [Manager.LoginWith] to be sure to end with the others.
//
// The cutoff is compared with createdAt values written by other instances,
// so RevokeAll assumes that the instances' clocks agree to well within a
// second, as NTP or the Amazon Time Sync Service keep them. An instance whose
// clock runs ahead by d sets a cutoff that also rejects sessions created in
// the d after the call.
func (m *Manager[U]) RevokeAll(ctx context.Context, user UserKey) error {
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	err := m.store.raiseCutoff(ctx, user.PK, user.SK, m.cfg.Now().UnixMilli())
	if err != nil && !errors.Is(err, ErrUserNotFound) {
		return fmt.Errorf("ddbsession: revoke all sessions: %w", err)
	}
	if err == nil && m.cfg.OnEvent != nil {
		m.emit(ctx, Event{Kind: EventRevokedAll, User: user})
	}
	return err
}
