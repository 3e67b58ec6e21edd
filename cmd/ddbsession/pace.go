package main

import (
	"context"
	"sync"
	"time"
)

// A pacer keeps calls to a rate of capacity units per second, on what
// DynamoDB reports each call consumed. A call reserves its estimate before
// it starts, so that concurrent callers queue behind each other, and
// settles for what it consumed once it knows: the next caller waits for the
// difference too. The first call starts at once; from then on, n units
// consumed delay the calls after them by n/rate in all.
type pacer struct {
	rate  float64 // units per second; 0: no limit
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu   sync.Mutex
	next time.Time // when the next call may start
}

func newPacer(rate float64, e *env) *pacer {
	return &pacer{rate: rate, now: e.now, sleep: e.sleep}
}

// take waits until a call that expects to consume estimate units may
// start, and reserves them.
func (p *pacer) take(ctx context.Context, estimate float64) error {
	if p.rate == 0 {
		return ctx.Err()
	}
	p.mu.Lock()
	now := p.now()
	start := p.next
	if start.Before(now) {
		start = now
	}
	p.next = start.Add(p.duration(estimate))
	p.mu.Unlock()
	if wait := start.Sub(now); wait > 0 {
		return p.sleep(ctx, wait)
	}
	return ctx.Err()
}

// settle corrects a reservation of estimate units for the call's actual
// consumption.
func (p *pacer) settle(estimate, actual float64) {
	if p.rate == 0 || actual == estimate {
		return
	}
	p.mu.Lock()
	p.next = p.next.Add(p.duration(actual - estimate))
	p.mu.Unlock()
}

// duration is how long units take at the rate.
func (p *pacer) duration(units float64) time.Duration {
	return time.Duration(units / p.rate * float64(time.Second))
}
