package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file keeps a user's sessions under Limits.MaxSessions: a login takes
// a slot in the user's state item, ending the oldest session or refusing
// when none is free, and a session lives only while it holds its slot.

// ErrTooManySessions is returned by a login of a user who has
// [Limits.MaxSessions] sessions already, with [Limits.RefuseAtMaxSessions]
// set. The login wrote no session; the sessions its request carried have
// ended all the same, as every login ends them.
var ErrTooManySessions = errors.New("ddbsession: the user has as many sessions as Limits.MaxSessions allows")

// maxSessionsLimit bounds Limits.MaxSessions: the state item, read with
// every session, holds one entry of about 45 bytes per slot, and must stay
// well within the 4 KB of one read unit.
const maxSessionsLimit = 100

// sessionLimit is Limits.MaxSessions and Limits.RefuseAtMaxSessions, and
// what taking a slot needs.
type sessionLimit struct {
	max    int // 0: no limit
	refuse bool
	store  *store
	life   lifetimes
	// young is how young a slot must be to count as a login on its way
	// (Limits.StoreTimeout and inFlight).
	young  time.Duration
	events events
	logger *slog.Logger
}

// inFlight is how young a slot must be to count as a login still on its
// way, whose session a query of the index may not show yet: a slot is taken
// before the session is written, within the login's StoreTimeout. The
// margin covers the clocks of two instances disagreeing.
const inFlight = 30 * time.Second

// claim gives session s, about to be created for user, a slot among the
// sessions the limit counts, in the state item that the login read as
// state (its cutoff is cutoff), and returns the index items of the sessions
// it ended to make room. ended are the sessions the login has just ended,
// whose slots are free. The write is conditional on the state item being as
// read, so two racing logins never both take the last slot: the loser reads
// the item again and decides anew. s copies the revision its write made.
func (l *sessionLimit) claim(ctx context.Context, user UserKey, state item.State, cutoff int64, s *item.Session, ended []item.Session, now time.Time) (evicted []item.Session, err error) {
	for attempt := 1; ; attempt++ {
		slots := maps.Clone(state.Sessions)
		if slots == nil {
			slots = map[string]int64{}
		}
		for _, e := range ended {
			delete(slots, e.ID)
		}
		var live map[string]item.Session
		if len(slots) >= l.max {
			// Full, maybe of sessions that ended some other way (a Logout,
			// a Revoke, an expiry): those give their slots up.
			if live, err = l.liveSessions(ctx, user, cutoff, now); err != nil {
				return nil, err
			}
			for id, created := range slots {
				if _, ok := live[id]; !ok && now.Sub(time.UnixMilli(created)) > l.young {
					delete(slots, id)
				}
			}
		}
		evicted = evicted[:0]
		if len(slots) >= l.max && l.refuse {
			return nil, ErrTooManySessions
		}
		for _, id := range oldestFirst(slots)[:max(len(slots)-l.max+1, 0)] {
			delete(slots, id)
			if e, ok := live[id]; ok {
				evicted = append(evicted, e)
			}
		}
		slots[s.ID] = s.CreatedAt.UnixMilli()
		taken, err := l.store.update(ctx, l.store.StateKey(user.PK, user.SK), l.store.Count(state, slots))
		switch {
		case err != nil:
			return nil, fmt.Errorf("take a session slot: %w", err)
		case !taken:
			s.SlotRev = state.Rev + 1
			return evicted, nil
		case attempt == 10:
			return nil, errors.New("take a session slot: the user's state item kept changing (ten logins at once?)")
		}
		av, err := l.store.getState(ctx, user.PK, user.SK)
		if err == nil {
			state, err = item.DecodeState(av)
		}
		if err != nil {
			return nil, fmt.Errorf("take a session slot: %w", err)
		}
	}
}

// liveSessions returns user's live sessions by ID, from the index items
// that List reads.
func (l *sessionLimit) liveSessions(ctx context.Context, user UserKey, cutoff int64, now time.Time) (map[string]item.Session, error) {
	found, err := l.store.queryIndex(ctx, user.PK, user.SK, time.UnixMilli(cutoff), now)
	if err != nil {
		return nil, err
	}
	live := make(map[string]item.Session, len(found))
	for _, s := range found {
		if l.life.live(s, now) {
			live[s.ID] = s
		}
	}
	return live, nil
}

// oldestFirst returns the IDs of slots by creation, oldest first.
func oldestFirst(slots map[string]int64) []string {
	return slices.SortedFunc(maps.Keys(slots), func(a, b string) int {
		return cmp.Or(cmp.Compare(slots[a], slots[b]), cmp.Compare(a, b))
	})
}

// endEvicted deletes the sessions that claim took the slots of. They are
// dead already, since a session lives only while it holds its slot: this
// clears them from List and the table, and a failure is only logged.
func (l *sessionLimit) endEvicted(ctx context.Context, evicted []item.Session) {
	for _, e := range evicted {
		if _, _, err := l.store.deleteSession(ctx, e); err != nil {
			l.logger.ErrorContext(ctx, "ddbsession: delete a session the session limit ended", "sid", e.ID, "err", err)
		}
		l.events.emit(ctx, Event{Kind: EventEvicted, SessionID: e.ID, User: userOf(e), Reason: ReasonSessionLimit})
	}
}
