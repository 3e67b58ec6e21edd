package ddbsession

import (
	"encoding/binary"
	"time"
)

// SetMonotonicClock makes m age its copy of the global revocation
// generation on clock (nanoseconds, never 0), which the test advances,
// rather than on the machine's monotonic clock; the copy counts as never
// read, so that m's next call reads it on the new clock. Call it before m
// serves.
func SetMonotonicClock[U any](m *Manager[U], clock func() int64) { m.read.SetMonotonic(clock) }

// DPoPCacheLens is how many proofs m's replay caches hold: requests' and
// logins'.
func DPoPCacheLens[U any](m *Manager[U]) (requests, logins int) {
	m.dpop.seen.mu.Lock()
	requests = len(m.dpop.seen.seen)
	m.dpop.seen.mu.Unlock()
	m.dpop.logins.mu.Lock()
	defer m.dpop.logins.mu.Unlock()
	return requests, len(m.dpop.logins.seen)
}

// FillDPoPLoginCache fills m's login proofs' cache with made-up proofs
// live until until, as a flood of logins with proofs would: signing that
// many in a test would take minutes.
func FillDPoPLoginCache[U any](m *Manager[U], until time.Time) {
	c := &m.dpop.logins
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; len(c.seen) < c.max; i++ {
		var id [16]byte
		binary.BigEndian.PutUint64(id[8:], uint64(i)+1)
		id[0] = 0xff
		c.seen[id] = until.Unix()
	}
}
