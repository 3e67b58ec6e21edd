package ddbsession

// SetMonotonicClock makes m age its copy of the global revocation
// generation on clock (nanoseconds, never 0), which the test advances,
// rather than on the machine's monotonic clock; the copy counts as never
// read, so that m's next call reads it on the new clock. Call it before m
// serves.
func SetMonotonicClock[U any](m *Manager[U], clock func() int64) { m.read.SetMonotonic(clock) }
