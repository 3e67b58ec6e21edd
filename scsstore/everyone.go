package scsstore

import (
	"sync/atomic"
	"time"
)

// everyone is this instance's copy of the table's global revocation
// generation, which ddbsession's Manager.RevokeEveryone raises, kept as
// the core keeps its own: Login and LoadUser read the global item with the
// user, in the same BatchGetItem, once the copy is RevokeEveryoneWithin
// old, and use the copy in between. The copy's age
// is measured on the machine's monotonic clock, which no skew or injected
// Config.Now moves.
type everyone struct {
	within time.Duration // Config.RevokeEveryoneWithin
	mono   func() int64  // the monotonic clock; tests inject their own
	gen    atomic.Int64
	readAt atomic.Int64 // monotonic nanoseconds at which the last read began; 0: never read
}

// stale reports whether the copy is too old to decide on without a read.
func (e *everyone) stale() bool {
	r := e.readAt.Load()
	return r == 0 || e.mono()-r >= int64(e.within)
}

// seen takes the generation that a read begun at began found. The
// generation only rises, so the higher of two racing reads is the truer.
func (e *everyone) seen(gen, began int64) {
	for g := e.gen.Load(); gen > g && !e.gen.CompareAndSwap(g, gen); g = e.gen.Load() {
	}
	for r := e.readAt.Load(); began > r && !e.readAt.CompareAndSwap(r, began); r = e.readAt.Load() {
	}
}

// monoBase anchors monotonic instants.
var monoBase = time.Now()

// mono is the monotonic clock, in nanoseconds since monoBase, and never 0.
func mono() int64 { return int64(time.Since(monoBase)) + 1 }
