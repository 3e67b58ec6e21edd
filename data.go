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

// This file writes and reads the app's data of a session: a value, as
// JSON, in the session item, read with the session at no extra call, or,
// over ddbitem.MaxData, in a data item of its own that Data reads (see
// internal/item's data.go).

// UpdateData changes the data of the session in ctx: update gets the data
// as it stands (nil for none) and returns the new value, encoded as JSON
// (a json.RawMessage or []byte as it is; nil removes it). Up to
// [ddbitem.MaxData] (2,048) bytes live in the session item, read with it
// ([Session.Data]), up to 64 KiB in an item of their own ([Manager.Data]).
// A change costs one conditional UpdateItem (and a PutItem for data kept
// apart). Racing writers never lose each other's changes: the loser reads
// the session and calls update again, so update must be a function of its
// argument alone. Data is never written into a session that ended
// meanwhile, which gets [ErrNoSession].
//
//	err := sessions.UpdateData(r.Context(), func(old json.RawMessage) (any, error) {
//		var cart Cart
//		if old != nil && json.Unmarshal(old, &cart) != nil {
//			return nil, errors.New("not a cart")
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
	if st.stored.SessionPK == "" {
		// A context of NewContext: find the session item through its
		// index item, and read the data there.
		s, err := c.sessionByID(ctx, st.session)
		if err != nil {
			return err
		}
		st.stored, st.session.Data, st.dataRev, st.apart = s, dataOf(s.Data), s.DataRev, s.DataApart
	}
	data, err := c.data(ctx, st)
	if err != nil {
		return err
	}
	rev, apart := st.dataRev, st.apart
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
		nextApart := len(next) > item.MaxData
		inline := string(next)
		if nextApart {
			// The data item first: the session item names it only once
			// it is there, and a writer that loses leaves it to its TTL.
			inline = ""
			until := st.stored.CreatedAt.Add(c.life.absolute)
			if err := c.store.put(ctx, c.store.EncodeData(st.stored.SessionPK, nextRev, string(next), until)); err != nil {
				return err
			}
		}
		conflict, err := c.store.update(ctx, c.store.SessionKey(st.stored.SessionPK), c.store.SetData(inline, nextApart, rev, nextRev, now))
		if err != nil {
			return err
		}
		if !conflict {
			if apart {
				c.store.deleteData(ctx, st.stored.SessionPK, rev)
			}
			st.setData(next, nextRev, nextApart)
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
			st.setData(next, nextRev, nextApart)
			return c.stillValid(ctx, st.stored)
		}
		if nextApart {
			c.store.deleteData(ctx, st.stored.SessionPK, nextRev)
		}
		// Another writer won: after a pause, which spreads racing writers
		// apart, try again with its data, until the call's deadline.
		select {
		case <-ctx.Done():
			return fmt.Errorf("the session's data kept changing: %w", ctx.Err())
		case <-time.After(backoff(attempt)):
		}
		st.session.Data, st.dataRev, st.apart, st.loaded = dataOf(s.Data), s.DataRev, s.DataApart, nil
		if data, err = c.data(ctx, st); err != nil {
			return err
		}
		rev, apart = st.dataRev, st.apart
	}
}

// Data returns the data of the session in ctx: [Session.Data], or, over
// [ddbitem.MaxData], one strongly consistent GetItem's, once per request.
func (m *Manager[U]) Data(ctx context.Context) (json.RawMessage, error) {
	st, _ := ctx.Value(ctxKey[U]{m}).(*requestState[U])
	if st == nil {
		return nil, ErrNoSession
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	data, err := m.data(ctx, &st.sessionState)
	return data, wrap("read session data", err)
}

// data returns st's data: as read with its session, or from its data item.
// A data item that is not there was replaced by a racing write, which a
// read of the session item again finds; or, in MREC, has not arrived yet.
func (c *core) data(ctx context.Context, st *sessionState) (json.RawMessage, error) {
	switch {
	case !st.apart:
		return st.session.Data, nil
	case st.loaded != nil:
		return st.loaded, nil
	}
	for range 3 {
		av, err := c.store.get(ctx, c.store.DataKey(st.stored.SessionPK, st.dataRev))
		if err != nil {
			return nil, err
		}
		if av != nil {
			data, err := item.DecodeData(av)
			if err != nil {
				return nil, c.store.named(fmt.Errorf("a session's data item: %w", err))
			}
			st.loaded = json.RawMessage(data)
			return st.loaded, nil
		}
		s, found, err := c.store.getSession(ctx, st.stored.SessionPK)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, ErrNoSession
		}
		st.session.Data, st.dataRev, st.apart = dataOf(s.Data), s.DataRev, s.DataApart
		if !st.apart {
			return st.session.Data, nil
		}
	}
	return nil, c.store.named(errors.New("a session's data item is not there (in MREC, it may not have arrived yet: try again)"))
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

// encodeData is v as the data the session holds: JSON, at most
// item.MaxDataApart bytes; nil for a nil v.
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
	if len(raw) > item.MaxDataApart {
		return nil, fmt.Errorf("%d bytes of JSON, more than the %d a session's data may hold", len(raw), item.MaxDataApart)
	}
	return raw, nil
}
