package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestFailureLimiter(t *testing.T) {
	t.Parallel()
	start := time.Now()
	limit := rateLimit{Every: time.Minute, Burst: 3}

	t.Run("failures spend, successes do not", func(t *testing.T) {
		l := newFailureLimiter(limit, 10)
		for i := range 5 {
			b, _ := l.begin("alice", start)
			if b == nil {
				t.Fatalf("success %d refused", i)
			}
			l.end(b, start, false)
		}
		for i := range 3 {
			b, _ := l.begin("alice", start)
			if b == nil {
				t.Fatalf("failure %d refused, want %d allowed", i, limit.Burst)
			}
			l.end(b, start, true)
		}
		if b, wait := l.begin("alice", start); b != nil || wait != time.Minute {
			t.Errorf("after %d failures: allowed %v, wait %v; want refused for a minute", limit.Burst, b != nil, wait)
		}
		if b, _ := l.begin("bob", start); b == nil {
			t.Errorf("another key was refused")
		}
		if b, wait := l.begin("alice", start.Add(40*time.Second)); b != nil || wait != 20*time.Second {
			t.Errorf("40s on: allowed %v, wait %v; want refused for 20s more", b != nil, wait)
		}
		if b, _ := l.begin("alice", start.Add(time.Minute)); b == nil {
			t.Errorf("a minute on: still refused")
		}
	})

	t.Run("attempts in flight hold their token", func(t *testing.T) {
		l := newFailureLimiter(limit, 10)
		var held []*failureBucket
		for range 3 {
			b, _ := l.begin("alice", start)
			held = append(held, b)
		}
		if b, _ := l.begin("alice", start); b != nil {
			t.Fatalf("a fourth concurrent attempt was let in with a burst of 3")
		}
		l.end(held[0], start, false) // a success gives its token back
		if b, _ := l.begin("alice", start); b == nil {
			t.Fatalf("refused after an attempt in flight succeeded")
		}
		l.end(held[1], start, true)
		l.end(held[2], start, true)
		if b, _ := l.begin("alice", start); b != nil {
			t.Errorf("let in with two failures spent and one attempt in flight")
		}
	})

	t.Run("idle keys are dropped", func(t *testing.T) {
		l := newFailureLimiter(limit, 1000)
		for i := range 100 {
			b, _ := l.begin(fmt.Sprint("user", i), start)
			l.end(b, start, true)
		}
		inFlight, _ := l.begin("busy", start)
		if n := l.size(); n != 101 {
			t.Fatalf("%d keys, want 101", n)
		}
		// A minute on, every bucket but the one in flight is full again.
		later := start.Add(time.Minute)
		l.begin("newcomer", later)
		if n := l.size(); n != 2 {
			t.Errorf("%d keys a minute on, want 2 (the one in flight, the newcomer)", n)
		}
		l.end(inFlight, later, false)
	})

	t.Run("a full map refuses new keys, not forgets old ones", func(t *testing.T) {
		l := newFailureLimiter(limit, 2)
		for _, key := range []string{"a", "b"} {
			b, _ := l.begin(key, start)
			l.end(b, start, true)
		}
		if b, wait := l.begin("c", start.Add(2*time.Second)); b != nil || wait != time.Minute {
			t.Errorf("a third key with two recent failures kept: allowed %v, wait %v; want refused", b != nil, wait)
		}
		if b, _ := l.begin("a", start.Add(2*time.Second)); b == nil {
			t.Errorf("a known key was refused when the map was full")
		} else {
			l.end(b, start.Add(2*time.Second), true)
		}
		// Once b's bucket has refilled, b is dropped and c fits.
		if b, _ := l.begin("c", start.Add(61*time.Second)); b == nil {
			t.Errorf("a new key refused after the others refilled")
		}
	})
}

// postFrom sends a form to the app directly, as if from remoteAddr.
func (ta *testApp) postFrom(remoteAddr, path string, form url.Values, header ...string) *httptest.ResponseRecorder {
	ta.t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	r.RemoteAddr = remoteAddr
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	ta.app.ServeHTTP(w, r)
	return w
}

func creds(username, password string) url.Values {
	return url.Values{"username": {username}, "password": {password}}
}

func TestLoginLimitPerUsername(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 3}
		cfg.AddrLimit = rateLimit{Every: time.Minute, Burst: 100}
	})
	ta.browser("A").signup("alice", "correct horse")
	ta.browser("B").signup("bob", "battery staple")
	const addr, other = "192.0.2.1:1234", "198.51.100.7:4321"

	// Successes cost nothing.
	for range 5 {
		if w := ta.postFrom(addr, "/login", creds("alice", "correct horse")); w.Code != http.StatusSeeOther {
			t.Fatalf("login: %d", w.Code)
		}
	}
	for i := range 3 {
		if w := ta.postFrom(addr, "/login", creds("alice", fmt.Sprint("guess ", i))); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, w.Code)
		}
	}
	for _, tc := range []struct {
		name, addr, username, password string
	}{
		{"another guess", addr, "alice", "guess 4"},
		{"the right password", addr, "alice", "correct horse"},
		{"from another address", other, "alice", "correct horse"},
		{"in another spelling", other, "ALICE ", "correct horse"},
	} {
		w := ta.postFrom(tc.addr, "/login", creds(tc.username, tc.password))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
			t.Errorf("%s after 3 failures: %d, Retry-After %q; want 429, 60", tc.name, w.Code, w.Header().Get("Retry-After"))
		}
		if w.Header().Get("Set-Cookie") != "" {
			t.Errorf("%s: a refused login set a cookie", tc.name)
		}
	}
	if w := ta.postFrom(addr, "/login", creds("bob", "battery staple")); w.Code != http.StatusSeeOther {
		t.Errorf("another user from the same address: %d, want 303", w.Code)
	}

	clock.Advance(59 * time.Second)
	if w := ta.postFrom(addr, "/login", creds("alice", "correct horse")); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("a second early: %d, Retry-After %q; want 429, 1", w.Code, w.Header().Get("Retry-After"))
	}
	clock.Advance(time.Second)
	if w := ta.postFrom(addr, "/login", creds("alice", "correct horse")); w.Code != http.StatusSeeOther {
		t.Errorf("the right password once the window passed: %d, want 303", w.Code)
	}
	// One failure came back, and the success did not spend it.
	if w := ta.postFrom(addr, "/login", creds("alice", "guess 5")); w.Code != http.StatusUnauthorized {
		t.Errorf("a guess with one failure back: %d, want 401", w.Code)
	}
	if w := ta.postFrom(addr, "/login", creds("alice", "guess 6")); w.Code != http.StatusTooManyRequests {
		t.Errorf("the next guess: %d, want 429", w.Code)
	}
}

func TestLoginLimitPerAddress(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 100}
		cfg.AddrLimit = rateLimit{Every: 10 * time.Second, Burst: 3}
	})
	ta.browser("A").signup("alice", "correct horse")

	for _, tc := range []struct {
		name           string
		guessers       []string // three failures spread over these
		limited, fresh string   // refused now; not
	}{
		{"IPv4", []string{"192.0.2.1:1"}, "192.0.2.1:2", "192.0.2.2:1"},
		{"IPv6 by /64", []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::ffff:1]:1"}, "[2001:db8:0:0:1::1]:1", "[2001:db8:0:1::1]:1"},
		{"IPv4 in IPv6", []string{"[::ffff:192.0.2.9]:1"}, "192.0.2.9:1", "192.0.2.10:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 3 {
				from := tc.guessers[i%len(tc.guessers)]
				if w := ta.postFrom(from, "/login", creds(fmt.Sprint("user", i), "guess")); w.Code != http.StatusUnauthorized {
					t.Fatalf("failure %d from %s: %d, want 401", i, from, w.Code)
				}
			}
			if w := ta.postFrom(tc.limited, "/login", creds("alice", "correct horse")); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "10" {
				t.Errorf("from %s: %d, Retry-After %q; want 429, 10", tc.limited, w.Code, w.Header().Get("Retry-After"))
			}
			if w := ta.postFrom(tc.fresh, "/login", creds("alice", "correct horse")); w.Code != http.StatusSeeOther {
				t.Errorf("from %s: %d, want 303", tc.fresh, w.Code)
			}
		})
	}

	t.Run("taken usernames at sign-up", func(t *testing.T) {
		const from = "203.0.113.1:1"
		for i := range 3 {
			if w := ta.postFrom(from, "/signup", creds("alice", fmt.Sprint("probe number ", i))); w.Code != http.StatusConflict {
				t.Fatalf("sign-up %d as alice: %d, want 409", i, w.Code)
			}
		}
		if w := ta.postFrom(from, "/signup", creds("carol", "carol's password")); w.Code != http.StatusTooManyRequests {
			t.Errorf("sign-up after 3 taken names: %d, want 429", w.Code)
		}
		clock.Advance(10 * time.Second)
		if w := ta.postFrom(from, "/signup", creds("carol", "carol's password")); w.Code != http.StatusSeeOther {
			t.Errorf("sign-up once a failure came back: %d, want 303", w.Code)
		}
	})
}

// TestTrustedProxies runs the limit behind one proxy: clients are told
// apart by the entry the proxy appended, and what they write themselves is
// not believed; nor is the header of a client that connects directly.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		cfg.UserLimit = rateLimit{Every: time.Hour, Burst: 100}
		cfg.AddrLimit = rateLimit{Every: time.Hour, Burst: 2}
	})
	const proxy = "10.0.0.1:5555"
	for i := range 2 {
		// The client varies what it claims; the proxy appends the truth.
		xff := fmt.Sprintf("192.0.2.%d, 203.0.113.5", i)
		if w := ta.postFrom(proxy, "/login", creds("nobody", "guess"), "X-Forwarded-For", xff); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i, w.Code)
		}
	}
	if w := ta.postFrom(proxy, "/login", creds("nobody", "guess"), "X-Forwarded-For", "192.0.2.99, 203.0.113.5"); w.Code != http.StatusTooManyRequests {
		t.Errorf("a third failure from 203.0.113.5: %d, want 429", w.Code)
	}
	if w := ta.postFrom(proxy, "/login", creds("nobody", "guess"), "X-Forwarded-For", "203.0.113.6"); w.Code != http.StatusUnauthorized {
		t.Errorf("another client behind the same proxy: %d, want 401", w.Code)
	}

	// A client that reaches the app directly names a fresh address in
	// each request: all of them count against its connection's.
	const direct = "192.0.2.7:4444"
	for i := range 2 {
		xff := fmt.Sprintf("198.51.100.%d", i)
		if w := ta.postFrom(direct, "/login", creds("nobody", "guess"), "X-Forwarded-For", xff); w.Code != http.StatusUnauthorized {
			t.Fatalf("direct failure %d: %d, want 401", i, w.Code)
		}
	}
	if w := ta.postFrom(direct, "/login", creds("nobody", "guess"), "X-Forwarded-For", "198.51.100.99"); w.Code != http.StatusTooManyRequests {
		t.Errorf("a third failure from a direct client that names another address each time: %d, want 429", w.Code)
	}
}

// TestPasswordChangeLimit: a stolen session cannot guess the current
// password faster than a login could, and failed logins by someone else do
// not stop the owner from changing it.
func TestPasswordChangeLimit(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 2}
		cfg.AddrLimit = rateLimit{Every: time.Minute, Burst: 100}
	})
	owner := ta.browser("owner")
	owner.signup("alice", "old password")
	for range 2 {
		ta.postFrom("192.0.2.1:1", "/login", creds("alice", "guess"))
	}
	if w := ta.postFrom("192.0.2.1:1", "/login", creds("alice", "guess")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("third failed login: %d, want 429", w.Code)
	}

	for i := range 2 {
		if res := owner.post("/password", url.Values{"current": {fmt.Sprint("guess ", i)}, "new": {"new password"}}); res.code != http.StatusUnauthorized {
			t.Fatalf("wrong current password %d: %d, want 401", i, res.code)
		}
	}
	res := owner.post("/password", url.Values{"current": {"old password"}, "new": {"new password"}})
	if res.code != http.StatusTooManyRequests || res.header.Get("Retry-After") != "60" {
		t.Errorf("password change after 2 wrong ones: %d, Retry-After %q; want 429, 60", res.code, res.header.Get("Retry-After"))
	}
	clock.Advance(time.Minute)
	owner.mustPost(http.StatusSeeOther, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
	if code := owner.meStatus(); code != http.StatusOK {
		t.Errorf("after the change: /api/me %d, want 200", code)
	}
}

// TestLoginLimitPerIPv6Prefix spreads failures over many /64s of one /56,
// then of one /48, as a customer with a prefix of its own can: the wider
// buckets stop them, each at its own limit, and leave the neighbours alone.
func TestLoginLimitPerIPv6Prefix(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 1000}
		cfg.AddrLimit = rateLimit{Every: time.Minute, Burst: 1} // every /64 below fails once
		cfg.Prefix56Limit = rateLimit{Every: 20 * time.Second, Burst: 3}
		cfg.Prefix48Limit = rateLimit{Every: 30 * time.Second, Burst: 5}
	})
	ta.browser("A").signup("alice", "correct horse")
	fail := func(from string) int {
		t.Helper()
		return ta.postFrom(from, "/login", creds("nobody", "guess")).Code
	}

	// Three /64s of 2001:db8:1:100::/56 each fail once: the /56 is spent.
	for i := range 3 {
		if code := fail(fmt.Sprintf("[2001:db8:1:1%02x::1]:1", i)); code != http.StatusUnauthorized {
			t.Fatalf("failure %d in the /56: %d, want 401", i, code)
		}
	}
	w := ta.postFrom("[2001:db8:1:1ff::1]:1", "/login", creds("alice", "correct horse"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "20" {
		t.Errorf("a fresh /64 in the spent /56: %d, Retry-After %q; want 429, 20", w.Code, w.Header().Get("Retry-After"))
	}
	// Two more failures from another /56 of the same /48 spend the /48.
	for i := range 2 {
		if code := fail(fmt.Sprintf("[2001:db8:1:2%02x::1]:1", i)); code != http.StatusUnauthorized {
			t.Fatalf("failure %d in another /56 of the /48: %d, want 401", i, code)
		}
	}
	w = ta.postFrom("[2001:db8:1:300::1]:1", "/login", creds("alice", "correct horse"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "30" {
		t.Errorf("a fresh /56 in the spent /48: %d, Retry-After %q; want 429, 30", w.Code, w.Header().Get("Retry-After"))
	}
	if w := ta.postFrom("[2001:db8:2::1]:1", "/login", creds("alice", "correct horse")); w.Code != http.StatusSeeOther {
		t.Errorf("the next /48: %d, want 303", w.Code)
	}
	// The /48 refills one failure per 30 s.
	clock.Advance(30 * time.Second)
	if w := ta.postFrom("[2001:db8:1:300::1]:1", "/login", creds("alice", "correct horse")); w.Code != http.StatusSeeOther {
		t.Errorf("a fresh /56 once the /48 refilled a little: %d, want 303", w.Code)
	}
}
