package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file keeps a user's sessions under Limits.MaxSessions: a login takes
// a slot in the user's slots item, ending the oldest session or refusing
// when none is free; the session it ends is gone before the new one exists.

// claim gives session s, about to be created for user under sessionPK, a
// slot among those the limit counts, in the slots item that the login read
// with the user (f.Slots), and returns the sessions it ended to make
// room, which the caller ends (evict) before it writes s. ended are the
// sessions the login has just ended, whose slots are free; so is a slot
// whose session is gone, voided, expired or revoked, which the claim reads
// when the slots are full. The write is conditional on the slots being as
// read, so two racing logins never both take the last slot: the loser reads
// the item again and decides anew, unless its own slot is there, when its
// write was made and its answer lost.
//
// At the limit the oldest slots go, live or not: a young slot without its
// session is a login on its way (or a session that ended soon after it
// began, which looks the same), returned as a session known by its key
// alone, whose write evict stops (see overtaken). No session outlives its
// slot. The claim works under work; if it fails, what its writes may have
// taken the slots of ends within ctx's deadline.
func (c *core) claim(ctx, work context.Context, user UserKey, f *decide.Facts, sessionPK string, s item.Session, ended []item.Session, now time.Time) (_ []item.Session, err error) {
	l := c.limit
	slots := f.Slots
	// The sessions that this login's writes took the slots of: refused, or
	// made with their answers lost, which cannot be told apart.
	var picked []item.Session
	defer func() {
		// A write whose answer was an error may have been made: what it
		// took the slots of must end, lest it live on without them.
		if err != nil && len(picked) > 0 {
			if err := c.evict(ctx, ctx, picked); err != nil {
				c.logger.ErrorContext(ctx, "ddbsession: a failed login could not end the sessions it took the slots of", "err", err)
			}
		}
	}()
	for attempt := 1; ; attempt++ {
		taken := slices.DeleteFunc(slices.Clone(slots.List), func(slot item.Slot) bool {
			return slices.ContainsFunc(ended, func(e item.Session) bool { return e.SessionPK == slot.SessionPK })
		})
		var evicted []item.Session
		if len(taken) >= l.max {
			// Full, maybe of sessions that ended some other way (a Logout,
			// a Revoke, an expiry, a RevokeAll, a failed login's void):
			// those give their slots up.
			live, found, err := c.liveSlots(work, taken, f, now)
			if err != nil {
				return nil, err
			}
			taken = slices.DeleteFunc(taken, func(slot item.Slot) bool {
				if _, ok := live[slot.SessionPK]; ok {
					return false
				}
				// Dead, or gone; but a young slot without its session is
				// a login on its way.
				return found[slot.SessionPK] || now.Sub(slot.Created) > c.onItsWay
			})
			if len(taken) >= l.max && l.refuse {
				return nil, ErrTooManySessions
			}
			for _, slot := range taken[:max(len(taken)-l.max+1, 0)] { // oldest first
				e, ok := live[slot.SessionPK]
				if !ok {
					e = item.Session{SessionPK: slot.SessionPK}
				}
				evicted = append(evicted, e)
			}
			taken = taken[max(len(taken)-l.max+1, 0):]
		}
		w, err := c.store.ClaimSlots(slots, append(taken, item.Slot{SessionPK: sessionPK, Created: s.CreatedAt}))
		if err != nil {
			return nil, err
		}
		earlier := picked
		picked = append(picked, evicted...)
		lost, err := c.store.update(work, c.store.SlotsKey(user.PK, user.SK), w)
		switch {
		case err != nil:
			return nil, fmt.Errorf("take a session slot: %w", err)
		case !lost:
			return append(evicted, gone(earlier, slots.List)...), nil
		case attempt == 10:
			return nil, errors.New("take a session slot: the user's slots item kept changing (ten logins at once?)")
		}
		var overtaken bool
		if slots, overtaken, err = c.readSlots(work, user, sessionPK); err != nil {
			return nil, fmt.Errorf("take a session slot: %w", err)
		}
		if overtaken || slices.ContainsFunc(slots.List, func(slot item.Slot) bool { return slot.SessionPK == sessionPK }) {
			// This attempt's write was made, its answer lost; and maybe a
			// racing login has taken the slot it made since.
			return gone(picked, slots.List), nil
		}
	}
}

// gone returns, once each, those of picked whose slots are not among
// slots: a write took them, maybe one of this login's whose answer was
// lost, so they must end. Ending a session that another login ended too is
// harmless; one still in its slot is left alone.
func gone(picked []item.Session, slots []item.Slot) []item.Session {
	var out []item.Session
	for _, p := range picked {
		if !slices.ContainsFunc(slots, func(slot item.Slot) bool { return slot.SessionPK == p.SessionPK }) &&
			!slices.ContainsFunc(out, func(o item.Session) bool { return o.SessionPK == p.SessionPK }) {
			out = append(out, p)
		}
	}
	return out
}

// readSlots reads user's slots item, for a claim whose write was refused,
// and says whether a void stands under sessionPK, the key of the session
// the login is about to write: a racing login took its slot. One round
// trip.
func (c *core) readSlots(ctx context.Context, user UserKey, sessionPK string) (item.Slots, bool, error) {
	f, err := c.read.Read(ctx, decide.Query{Session: sessionPK, UserPK: user.PK, UserSK: user.SK, SlotsAlone: true})
	return f.Slots, f.Voided(sessionPK), err
}

// liveSlots reads the sessions of slots, in one round trip, and returns
// those that are live and stand against the user of f, by session
// partition key, and which of the slots' keys it found an item under at
// all (a session, or a void over one).
func (c *core) liveSlots(ctx context.Context, slots []item.Slot, user *decide.Facts, now time.Time) (live map[string]item.Session, found map[string]bool, err error) {
	pks := make([]string, len(slots))
	for i, slot := range slots {
		pks[i] = slot.SessionPK
	}
	f, err := c.read.Read(ctx, decide.Query{Sessions: pks})
	if err != nil {
		return nil, nil, fmt.Errorf("read the slots' sessions: %w", err)
	}
	f.Adopt(user)
	live, found = map[string]item.Session{}, map[string]bool{}
	for _, pk := range pks {
		found[pk] = f.Voided(pk)
	}
	for pk, s := range f.Sessions {
		found[pk] = true
		if c.life.live(s, now) && c.judge(&f, s) == "" {
			live[pk] = s
		}
	}
	return live, found, nil
}

// voidUntil is how long a void stands, from now: a write on its way comes
// within onItsWay of its slot, which is at most onItsWay old by any
// instance's clock.
func (c *core) voidUntil() time.Time { return c.now().Add(2 * c.onItsWay) }

// evict ends the sessions that a claim took the slots of, before the
// session that took them is written: in MREC it records their ends, so
// that no Region's refresh brings them back, and it puts a void over each
// (see store.voidSession), which also stops the write of a session still
// on its way, a login's or its retry's. Their writes run beside the new
// session's index write, at no round trip of their own.
//
// They run under work; those that fail are tried once more, under ctx,
// whose deadline is the call's own: a session whose slot is gone must not
// live on.
func (c *core) evict(ctx, work context.Context, evicted []item.Session) error {
	failed, err := c.evictOnce(work, evicted)
	if err == nil {
		return nil
	}
	again, cancel := detach(ctx)
	defer cancel()
	if _, err = c.evictOnce(again, failed); err != nil {
		return fmt.Errorf("end a session the session limit ended: %w", err)
	}
	return nil
}

// evictOnce makes evict's writes once, and returns the sessions it failed
// to end.
func (c *core) evictOnce(ctx context.Context, evicted []item.Session) (failed []item.Session, err error) {
	until := c.voidUntil()
	errs := make([]error, len(evicted))
	var wg sync.WaitGroup
	for i, e := range evicted {
		wg.Go(func() {
			if errs[i] = c.recordEnd(ctx, e); errs[i] != nil {
				return
			}
			s, found, err := c.store.voidSession(ctx, e, until)
			switch {
			case err != nil:
				errs[i] = err
				return
			case e.ID == "" && found: // a login's on its way, written after all
				e = s
			case e.ID == "":
				return
			}
			c.events.emit(ctx, Event{Kind: EventEvicted, SessionID: e.ID, User: userOf(e), Reason: ReasonSessionLimit})
			c.recordOrLog(ctx, EventEvicted, userOf(e), e)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			failed = append(failed, evicted[i])
		}
	}
	return failed, errors.Join(errs...)
}

// overtaken reports whether err, from writing the session under sessionPK,
// means that a racing login took its slot first and put a void under its
// key (see claim). The login then ends as if its session had been written
// and evicted at once, which is what a moment's difference in timing would
// have done: its token is refused from its first request.
func (c *core) overtaken(ctx context.Context, sessionPK string, err error) bool {
	if c.limit.max == 0 || !errors.Is(err, errTaken) {
		return false
	}
	av, rerr := c.store.get(ctx, c.store.SessionKey(sessionPK))
	return rerr == nil && attrS(av, item.AttrKind) == item.KindVoid
}
