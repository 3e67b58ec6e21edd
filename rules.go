package ddbsession

import (
	"context"
	"time"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds the rules that make a session valid, which every reader
// of one applies: the middleware, Authenticate, device binding, Login's
// re-authentication, List, a session limit's count and a data write's
// check. check reads a session and its user (internal/decide's one Read)
// and decides; reject and judge are its two halves.

// mayArrive reports whether a session rejected for reason may still be
// valid once this instance catches up: its login read a RevokeEveryone
// this instance does not know of yet; in MREC mode, a session created in
// another Region a moment ago is not here yet, and neither may be its
// user, a change of its user item (a new credential) or a revocation its
// login read. Its cookie must not be cleared, or its user would stay
// signed out once they have arrived. A session that is revoked indeed
// keeps its cookie until it expires, and is refused all the same.
func (c *core) mayArrive(reason Reason) bool {
	switch reason {
	case ReasonNotReplicated:
		return true // also a RevokeEveryone another instance made, which this one learns of
	case ReasonUnknown, ReasonRevoked, ReasonUserMissing:
		return c.store.MREC
	}
	return false
}

// check reads the session of cred, under sessionPK, and its user, which it
// decodes into user unless that is nil, and decides whether the session is
// valid at now: present, live, naming the credential's user if the
// credential names one (reject), and still standing (judge). A session
// that is not valid comes with an error that is ErrNoSession and says why
// (see rejected), and with what was read of it, for events.
//
// It is one round trip: the session and the user the credential names, or
// two in turn, the session then its user, for a credential that names none
// and for users of Config.LoadUser. A credential whose user key is sealed
// costs the first request of a process one more, before them, which reads
// the table's cookie keys (see openSeal).
func (c *core) check(ctx context.Context, cred item.Credential, sessionPK string, now time.Time, user any) (s item.Session, err error) {
	defer recovered(&err)
	if err := c.openSeal(ctx, &cred); err != nil {
		return s, err
	}
	q := decide.Query{Session: sessionPK, Into: user}
	if cred.HasUser() && c.users.inTable() {
		q.UserPK, q.UserSK = cred.UserPK, cred.UserSK
	} else {
		q.OfSession = true
		q.Then = func(s item.Session) bool { return c.reject(s, true, cred, now) == "" }
	}
	f, err := c.read.Read(ctx, q)
	if err != nil {
		return s, err
	}
	s, found := f.Session(sessionPK)
	if reason := c.reject(s, found, cred, now); reason != "" {
		return s, rejected(reason)
	}
	if reason := c.judge(&f, s); reason != "" {
		return s, rejected(reason)
	}
	return s, c.users.decode(&f, user)
}

// openSeal opens the user key that cred carries sealed, if it does. A seal
// that does not open under the key it names is refused as malformed, at no
// read of a session: altered, or moved from another credential. One of a
// key this instance does not know (added to the table since it read the
// keys) leaves the token alone to decide, at two reads, and the keys are
// read again.
func (c *core) openSeal(ctx context.Context, cred *item.Credential) error {
	keys := c.read.CookieKeys()
	if keys == nil && cred.Sealed() {
		if err := c.read.CheckLayout(ctx); err != nil {
			return err
		}
		keys = c.read.CookieKeys()
	}
	switch keys.Open(&c.store.Layout, cred) {
	case item.Forged:
		return rejected(ReasonMalformed)
	case item.UnknownKey:
		c.read.Rekey()
	}
	return nil
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

// judge says why session s no longer stands against f, the facts of its
// user and the table that a Read found, or returns "": the login stamped
// the session with everything that can end it (see decide.Facts.Judge),
// and each must be as it was.
func (c *core) judge(f *decide.Facts, s item.Session) Reason {
	switch f.Judge(s) {
	case decide.Stands:
		return ""
	case decide.EndedEveryone:
		return ReasonEveryone // created before a RevokeEveryone
	case decide.Ended:
		return ReasonUnknown // ended, and maybe brought back by a write of another Region
	case decide.UserMissing:
		return ReasonUserMissing
	case decide.NotHereYet:
		return ReasonNotReplicated
	}
	// A RevokeAll, a user item made anew under the same key, or a new
	// credential, since the login.
	return ReasonRevoked
}
