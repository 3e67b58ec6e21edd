package main

import (
	"context"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed password checks are limited per username and per client address,
// each with a token bucket: Burst failures at once, then one more every
// Every. The username limit stops guessing one account's password from many
// addresses; the address limit stops one client from guessing across many
// accounts (or probing which names are taken at sign-up). A success costs
// no token, so a user who types the password right is never slowed down, and
// once the bucket has refilled a correct password works again.
//
// The per-username counts live in the table (userlimit.go), so that they
// hold across instances. The per-address counts stay in each instance's
// memory: they guard that instance's password hasher, which is per
// instance too; an address is cheap to change (an IPv6 /64 holds 2^64), so
// counting addresses in the table would let a client choose how many items
// the app writes; and guesses spread over many accounts from one address
// still meet each account's own limit, which is shared.
//
// A limit on usernames lets anyone who knows a username hold that user's
// logins off for as long as they keep failing; that is the price of stopping
// a distributed guesser, and the per-address limit keeps one client from
// paying it cheaply.
//
// An IPv4 address counts alone. An IPv6 address counts by its /64, which
// one subscriber usually holds whole, and also by its /56 and its /48, with
// limits of their own: ISPs commonly delegate a /56 to a home and a /48 to
// a business site, and a /48 holds 65,536 /64s, so /64 buckets alone would
// give one customer 65,536 buckets of 50 failures, enough to keep the
// password hasher's queue full for everyone else. The wider buckets allow
// more, since more people can share them (an office, a campus), but not
// 256 or 65,536 times more: a /48 gets 200 failures at once and one a
// second, against 50 and one per 5 s for a /64.

// rateLimit is one token bucket of failures.
type rateLimit struct {
	Every time.Duration // one more failure allowed after each Every
	Burst int           // failures allowed at once
}

var (
	defaultUserLimit     = rateLimit{Every: time.Minute, Burst: 10}
	defaultAddrLimit     = rateLimit{Every: 5 * time.Second, Burst: 50} // an IPv4 address, an IPv6 /64
	defaultPrefix56Limit = rateLimit{Every: 2 * time.Second, Burst: 100}
	defaultPrefix48Limit = rateLimit{Every: time.Second, Burst: 200}
)

// maxLimiterKeys bounds the addresses (or prefixes) tracked at once, about
// 200 bytes each. Keys whose bucket is full again are dropped, since a full
// bucket is what a new key gets; if the map is still full of keys that
// failed recently, a new key is refused as if limited, rather than evicting
// one and forgetting its failures.
const maxLimiterKeys = 100_000

// failureLimiter counts failed attempts per key.
type failureLimiter struct {
	limit   rateLimit
	maxKeys int

	mu        sync.Mutex
	keys      map[string]*failureBucket
	lastSweep time.Time
}

// failureBucket is one key's bucket. An attempt holds a token from begin to
// end and spends it only if it fails. Counting the attempts in flight, rather
// than spending on entry and giving back on success, is what rate.Limiter
// allows (a Reservation cannot be cancelled once its time has passed), and it
// keeps a flood of concurrent guesses, all started before any has failed,
// within the burst.
type failureBucket struct {
	tokens   *rate.Limiter
	inFlight int
}

func newFailureLimiter(limit rateLimit, maxKeys int) *failureLimiter {
	return &failureLimiter{limit: limit, maxKeys: maxKeys, keys: map[string]*failureBucket{}}
}

// begin starts an attempt for key at now. It returns the bucket to end the
// attempt with, or nil and how long to wait when key has no failure left.
func (l *failureLimiter) begin(key string, now time.Time) (*failureBucket, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.keys[key]
	if b == nil {
		// A sweep costs a pass over the map: at most one a second.
		if now.Sub(l.lastSweep) >= time.Second || now.Before(l.lastSweep) {
			l.sweep(now)
		}
		if len(l.keys) >= l.maxKeys {
			return nil, l.limit.Every
		}
		b = &failureBucket{tokens: rate.NewLimiter(rate.Every(l.limit.Every), l.limit.Burst)} // full
		l.keys[key] = b
	}
	if free := b.tokens.TokensAt(now) - float64(b.inFlight); free < 1 {
		return nil, time.Duration((1 - free) * float64(l.limit.Every))
	}
	b.inFlight++
	return b, 0
}

// end ends an attempt that begin started; a failed one spends its token.
func (l *failureLimiter) end(b *failureBucket, now time.Time, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.inFlight--
	if failed {
		b.tokens.AllowN(now, 1) // always there: begin kept it free
	}
}

// sweep drops the keys whose bucket is full again and idle.
func (l *failureLimiter) sweep(now time.Time) {
	for key, b := range l.keys {
		if b.inFlight == 0 && b.tokens.TokensAt(now) >= float64(l.limit.Burst) {
			delete(l.keys, key)
		}
	}
	l.lastSweep = now
}

// size reports how many keys are tracked.
func (l *failureLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// limits are the app's failure limiters.
type limits struct {
	byUser userFailures
	// byAddr counts IPv4 addresses and IPv6 /64s; by56 and by48 count the
	// wider IPv6 prefixes.
	byAddr, by56, by48 *failureLimiter
	trustedProxies     []netip.Prefix // appConfig.TrustedProxies
	now                func() time.Time
}

// attempt is one password check (or sign-up), and the one-time code that
// may come with it, under the limits.
type attempt struct {
	a    *app
	ctx  context.Context // the request's
	held []heldToken
	// users are the user buckets whose tokens it holds, failed those of
	// them whose check failed: their tokens stay spent.
	users, failed []userBucket
	failing       bool // some check failed: the address tokens are spent too
}

type heldToken struct {
	limiter *failureLimiter
	bucket  *failureBucket
}

// beginAttempt starts an attempt counted against r's client address and
// against each of users: the password's bucket of the check it makes, and
// codeCheck's when the request carries a one-time code. If any has no
// failure left it answers 429 with Retry-After itself, with answer, and
// returns false; so it does, with 503, if the table cannot be reached. The
// caller calls fail with the bucket of each check that fails, and end when
// the attempt is over.
func (a *app) beginAttempt(w http.ResponseWriter, r *http.Request, answer answerFunc, users ...userBucket) (*attempt, bool) {
	l := a.limits
	now := l.now()
	at := &attempt{a: a, ctx: r.Context()}
	refuse := func(wait time.Duration) {
		at.end()
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		answer(w, http.StatusTooManyRequests, "Too many failed attempts. Try again in "+plural(secs, "second")+".")
	}
	for _, b := range l.addrBuckets(clientAddr(r, l.trustedProxies), r.RemoteAddr) {
		token, wait := b.limiter.begin(b.key, now)
		if token == nil {
			refuse(wait)
			return nil, false
		}
		at.held = append(at.held, heldToken{b.limiter, token})
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	for _, user := range users {
		took, wait, err := l.byUser.take(ctx, user, now)
		switch {
		case err != nil:
			at.end()
			a.storeFailed(w, r, "count a login attempt", err, answer)
			return nil, false
		case !took:
			refuse(wait)
			return nil, false
		}
		at.users = append(at.users, user)
	}
	return at, true
}

// fail marks the check of user failed: end then spends user's token, and
// the address tokens. The zero userBucket marks a failure that counts
// against the address alone (a sign-up's taken username).
func (at *attempt) fail(user userBucket) {
	at.failing = true
	if user != (userBucket{}) {
		at.failed = append(at.failed, user)
	}
}

// end ends the attempt: the tokens of failed checks stay spent (the
// address tokens if any check failed), the others are given back. Only
// the first call counts.
func (at *attempt) end() {
	now := at.a.limits.now()
	for _, h := range at.held {
		h.limiter.end(h.bucket, now, at.failing)
	}
	at.held = nil
	users := at.users
	at.users = nil
	// Given back even if the client has gone: a success (or a store
	// failure) is no failed guess.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(at.ctx), at.a.storeTimeout)
	defer cancel()
	for _, user := range users {
		if slices.Contains(at.failed, user) {
			continue
		}
		if err := at.a.limits.byUser.giveBack(ctx, user); err != nil {
			at.a.log.ErrorContext(at.ctx, "dynamodb request failed", "op", "give back a login attempt", "err", err)
		}
	}
}

// addrBucket is one bucket that a client address counts against.
type addrBucket struct {
	limiter *failureLimiter
	key     string
}

// addrBuckets returns the buckets that addr counts against: an IPv4
// address its own; an IPv6 address its /64, /56 and /48. A request without
// an IP address (over a Unix socket) counts under its RemoteAddr.
func (l *limits) addrBuckets(addr netip.Addr, remoteAddr string) []addrBucket {
	switch {
	case !addr.IsValid():
		return []addrBucket{{l.byAddr, remoteAddr}}
	case addr.Is4():
		return []addrBucket{{l.byAddr, addr.String()}}
	}
	prefix := func(bits int) string { return netip.PrefixFrom(addr, bits).Masked().String() }
	return []addrBucket{{l.byAddr, prefix(64)}, {l.by56, prefix(56)}, {l.by48, prefix(48)}}
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
