//go:build !unix

package main

// lockFile does not lock where flock is missing: two checks at once on
// such a machine may still collide in the shared module cache.
func lockFile(name string, wait bool) (unlock func(), err error) { return func() {}, nil }
