package ddbsession

import (
	"sync/atomic"
	"time"
)

// This file holds this instance's copy of the table's global revocation
// generation, which RevokeEveryone raises and every request compares with.

// everyone is this instance's copy of the table's global revocation
// generation, which [Manager.RevokeEveryone] raises. A request reads the
// global item with its session and user, in the same round trip, once the
// copy is RevokeEveryoneWithin old; the requests in between compare with
// the copy and read nothing more. The copy's age is measured on the
// machine's monotonic clock, which no skew or injected Config.Now moves.
type everyone struct {
	within time.Duration // Limits.RevokeEveryoneWithin
	clock  func() int64  // the monotonic clock: mono, or a test's
	gen    atomic.Int64
	readAt atomic.Int64 // monotonic nanoseconds at which the last read began; 0: never read
}

// stale reports whether the copy is too old to decide on without a read.
func (e *everyone) stale() bool {
	r := e.readAt.Load()
	return r == 0 || e.clock()-r >= int64(e.within)
}

// seen takes the generation that a read begun at began found. The
// generation only rises, so the higher of two reads is the truer.
func (e *everyone) seen(gen, began int64) {
	for g := e.gen.Load(); gen > g && !e.gen.CompareAndSwap(g, gen); g = e.gen.Load() {
	}
	for r := e.readAt.Load(); began > r && !e.readAt.CompareAndSwap(r, began); r = e.readAt.Load() {
	}
}
