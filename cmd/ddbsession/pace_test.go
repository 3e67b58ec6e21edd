package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Callers that start together queue behind each other's reservations;
// a call that consumed more than it reserved delays the next by the
// difference, and one that consumed less gives the difference back.
func TestPacer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A clock that stands still: each wait is measured from the same
	// instant, as concurrent sleeps overlap in real time.
	start := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	var waits []time.Duration
	p := &pacer{rate: 10, now: func() time.Time { return start }, sleep: func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := p.take(ctx, 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := slices.Clone(waits)
	slices.Sort(got)
	if diff := cmp.Diff([]time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, got); diff != "" {
		t.Errorf("three at once (-want +got):\n%s", diff)
	}
	// The next start is at 300 ms.
	p.settle(1, 3) // +200 ms: 500 ms
	waits = nil
	p.take(ctx, 1)   // waits 500 ms; next at 600 ms
	p.settle(1, 0.5) // back 50 ms: 550 ms
	p.take(ctx, 1)
	if diff := cmp.Diff([]time.Duration{500 * time.Millisecond, 550 * time.Millisecond}, waits); diff != "" {
		t.Errorf("after settling (-want +got):\n%s", diff)
	}

	unlimited := &pacer{now: time.Now, sleep: func(context.Context, time.Duration) error { t.Error("an unlimited pacer slept"); return nil }}
	unlimited.take(ctx, 100)
	unlimited.settle(100, 1000)
	unlimited.take(ctx, 100)
}

// A page is about a second of the read rate, per segment, and 64 KB at
// least.
func TestPageLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate      float64
		segments  int
		itemBytes float64
		want      int32
	}{
		{0, 1, 1000, 0},
		{400, 1, 1024, 3200},
		{400, 4, 1024, 800},
		{400, 1, 0, 3200}, // unknown size: 1 KB
		{1, 1, 1024, 64},
		{1, 1, 100_000, 10},
		{100_000, 1, 10, 10000},
	} {
		if got := pageLimit(tc.rate, tc.segments, tc.itemBytes); got != tc.want {
			t.Errorf("pageLimit(%v, %d, %v) = %d, want %d", tc.rate, tc.segments, tc.itemBytes, got, tc.want)
		}
	}
}
