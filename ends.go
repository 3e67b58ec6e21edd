package ddbsession

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file ends sessions, as Logout, a login's rotation, Revoke and a
// session limit do: it deletes them and, in MREC, records their ends.

// carried says which sessions a request carries a sign-in ends.
type carried int

const (
	endAll    carried = iota // cookie and bearer token: Login, CompleteLogin
	endBearer                // the bearer token alone: LoginBearer
)

// endRequestSessions deletes the sessions the request carries, those that
// which says, reports each as kind, and returns them as they were. read is
// the session that RequireSession read in the request, if any.
func (c *core) endRequestSessions(ctx context.Context, r *http.Request, which carried, kind EventKind, read item.Session) ([]item.Session, error) {
	var errs []error
	var ended []item.Session
	unseen := false
	for _, token := range c.cookies.tokens(r, which == endAll) {
		pk := c.store.SessionPK(token)
		s, found, err := c.endSession(ctx, pk, read)
		if err == nil && s.SessionPK == "" && !unseen {
			// Not in this Region: in MREC it may be a session of another
			// on its way here, which its end, recorded by its key alone,
			// meets. One a request: a request that carries made-up tokens
			// must not write an item, kept for a session's lifetime, for
			// each.
			unseen = true
			err = c.recordEnd(ctx, item.Session{SessionPK: pk})
		}
		if err != nil {
			errs = append(errs, err)
		}
		if found {
			ended = append(ended, s)
			c.events.emit(ctx, Event{Kind: kind, SessionID: s.ID, User: userOf(s)})
			if kind == EventEnded && !s.Pending {
				c.recordOrLog(ctx, kind, userOf(s), s)
			}
		}
	}
	return ended, errors.Join(errs...)
}

// endSession deletes the session under sessionPK and returns it as the
// delete found it, or false if the delete found nothing. deleteSession
// needs a copy, which this reads first unless read is that session.
//
// A session that is not there comes back as the zero Session.
//
// A copy that the delete then does not find was ended by a racing call or
// by this delete, whose answer was lost: it is not reported (no event, no
// re-authentication from it), since which cannot be told, but it is
// recorded as ended (MREC), as the one that ended it does too, because
// if that was this delete, no one else will.
func (c *core) endSession(ctx context.Context, sessionPK string, read item.Session) (item.Session, bool, error) {
	s := read
	if sessionPK != read.SessionPK {
		var present bool
		var err error
		if s, present, err = c.store.readSession(ctx, sessionPK); err != nil || !present {
			return item.Session{}, false, err
		}
	}
	deleted, found, err := c.store.deleteSession(ctx, s)
	switch {
	case err != nil:
		return s, false, err
	case found:
		return deleted, true, c.recordEnd(ctx, deleted)
	case s.ID != "":
		return s, false, c.recordEnd(ctx, s)
	}
	return s, false, nil
}

// endPending deletes the pending session of r's pending cookie, if any,
// and clears the cookie.
func (c *core) endPending(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	token, present := c.cookies.pendingToken(r)
	if !present {
		return nil
	}
	c.cookies.clearPending(w)
	if token == "" {
		return nil
	}
	pk := c.store.SessionPK(token)
	s, found, err := c.store.getSession(ctx, pk)
	if err != nil {
		return err
	}
	// Only a pending session: a signed-in token put in this cookie is no
	// business of this cookie's.
	if found && s.Pending {
		if _, _, err := c.store.deleteSession(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// recordEnd, in MREC, writes the end record of session s, deleted or
// about to be: a refresh of it in another Region that had not seen the
// delete yet writes the item back, whole, and would win. The record lasts
// as long as any copy of the session could be valid: until the end of its
// absolute lifetime, and endMargin more. A record that ended
// sooner (an idle timeout from now, say) could expire before it reached a
// Region held up longer than that, while that Region kept refreshing the
// session: the session would come back. s may be a login's on its way,
// known by its key alone (a session limit's eviction), created about now.
func (c *core) recordEnd(ctx context.Context, s item.Session) error {
	if !c.store.MREC || s.SessionPK == "" {
		return nil
	}
	created := s.CreatedAt
	if created.IsZero() {
		created = c.now()
	}
	return c.store.putEnd(ctx, s, created.Add(c.life.absolute+endMargin))
}

// endMargin is how long an end record outlasts its session's absolute
// lifetime as this instance counts it: for an instance that counts it
// longer, on a clock behind this one's, or with an AbsoluteLifetime that a
// deploy under way raises (by up to the margin). It costs storage alone.
const endMargin = 24 * time.Hour
