package mcpsession

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// This file is this instance's copy of the server's sessions version, which
// the sessions' LoadUser returns, so that an MCP request reads its session
// item alone: every MCP session is the server user's, and DynamoDB serves
// one item at most 3,000 read units a second, which a busy fleet reading
// the server's user item in every request would pass. The copy is read
// again, with the server's user item, once it is Limits.RevokeEveryoneWithin
// old, as ddbsession keeps the global revocation generation, and at once
// after this instance's RevokeAll, and after the first initialize creates
// the server's user item. ddbitem's Reader makes the read, with the code a
// Manager reads a user with.

// loadServer is the sessions' LoadUser: the server's user, with the
// version of this instance's copy, for every request and every initialize.
// Any other key is no user: a web app's session on the same table is
// refused without a read. A server's user item without a sessions version
// has version 0, which ddbsession refuses loudly.
func (m *Manager) loadServer(ctx context.Context, key ddbsession.UserKey) (struct{}, int64, error) {
	if key != m.server {
		return struct{}{}, 0, ddbsession.ErrUserNotFound
	}
	read := m.version.current
	if ctx.Value(revokingAll{}) != nil {
		read = m.version.readAgain
	}
	v, err := read(ctx)
	switch {
	case err != nil:
		return struct{}{}, 0, err
	case !v.found:
		return struct{}{}, 0, ddbsession.ErrUserNotFound
	}
	return struct{}{}, v.version, nil
}

// revokingAll marks the context of this instance's RevokeAll. The
// sessions' Manager loads the server's version before its write and after
// it, and fails unless the two differ: each load reads anew, so that the
// copy, however old, neither hides the write nor says there is no user
// item, and the load after it renews the copy for this instance's requests.
type revokingAll struct{}

// version is what one read of the server's user item found: whether the
// item is there, and its version (ddbitem.User.Version: one number that
// changes with any part of the stamp that the server's sessions copy at
// initialize), or, for 0, why it has none; when the read began on the
// monotonic clock, and which read it was.
type version struct {
	found    bool
	version  int64
	unusable error
	began    int64
	flight   uint64
}

// serverVersion is the copy: the version that the latest read found, and
// the read under way, which every request that finds the copy stale
// waits for, so that an instance reads once per RevokeEveryoneWithin
// however many requests arrive then. Reads run one at a time, so the
// latest to end is the latest state.
type serverVersion struct {
	readerConfig ddbitem.ReaderConfig
	server       ddbsession.UserKey
	within       time.Duration // Limits.RevokeEveryoneWithin
	timeout      time.Duration // Limits.StoreTimeout
	mono         func() int64

	latest atomic.Pointer[version] // nil until the first read
	mu     sync.Mutex
	flight *flight         // the read under way, nil for none; under mu
	begun  uint64          // the reads begun; under mu
	reader *ddbitem.Reader // under mu; a read that fails replaces it (see failed)
}

// flight is one read, which the requests that wait for it share.
type flight struct {
	done chan struct{}
	n    uint64 // the reads begun, this one included
	v    version
	err  error
}

// newServerVersion returns the copy of the server's version for the
// sessions of cfg, unread; mono nil is the machine's monotonic clock.
func newServerVersion(cfg ddbsession.Config[struct{}], server ddbsession.UserKey, mono func() int64) (*serverVersion, error) {
	if mono == nil {
		mono = machineMono
	}
	// ddbsession's defaults; its New checks the values.
	within, timeout := cfg.Limits.RevokeEveryoneWithin, cfg.Limits.StoreTimeout
	if within == 0 {
		within = 10 * time.Second
	}
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	c := &serverVersion{
		readerConfig: ddbitem.ReaderConfig{
			Client: cfg.Client, Table: cfg.Table, Layout: cfg.Layout,
			// The Reader keeps a copy of the global revocation generation
			// too, and reads the global item with the user whenever that
			// copy is RevokeEveryoneWithin old. The version leaves the
			// generation out (the sessions' Manager judges it from its
			// own copy), so the Reader's never ages: it reads the global
			// item and the layout record on its first read alone, and the
			// table's busiest item is not read twice per interval.
			RevokeEveryoneWithin: time.Duration(math.MaxInt64),
			Monotonic:            mono,
		},
		server: server, within: within, timeout: timeout, mono: mono,
	}
	var err error
	c.reader, err = ddbitem.NewReader(c.readerConfig)
	return c, err
}

// current returns the copy, read again first if it is RevokeEveryoneWithin
// old.
func (c *serverVersion) current(ctx context.Context) (version, error) {
	if v := c.latest.Load(); v != nil && c.mono()-v.began < int64(c.within) {
		return *v, nil
	}
	return c.refresh(ctx, false)
}

// readAgain reads the copy again, whatever its age, in a read that begins
// after the call: after a write of this instance that the copy must show.
func (c *serverVersion) readAgain(ctx context.Context) (version, error) {
	return c.refresh(ctx, true)
}

// refresh returns the copy once a read has renewed it: one that begins
// after the call, if anew; otherwise any, and none while the copy is
// fresh. It joins the read under way that serves, or waits for one that
// does not and then begins its own.
func (c *serverVersion) refresh(ctx context.Context, anew bool) (version, error) {
	c.mu.Lock()
	begun := c.begun // a read anew is one begun after these
	for {
		v := c.latest.Load()
		switch {
		case v == nil:
		case anew && v.flight > begun,
			!anew && c.mono()-v.began < int64(c.within): // another request's read ended meanwhile
			c.mu.Unlock()
			return *v, nil
		}
		f := c.flight
		if f == nil {
			c.begun++
			f = &flight{done: make(chan struct{}), n: c.begun}
			c.flight = f
			c.mu.Unlock()
			c.lead(ctx, f)
			return f.v, f.err
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return version{}, fmt.Errorf("mcpsession: wait for the server's user item: %w", ctx.Err())
		}
		if !anew || f.n > begun {
			return f.v, f.err
		}
		c.mu.Lock() // the read began before the call: begin another
	}
}

// lead makes flight f's read, and takes what it found into the copy.
func (c *serverVersion) lead(ctx context.Context, f *flight) {
	// The read is this request's, but its answer is every waiting one's:
	// a client that goes away must not fail the others.
	rctx, cancel := context.WithoutCancel(ctx), func() {}
	if deadline, ok := ctx.Deadline(); ok {
		rctx, cancel = context.WithDeadline(rctx, deadline)
	}
	f.v, f.err = c.read(rctx, f.n)
	cancel()
	c.mu.Lock()
	if f.err == nil {
		c.latest.Store(&f.v)
	}
	c.flight = nil
	c.mu.Unlock()
	close(f.done)
}

// read reads the server's user item with the Reader, within StoreTimeout.
func (c *serverVersion) read(ctx context.Context, n uint64) (version, error) {
	// Inside a request, ddbsession's deadline for it comes first.
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	began := c.mono()
	r := c.readerNow()
	u, err := r.User(ctx, c.server)
	if err != nil {
		c.failed(r)
		return version{}, fmt.Errorf("mcpsession: read the server's user item: %w", err)
	}
	v := version{found: u.Item() != nil, version: u.Version(), began: began, flight: n}
	if v.found && v.version == 0 {
		_, v.unusable = u.Stamp() // a user item without a sessions version
	}
	return v, nil
}

// checkLayout checks the table's layout record against the sessions'
// Layout, as the Reader's first read does, at no call after the first
// that passed: for what writes to the table without a read of the
// sessions' Manager first (Revoke, RevokeAll), which would otherwise act
// on items that the table's other instances do not read.
func (c *serverVersion) checkLayout(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r := c.readerNow()
	if err := r.CheckLayout(ctx); err != nil {
		c.failed(r)
		return fmt.Errorf("mcpsession: %w", err)
	}
	return nil
}

// readerNow returns the Reader to read with.
func (c *serverVersion) readerNow() *ddbitem.Reader {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reader
}

// failed replaces r, whose read failed, with a new Reader. A Reader keeps
// what its first read found of the table's layout record as long as its
// copy of the global generation, which here never ages: the next read
// goes to one that looks again, so that a layout record put right is
// seen without a restart, as the sessions' Manager sees it.
func (c *serverVersion) failed(r *ddbitem.Reader) {
	fresh, err := ddbitem.NewReader(c.readerConfig)
	if err != nil {
		return // unreachable: New made one of the same config
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reader == r {
		c.reader = fresh
	}
}

// monoBase anchors monotonic instants.
var monoBase = time.Now()

// machineMono is the machine's monotonic clock, in nanoseconds since
// monoBase, and never 0; no skew or injected Config.Now moves it.
func machineMono() int64 { return int64(time.Since(monoBase)) + 1 }
