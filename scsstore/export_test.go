package scsstore

// NewWithMonotonicClock is New with the copy of the global revocation
// generation aged on mono, for a test to advance.
func NewWithMonotonicClock(cfg Config, mono func() int64) (*Store, error) {
	return newStore(cfg, options{monotonic: mono})
}
