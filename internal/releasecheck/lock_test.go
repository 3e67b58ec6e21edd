//go:build unix

package main

import (
	"path/filepath"
	"testing"
	"time"
)

// Two checks at once share the module cache: the second waits for the
// first's lock, and gets it once the first lets go.
//
// Not parallel: a flock belongs to the open file, which a process that
// another test forks holds too until it execs, so a lock let go can stay
// taken a moment longer. For the same reason the second lock, once the
// first is let go, waits rather than fails at once, as a check does; a
// lock never let go fails the test after a minute instead of hanging it.
func TestModCacheLockExcludesASecondCheck(t *testing.T) {
	name := filepath.Join(t.TempDir(), "modcache.lock")
	unlock, err := lockFile(name, true)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := lockFile(name, false); err == nil {
		second()
		t.Fatal("a second lock while the first is held: taken, want refused")
	}
	unlock()
	got := make(chan error, 1)
	go func() {
		second, err := lockFile(name, true)
		if err == nil {
			second()
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a second lock after the first let go: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a second lock after the first let go: still waiting after a minute")
	}
}
