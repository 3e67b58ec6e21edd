//go:build unix

package main

import (
	"path/filepath"
	"testing"
)

// Two checks at once share the module cache: the second waits for the
// first's lock, and gets it once the first lets go.
func TestModCacheLockExcludesASecondCheck(t *testing.T) {
	t.Parallel()
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
	second, err := lockFile(name, false)
	if err != nil {
		t.Fatalf("a second lock after the first let go: %v", err)
	}
	second()
}
