package scsstore

// SetMonotonicClock makes s measure the age of its copy of the global
// revocation generation on mono, for a test to advance; call it before s
// serves anything.
func SetMonotonicClock(s *Store, mono func() int64) { s.everyone.mono = mono }
