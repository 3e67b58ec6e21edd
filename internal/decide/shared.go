package decide

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// shared is this instance's copy of what the whole table shares and every
// request depends on, but no request should read, since one item read by
// every request of a fleet is a ceiling for all of them: the table's
// global revocation generation, and whether the table's layout record
// agrees with this instance's layout.
//
// A Read takes a ticket. While the copy is fresh (read less than within
// ago, on the monotonic clock, which no skew or injected clock moves) the
// ticket is the copy. Once it is stale, one Read, the lead, reads the
// global item in its own round trip, with its own keys, at no call of its
// own; every Read that finds the copy stale meanwhile waits for the lead's
// read after its own: one read at a time, whatever the concurrency.
type shared struct {
	within time.Duration
	mono   func() int64 // the monotonic clock, in nanoseconds, never 0

	mu     sync.Mutex
	gen    int64
	at     time.Time // when gen's RevokeEveryone wrote it (item.GlobalRevokedAt)
	began  int64     // mono when the read behind gen began; 0: never read
	flight *flight   // the read under way, nil for none
	// beyond is the highest generation of a session that a read begun
	// after the session was seen did not find (see mayBeNewer).
	beyond int64
	// layoutOK says that a read found the layout record agreeing with
	// the Reader's; layoutErr that the last one found it differing.
	layoutOK  bool
	layoutErr error
	// keys are the record's cookie keys, nil until a read has found them;
	// rekey asks the next read to read them again (a seal of a key this
	// copy does not have).
	keys  *item.CookieKeys
	rekey bool
}

// flight is one read of the shared items, which the Reads that found the
// copy stale while it was under way wait for.
type flight struct {
	done  chan struct{}
	began int64
	err   error // set before done closes
}

// ticket is what a Read starts from: the copy's generation as it was, and
// either the flight it leads (its keys go in the Read's round trip), or
// the one it waits for, or neither for a fresh copy.
type ticket struct {
	gen         int64
	lead, wait  *flight
	layoutCheck bool // the lead reads the layout record too
}

// take returns a Read's ticket. force takes a flight even for a fresh
// copy: for a session whose generation is newer than the copy's (see
// mayBeNewer).
func (s *shared) take(force bool) (ticket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := ticket{gen: s.gen}
	fresh := s.began != 0 && s.mono()-s.began < int64(s.within)
	switch {
	case fresh && !force && s.layoutErr != nil:
		return t, s.layoutErr
	case fresh && !force:
		return t, nil
	case s.flight != nil:
		t.wait = s.flight
		return t, nil
	}
	s.flight = &flight{done: make(chan struct{}), began: s.mono()}
	t.lead, t.layoutCheck = s.flight, !s.layoutOK || s.rekey
	return t, nil
}

// land ends flight f: with err nil, the copy takes gen and at, read in the
// flight, and layoutErr and keys, what the flight found of the layout record (nil
// when it did not look).
func (s *shared) land(f *flight, gen int64, at time.Time, checked bool, keys *item.CookieKeys, layoutErr, err error) {
	s.mu.Lock()
	if err == nil {
		s.gen, s.at, s.began = gen, at, f.began
		if checked {
			s.layoutOK, s.layoutErr = layoutErr == nil, layoutErr
			s.keys, s.rekey = keys, false
		}
		err = s.layoutErr
	}
	f.err = err
	s.flight = nil
	s.mu.Unlock()
	close(f.done)
}

// everyoneAt returns when the copy's RevokeEveryone was: zero for none.
func (s *shared) everyoneAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at
}

// underWay returns the read of the shared items under way, nil for none.
// Reads run one at a time, so every other began after this call.
func (s *shared) underWay() *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flight
}

// current returns the copy's generation, or the layout's error.
func (s *shared) current() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.layoutErr
}

// mayBeNewer reports whether a session that copied generation gen may
// have read a generation newer than the copy: gen is higher, and no read
// since has found that it is not. Generations only rise in a Region, so a
// session whose generation is lower than the copy's is older than the
// copy's; a higher one is of a RevokeEveryone this instance has not seen
// yet, or, in a global table, of one that a RevokeEveryone in another
// Region overtook, which a read finds once. So a stale copy costs one
// read, and a session of an overtaken generation no more than one.
func (s *shared) mayBeNewer(gen int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return gen > s.gen && gen > s.beyond
}

// notFound records that a read begun after a session of generation gen
// was seen did not find gen: a generation that another Region's overtook,
// which no later read finds, or one still on its way here, which the
// copy's next read (within RevokeEveryoneWithin) finds.
func (s *shared) notFound(gen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		s.beyond = max(s.beyond, gen)
	}
}

// sharedKeys are the keys a lead adds to its Read's round trip.
func (r *Reader) sharedKeys(t ticket) []map[string]types.AttributeValue {
	if t.lead == nil {
		return nil
	}
	keys := []map[string]types.AttributeValue{r.Layout.GlobalKey()}
	if t.layoutCheck {
		keys = append(keys, r.Layout.LayoutKey())
	}
	return keys
}

// lead ends the flight of ticket t, whose Read's round trip found the
// shared items of items (err: the round trip failed), and returns the
// generation it read. A table without a layout record gets this Reader's,
// unless another comes first.
func (r *Reader) lead(ctx context.Context, t ticket, items map[string]map[string]types.AttributeValue, err error) (int64, error) {
	if t.lead == nil {
		return t.gen, err
	}
	var gen int64
	var at time.Time
	var layoutErr error
	var keys *item.CookieKeys
	if err == nil {
		global := items[r.id(r.Layout.GlobalKey())]
		at = item.GlobalRevokedAt(global)
		gen, err = item.DecodeGlobal(global)
		if err != nil {
			err = fmt.Errorf("the global revocation item: %w", err)
		}
	}
	if err == nil && t.layoutCheck {
		keys, layoutErr, err = r.checkLayout(ctx, items[r.id(r.Layout.LayoutKey())])
	}
	r.shared.land(t.lead, gen, at, t.layoutCheck, keys, layoutErr, err)
	if err == nil {
		err = layoutErr
	}
	return gen, err
}

// wait waits for the flight of ticket t, if any, and returns the copy's
// generation after it. A flight that failed (its Read's client went away,
// say) is not this Read's failure: it reads the shared items itself.
func (r *Reader) wait(ctx context.Context, t ticket) (int64, error) {
	if t.wait == nil {
		return t.gen, nil
	}
	select {
	case <-t.wait.done:
	case <-ctx.Done():
		return 0, r.Named(fmt.Errorf("wait for the global revocation item: %w", ctx.Err()))
	}
	if t.wait.err != nil {
		return r.Refresh(ctx, false)
	}
	return r.shared.current()
}

// Refresh reads the shared items in a round trip of their own, one Read at
// a time (a Read under way serves as this one's), unless the copy is fresh
// and force is false, and returns the copy's generation after it. It is
// how a table's user (CreateTable, say) checks the layout at start.
func (r *Reader) Refresh(ctx context.Context, force bool) (int64, error) {
	return r.refresh(ctx, force, nil)
}

// ReadAgain is a forced Refresh whose read begins after the call: it waits
// out the Read under way, which may have read the global item before the
// write the caller must see (RevokeEveryone's own, or the generation of a
// session newer than the copy), and then reads anew, or joins a Read that
// began after the call.
func (r *Reader) ReadAgain(ctx context.Context) (int64, error) {
	return r.refresh(ctx, true, r.shared.underWay())
}

// refresh is Refresh, which takes no answer from the read earlier.
func (r *Reader) refresh(ctx context.Context, force bool, earlier *flight) (int64, error) {
	for {
		t, err := r.shared.take(force)
		if err != nil || (t.lead == nil && t.wait == nil) {
			return t.gen, err
		}
		if t.wait != nil {
			select {
			case <-t.wait.done:
			case <-ctx.Done():
				return 0, r.Named(fmt.Errorf("wait for the global revocation item: %w", ctx.Err()))
			}
			if t.wait.err == nil && t.wait != earlier {
				return r.shared.current()
			}
			if ctx.Err() != nil {
				return 0, r.Named(ctx.Err())
			}
			continue // the lead failed, or read too early: lead the next flight, or wait for it
		}
		items, err := r.read(ctx, r.sharedKeys(t))
		return r.lead(ctx, t, items, err)
	}
}

// checkLayout compares the layout record av (nil: none) with the Reader's
// layout, and returns the record's cookie keys. A table without a record
// gets the Reader's, with a write that must find none, and is compared
// with whichever record won. err is the read's or the write's failure;
// layoutErr a mismatch.
func (r *Reader) checkLayout(ctx context.Context, av map[string]types.AttributeValue) (keys *item.CookieKeys, layoutErr, err error) {
	if av == nil {
		if av, err = r.recordLayout(ctx); err != nil {
			return nil, nil, err
		}
	}
	recorded, err := item.DecodeLayout(av)
	if err == nil {
		keys, err = item.DecodeCookieKeys(av)
	}
	if err != nil {
		return nil, nil, r.Named(fmt.Errorf("the layout record: %w", err))
	}
	return keys, r.Layout.CompareLayout(r.Table, recorded), nil
}

// recordLayout writes the Reader's layout as the table's record, unless
// one is there, and returns the record that stands. It has no cookie key:
// a table without a record may be one of v0.1.0, whose instances, still
// running in a rolling deploy, cannot read a sealed cookie (nor end its
// session at Logout). CreateTable gives a table it creates a key.
func (r *Reader) recordLayout(ctx context.Context) (map[string]types.AttributeValue, error) {
	av := r.Layout.EncodeLayout()
	_, err := r.Client.PutItem(ctx, putNew(r.Table, r.Layout.PartitionKey, av))
	if isConditionFailed(err) {
		return r.Get(ctx, r.Layout.LayoutKey()) // another was first
	}
	if err != nil {
		return nil, r.Named(fmt.Errorf("record the layout: %w", err))
	}
	if r.OnRecord != nil {
		r.OnRecord(ctx)
	}
	return av, nil
}

// SetMonotonic makes the Reader age its copy on clock (nanoseconds, never
// 0) instead of the one New gave it, and forget the copy, so that the next
// Read reads it on the new clock: for tests, which advance their own.
func (r *Reader) SetMonotonic(clock func() int64) {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	r.shared.mono, r.shared.began = clock, 0
}

// CheckLayout returns nil once a read has found the table's layout record
// agreeing with the Reader's, and the mismatch once one has found it
// differing; until one has, it reads the shared items (recording the
// layout in a table without a record). A write that reads nothing first
// (RevokeAll, Logout, Revoke) calls it, so that an instance of another
// layout never writes: a RevokeAll of another version attribute would
// change nothing the table's sessions copied, and report success.
func (r *Reader) CheckLayout(ctx context.Context) error {
	r.shared.mu.Lock()
	ok, err := r.shared.layoutOK, r.shared.layoutErr
	r.shared.mu.Unlock()
	if ok {
		return nil
	}
	if err != nil {
		if _, err := r.Refresh(ctx, false); err != nil {
			return err
		}
		return nil
	}
	_, err = r.Refresh(ctx, true)
	return err
}

// EveryoneAt returns when RevokeEveryone last ended every session, as the
// copy knows it: zero for never, or before a read.
func (r *Reader) EveryoneAt() time.Time { return r.shared.everyoneAt() }

// CookieKeys returns the cookie keys of the table's layout record, as the
// last read of it found them: nil before one has (CheckLayout reads it).
func (r *Reader) CookieKeys() *item.CookieKeys {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	return r.shared.keys
}

// Rekey asks the next read of the shared items to read the cookie keys
// again: a credential came sealed under a key this copy does not have, one
// added since it was read. Until that read, such credentials cost the two
// reads of a token alone.
func (r *Reader) Rekey() {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	r.shared.rekey = true
}
