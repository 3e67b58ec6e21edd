package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds the rules that make a session valid, which every reader
// of one applies: the middleware, Authenticate, device binding, Login's
// re-authentication and List. check reads a session and its user and
// decides; reject and revoked are its two halves.

// mayArrive reports whether a session rejected for reason may still be
// valid once replication catches up: in MREC mode, a session created in
// another Region a moment ago is not here yet, and its cookie must not be
// cleared, or its user would stay signed out once it has arrived.
func (c *core) mayArrive(reason Reason) bool {
	return c.users.mrec && (reason == ReasonUnknown || reason == ReasonNotReplicated)
}

// check reads the session of cred, under sessionPK, and its user, which it
// decodes into user unless that is nil, and decides whether the session is
// valid at now: present, live, naming the credential's user if the
// credential names one, and not revoked (see revoked). A session that is
// not valid comes with an error that is ErrNoSession and says why (see
// rejected), and with what was read of it, for events.
func (c *core) check(ctx context.Context, cred item.Credential, sessionPK string, now time.Time, user any) (s item.Session, err error) {
	defer recovered(&err)
	withGlobal, began := c.everyone.stale(), c.everyone.clock()
	var rev revocation
	if cred.HasUser() && c.users.inTable() {
		s, rev, err = c.readTogether(ctx, cred, sessionPK, now, user, withGlobal)
	} else {
		s, rev, err = c.readInTurn(ctx, cred, sessionPK, now, user, withGlobal)
	}
	if err != nil {
		return s, err
	}
	if rev.globalRead {
		c.everyone.seen(rev.global, began)
	}
	if reason := c.revoked(s, rev.version, rev.ended); reason != "" {
		return s, rejected(reason)
	}
	return s, nil
}

// readTogether reads the session and the user item that cred names (and in
// MREC the session's end record and the user's revocation item) in one
// round trip.
func (c *core) readTogether(ctx context.Context, cred item.Credential, sessionPK string, now time.Time, user any, withGlobal bool) (item.Session, revocation, error) {
	s, found, items, err := c.store.getSessionAndUser(ctx, sessionPK, cred.UserPK, cred.UserSK, withGlobal)
	if err != nil {
		return s, revocation{}, err
	}
	if reason := c.reject(s, found, cred, now); reason != "" {
		return s, revocation{}, rejected(reason)
	}
	if items.user == nil {
		return s, revocation{}, rejected(ReasonUserMissing)
	}
	rev, err := c.users.decode(items, user)
	if err != nil {
		return s, rev, err
	}
	return s, rev, nil
}

// readInTurn reads the session (in MREC with its end record), then its
// user: two round trips, for credentials without a user key and for users
// kept elsewhere.
func (c *core) readInTurn(ctx context.Context, cred item.Credential, sessionPK string, now time.Time, user any, withGlobal bool) (item.Session, revocation, error) {
	s, found, ended, err := c.store.getSessionEnded(ctx, sessionPK)
	if err != nil {
		return s, revocation{}, err
	}
	if reason := c.reject(s, found, cred, now); reason != "" {
		return s, revocation{}, rejected(reason)
	}
	rev, err := c.users.load(ctx, userOf(s), user, false, withGlobal)
	if errors.Is(err, ErrUserNotFound) {
		return s, rev, rejected(ReasonUserMissing)
	}
	if err != nil {
		return s, rev, err
	}
	if rev.ended, err = item.DecodeEnd(ended); err != nil {
		return s, rev, fmt.Errorf("the session's end record: %w", err)
	}
	return s, rev, nil
}

// reject says why a session read for cred cannot be accepted at now, or
// returns "": it must be present, live, and, if cred names a user, that
// user's, so that a valid token is never paired with someone else's user.
func (c *core) reject(s item.Session, found bool, cred item.Credential, now time.Time) Reason {
	switch {
	case !found:
		return ReasonUnknown
	case s.Pending:
		return ReasonPending // only CompleteLogin takes it
	case cred.HasUser() && (s.UserPK != cred.UserPK || s.UserSK != cred.UserSK):
		return ReasonUserMismatch
	}
	return c.life.ended(s, now)
}

// revoked says why session s is revoked, for a user whose sessions version
// is version and, in MREC, a session whose end record is there if ended; or
// returns "". The version is no time to compare: RevokeAll changes it, a
// login reads it with the credential it checks and copies it into the
// session (item.AttrGen), and the session is valid while the version is
// still that one, whatever the instances' clocks say. Above that, the
// session must not be older than the last RevokeEveryone this instance
// knows of (see everyone).
func (c *core) revoked(s item.Session, version int64, ended bool) Reason {
	switch {
	case s.GlobalGen < c.everyone.gen.Load():
		return ReasonEveryone // created before a RevokeEveryone
	case ended:
		return ReasonUnknown // ended, and maybe brought back by a write of another Region
	case s.Gen == version:
		return ""
	case s.Gen > version && c.users.mrec:
		// A login after a RevokeAll in another Region: its session has
		// come here before the raised version has.
		return ReasonNotReplicated
	}
	// Changed since (RevokeAll), or, for a higher copy, the user item
	// was made anew under the same key.
	return ReasonRevoked
}
