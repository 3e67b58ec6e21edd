package ddbtest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A Clock reads what the test set until the test moves it, while requests
// read it concurrently.
func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := ddbtest.NewClock(start)
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for range 100 {
				if now := c.Now(); now.Before(start) {
					t.Errorf("Now = %v, before the start %v: the clock went back", now, start)
				}
			}
		})
	}
	for range 100 {
		c.Advance(time.Second)
	}
	readers.Wait()
	if got, want := c.Now(), start.Add(100*time.Second); !got.Equal(want) {
		t.Errorf("after 100 Advances of 1s: Now = %v, want %v", got, want)
	}
	c.Advance(-time.Minute)
	if got, want := c.Now(), start.Add(40*time.Second); !got.Equal(want) {
		t.Errorf("after an Advance of -1m: Now = %v, want %v", got, want)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("after Set: Now = %v, want %v", got, start)
	}
}

// A Mono's zero value reads 1, never the 0 that means "never read", and
// moves only when advanced.
func TestMono(t *testing.T) {
	t.Parallel()
	var m ddbtest.Mono
	if got := m.Now(); got != 1 {
		t.Errorf("a new Mono reads %d, want 1", got)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { m.Advance(time.Second) })
	}
	wg.Wait()
	if got, want := m.Now(), int64(4*time.Second)+1; got != want {
		t.Errorf("after 4 Advances of 1s: Now = %d, want %d", got, want)
	}
}
