package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file keeps a user's sessions under Limits.MaxSessions: a login takes
// a slot in the user's slots item, ending the oldest session or refusing
// when none is free; the session it ends is gone before the new one exists.

// room is what a claim frees for its session: the live sessions it ends,
// and the keys of the sessions of logins on their way whose slots it took.
type room struct {
	evicted []item.Session
	voided  []string
}

// claim gives session s, about to be created for user under sessionPK, a
// slot among those the limit counts, in the slots item that the login read
// with the user (rev.slots), and returns the room it made, which the caller
// frees (evict) before it writes s. ended are the sessions the login has
// just ended, whose slots are free; so is a slot whose session is gone,
// expired or revoked, which the claim reads when the slots are full. The
// write is conditional on the slots being as read, so two racing logins
// never both take the last slot: the loser reads the item again and
// decides anew.
//
// At the limit the oldest slots go, live or not: a young slot without its
// session is a login on its way (or a session that ended soon after it
// began, which looks the same), and its session's key gets a void, which
// its write, made only where no item is, cannot overwrite. That login has
// been overtaken (see overtaken): no session outlives its slot.
func (c *core) claim(ctx context.Context, user UserKey, rev revocation, sessionPK string, s item.Session, ended []item.Session, now time.Time) (room, error) {
	l := c.limit
	slots := rev.slots
	for attempt := 1; ; attempt++ {
		taken := slices.DeleteFunc(slices.Clone(slots.List), func(slot item.Slot) bool {
			return slices.ContainsFunc(ended, func(e item.Session) bool { return e.SessionPK == slot.SessionPK })
		})
		var made room
		if len(taken) >= l.max {
			// Full, maybe of sessions that ended some other way (a Logout,
			// a Revoke, an expiry, a RevokeAll): those give their slots up.
			live, found, err := c.liveSlots(ctx, taken, rev.version, now)
			if err != nil {
				return room{}, err
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
				return room{}, ErrTooManySessions
			}
			n := max(len(taken)-l.max+1, 0)
			for _, slot := range taken[:n] { // oldest first
				if e, ok := live[slot.SessionPK]; ok {
					made.evicted = append(made.evicted, e)
				} else {
					made.voided = append(made.voided, slot.SessionPK)
				}
			}
			taken = taken[n:]
		}
		w, err := c.store.ClaimSlots(slots, append(taken, item.Slot{SessionPK: sessionPK, Created: s.CreatedAt}))
		if err != nil {
			return room{}, err
		}
		lost, err := c.store.update(ctx, c.store.SlotsKey(user.PK, user.SK), w)
		switch {
		case err != nil:
			return room{}, fmt.Errorf("take a session slot: %w", err)
		case !lost:
			return made, nil
		case attempt == 10:
			return room{}, errors.New("take a session slot: the user's slots item kept changing (ten logins at once?)")
		}
		av, err := c.store.get(ctx, c.store.SlotsKey(user.PK, user.SK))
		if err == nil {
			slots, err = c.store.DecodeSlots(av)
		}
		if err != nil {
			return room{}, fmt.Errorf("take a session slot: %w", err)
		}
	}
}

// liveSlots reads the sessions of slots, in one BatchGetItem, and returns
// those that are live and not revoked for a user whose version is version,
// by session partition key, and which of the slots' sessions it found at
// all.
func (c *core) liveSlots(ctx context.Context, slots []item.Slot, version int64, now time.Time) (live map[string]item.Session, found map[string]bool, err error) {
	keys := make([]map[string]types.AttributeValue, 0, 2*len(slots))
	for _, slot := range slots {
		keys = append(keys, c.store.SessionKey(slot.SessionPK))
		if c.users.mrec {
			keys = append(keys, c.store.EndKey(slot.SessionPK))
		}
	}
	items, err := c.store.batchGetMany(ctx, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("read the slots' sessions: %w", err)
	}
	ended := map[string]bool{}
	var sessions []item.Session
	for _, av := range items {
		if attrS(av, item.AttrKind) == item.KindEnded {
			ended[c.store.sessionPKOfEnd(av)] = true
			continue
		}
		if s, ok := c.store.decodeSession(ctx, av); ok {
			sessions = append(sessions, s)
		}
	}
	live, found = map[string]item.Session{}, map[string]bool{}
	for _, s := range sessions {
		found[s.SessionPK] = true
		if c.life.live(s, now) && c.revoked(s, version, ended[s.SessionPK]) == "" {
			live[s.SessionPK] = s
		}
	}
	return live, found, nil
}

// evict ends the sessions that a claim took the slots of, before the
// session that took them is written: it deletes the live ones, and in MREC
// records their ends, so that no Region's refresh brings them back; it
// writes the voids, and a session that got written before its void did is
// ended as a live one. All of it runs beside the new session's index
// write, at no round trip of its own.
func (c *core) evict(ctx context.Context, made room) error {
	errs := make([]error, len(made.evicted)+len(made.voided))
	var wg sync.WaitGroup
	for i, e := range made.evicted {
		wg.Go(func() {
			if errs[i] = c.recordEnd(ctx, e); errs[i] != nil {
				return
			}
			if _, _, errs[i] = c.store.deleteSession(ctx, e); errs[i] == nil {
				c.events.emit(ctx, Event{Kind: EventEvicted, SessionID: e.ID, User: userOf(e), Reason: ReasonSessionLimit})
			}
		})
	}
	for i, sessionPK := range made.voided {
		wg.Go(func() {
			errs[len(made.evicted)+i] = c.void(ctx, sessionPK)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("end a session the session limit ended: %w", err)
	}
	return nil
}

// void writes a void under the key of the session under sessionPK, whose
// login is on its way; or, if the session got there first, ends it.
func (c *core) void(ctx context.Context, sessionPK string) error {
	until := c.now().Add(c.life.absolute) // past any write of the login's
	taken, err := c.store.putNew(ctx, c.store.EncodeVoid(sessionPK, until))
	if err != nil || !taken {
		return err
	}
	s, found, err := c.endSession(ctx, sessionPK, item.Session{})
	if found {
		c.events.emit(ctx, Event{Kind: EventEvicted, SessionID: s.ID, User: userOf(s), Reason: ReasonSessionLimit})
	}
	return err
}

// overtaken reports whether err, from writing the session under sessionPK,
// means that a racing login took its slot first and voided its key (see
// claim). The login then ends as if its session had been written and
// evicted at once, which is what a moment's difference in timing would
// have done: its token is refused from its first request.
func (c *core) overtaken(ctx context.Context, sessionPK string, err error) bool {
	if c.limit.max == 0 || !errors.Is(err, errTaken) {
		return false
	}
	av, rerr := c.store.get(ctx, c.store.SessionKey(sessionPK))
	return rerr == nil && attrS(av, item.AttrKind) == item.KindVoid
}
