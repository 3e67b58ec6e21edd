package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHasherQueue(t *testing.T) {
	t.Parallel()
	h := newHasher(1, 2, testCost)
	holder, err := h.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// Two wait, one of whom gives up.
	type result struct {
		slot *hashSlot
		err  error
	}
	patient, impatient := make(chan result, 1), make(chan result, 1)
	ctx, giveUp := context.WithCancel(t.Context())
	go func() { s, err := h.acquire(t.Context()); patient <- result{s, err} }()
	go func() { s, err := h.acquire(ctx); impatient <- result{s, err} }()
	waitUntil(t, "two requests queued", func() bool { return h.queued() == 2 })

	if _, err := h.acquire(t.Context()); !errors.Is(err, errHasherBusy) {
		t.Errorf("acquire with the queue full: %v, want errHasherBusy", err)
	}
	giveUp()
	if r := <-impatient; !errors.Is(r.err, context.Canceled) {
		t.Errorf("acquire whose context ended: %v, want context.Canceled", r.err)
	}
	if n := h.queued(); n != 1 {
		t.Errorf("%d queued after one gave up, want 1", n)
	}
	holder.release()
	holder.release() // twice is harmless
	r := <-patient
	if r.err != nil {
		t.Fatalf("the waiting request after the slot came free: %v", r.err)
	}
	r.slot.release()
	if n := h.queued(); n != 0 || len(h.running) != 0 {
		t.Errorf("after every release: %d queued, %d running; want none", n, len(h.running))
	}
	if n := h.hashes.Load(); n != 0 {
		t.Errorf("%d hashes done, want 0: nobody hashed", n)
	}
}

// TestAbandonedLoginsDoNotHash sends a burst of logins whose clients give
// up while they wait for the hasher, as in a flood of requests that time
// out: none of them may hash afterwards, so a real login that follows is
// the next hash done, not the twenty-first.
func TestAbandonedLoginsDoNotHash(t *testing.T) {
	t.Parallel()
	// Unlimited: the per-username limit would otherwise refuse most of the
	// burst before it reached the hasher, which is not what is tested here.
	ta := newTestApp(t, unlimited, func(cfg *appConfig) { cfg.HashSlots, cfg.HashQueue = 1, 64 })
	ta.browser("browser-A").signup("alice", "correct horse")

	busy, err := ta.app.hasher.acquire(t.Context()) // the only slot
	if err != nil {
		t.Fatal(err)
	}
	defer busy.release()
	before := ta.app.hasher.hashes.Load()

	const burst = 20
	ctx, giveUp := context.WithCancel(t.Context())
	var clients sync.WaitGroup
	for range burst {
		b := ta.browser("impatient")
		clients.Go(func() {
			r, _ := http.NewRequestWithContext(ctx, "POST", ta.srv.URL+"/login",
				strings.NewReader(url.Values{"username": {"alice"}, "password": {"guess"}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if res, err := b.client.Do(r); err == nil {
				res.Body.Close()
				t.Errorf("an abandoned login was answered: %d", res.StatusCode)
			}
		})
	}
	waitUntil(t, "the burst queued for the hasher", func() bool { return ta.app.hasher.queued() == burst })
	giveUp()
	clients.Wait()
	waitUntil(t, "the server to notice the clients left", func() bool { return ta.app.hasher.queued() == 0 })
	busy.release()

	ta.browser("browser-B").login("alice", "correct horse")
	if n := ta.app.hasher.hashes.Load() - before; n != 1 {
		t.Errorf("%d hashes done for %d abandoned logins and one real one, want 1", n, burst)
	}
}

func TestHasherQueueFull(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(cfg *appConfig) { cfg.HashSlots, cfg.HashQueue = 1, 2 })
	ta.browser("browser-A").signup("alice", "correct horse")

	busy, err := ta.app.hasher.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before := ta.app.hasher.hashes.Load()
	codes := make(chan int, 2)
	for range 2 {
		b := ta.browser("waiting")
		go func() {
			res, err := b.client.PostForm(ta.srv.URL+"/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
			if err != nil {
				codes <- 0
				return
			}
			res.Body.Close()
			codes <- res.StatusCode
		}()
	}
	waitUntil(t, "two logins queued", func() bool { return ta.app.hasher.queued() == 2 })

	for _, path := range []string{"/login", "/signup"} {
		res := ta.browser("late").post(path, url.Values{"username": {"bob"}, "password": {"correct horse"}})
		if res.code != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" {
			t.Errorf("POST %s with the hasher's queue full: %d, Retry-After %q; want 503 and a Retry-After",
				path, res.code, res.header.Get("Retry-After"))
		}
	}
	busy.release()
	for range 2 {
		if code := <-codes; code != http.StatusSeeOther {
			t.Errorf("a queued login: %d, want 303 once the slot came free", code)
		}
	}
	if n := ta.app.hasher.hashes.Load() - before; n != 2 {
		t.Errorf("%d hashes done, want 2: the refused requests must not hash", n)
	}
}

// waitUntil polls cond until it holds, failing the test after ten seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
