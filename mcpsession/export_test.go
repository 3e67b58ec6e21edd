package mcpsession

// NewWithMonotonicClock is New with the copy of the server's version aged
// on mono (nanoseconds, never 0), for a test to advance.
func NewWithMonotonicClock(cfg Config, mono func() int64) (*Manager, error) {
	return newManager(cfg, options{mono: mono})
}

// NewReadingServerPerRequest is New wired as before the per-instance copy:
// every request reads the server's user item with its session.
func NewReadingServerPerRequest(cfg Config) (*Manager, error) {
	return newManager(cfg, options{readServerPerRequest: true})
}
