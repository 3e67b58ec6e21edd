package scsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alexedwards/scs/v2"
)

// Phase is a step of a move from another scs store (the old store, such as
// scs's redisstore) to a [Store], without signing anyone out. Deploy the
// app wrapped in a Migration in PhaseOld first (replacing the unwrapped
// app), then each phase in this order, one rolling deploy each; each can
// be rolled back to the one before it. docs/migrate.md says why, how long
// to stay in each and what each costs.
type Phase string

const (
	// PhaseOld finds and commits in the old store alone, as the unwrapped
	// app does; with New set, its destroy buries the token in DynamoDB
	// first, as the later phases' does, so that a PhaseDual instance
	// beside it cannot revive a session it destroyed. Without New it is
	// the old store alone, and gives no such guarantee.
	PhaseOld Phase = "old"
	// PhaseDual writes every commit to the old store, which stays the
	// home of the sessions it holds; DynamoDB decides, and gets the
	// commits of, only the sessions it holds an item of (moved there in
	// PhaseDynamoDBFirst, or destroyed). It serves beside PhaseOld
	// instances and beside PhaseDynamoDBFirst ones.
	PhaseDual Phase = "dual"
	// PhaseDynamoDBFirst reads DynamoDB, and on a miss the old store: a
	// session found there moves, on that first touch, into DynamoDB and
	// out of the old store. New sessions start in DynamoDB.
	PhaseDynamoDBFirst Phase = "dynamodb-first"
	// PhaseDynamoDBOnly uses the Store alone. Deploy it once no session
	// lives only in the old store: after PhaseDynamoDBFirst has served
	// for the old sessions' Lifetime, or after `ddbsession import`.
	PhaseDynamoDBOnly Phase = "dynamodb-only"
)

// MigrationConfig configures a [Migration].
type MigrationConfig struct {
	// Old is the store being left. Required but in PhaseDynamoDBOnly. Its
	// CtxStore methods are used if it has them.
	Old scs.Store

	// New is the Store being moved to. Required but in PhaseOld, where
	// it should be set too (see PhaseOld); its Layout must not be MREC
	// in PhaseDual and PhaseDynamoDBFirst, whose guarantees rest on
	// strongly consistent reads and conditions that see every write
	// (docs/migrate.md, "Global tables"). The old
	// sessions' data is read with its Config.Codec, which must be the
	// SessionManager's, to learn their absolute expiry.
	New *Store

	// Phase selects the step; see [Phase].
	Phase Phase

	// Lifetime is the longest an old session lives: the SessionManager's
	// Lifetime. A session destroyed in the dual and later phases leaves a
	// tombstone in DynamoDB this long (an hour at least), so that no copy
	// of it that the old store may still hold can come back. Default 24
	// hours, scs's default.
	Lifetime time.Duration

	// IdleTimeout is the SessionManager's IdleTimeout; 0 for none, as in
	// scs. A session moved into DynamoDB expires at its absolute deadline
	// or IdleTimeout after the move, whichever is first, as scs's commit
	// of the moving request would have it: the old store's own idle expiry
	// cannot be read through scs.Store. Without it, a session moved by a
	// request that commits nothing would live idle to its deadline.
	IdleTimeout time.Duration
}

// Migration is an scs.Store and scs.CtxStore that moves sessions from an
// old scs store into a [Store] in the phases of [Phase]. Instances in
// adjacent phases agree, at every moment, on whether a session is alive:
//
//   - Each session has one home. DynamoDB is it for every session it holds
//     an item of (live, expired or destroyed); the old store is it only
//     for a token DynamoDB has no item of. So every phase but PhaseOld
//     reads DynamoDB first, and asks the old store only on a miss.
//   - A session is moved only from the old store (token, data, the
//     absolute expiry its data holds) into a free key: never over a
//     tombstone, never for a token the old store does not know or whose
//     expiry has passed by this instance's clock. The old store's copy is
//     then deleted.
//   - Destroy buries the token in DynamoDB first (in every phase where New
//     is set, PhaseOld too), whether or not it holds the session, then
//     deletes it from the old store: a move that read the old store before
//     the delete cannot write over the tombstone.
//   - A dual commit writes the old store, then reads DynamoDB: if the
//     session lives there, the commit is written there too; if it ended
//     there (destroyed, expired), the commit is taken back out of the old
//     store; so a request racing a destroy or a move never revives a
//     session on either side.
//
// A session that DynamoDB holds costs no lookup of the old store.
type Migration struct {
	old      scs.CtxStore
	new      *Store // nil in PhaseOld alone
	phase    Phase
	lifetime time.Duration
	idle     time.Duration
}

var _ scs.CtxStore = (*Migration)(nil)

// NewMigration validates cfg and returns a Migration; the error names the
// first invalid field.
func NewMigration(cfg MigrationConfig) (*Migration, error) {
	switch cfg.Phase {
	case PhaseOld, PhaseDual, PhaseDynamoDBFirst, PhaseDynamoDBOnly:
	default:
		return nil, fmt.Errorf("scsstore: MigrationConfig.Phase %q: want %q, %q, %q or %q",
			cfg.Phase, PhaseOld, PhaseDual, PhaseDynamoDBFirst, PhaseDynamoDBOnly)
	}
	if cfg.Old == nil && cfg.Phase != PhaseDynamoDBOnly {
		return nil, fmt.Errorf("scsstore: MigrationConfig.Old is nil in phase %q", cfg.Phase)
	}
	if cfg.New == nil && cfg.Phase != PhaseOld {
		return nil, fmt.Errorf("scsstore: MigrationConfig.New is nil in phase %q", cfg.Phase)
	}
	if cfg.New != nil && cfg.New.items.MREC && (cfg.Phase == PhaseDual || cfg.Phase == PhaseDynamoDBFirst) {
		return nil, fmt.Errorf("scsstore: MigrationConfig.New has an MREC Layout in phase %q: a move or commit in one Region can settle over a tombstone written in another; migrate on a table in one Region or on MRSC (docs/migrate.md)", cfg.Phase)
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = 24 * time.Hour
	}
	if cfg.Lifetime < 0 {
		return nil, fmt.Errorf("scsstore: MigrationConfig.Lifetime %v: must not be negative", cfg.Lifetime)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("scsstore: MigrationConfig.IdleTimeout %v: must not be negative", cfg.IdleTimeout)
	}
	m := &Migration{new: cfg.New, phase: cfg.Phase, lifetime: cfg.Lifetime, idle: cfg.IdleTimeout}
	if cfg.Old != nil {
		m.old = ctxStore(cfg.Old)
	}
	return m, nil
}

// FindCtx returns the data of the session behind token, from its home
// (see [Migration]); in PhaseDynamoDBFirst a session found in the old
// store moves into DynamoDB first. Not found and errors are as
// [Store.FindCtx] has them; an error of either store is returned.
func (m *Migration) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	switch m.phase {
	case PhaseOld:
		return m.old.FindCtx(ctx, token)
	case PhaseDynamoDBOnly:
		return m.new.FindCtx(ctx, token)
	}
	if !validToken(token) {
		return nil, false, nil
	}
	pk := m.new.items.pk(token)
	sess, st, err := m.new.lookup(ctx, pk)
	if err != nil || st != free {
		return sess.data, st == live, err
	}
	b, expires, ok, err := m.findOld(ctx, token)
	if err != nil || !ok || m.phase == PhaseDual {
		return b, ok, err
	}
	moving := session{data: b, expires: expires}
	moved, err := m.new.put(ctx, pk, m.new.items.move(pk, moving), moving)
	if err != nil {
		return nil, false, err
	}
	if !moved {
		// Another request moved or buried it since the lookup: the
		// table's word is final.
		sess, st, err := m.new.lookup(ctx, pk)
		return sess.data, st == live, err
	}
	if err := m.old.DeleteCtx(ctx, token); err != nil {
		return nil, false, fmt.Errorf("scsstore: delete moved session from the old store: %w", err)
	}
	return b, true, nil
}

// findOld finds token in the old store and reads the expiry it moves
// with: the absolute deadline its data holds, or IdleTimeout from now if
// that is first. A session the old store still has after its deadline by
// this instance's clock, or whose data the Codec cannot read, is not found.
func (m *Migration) findOld(ctx context.Context, token string) (b []byte, expires int64, found bool, err error) {
	b, found, err = m.old.FindCtx(ctx, token)
	if err != nil {
		return nil, 0, false, fmt.Errorf("scsstore: find session in the old store: %w", err)
	}
	if !found {
		return nil, 0, false, nil
	}
	deadline, _, err := m.new.codec.Decode(b)
	now := m.new.now()
	if err != nil || !now.Before(deadline) {
		return nil, 0, false, nil
	}
	if idle := now.Add(m.idle); m.idle > 0 && idle.Before(deadline) {
		deadline = idle
	}
	return b, deadline.Unix(), true, nil
}

// CommitCtx writes the session to its home: in PhaseDual the old store
// always, and DynamoDB too where the session lives there; in
// PhaseDynamoDBFirst and PhaseDynamoDBOnly DynamoDB alone, as
// [Store.CommitCtx] does.
func (m *Migration) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	switch m.phase {
	case PhaseOld:
		return m.old.CommitCtx(ctx, token, b, expiry)
	case PhaseDynamoDBFirst, PhaseDynamoDBOnly:
		return m.new.CommitCtx(ctx, token, b, expiry)
	}
	if !validToken(token) {
		return errors.New("scsstore: commit session: the token is not an scs token")
	}
	if err := m.old.CommitCtx(ctx, token, b, expiry); err != nil {
		return fmt.Errorf("scsstore: commit session to the old store: %w", err)
	}
	// Read after the write: a destroy or a move that the read misses
	// comes after the write, and deletes it from the old store itself.
	pk := m.new.items.pk(token)
	_, st, err := m.new.lookup(ctx, pk)
	if err != nil || st == free {
		return err
	}
	if st == live {
		sess := session{data: b, expires: expiry.Unix()}
		mirrored, err := m.new.put(ctx, pk, m.new.items.mirror(pk, sess), sess)
		if err != nil || mirrored {
			return err
		}
	}
	// The session ended in its home since scs loaded it: take the commit
	// back out of the old store.
	if err := m.old.DeleteCtx(ctx, token); err != nil {
		return fmt.Errorf("scsstore: delete ended session from the old store: %w", err)
	}
	return nil
}

// DeleteCtx destroys the session behind token: a tombstone in DynamoDB for
// Lifetime (wherever New is set), then, but in PhaseDynamoDBOnly, a
// delete in the old store. An error of either is returned; one of the old
// store's leaves the session destroyed for every phase but PhaseOld.
func (m *Migration) DeleteCtx(ctx context.Context, token string) error {
	if m.new == nil {
		return m.old.DeleteCtx(ctx, token)
	}
	if !validToken(token) {
		return nil
	}
	if err := m.new.bury(ctx, m.new.items.pk(token), m.new.now().Add(max(m.lifetime, tombstoneLife))); err != nil {
		return err
	}
	if m.phase == PhaseDynamoDBOnly {
		return nil
	}
	if err := m.old.DeleteCtx(ctx, token); err != nil {
		return fmt.Errorf("scsstore: delete session from the old store: %w", err)
	}
	return nil
}

// Find is FindCtx without a context.
func (m *Migration) Find(token string) ([]byte, bool, error) {
	return m.FindCtx(context.Background(), token)
}

// Commit is CommitCtx without a context.
func (m *Migration) Commit(token string, b []byte, expiry time.Time) error {
	return m.CommitCtx(context.Background(), token, b, expiry)
}

// Delete is DeleteCtx without a context.
func (m *Migration) Delete(token string) error {
	return m.DeleteCtx(context.Background(), token)
}

// ctxStore returns s's CtxStore methods, or its plain ones behind them.
func ctxStore(s scs.Store) scs.CtxStore {
	if c, ok := s.(scs.CtxStore); ok {
		return c
	}
	return plainStore{s}
}

type plainStore struct{ scs.Store }

func (p plainStore) FindCtx(_ context.Context, token string) ([]byte, bool, error) {
	return p.Find(token)
}

func (p plainStore) CommitCtx(_ context.Context, token string, b []byte, expiry time.Time) error {
	return p.Commit(token, b, expiry)
}

func (p plainStore) DeleteCtx(_ context.Context, token string) error { return p.Delete(token) }
