package ddbsession

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file writes the app's data of a session: a small value, as JSON, in
// the session item, read with the session at no extra call.

// UpdateData changes the data of the session in ctx (as RequireSession or
// LoadSession put it there): update gets the data as it stands (nil for
// none) and returns the new value, which UpdateData encodes as JSON (a
// json.RawMessage or []byte as it is; nil removes it). Requests read the
// data with their session, in [Session.Data], at no extra call; a change
// costs one conditional UpdateItem, and no change none.
//
// Racing writers never lose each other's changes: the loser reads the
// session again and calls update again, so update must be a function of its
// argument alone. Data is never written into a session that ended
// meanwhile, which gets [ErrNoSession]. It is at most [ddbitem.MaxData]
// bytes of JSON, which keeps the session item within one read unit.
//
//	err := sessions.UpdateData(r.Context(), func(old json.RawMessage) (any, error) {
//		var cart Cart
//		if old != nil {
//			if err := json.Unmarshal(old, &cart); err != nil {
//				return nil, err
//			}
//		}
//		cart.Items = append(cart.Items, item)
//		return cart, nil
//	})
func (m *Manager[U]) UpdateData(ctx context.Context, update func(data json.RawMessage) (any, error)) error {
	st, _ := ctx.Value(ctxKey[U]{m}).(*requestState[U])
	if st == nil {
		return ErrNoSession
	}
	return wrap("update session data", m.updateData(ctx, &st.sessionState, update))
}

func (c *core) updateData(ctx context.Context, st *sessionState, update func(json.RawMessage) (any, error)) error {
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return err
	}
	data, rev := st.session.Data, st.dataRev
	if st.stored.SessionPK == "" {
		// A context of NewContext: find the session item through its
		// index item, and read the data there.
		s, err := c.sessionByID(ctx, st.session)
		if err != nil {
			return err
		}
		st.stored, data, rev = s, dataOf(s.Data), s.DataRev
	}
	for attempt := 1; ; attempt++ {
		v, err := update(data)
		if err != nil {
			return err
		}
		next, err := encodeData(v)
		if err != nil {
			return err
		}
		if bytes.Equal(next, data) {
			return nil // unchanged: nothing to write
		}
		now, nextRev := c.now(), rand.Int64N(math.MaxInt64)+1
		conflict, err := c.store.update(ctx, c.store.SessionKey(st.stored.SessionPK), c.store.SetData(string(next), rev, nextRev, now))
		if err != nil {
			return err
		}
		if !conflict {
			st.session.Data, st.dataRev = next, nextRev
			return c.stillValid(ctx, st.stored)
		}
		// Another writer, or the session ended: read it again.
		s, found, err := c.store.getSession(ctx, st.stored.SessionPK)
		if err != nil {
			return err
		}
		if !found || c.life.ended(s, now) != "" {
			return ErrNoSession
		}
		if s.DataRev == nextRev {
			// Our write, applied, whose answer was lost and whose retry
			// met its own result.
			st.session.Data, st.dataRev = next, nextRev
			return c.stillValid(ctx, st.stored)
		}
		// Another writer won: after a pause, which spreads racing writers
		// apart, try again with its data, until the call's deadline.
		select {
		case <-ctx.Done():
			return fmt.Errorf("the session's data kept changing: %w", ctx.Err())
		case <-time.After(backoff(attempt)):
		}
		data, rev = dataOf(s.Data), s.DataRev
	}
}

// backoff is the pause before a write's attempt'th retry: doubling from
// 2 ms to at most 100 ms, with jitter, so that racing writers fall apart.
func backoff(attempt int) time.Duration {
	d := min(2*time.Millisecond<<min(attempt-1, 6), 100*time.Millisecond)
	return d/2 + rand.N(d/2+1)
}

// stillValid reads, after a write into session s, what decides whether it
// stands (its user, in MREC its end record), and returns ErrNoSession if
// it ended since the request read it (a RevokeAll, a new credential, a
// RevokeEveryone this instance knows of): the write's own condition sees
// the session item alone, and the data of an ended session is no one's.
func (c *core) stillValid(ctx context.Context, s item.Session) error {
	f, err := c.read.Read(ctx, decide.Query{Ends: []string{s.SessionPK}, UserPK: s.UserPK, UserSK: s.UserSK})
	if err != nil {
		return err
	}
	if err := c.users.decode(&f, nil); f.UserFound && err != nil {
		return err
	}
	if c.judge(&f, s) != "" {
		return ErrNoSession
	}
	return nil
}

// sessionByID reads session s's item, found by its public ID in its user's
// index partition; its SessionPK is set.
func (c *core) sessionByID(ctx context.Context, s Session) (item.Session, error) {
	if c.store.HashOnly || s.ID == "" {
		return item.Session{}, errors.New("the context has no session of RequireSession, LoadSession or Authenticate")
	}
	idx, ok, err := c.store.getIndex(ctx, s.User.PK, s.User.SK, s.ID)
	if err != nil {
		return item.Session{}, err
	}
	if !ok {
		return item.Session{}, ErrNoSession
	}
	found, live, err := c.store.getSession(ctx, idx.SessionPK)
	if err != nil {
		return item.Session{}, err
	}
	if !live || found.ID != s.ID {
		return item.Session{}, ErrNoSession
	}
	return found, nil
}

// encodeData is v as the data the session item holds: JSON, at most
// item.MaxData bytes; nil for a nil v.
func encodeData(v any) (json.RawMessage, error) {
	var raw []byte
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("encode %T: %w", v, err)
		}
	}
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("not JSON")
	}
	if len(raw) > item.MaxData {
		return nil, fmt.Errorf("%d bytes of JSON, more than the %d that keep the session item within one read unit (4 KB)", len(raw), item.MaxData)
	}
	return raw, nil
}
