package ddbsession

import (
	"errors"
	"fmt"
)

// This file holds the one convention of the errors that leave the package:
// "ddbsession: <operation>: <cause>", prefixed once, where the error leaves.

// ErrNoSession is returned for a token that grants no session (malformed,
// unknown, expired, revoked, or its user gone) and by [Manager.Revoke] for
// an ID that is not one of the user's sessions, alike: "signed out".
var ErrNoSession = errors.New("ddbsession: no valid session")

// ErrUserNotFound is returned by a [Config.LoadUser] for a user that does
// not exist, by the logins for a user without an item (they write nothing
// then), and by [Manager.RevokeAll] for a user item that is not in the table.
var ErrUserNotFound = errors.New("ddbsession: user not found")

// ErrUserExists is returned by [Manager.CreateUser] for a key already taken.
var ErrUserExists = errors.New("ddbsession: user already exists")

// ErrTooManySessions is returned by a login of a user who has
// [Limits.MaxSessions] sessions already, with [Limits.RefuseAtMaxSessions]:
// it wrote no session, and ended those its request carried, as logins do.
var ErrTooManySessions = errors.New("ddbsession: the user has as many sessions as Limits.MaxSessions allows")

// ErrSecondStep, wrapped by a verify's error, counts no failed sign-in.
var ErrSecondStep = errors.New("ddbsession: another step is needed to sign in")

// ErrBadPage is returned by [Manager.History] for a page it never returned.
var ErrBadPage = errors.New("ddbsession: history: not a page History returned")

// wrap is err as it leaves the package from operation op. The package's
// sentinels (ErrNoSession and its rejections, ErrUserNotFound,
// ErrUserExists, ErrTooManySessions, ErrBadPage) and the app's own errors, from a
// verify function, pass as they are, for callers to compare.
func wrap(op string, err error) error {
	var own *appError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &own):
		return own.err
	case err == ErrUserNotFound, err == ErrUserExists, err == ErrTooManySessions, err == ErrNoSession, err == ErrBadPage:
		return err
	}
	if _, ok := err.(*rejection); ok {
		return err
	}
	return fmt.Errorf("ddbsession: %s: %w", op, err)
}

// appError is an error of the app's own, which wrap hands back as it was.
type appError struct{ err error }

func (e *appError) Error() string { return e.err.Error() }
func (e *appError) Unwrap() error { return e.err }

// rejection is ErrNoSession with its reason, for events.
type rejection struct{ reason Reason }

func (r *rejection) Error() string        { return ErrNoSession.Error() }
func (r *rejection) Is(target error) bool { return target == ErrNoSession }

// rejections holds one rejection per reason, so that a rejection, the
// answer to a flood of unknown tokens, allocates nothing.
var rejections = func() map[Reason]*rejection {
	all := map[Reason]*rejection{}
	for _, r := range []Reason{ReasonMalformed, ReasonUnknown, ReasonExpired, ReasonAbsoluteLifetime,
		ReasonRevoked, ReasonUserMissing, ReasonUserMismatch, ReasonNotBound, ReasonNotReplicated, ReasonEveryone,
		ReasonPending, ReasonSessionLimit} {
		all[r] = &rejection{r}
	}
	return all
}()

// rejected returns the ErrNoSession of reason.
func rejected(reason Reason) error {
	if r, ok := rejections[reason]; ok {
		return r
	}
	return &rejection{reason}
}

// reasonOf returns the reason of a rejection, or "".
func reasonOf(err error) Reason {
	var r *rejection
	if errors.As(err, &r) {
		return r.reason
	}
	return ""
}
