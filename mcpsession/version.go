package mcpsession

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
// the server's user item.

// loadServer is the sessions' LoadUser: the server's user, with the
// version of this instance's copy, for every request and every initialize.
// Any other key is no user: a web app's session on the same table is
// refused without a read.
func (m *Manager) loadServer(ctx context.Context, key ddbsession.UserKey) (struct{}, int64, error) {
	if key != m.server {
		return struct{}{}, 0, ddbsession.ErrUserNotFound
	}
	v, err := m.version.current(ctx)
	switch {
	case err != nil:
		return struct{}{}, 0, err
	case !v.found:
		return struct{}{}, 0, ddbsession.ErrUserNotFound
	}
	return struct{}{}, v.version, nil
}

// version is what one read of the server's user item found: whether the
// item is there, and its sessions version; and when the read began and
// ended on the monotonic clock.
type version struct {
	found        bool
	version      int64
	began, ended int64
}

// serverVersion is the copy: the version that the latest read found, and
// the re-read under way, which every request that finds the copy stale
// waits for, so that an instance reads once per RevokeEveryoneWithin
// however many requests arrive then.
type serverVersion struct {
	client  ddbsession.Client
	table   string
	layout  ddbsession.Layout
	server  ddbsession.UserKey
	within  time.Duration // Limits.RevokeEveryoneWithin
	timeout time.Duration // Limits.StoreTimeout
	mono    func() int64

	latest atomic.Pointer[version] // nil until the first read
	mu     sync.Mutex
	flight *flight // the re-read under way, nil for none; under mu
}

// flight is one re-read, which the requests that wait for it share.
type flight struct {
	done chan struct{}
	v    version
	err  error
}

// newServerVersion returns the copy of the server's version for the
// sessions of cfg, unread; mono nil is the machine's monotonic clock.
func newServerVersion(cfg ddbsession.Config[struct{}], layout ddbsession.Layout, server ddbsession.UserKey, mono func() int64) *serverVersion {
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
	return &serverVersion{client: cfg.Client, table: cfg.Table, layout: layout, server: server, within: within, timeout: timeout, mono: mono}
}

// current returns the copy, read again first if it is RevokeEveryoneWithin
// old.
func (c *serverVersion) current(ctx context.Context) (version, error) {
	if v := c.latest.Load(); v != nil && c.mono()-v.began < int64(c.within) {
		return *v, nil
	}
	c.mu.Lock()
	if v := c.latest.Load(); v != nil && c.mono()-v.began < int64(c.within) {
		c.mu.Unlock()
		return *v, nil // another request's re-read ended meanwhile
	}
	f := c.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		// The read is this request's, but its answer is every waiting
		// one's: a client that goes away must not fail the others.
		rctx, cancel := context.WithoutCancel(ctx), func() {}
		if deadline, ok := ctx.Deadline(); ok {
			rctx, cancel = context.WithDeadline(rctx, deadline)
		}
		f.v, f.err = c.read(rctx)
		cancel()
		c.mu.Lock()
		c.flight = nil
		c.mu.Unlock()
		close(f.done)
		return f.v, f.err
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		return version{}, fmt.Errorf("mcpsession: wait for the server's user item: %w", ctx.Err())
	}
}

// read reads the server's user item and its version (ddbitem's
// RevocationKeys, in one strongly consistent BatchGetItem) within
// StoreTimeout, takes what it found into the copy, and returns it.
func (c *serverVersion) read(ctx context.Context) (version, error) {
	keys, err := ddbitem.RevocationKeys(c.layout, c.server)
	if err != nil {
		return version{}, fmt.Errorf("mcpsession: %w", err)
	}
	// Inside a request, ddbsession's deadline for it comes first.
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	began := c.mono()
	in := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{c.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}}
	var found []map[string]types.AttributeValue
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		out, err := c.client.BatchGetItem(ctx, in)
		if err != nil {
			return version{}, fmt.Errorf("mcpsession: read the server's user item: %w", err)
		}
		found = append(found, out.Responses[c.table]...)
		if len(out.UnprocessedKeys[c.table].Keys) == 0 {
			break
		}
		in = &dynamodb.BatchGetItemInput{RequestItems: out.UnprocessedKeys}
		select {
		case <-ctx.Done():
			return version{}, fmt.Errorf("mcpsession: read the server's user item: unprocessed keys: %w", ctx.Err())
		case <-time.After(pause):
		}
	}
	rev, userItem, err := ddbitem.ReadRevocation(c.layout, c.server, found)
	if err != nil {
		return version{}, fmt.Errorf("mcpsession: read the server's user item: %w", err)
	}
	v := version{found: userItem != nil, version: rev.Version, began: began, ended: c.mono()}
	c.seen(v)
	return v, nil
}

// seen takes v into the copy. A read that began after the copy's ended
// saw a later state, whatever it holds (the server's user item deleted, or
// made anew with another version); of two reads that overlapped, the
// higher version is the later, since only a RevokeAll changes it while the
// item lives, and raises it.
func (c *serverVersion) seen(v version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.latest.Load()
	switch {
	case cur == nil || v.began >= cur.ended:
	case v.ended <= cur.began:
		return // older than the copy
	case !v.found || (cur.found && cur.version >= v.version):
		v.found, v.version = cur.found, cur.version
		fallthrough
	default:
		v.began, v.ended = max(v.began, cur.began), max(v.ended, cur.ended)
	}
	c.latest.Store(&v)
}

// monoBase anchors monotonic instants.
var monoBase = time.Now()

// machineMono is the machine's monotonic clock, in nanoseconds since
// monoBase, and never 0; no skew or injected Config.Now moves it.
func machineMono() int64 { return int64(time.Since(monoBase)) + 1 }
