package ddbtest

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a test's wall clock: it stands still until the test moves it,
// so that an expiry, a refresh or a rate limit happens at a step the test
// names, never in a real window that a busy machine misses. Its Now is the
// func() time.Time that the configs take (ddbsession's Config.Now). It is
// safe for concurrent use: requests read it while the test moves it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads t until it is moved.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d, or back for a negative d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Mono is a test's monotonic clock: the func() int64 that ages an
// instance's copy of the table's shared items (ddbsession's
// SetMonotonicClock, scsstore's and mcpsession's NewWithMonotonicClock,
// ddbitem's ReaderConfig.Monotonic), which no skew of the wall clock
// moves, so a test moves it apart from its [Clock]. Those take 0 for "never
// read", so Now starts at 1. The zero value is ready, and it is safe for
// concurrent use.
type Mono struct{ ns atomic.Int64 }

// Now returns the clock's reading in nanoseconds, never 0.
func (m *Mono) Now() int64 { return m.ns.Load() + 1 }

// Advance moves the clock on by d.
func (m *Mono) Advance(d time.Duration) { m.ns.Add(int64(d)) }
