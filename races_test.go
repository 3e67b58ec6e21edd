package ddbsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// An attacker who knows the old password logs in while the owner changes
// it: the attacker's Login with verify is paused after it read the user item (old
// password, accepted) and before it writes its session; the change writes
// the new password and cuts off; then the login completes. Its session
// must be dead on arrival. The clock does not move at all, the hardest
// case: every timestamp is the same millisecond.
func TestLoginWithRacingPasswordChange(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	alice := e.createMember(m, "alice", "old")

	read, resume := make(chan struct{}), make(chan struct{})
	var paused atomic.Bool
	p.Before = func(_ context.Context, op string, in any) {
		if op == "PutItem" && paused.CompareAndSwap(false, true) { // the attacker's first session write
			close(read)
			<-resume
		}
	}
	var attacker *http.Cookie
	var loginErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		attacker, loginErr = loginWith(m, alice, "old")
	}()
	<-read
	p.Before = nil
	e.changePassword(m, alice, "new")
	close(resume)
	<-done
	if loginErr != nil {
		t.Fatalf("the attacker's login, which read the old password: %v", loginErr)
	}
	if got := statusOf(m, attacker); got != http.StatusUnauthorized {
		t.Errorf("the attacker's session, created from the old password: status %d, want 401", got)
	}
	// After the change, the old password fails and the new one works.
	if _, err := loginWith(m, alice, "old"); !errors.Is(err, errWrongPassword) {
		t.Errorf("Login with verify with the old password after the change: %v, want errWrongPassword", err)
	}
	c, err := loginWith(m, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	if got := statusOf(m, c); got != http.StatusOK {
		t.Errorf("a login with the new password: status %d, want 200", got)
	}
}

// The race of a password change, on instances whose clocks disagree: the
// attacker's Login with verify runs on one instance and waits inside its verify
// callback, having read and accepted the old password, while the owner
// writes the new one and calls RevokeAll on another; then the login
// completes. Whichever instance's clock is off, by 50 ms or by 5 s either
// way, the attacker's session is dead on arrival on both, and a login with
// the new password, on either, lives on both. Sessions copy the revocation
// version they read with the credential; no clock is compared with another.
func TestPasswordChangeUnderClockSkew(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{50 * time.Millisecond, 5 * time.Second, -5 * time.Second} {
		for _, off := range []string{"login", "revoke"} {
			t.Run(off+" instance "+skew.String(), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, nil)
				at := func(d time.Duration) func(*ddbsession.Config[Member]) {
					return func(c *ddbsession.Config[Member]) { c.Now = func() time.Time { return e.clock.Now().Add(d) } }
				}
				loginSkew, revokeSkew := skew, time.Duration(0)
				if off == "revoke" {
					loginSkew, revokeSkew = 0, skew
				}
				attackers, owners := e.members(at(loginSkew)), e.members(at(revokeSkew))
				alice := e.createMember(owners, "alice", "old")
				e.clock.Advance(time.Second)

				verified, resume := make(chan struct{}), make(chan struct{})
				var attacker *http.Cookie
				var loginErr error
				done := make(chan struct{})
				go func() {
					defer close(done)
					w := newRecorder()
					loginErr = attackers.Login(w, newRequest(), alice, func(m Member) error {
						err := checkPassword("old")(m)
						close(verified)
						<-resume // the owner changes the password meanwhile
						return err
					})
					attacker = sessionCookie(t, w.Result(), cookieName)
				}()
				<-verified
				e.clock.Advance(time.Millisecond)
				e.changePassword(owners, alice, "new")
				e.clock.Advance(time.Millisecond)
				close(resume)
				<-done
				if loginErr != nil || attacker == nil {
					t.Fatalf("the attacker's login, which read the old password: %v, cookie %v", loginErr, attacker)
				}
				for name, m := range map[string]*ddbsession.Manager[Member]{"the login's": attackers, "the revoker's": owners} {
					if got := statusOf(m, attacker); got != http.StatusUnauthorized {
						t.Errorf("the attacker's session, on %s instance: status %d, want 401", name, got)
					}
				}
				for name, m := range map[string]*ddbsession.Manager[Member]{"the login's": attackers, "the revoker's": owners} {
					c, err := loginWith(m, alice, "new")
					if err != nil {
						t.Fatalf("a login with the new password on %s instance: %v", name, err)
					}
					for _, other := range []*ddbsession.Manager[Member]{attackers, owners} {
						if got := statusOf(other, c); got != http.StatusOK {
							t.Errorf("a login with the new password on %s instance: status %d, want 200", name, got)
						}
					}
				}
			})
		}
	}
}

// The same race, as it happens: attackers on a second instance loop
// Login with verify with the old password while the owner changes it; none of
// their sessions survives the change, and the owner's own browser is signed
// in again with a fresh session. The instances run on the test's clock, or
// on the machine's, the attackers' off by 25 ms or 5 s either way.
func TestLoginWithLoopingAttackersDuringPasswordChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		real bool // the machine's clock, not the test's
		skew time.Duration
	}{
		{"one clock", false, 0},
		{"real time, attackers 25ms ahead", true, 25 * time.Millisecond},
		{"real time, attackers 5s ahead", true, 5 * time.Second},
		{"real time, attackers 5s behind", true, -5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			clock := func(skew time.Duration) func(*ddbsession.Config[Member]) {
				return func(c *ddbsession.Config[Member]) {
					if tc.real {
						c.Now = func() time.Time { return time.Now().Add(skew) }
					}
				}
			}
			owner := e.members(clock(0))
			alice := e.createMember(owner, "alice", "old")
			ownerCookie, err := loginWith(owner, alice, "old")
			if err != nil {
				t.Fatal(err)
			}
			second := e.members(clock(tc.skew)) // another instance on the same table

			var (
				mu      sync.Mutex
				cookies []*http.Cookie
				stop    atomic.Bool
				wg      sync.WaitGroup
			)
			for range 4 {
				wg.Go(func() {
					for i := 0; i < 200 && !stop.Load(); i++ {
						c, err := loginWith(second, alice, "old")
						if err != nil {
							continue // refused once the new password is in
						}
						mu.Lock()
						cookies = append(cookies, c)
						mu.Unlock()
					}
				})
			}
			for { // let the attackers get going
				mu.Lock()
				n := len(cookies)
				mu.Unlock()
				if n >= 40 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			e.changePassword(owner, alice, "new")
			w := newRecorder()
			if err := owner.Login(w, newRequest(ownerCookie), alice, nil); err != nil { // keep the owner signed in
				t.Fatal(err)
			}
			fresh := sessionCookie(t, w.Result(), cookieName)
			stop.Store(true)
			wg.Wait()

			survivors := 0
			for _, c := range cookies {
				if statusOf(owner, c) == http.StatusOK || statusOf(second, c) == http.StatusOK {
					survivors++
				}
			}
			t.Logf("%d attacker sessions with the old password", len(cookies))
			if survivors != 0 {
				t.Errorf("%d of %d attacker sessions survived the password change", survivors, len(cookies))
			}
			if statusOf(owner, ownerCookie) != http.StatusUnauthorized {
				t.Error("the owner's old session survived the change")
			}
			if statusOf(owner, fresh) != http.StatusOK || statusOf(second, fresh) != http.StatusOK {
				t.Error("the owner's fresh session after the change does not work on both instances")
			}
			c, err := loginWith(second, alice, "new")
			if err != nil || statusOf(owner, c) != http.StatusOK {
				t.Errorf("a login with the new password on the attackers' instance: %v, status %d; want it to live", err, statusOf(owner, c))
			}
		})
	}
}

// TestRevokeAllRacingLoginsAndRefreshes runs RevokeAll several times while
// logins (Login without verify on one instance, with it on another) and requests that
// refresh sessions run at full speed against the same user, with the
// injected clock advancing under all of them. Afterwards the table decides:
// with the user's final stored version, every session created at or before
// it (its stored createdAt) is rejected by Authenticate and left out of List, and
// every session created after it is accepted, with that createdAt, and
// listed. Both kinds must exist, and refreshes must have happened, or the
// race was not run.
func TestRevokeAllRacingLoginsAndRefreshes(t *testing.T) {
	t.Parallel()
	// A refresh is due a millisecond after the last, so that every request
	// whose expiry (whole seconds) can move writes one.
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.RefreshInterval = time.Millisecond })
	first := e.m
	second := e.members() // another instance, whose users carry a password
	alice := e.createMember(second, "alice", "pw")
	e.clock.Advance(time.Millisecond)

	const rounds = 6
	var (
		mu        sync.Mutex
		cookies   []*http.Cookie
		order     = map[*http.Cookie]loginOrder{}
		logins    atomic.Int64
		refreshes atomic.Int64
		stop      atomic.Bool
		wg        sync.WaitGroup
		// RevokeAll calls started and returned, for each login to say
		// where it stood to the final one.
		revokesStarted, revokesDone atomic.Int32
	)
	for worker := range 4 {
		wg.Go(func() { // logins, on both instances
			for i := 0; !stop.Load(); i++ {
				var c *http.Cookie
				var err error
				afterFinal := revokesDone.Load() == rounds
				if (worker+i)%2 == 0 {
					w := newRecorder()
					if err = first.Login(w, newRequest(), alice, nil); err == nil {
						c = w.Result().Cookies()[0]
					}
				} else {
					c, err = loginWith(second, alice, "pw")
				}
				e.clock.Advance(3 * time.Millisecond)
				if err != nil {
					t.Errorf("login: %v", err)
					return
				}
				mu.Lock()
				cookies = append(cookies, c)
				order[c] = loginOrder{afterFinal: afterFinal, beforeFinal: revokesStarted.Load() < rounds}
				mu.Unlock()
				logins.Add(1)
			}
		})
		wg.Go(func() { // requests, which refresh
			for i := 0; !stop.Load(); i++ {
				mu.Lock()
				var c *http.Cookie
				if len(cookies) > 0 {
					c = cookies[rand.IntN(len(cookies))]
				}
				mu.Unlock()
				if c == nil { // no session yet: wait without moving the clock
					runtime.Gosched()
					continue
				}
				e.clock.Advance(7 * time.Millisecond)
				var h http.Handler = first.RequireSession(whoami(first))
				if i%2 == 1 {
					h = second.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				}
				w := newRecorder()
				h.ServeHTTP(w, newRequest(c))
				if w.Code == http.StatusOK && len(w.Result().Cookies()) > 0 {
					refreshes.Add(1)
				}
			}
		})
	}
	awaitLogins := func(n int64) {
		for logins.Load() < n && !t.Failed() {
			time.Sleep(time.Millisecond)
		}
	}
	var final int64
	for round := range rounds {
		awaitLogins(int64(25 * (round + 1)))
		var err error
		revokesStarted.Add(1)
		if round%2 == 0 {
			err = first.RevokeAll(context.Background(), alice)
		} else {
			err = second.RevokeAll(context.Background(), alice)
		}
		revokesDone.Add(1)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		final = logins.Load()
	}
	awaitLogins(final + 25) // logins after the final version
	stop.Store(true)
	wg.Wait()
	for _, m := range []interface{ Wait(context.Context) error }{first, second} {
		if err := m.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	// The table's word: the final version, and for each session the version
	// its login read (gen). A session lives if and only if its login read
	// the final version: every login that began after the final RevokeAll
	// returned lives, every one that ended before it began dies, and those
	// that raced it go the way of the version they read.
	version := storedNumber(t, e, userItemKey(alice), "sessionsVersion")
	var dead, alive, refreshed, raced int
	var wantListed []string
	for _, c := range cookies {
		stored := rawItem(t, e, sessionItemKey(c.Value))
		if stored == nil {
			t.Errorf("session item of a cookie is gone; nothing here deletes one")
			continue
		}
		created, gen := numberOf(t, stored, "createdAt"), numberOf(t, stored, "gen")
		if numberOf(t, stored, "refreshedAt") > created {
			refreshed++
		}
		switch o := order[c]; {
		case o.afterFinal && gen != version:
			t.Errorf("a login after the final RevokeAll read the version %d, not the final %d", gen, version)
		case o.beforeFinal && gen == version:
			t.Errorf("a login before the final RevokeAll read its version %d", version)
		case !o.afterFinal && !o.beforeFinal:
			raced++
		}
		s, _, err := first.Authenticate(context.Background(), c.Value)
		if gen != version {
			dead++
			if !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("session of a login that read the version %d, before the final %d: Authenticate = %v, want ErrNoSession", gen, version, err)
			}
			continue
		}
		alive++
		wantListed = append(wantListed, attrText(stored["sid"])[len("S:"):])
		if err != nil || s.CreatedAt.UnixMilli() != created {
			t.Errorf("session of a login that read the final version %d: Authenticate = %v, createdAt %v, want %d", version, err, s.CreatedAt.UnixMilli(), created)
		}
	}
	list, err := first.List(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	got := listIDs(list)
	slices.Sort(got)
	slices.Sort(wantListed)
	if !slices.Equal(got, wantListed) {
		t.Errorf("List has %d sessions, want the %d created after the version version", len(got), len(wantListed))
	}
	t.Logf("%d logins, %d refreshes started (%d sessions refreshed), %d RevokeAlls; final version %d: %d sessions before it, %d after, %d of them racing it",
		len(cookies), refreshes.Load(), refreshed, rounds, version, dead, alive, raced)
	if dead == 0 || alive == 0 || refreshed == 0 {
		t.Errorf("the race did not run: %d sessions before the final RevokeAll, %d after, %d refreshed", dead, alive, refreshed)
	}
}

// loginOrder is where a login stood to the final RevokeAll of a race:
// begun after it returned, or ended before it began.
type loginOrder struct{ afterFinal, beforeFinal bool }

// rawItem reads an item straight from the engine; nil if there is none.
func rawItem(t *testing.T, e *env, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// storedNumber reads a Number attribute of an item straight from the engine.
func storedNumber(t *testing.T, e *env, key map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	item := rawItem(t, e, key)
	if item == nil {
		t.Fatalf("no item %v", itemText(key))
	}
	return numberOf(t, item, name)
}

func numberOf(t *testing.T, item map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%s is %T in %s, want a Number", name, item[name], itemText(item))
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// boundValues returns the values of the bound cookies that responses set.
func boundValues(ws ...*httptest.ResponseRecorder) []string {
	var values []string
	for _, w := range ws {
		for _, c := range boundSetCookies(w) {
			if c.Value != "" {
				values = append(values, c.Value)
			}
		}
	}
	return values
}

// TestDeviceRefreshesRacingOneChallenge: two refreshes answer the same
// challenge (Chromium re-sends a cached proof; a thief may replay one).
// The second reads the session after the first read it and writes first;
// the first's write then finds the challenge used: exactly one bound
// cookie is issued, and it is the one the table holds.
func TestDeviceRefreshesRacingOneChallenge(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		b := e.bound(devicesOf(alg)[0], e.putUser("alice"))
		jwt := b.device.Refresh(b.challenge)
		var inner *httptest.ResponseRecorder
		fired := pauseBefore(p, "SESSION#", func() { inner = b.refreshWith(jwt) })
		outer := b.refreshWith(jwt)
		p.Before = nil
		if !fired.Load() {
			t.Fatal("the race did not run")
		}
		issued := boundValues(outer, inner)
		if len(issued) != 1 {
			t.Fatalf("%d bound cookies issued (statuses %d and %d), want exactly 1", len(issued), outer.Code, inner.Code)
		}
		if inner.Code != http.StatusOK || outer.Code != http.StatusForbidden {
			t.Errorf("statuses: %d for the refresh that wrote first, %d for the other; want 200 and 403", inner.Code, outer.Code)
		}
		challengeOf(t, outer, b.id)
		if got := attrText(e.itemOf(kindSession, b.id)["boundCookie"]); got != "S:"+tokenHash(issued[0]) {
			t.Errorf("stored bound cookie %s is not the issued one's digest", got)
		}
		if got := e.statusWith(b.session, &http.Cookie{Name: "__Host-bound", Value: issued[0]}); got != http.StatusOK {
			t.Errorf("the issued bound cookie: status %d", got)
		}
	})
}

// TestDeviceRegistrationRacingEnd: a registration whose session is signed
// out or revoked between its read and its write leaves neither item
// behind: nothing to list, nothing to let in.
func TestDeviceRegistrationRacingEnd(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, point := range []struct{ name, prefix string }{
			{"before the session item is bound", "SESSION#"},
		} {
			for _, end := range sessionEnders[:2] { // Logout and Revoke delete; RevokeAll is below
				t.Run(alg+"/"+end.name+" "+point.name, func(t *testing.T) {
					t.Parallel()
					e, p := newBoundEnv(t)
					alice := e.putUser("alice")
					b, offer := e.loginOffered(devicesOf(alg)[0], alice)
					id := e.mustList(alice)[0].ID
					fired := pauseBefore(p, point.prefix, func() { end.run(t, e, alice, b, id) })
					w := b.registerWith(b.device.Registration(offer.Challenge))
					p.Before = nil
					if !fired.Load() {
						t.Fatal("the race did not run")
					}
					if items := itemsWithSID(e.scanAll(), id); len(items) != 0 {
						t.Errorf("registration (status %d) racing %s left items: %v", w.Code, end.name, itemsText(items))
					}
					if list := e.mustList(alice); len(list) != 0 {
						t.Errorf("List: %+v", list)
					}
					for _, v := range boundValues(w) {
						if got := e.statusWith(b.session, &http.Cookie{Name: "__Host-bound", Value: v}); got != http.StatusUnauthorized {
							t.Errorf("the bound cookie of the ended session: status %d", got)
						}
					}
					if got := b.status(); got != http.StatusUnauthorized {
						t.Errorf("the session cookie: status %d", got)
					}
				})
			}
		}
	}
}

// TestDeviceRegistrationsRacing: two registrations of one session with
// different keys (the device and a thief with copies of the session cookie
// and the offer), the second landing between the first's read and write.
// One wins, and the key stored is the winner's: the other refreshes with
// nothing.
func TestDeviceRegistrationsRacing(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, otherKey := range []string{alg, otherAlg(alg)} {
			t.Run(alg+"/against "+otherKey, func(t *testing.T) {
				t.Parallel()
				e, p := newBoundEnv(t)
				first, offer := e.loginOffered(devicesOf(alg)[0], e.putUser("alice"))
				second := *first
				second.device = devicesOf(otherKey)[1]
				var inner *httptest.ResponseRecorder
				fired := pauseBefore(p, "SESSION#", func() { inner = second.registerWith(second.device.Registration(offer.Challenge)) })
				outer := first.registerWith(first.device.Registration(offer.Challenge))
				p.Before = nil
				if !fired.Load() {
					t.Fatal("the race did not run")
				}
				if issued := boundValues(outer, inner); len(issued) != 1 {
					t.Fatalf("%d bound cookies issued (statuses %d, %d), want 1", len(issued), outer.Code, inner.Code)
				}
				if inner.Code != http.StatusOK || outer.Code != http.StatusBadRequest {
					t.Fatalf("statuses %d (wrote first) and %d, want 200 and 400", inner.Code, outer.Code)
				}
				second.take(inner)
				if key := e.storedKey(second.id); !maps.Equal(key, second.device.JWK()) {
					t.Errorf("stored key %v, want the winner's %v", key, second.device.JWK())
				}
				loser := second
				loser.device = first.device
				if w := loser.chromiumRefresh(); w.Code != http.StatusBadRequest || len(boundValues(w)) != 0 {
					t.Errorf("refresh with the losing key: status %d, cookies %v; want 400, none", w.Code, w.Result().Cookies())
				}
				second.refresh()
				if got := second.status(); got != http.StatusOK {
					t.Errorf("the winner after its refresh: status %d", got)
				}
			})
		}
	}
}

// TestDeviceRefreshRacingEnd: a refresh whose session is ended between its
// read and its write. After RevokeAll, whatever bound cookie the refresh
// issues does not let the session in: the user's version still applies. After
// Logout or Revoke the write finds no session, creates no item, and the
// browser is told to end the binding.
func TestDeviceRefreshRacingEnd(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, end := range sessionEnders {
			t.Run(alg+"/"+end.name, func(t *testing.T) {
				t.Parallel()
				e, p := newBoundEnv(t)
				alice := e.putUser("alice")
				b := e.bound(devicesOf(alg)[0], alice)
				fired := pauseBefore(p, "SESSION#", func() { end.run(t, e, alice, b, b.id) })
				w := b.refreshWith(b.device.Refresh(b.challenge))
				p.Before = nil
				if !fired.Load() {
					t.Fatal("the race did not run")
				}
				for _, v := range boundValues(w) {
					if got := e.statusWith(b.session, &http.Cookie{Name: "__Host-bound", Value: v}); got != http.StatusUnauthorized {
						t.Errorf("the bound cookie the racing refresh issued: status %d, want 401", got)
					}
				}
				if got := b.status(); got != http.StatusUnauthorized {
					t.Errorf("the earlier bound cookie: status %d, want 401", got)
				}
				if _, _, err := e.m.Authenticate(context.Background(), b.session.Value); !errors.Is(err, ddbsession.ErrNoSession) {
					t.Errorf("Authenticate: %v, want ErrNoSession", err)
				}
				if end.name == "RevokeAll" && len(boundValues(w)) == 0 {
					// Refusing the refresh is as good as issuing a cookie
					// that does not get in (checked above).
					assertEnded(t, w, b.id, "refresh racing RevokeAll")
				} else if end.name != "RevokeAll" {
					assertEnded(t, w, b.id, "refresh racing "+end.name)
					if items := itemsWithSID(e.scanAll(), b.id); len(items) != 0 {
						t.Errorf("refresh racing %s left items: %v", end.name, itemsText(items))
					}
				}
				assertEnded(t, b.chromiumRefresh(), b.id, "the next refresh")
				if list := e.mustList(alice); len(list) != 0 {
					t.Errorf("List: %+v", list)
				}
			})
		}
	}
}

// storedKey returns the device key that session id's item holds, a JWK.
func (e *env) storedKey(id string) map[string]string {
	e.t.Helper()
	item := e.itemOf(kindSession, id)
	var key map[string]string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(attrText(item["boundKey"]), "S:")), &key); err != nil {
		e.t.Fatalf("boundKey of %s: %v", itemText(item), err)
	}
	return key
}

// regions is a Manager of Members in each Region of a simulated global
// table in multi-Region eventual consistency (ddbtest.Regions): one table,
// a replica in each Region, each Manager with Config.Layout.MREC, on the test's
// clock offset by a skew of its own.
type regions struct {
	t     *testing.T
	g     *ddbtest.Regions
	table string
	clock *ddbtest.Clock
	mono  *ddbtest.Mono // every instance's monotonic clock, which ages its copy of the global generation
	a, b  *ddbsession.Manager[Member]
	logs  *syncBuffer
	// mutate adjusts each Manager's Config before New.
	mutate []func(*ddbsession.Config[Member])
}

func newRegions(t *testing.T, skewA, skewB time.Duration, mutate ...func(*ddbsession.Config[Member])) *regions {
	t.Helper()
	g := ddbtest.NewRegions(t, ddbtest.Client(t), ddbtest.SecondClient(t))
	rs := &regions{t: t, g: g, table: g.TableName(t), clock: ddbtest.NewClock(start), mono: &ddbtest.Mono{}, logs: &syncBuffer{}, mutate: mutate}
	rs.a, rs.b = rs.manager(g.A, skewA), rs.manager(g.B, skewB)
	return rs
}

// manager is an instance in the Region that client reaches (a
// ddbtest.Region, or a probe in front of one), whose clock is skew off.
func (rs *regions) manager(client ddbsession.Client, skew time.Duration) *ddbsession.Manager[Member] {
	t := rs.t
	cfg := ddbsession.Config[Member]{
		Client: client, Table: rs.table, Layout: ddbsession.Layout{MREC: true},
		Limits: ddbsession.Limits{IdleTimeout: time.Hour, RefreshInterval: 10 * time.Minute, StoreTimeout: time.Minute},
		Now:    func() time.Time { return rs.clock.Now().Add(skew) },
		Logger: slog.New(slog.NewTextHandler(rs.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range rs.mutate {
		f(&cfg)
	}
	m, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ddbsession.SetMonotonicClock(m, rs.mono.Now)
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Wait(context.Background()) })
	return m
}

// copiesStale makes every instance's copy of the global generation stale,
// as RevokeEveryoneWithin passing does: each reads it again with its next
// request.
func (rs *regions) copiesStale() { rs.mono.Advance(time.Minute) }

// changePassword is the documented credential change in Region r: the new
// password and a new credential version in one write of the user item
// (docs/item-format.md#user-items).
func (rs *regions) changePassword(r *ddbtest.Region, key ddbsession.UserKey, password string) {
	rs.t.Helper()
	_, err := r.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &rs.table, Key: userItemKey(key),
		UpdateExpression:          ptr("SET password = :p, credentialVersion = if_not_exists(credentialVersion, :zero) + :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": attrS(password), ":zero": attrN(0), ":one": attrN(1)},
	})
	if err != nil {
		rs.t.Fatal(err)
	}
}

// alice creates the user alice, with password "pw", in Region A, and
// waits until Region B has her too.
func (rs *regions) alice() ddbsession.UserKey {
	rs.t.Helper()
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := rs.a.CreateUser(context.Background(), Member{PK: alice.PK, SK: alice.SK, Name: "alice", Password: "pw"}); err != nil {
		rs.t.Fatal(err)
	}
	rs.settled()
	return alice
}

// both runs f for each Region's Manager.
func (rs *regions) both(f func(region string, m *ddbsession.Manager[Member])) {
	f("A", rs.a)
	f("B", rs.b)
}

// expect checks that both Regions answer a request with cookie c (named
// what in a failure) with status want.
func (rs *regions) expect(t *testing.T, want int, c *http.Cookie, what string) {
	t.Helper()
	rs.both(func(r string, m *ddbsession.Manager[Member]) {
		if got := statusOf(m, c); got != want {
			t.Errorf("Region %s: %s: status %d, want %d", r, what, got, want)
		}
	})
}

// settled waits for the refreshes the Managers started and for every write
// to reach the other Region.
func (rs *regions) settled() {
	rs.t.Helper()
	for _, m := range []*ddbsession.Manager[Member]{rs.a, rs.b} {
		if err := m.Wait(context.Background()); err != nil {
			rs.t.Fatal(err)
		}
	}
	rs.g.Settle()
}

// requestIn sends a request with c to m's RequireSession and returns its
// answer.
func requestIn(m *ddbsession.Manager[Member], c *http.Cookie) *httptest.ResponseRecorder {
	w := newRecorder()
	m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, newRequest(c))
	return w
}

// userUpdate is the app's own write of a user item in Region r: a profile
// change, or a new password.
func (rs *regions) userUpdate(r *ddbtest.Region, key ddbsession.UserKey, attr, value string) {
	rs.t.Helper()
	_, err := r.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &rs.table, Key: userItemKey(key),
		UpdateExpression:          ptr("SET #a = :v"),
		ExpressionAttributeNames:  map[string]string{"#a": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": attrS(value)},
	})
	if err != nil {
		rs.t.Fatal(err)
	}
}

// MREC: a RevokeAll in Region B, within the lag of a password change in
// Region A, of a user item the app wrote without a sessions version (as
// release v0.1.0 let it). RevokeAll writes the revocation item alone: a
// write of the user item in B would settle whole over A's, and bring the
// old password back in both Regions.
func TestMRECRevokeAllLeavesAnUnversionedUserItemAlone(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if _, err := rs.g.A.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &rs.table, Item: map[string]types.AttributeValue{
		"pk": attrS(alice.PK), "sk": attrS(alice.SK), "name": attrS("alice"), "password": attrS("pw"),
	}}); err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.changePassword(rs.g.A, alice, "new")
	if err := rs.b.RevokeAll(context.Background(), alice); err != nil { // within the lag
		t.Fatal(err)
	}
	rs.settled()
	for name, r := range map[string]*ddbtest.Region{"A": rs.g.A, "B": rs.g.B} {
		if got := attrText(rawRegionItem(t, r, rs.table, userItemKey(alice))["password"]); got != "S:new" {
			t.Errorf("Region %s, settled: the user item's password is %s, want the new one", name, got)
		}
	}
}

// MREC: a RevokeAll in Region A and an app's write of the user item in
// Region B within the replication lag. The user item converges to B's
// version, whole, in both Regions (last writer wins), but the revocation
// state is not on it: the sessions before the RevokeAll stay dead in both,
// the app's write stands, and a login after it lives in both.
func TestMRECRevokeAllRacingAppWrite(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice()
	before, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.clock.Advance(time.Second)
	if err := rs.a.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	rs.userUpdate(rs.g.B, alice, "name", "Alice") // 3 ms later, say: well within the lag
	rs.settled()

	for _, r := range []*ddbtest.Region{rs.g.A, rs.g.B} {
		if name := attrText(rawRegionItem(t, r, rs.table, userItemKey(alice))["name"]); name != "S:Alice" {
			t.Errorf("Region %s: the user item's name is %s: the app's write was undone", r.Name, name)
		}
	}
	rs.expect(t, http.StatusUnauthorized, before, "a session from before the RevokeAll")
	after, err := loginWith(rs.b, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusOK, after, "a login after the RevokeAll")
}

// MREC: a Logout in one Region, and a request in the other within the
// replication lag that refreshes the session there. The refresh's write is
// the later one, and brings the session item back in both Regions; the
// end recorded in the user's state item keeps it dead in both, and out of
// both Regions' lists.
func TestMRECLogoutRacingRefresh(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ logout, refresh string }{{"A", "B"}, {"B", "A"}} {
		t.Run("logout in "+tc.logout+", refresh in "+tc.refresh, func(t *testing.T) {
			t.Parallel()
			rs := newRegions(t, 0, 0)
			managers := map[string]*ddbsession.Manager[Member]{"A": rs.a, "B": rs.b}
			region := map[string]*ddbtest.Region{"A": rs.g.A, "B": rs.g.B}
			alice := rs.alice()
			c, err := loginWith(managers[tc.logout], alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			rs.settled()
			rs.clock.Advance(20 * time.Minute) // a refresh is due

			if err := managers[tc.logout].Logout(newRecorder(), newRequest(c)); err != nil {
				t.Fatal(err)
			}
			w := requestIn(managers[tc.refresh], c) // before the delete has arrived
			if w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
				t.Fatalf("the request in %s within the lag: status %d, Set-Cookie %q; want 200 and a refresh", tc.refresh, w.Code, w.Header().Values("Set-Cookie"))
			}
			rs.settled()

			if rawRegionItem(t, region[tc.logout], rs.table, sessionItemKey(c.Value)) == nil {
				t.Fatal("the race did not run: the refresh's write did not bring the session item back")
			}
			rs.both(func(r string, m *ddbsession.Manager[Member]) {
				if got := statusOf(m, c); got != http.StatusUnauthorized {
					t.Errorf("Region %s: the logged-out session after the refresh's write came back: status %d, want 401", r, got)
				}
				list, err := m.List(context.Background(), alice)
				if err != nil || len(list) != 0 {
					t.Errorf("Region %s: List = %v, %v; want no session", r, list, err)
				}
			})
		})
	}
}

// MREC: a Logout in Region A whose delete is applied but whose answer is
// lost (the SDK's retry finds nothing), and then, in one case, whose index
// delete fails too, still records the session as ended: a refresh in
// Region B within the lag does not bring it back.
func TestMRECLogoutWhoseAnswerIsLost(t *testing.T) {
	t.Parallel()
	for _, indexFails := range []bool{false, true} {
		t.Run(map[bool]string{false: "index delete applied", true: "index delete fails"}[indexFails], func(t *testing.T) {
			t.Parallel()
			rs := newRegions(t, 0, 0)
			p := ddbtest.NewProbe(rs.g.A)
			lossy := rs.manager(p, 0) // an instance in Region A
			alice := rs.alice()
			c, err := loginWith(rs.a, alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			rs.settled()
			rs.clock.Advance(20 * time.Minute) // a refresh is due

			var lost atomic.Int32
			p.Answer = func(ctx context.Context, op string, in any) (any, bool) {
				del, ok := in.(*dynamodb.DeleteItemInput)
				if !ok || !strings.HasPrefix(del.Key["pk"].(*types.AttributeValueMemberS).Value, "SESSION#") {
					return nil, false // not the session item
				}
				if _, err := rs.g.A.DeleteItem(ctx, del); err != nil { // applied...
					t.Error(err)
				}
				lost.Add(1)
				return &dynamodb.DeleteItemOutput{}, true // ...and the retry's answer: nothing was there
			}
			if indexFails {
				p.Fail = func(_ context.Context, op string, _ any) error {
					if op == "DeleteItem" && lost.Load() > 0 { // the index item's, after
						return errors.New("down")
					}
					return nil
				}
			}
			if err := lossy.Logout(newRecorder(), newRequest(c)); err != nil {
				t.Fatal(err)
			}
			if lost.Load() != 1 {
				t.Fatal("the session delete's answer was not lost")
			}
			w := requestIn(rs.b, c) // before the delete has arrived
			if w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
				t.Fatalf("the request in B within the lag: status %d; want 200 and a refresh", w.Code)
			}
			rs.settled()
			rs.expect(t, http.StatusUnauthorized, c, "the logged-out session came back with the refresh's write")
		})
	}
}

// MREC: a Logout in Region A of a session that Region B made and A has
// not seen yet (a browser whose requests change Regions within the lag)
// finds nothing to delete, but records the session's end all the same:
// once replication settles the session is refused in both Regions, and a
// copy of its token with it. (It used to answer nil and leave the session
// alive in both.)
func TestMRECLogoutBeforeTheSessionArrived(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice()
	c, err := loginWith(rs.b, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.a.Logout(newRecorder(), newRequest(c)); err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusUnauthorized, c, "settled: the logged-out session")
}

// MREC: a Logout that carries several sessions this Region has not seen
// records the end of one alone: made-up tokens, which anyone can send,
// must not each write an item kept for a session's lifetime.
func TestMRECLogoutRecordsOneUnseenEnd(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withMREC, withProbe(&p))
	alice := e.putUser("alice")
	var carried []*http.Cookie
	for range 4 {
		c := e.login(alice)
		e.deleteItem(sessionItemKey(c.Value)) // not in this Region (yet)
		carried = append(carried, c)
	}
	p.Reset()
	if err := e.m.Logout(newRecorder(), newRequest(carried...)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"GetItem": 4, "PutItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls of a Logout carrying 4 sessions not seen here (-want +got):\n%s", diff)
	}
	if rawItem(t, e, endItemKey(carried[0].Value)) == nil {
		t.Error("no end record for the first of them")
	}
}

// MREC: a login in Region A whose next request lands in Region B before
// the session has: B refuses it, but leaves the cookie, so that once the
// session has arrived the same cookie works there.
func TestMRECLoginThenRequestInOtherRegion(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice()
	c, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	w := requestIn(rs.b, c)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("the request in B before the session arrived: status %d, want 401", w.Code)
	}
	if cleared := sessionCookie(t, w.Result(), cookieName); cleared != nil {
		t.Errorf("B cleared the cookie of a session that had not arrived yet: %v", cleared)
	}
	rs.settled()
	if got := statusOf(rs.b, c); got != http.StatusOK {
		t.Errorf("the same cookie in B once the session arrived: status %d, want 200", got)
	}

	// A RevokeAll in A, then a login in A: the new session may reach B
	// before the changed version does. B refuses it meanwhile, keeping the
	// cookie, and accepts it once both have arrived.
	if err := rs.a.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	fresh, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusOK, fresh, "the login after the RevokeAll")
	rs.expect(t, http.StatusUnauthorized, c, "the session before the RevokeAll")
}

// MREC with clocks that disagree, 5 s ahead in A and 5 s behind in B: the
// owner changes the password in A (the app's write of the user item, then
// RevokeAll) while attackers in B log in with the old one, before the
// change and after it, which B's replica holds until the change arrives.
// Once it has, none of the attackers' sessions lives in either Region, and
// a login with the new password in B lives in both.
func TestMRECPasswordChangeUnderClockSkew(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 5*time.Second, -5*time.Second)
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := rs.a.CreateUser(context.Background(), Member{PK: alice.PK, SK: alice.SK, Name: "alice", Password: "old"}); err != nil {
		t.Fatal(err)
	}
	rs.settled()
	var cookies []*http.Cookie
	attack := func(n int) {
		t.Helper()
		for range n {
			c, err := loginWith(rs.b, alice, "old")
			if err != nil {
				t.Fatalf("an attacker's login with the old password in B: %v", err)
			}
			cookies = append(cookies, c)
			rs.clock.Advance(time.Millisecond)
		}
	}
	attack(2)
	rs.userUpdate(rs.g.A, alice, "password", "new")
	if err := rs.a.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	attack(2) // within the lag: B has neither write yet
	rs.settled()

	for i, c := range cookies {
		rs.expect(t, http.StatusUnauthorized, c, fmt.Sprintf("attacker session %d with the old password", i))
	}
	c, err := loginWith(rs.b, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusOK, c, "a login with the new password in B")
}

// MREC: a RevokeAll reaches the other Region with the replication of the
// user's revocation state, and no later: B accepts a session from before it
// until that item arrives, and refuses it from the first request after.
func TestMRECRevocationLagIsTheReplicationLag(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice()
	c, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()

	if err := rs.a.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if got := statusOf(rs.b, c); got != http.StatusOK {
		t.Errorf("B before the revocation arrived: status %d, want 200 (it cannot know yet)", got)
	}
	stateKey := "S:USERSESSIONS#10#USER#alicePROFILE" // the user's index partition, as documented
	n := rs.g.Deliver(func(to *ddbtest.Region, key map[string]types.AttributeValue) bool {
		return to == rs.g.B && attrText(key["pk"]) == stateKey
	})
	if n == 0 {
		t.Fatal("RevokeAll in A sent B no write of the user's revocation state")
	}
	if got := statusOf(rs.b, c); got != http.StatusUnauthorized {
		t.Errorf("B's first request after the revocation arrived: status %d, want 401", got)
	}
}

// rawRegionItem reads an item of Region r's replica straight from its
// engine; nil if there is none.
func rawRegionItem(t *testing.T, r *ddbtest.Region, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := r.Engine().GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// MRSC: the two Regions see one another's writes at once, as one engine
// does, and a write that meets a concurrent one in another Region fails
// with ReplicatedWriteConflictException, which the SDK does not retry. The
// library retries it until the call's deadline: a RevokeAll in A through
// conflicts holds in B at once, and a write that keeps conflicting fails
// closed (an error, no session, no cookie), within StoreTimeout.
func TestMRSCWriteConflicts(t *testing.T) {
	t.Parallel()
	conflict := func() error {
		return &types.ReplicatedWriteConflictException{Message: ptr("the item is being modified in another Region")}
	}
	var p *ddbtest.Probe
	// Long enough for the engine's own answers on a busy machine, which
	// are no conflict; short enough that the endless retries below end.
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.StoreTimeout = 2 * time.Second })
	regionB, err := ddbsession.New(e.cfg) // the other Region: the same table, strongly consistent
	if err != nil {
		t.Fatal(err)
	}
	alice := e.putUser("alice")
	c := e.login(alice)

	var conflicts atomic.Int32
	conflicts.Store(3)
	p.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateItem" && conflicts.Add(-1) >= 0 {
			return conflict()
		}
		return nil
	}
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatalf("RevokeAll through 3 conflicts: %v", err)
	}
	if got := e.get(regionB.RequireSession(whoami(regionB)), c).Code; got != http.StatusUnauthorized {
		t.Errorf("B right after A's RevokeAll: status %d, want 401", got)
	}

	p.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateItem" || op == "PutItem" || op == "DeleteItem" {
			return conflict()
		}
		return nil
	}
	began := time.Now()
	err = e.m.RevokeAll(context.Background(), alice)
	if !errors.As(err, new(*types.ReplicatedWriteConflictException)) || !strings.Contains(err.Error(), "another Region") {
		t.Errorf("RevokeAll under endless conflicts = %v, want the conflict, said so", err)
	}
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); err == nil || sessionCookie(t, w.Result(), cookieName) != nil {
		t.Errorf("Login under endless conflicts = %v, cookie %v; want an error and no cookie", err, w.Header().Values("Set-Cookie"))
	}
	if elapsed := time.Since(began); elapsed > 30*time.Second {
		t.Errorf("the failing calls took %v, far past StoreTimeout", elapsed)
	}
}

// Racing completions of one two-step login, on two instances: exactly one
// signs in; and racing wrong codes get five checks in all, however many
// requests try at once.
func TestTwoStepLoginRacing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other, err := ddbsession.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	alice := e.putUser("alice")
	instances := []*ddbsession.Manager[User]{e.m, other}

	pending := e.beginLogin(alice)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var signedIn []*http.Cookie
	start := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			<-start
			w := newRecorder()
			err := instances[i%2].CompleteLogin(w, newRequest(pending), code("123456", "123456"), "otp")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				signedIn = append(signedIn, sessionCookie(t, w.Result(), cookieName))
			case !errors.Is(err, ddbsession.ErrNoSession):
				t.Errorf("a racing completion: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(signedIn) != 1 {
		t.Fatalf("%d of 8 racing completions signed in, want 1", len(signedIn))
	}
	if list := e.mustList(alice); len(list) != 1 {
		t.Errorf("List after the race: %d sessions, want 1", len(list))
	}

	pending = e.beginLogin(alice)
	var checks atomic.Int32
	guess := func(User) error { checks.Add(1); return errWrongCode }
	start = make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			err := instances[i%2].CompleteLogin(newRecorder(), newRequest(pending), guess, "otp")
			if !errors.Is(err, errWrongCode) && !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("a racing guess: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := checks.Load(); n != 5 {
		t.Errorf("20 racing guesses got %d checks, want 5", n)
	}
}

// Logins racing on two instances never leave more sessions alive than
// MaxSessions, whether the limit ends the oldest or refuses the newest.
func TestSessionLimitRacingLogins(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			t.Parallel()
			const limit, logins = 3, 8
			e := newEnv(t, withBearer, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions, c.Limits.RefuseAtMaxSessions = limit, refuse })
			other, err := ddbsession.New(e.cfg)
			if err != nil {
				t.Fatal(err)
			}
			instances := []*ddbsession.Manager[User]{e.m, other}
			alice := e.putUser("alice")
			var wg sync.WaitGroup
			var mu sync.Mutex
			var tokens []string
			refused := 0
			start := make(chan struct{})
			for i := range logins {
				wg.Go(func() {
					<-start
					token, _, err := instances[i%2].LoginBearer(newRequest(), alice, nil)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						tokens = append(tokens, token)
					case refuse && errors.Is(err, ddbsession.ErrTooManySessions):
						refused++
					default:
						t.Errorf("a racing login: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
			alive := 0
			for _, token := range tokens {
				if _, _, err := e.m.Authenticate(context.Background(), token); err == nil {
					alive++
				} else if !errors.Is(err, ddbsession.ErrNoSession) {
					t.Fatal(err)
				}
			}
			if alive > limit || alive == 0 {
				t.Errorf("%d sessions alive after %d racing logins, want at most %d (and some)", alive, logins, limit)
			}
			if refuse && (len(tokens) != limit || refused != logins-limit) {
				t.Errorf("refusing: %d logins succeeded and %d were refused, want %d and %d", len(tokens), refused, limit, logins-limit)
			}
			if list := e.mustList(alice); len(list) != alive {
				t.Errorf("List shows %d sessions, %d are alive", len(list), alive)
			}
		})
	}
}

// MREC: a password change in Region A (the new password, then RevokeAll),
// and within the replication lag a write in Region B of the kind that
// Logouts, rotations and session-limit logins make: (a) the attacker, who
// knows the old password, signs in again in B carrying the session cookie
// stolen earlier, which the login rotates; (b) a Logout of another session
// of the user in B; (c) a login in B under a session limit. Once the
// writes have crossed, every session from before the change and the
// attacker's are refused in both Regions, and the owner's login with the
// new password, made in A after the change, lives in both.
func TestMRECRevokeAllSurvivesWritesInTheOtherRegion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
	}{{"attacker re-login carrying a stolen cookie", 0}, {"Logout of another session", 0}, {"login under a session limit", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := newRegions(t, 0, 0, func(c *ddbsession.Config[Member]) { c.Limits.MaxSessions = tc.limit })
			alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
			if err := rs.a.CreateUser(context.Background(), Member{PK: alice.PK, SK: alice.SK, Name: "alice", Password: "old"}); err != nil {
				t.Fatal(err)
			}
			rs.settled()
			victim, err := loginWith(rs.a, alice, "old") // the session the attacker steals
			if err != nil {
				t.Fatal(err)
			}
			other, err := loginWith(rs.b, alice, "old")
			if err != nil {
				t.Fatal(err)
			}
			rs.settled()
			rs.clock.Advance(time.Second)

			rs.userUpdate(rs.g.A, alice, "password", "new")
			if err := rs.a.RevokeAll(context.Background(), alice); err != nil {
				t.Fatal(err)
			}
			owner, err := loginWith(rs.a, alice, "new")
			if err != nil {
				t.Fatal(err)
			}
			var attacker *http.Cookie
			switch tc.name { // in B, within the lag: B still has the old password
			case "attacker re-login carrying a stolen cookie":
				w := newRecorder()
				if err := rs.b.Login(w, newRequest(victim), alice, checkPassword("old")); err != nil {
					t.Fatal(err)
				}
				attacker = sessionCookie(t, w.Result(), cookieName)
			case "Logout of another session":
				if err := rs.b.Logout(newRecorder(), newRequest(other)); err != nil {
					t.Fatal(err)
				}
			case "login under a session limit":
				if attacker, err = loginWith(rs.b, alice, "old"); err != nil {
					t.Fatal(err)
				}
			}
			rs.settled()

			for name, c := range map[string]*http.Cookie{"the stolen session": victim, "the other session": other, "the attacker's": attacker} {
				if c != nil {
					rs.expect(t, http.StatusUnauthorized, c, name+" after the change")
				}
			}
			rs.expect(t, http.StatusOK, owner, "the owner's login with the new password")
		})
	}
}

// MREC: a RevokeAll from an instance whose clock is behind the version the
// user's sessions copied (50 ms, 5 s) still ends them: the version changes
// from where it is, whatever the revoker's clock says.
func TestMRECRevokeAllWithARevokerClockBehind(t *testing.T) {
	t.Parallel()
	for _, behind := range []time.Duration{50 * time.Millisecond, 5 * time.Second} {
		t.Run(behind.String(), func(t *testing.T) {
			t.Parallel()
			rs := newRegions(t, 0, -behind)
			alice := rs.alice() // created in A, on the test's clock
			c, err := loginWith(rs.a, alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			rs.settled()
			if err := rs.b.RevokeAll(context.Background(), alice); err != nil { // B's clock is behind
				t.Fatal(err)
			}
			rs.settled()
			rs.expect(t, http.StatusUnauthorized, c, fmt.Sprintf("the session after a RevokeAll from a clock %v behind", behind))
		})
	}
}

// MREC with a session limit above two: two logins of one user, one in each
// Region within the lag, each write the user's slots whole, and one write
// wins; both sessions live in both Regions all the same, for a slot decides
// nothing about a request.
func TestMRECLoginsInTwoRegionsUnderALimit(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0, func(c *ddbsession.Config[Member]) { c.Limits.MaxSessions = 3 })
	alice := rs.alice()
	inA, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	inB, err := loginWith(rs.b, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	for name, c := range map[string]*http.Cookie{"A's login": inA, "B's login": inB} {
		rs.expect(t, http.StatusOK, c, name)
	}
}

// MREC: a two-step login's tries are records that no Region's write takes
// back: within the lag each Region counts its own, so an attacker who
// reaches both gets at most five in each, and once the tries have crossed,
// the five already made count in both.
func TestMRECTwoStepTriesAcrossRegions(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice()
	w := newRecorder()
	if err := rs.a.BeginLogin(w, newRequest(), alice, checkPassword("pw"), "password"); err != nil {
		t.Fatal(err)
	}
	var pending *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName+"-pending" {
			pending = c
		}
	}
	rs.settled()
	tries := map[string]int{} // the second factor's checks, by Region
	try := func(region string, m *ddbsession.Manager[Member]) {
		wrong := func(Member) error { tries[region]++; return errWrongCode }
		err := m.CompleteLogin(newRecorder(), newRequest(pending), wrong, "otp")
		if !errors.Is(err, errWrongCode) && !errors.Is(err, ddbsession.ErrNoSession) {
			t.Fatalf("a try in %s: %v", region, err)
		}
	}
	for range 3 {
		try("A", rs.a)
		try("B", rs.b)
	}
	if tries["A"] != 3 || tries["B"] != 3 {
		t.Fatalf("tries within the lag: %v, want 3 in each Region", tries)
	}
	rs.settled()
	for range 5 {
		try("A", rs.a)
	}
	// The first three of each Region took the same three records: two
	// are left in all.
	if tries["A"] != 5 {
		t.Errorf("tries in A after the records crossed: %d more, want 2", tries["A"]-3)
	}
}

// A login copies the global generation it read with the credential: a
// RevokeEveryone that runs while the login is in its verify, on the same
// instance or on another that this one then hears of, ends the new session
// too; so does one between the two steps of a two-step login. And the
// request still reads its session in one BatchGetItem.
func TestLoginRacingRevokeEveryone(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"same instance", "another instance, then a read here", "between the two steps"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p))
			other := primed(t, e.cfg)
			alice := e.putUser("alice")
			revoke := func() {
				if err := other.RevokeEveryone(context.Background()); err != nil {
					t.Error(err)
				}
				if err := e.m.CreateTable(context.Background()); err != nil { // this instance reads the generation anew
					t.Error(err)
				}
			}
			if where == "same instance" {
				revoke = func() {
					if err := e.m.RevokeEveryone(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}
			var c *http.Cookie
			if where == "between the two steps" {
				pending := e.beginLogin(alice)
				revoke()
				res, err := e.completeLogin("123456", pending)
				if !errors.Is(err, ddbsession.ErrNoSession) {
					t.Fatalf("completing across a RevokeEveryone: %v, want ErrNoSession", err)
				}
				c = sessionCookie(t, res, cookieName)
			} else {
				w := newRecorder()
				verify := func(User) error { revoke(); return nil } // the login is paused here
				if err := e.m.Login(w, newRequest(), alice, verify); err != nil {
					t.Fatal(err)
				}
				c = sessionCookie(t, w.Result(), cookieName)
			}
			if c != nil {
				p.Reset()
				if got := e.status(c); got != http.StatusUnauthorized {
					t.Errorf("the session of a login racing RevokeEveryone: status %d, want 401", got)
				}
				if p.Total() != 1 || p.Count("BatchGetItem") != 1 {
					t.Errorf("the request: %v calls, want 1 BatchGetItem", p.Calls())
				}
			}
			if got := e.status(e.login(alice)); got != http.StatusOK {
				t.Errorf("a login after RevokeEveryone: status %d, want 200", got)
			}
		})
	}
}

// MRSC: one linearizable copy, seen by both Regions at once. A RevokeAll in
// A after the new password, followed by the attacker's re-login in B with
// the old one carrying a stolen cookie, a Logout in B, and a login in B
// under a session limit: the attacker's login fails at once (B reads the
// new password), the sessions before the change are refused in both, the
// owner's login after it lives in both; the writes that meet a concurrent
// write in the other Region are retried through its conflicts.
func TestMRSCRevokeAllWithWritesInTheOtherRegion(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	conflicts := atomic.Int32{}
	p.Fail = func(_ context.Context, op string, _ any) error {
		if (op == "UpdateItem" || op == "PutItem" || op == "DeleteItem") && conflicts.Add(1)%3 == 0 {
			return &types.ReplicatedWriteConflictException{Message: ptr("the item is being modified in another Region")}
		}
		return nil
	}
	a := e.members(func(c *ddbsession.Config[Member]) { c.Limits.MaxSessions = 5 })
	b := e.members(func(c *ddbsession.Config[Member]) { c.Limits.MaxSessions = 5 })
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := a.CreateUser(context.Background(), Member{PK: alice.PK, SK: alice.SK, Name: "alice", Password: "old"}); err != nil {
		t.Fatal(err)
	}
	victim, err := loginWith(a, alice, "old")
	if err != nil {
		t.Fatal(err)
	}
	other, err := loginWith(b, alice, "old")
	if err != nil {
		t.Fatal(err)
	}
	e.changePassword(a, alice, "new")
	owner, err := loginWith(a, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Login(newRecorder(), newRequest(victim), alice, checkPassword("old")); !errors.Is(err, errWrongPassword) {
		t.Errorf("the attacker's login in B with the old password: %v, want errWrongPassword", err)
	}
	if err := b.Logout(newRecorder(), newRequest(other)); err != nil {
		t.Fatal(err)
	}
	if _, err := loginWith(b, alice, "new"); err != nil {
		t.Fatal(err)
	}
	for r, m := range map[string]*ddbsession.Manager[Member]{"A": a, "B": b} {
		for name, c := range map[string]*http.Cookie{"the stolen session": victim, "the other session": other} {
			if got := statusOf(m, c); got != http.StatusUnauthorized {
				t.Errorf("Region %s: %s: status %d, want 401", r, name, got)
			}
		}
		if got := statusOf(m, owner); got != http.StatusOK {
			t.Errorf("Region %s: the owner's login after the change: status %d, want 200", r, got)
		}
	}
	if conflicts.Load() < 3 {
		t.Error("no write met a conflict")
	}
}

// MREC: a revocation in Region A and one of the same kind in Region B
// within the replication lag, RevokeAll or RevokeEveryone. They write two
// versions, never one (each adds a random step), and the settlement, last
// writer wins, lowers nothing either achieved: every session made before
// either is refused in both Regions, and so is one made in A between the
// two, whose version the later revocation replaced (a login within the lag
// of the other Region's revocation may be refused: fail closed); the
// owner's login after the settlement lives in both.
func TestMRECRevocationsInTwoRegionsCompose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		revoke func(m *ddbsession.Manager[Member], key ddbsession.UserKey) error
		item   func(rs *regions, key ddbsession.UserKey) map[string]types.AttributeValue
	}{
		{"RevokeAll", func(m *ddbsession.Manager[Member], key ddbsession.UserKey) error {
			return m.RevokeAll(context.Background(), key)
		}, func(rs *regions, key ddbsession.UserKey) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"pk": attrS("USERSESSIONS#10#" + key.PK + key.SK), "sk": attrS("REVOKED")}
		}},
		{"RevokeEveryone", func(m *ddbsession.Manager[Member], _ ddbsession.UserKey) error {
			return m.RevokeEveryone(context.Background())
		}, func(*regions, ddbsession.UserKey) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"pk": attrS("SESSION#GLOBAL"), "sk": attrS("STATE")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := newRegions(t, 0, 0)
			alice := rs.alice()
			inA, err := loginWith(rs.a, alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			inB, err := loginWith(rs.b, alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			rs.settled()

			if err := tc.revoke(rs.a, alice); err != nil { // the clock stands still: the same millisecond in both
				t.Fatal(err)
			}
			between, err := loginWith(rs.a, alice, "pw") // in A, after A's revocation, before B's
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.revoke(rs.b, alice); err != nil { // within the lag: B has none of A's writes
				t.Fatal(err)
			}
			versions := map[string]string{}
			for _, r := range []*ddbtest.Region{rs.g.A, rs.g.B} {
				versions[r.Name] = attrText(rawRegionItem(t, r, rs.table, tc.item(rs, alice))["gen"])
			}
			if versions["A"] == versions["B"] {
				t.Errorf("the two revocations wrote the same version %s", versions["A"])
			}
			rs.settled()
			rs.copiesStale()
			for name, c := range map[string]*http.Cookie{"a session made in A before both": inA, "a session made in B before both": inB, "a session made in A between the two": between} {
				rs.expect(t, http.StatusUnauthorized, c, name)
			}
			for _, m := range []*ddbsession.Manager[Member]{rs.a, rs.b} {
				owner, err := loginWith(m, alice, "pw")
				if err != nil {
					t.Fatal(err)
				}
				rs.settled()
				rs.expect(t, http.StatusOK, owner, "the owner's login after the settlement")
			}
		})
	}
}

// MREC: the owner changes the password in A as docs/multi-region.md says
// (the new password and a new credential version in one write, then a
// login). Within the replication lag, in B, an attacker who knows the old
// password signs in, presses "log out everywhere" (RevokeAll, then Logout)
// and signs in again. Once replication settles, whichever revocation won,
// neither of the attacker's sessions is valid in either Region, since each
// copied the old credential version; the owner's login after the
// settlement lives in both.
func TestMRECPasswordChangeOutlivesTheAttackersRevokeAll(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice() // password "pw"
	rs.changePassword(rs.g.A, alice, "new")
	if _, err := loginWith(rs.a, alice, "new"); err != nil {
		t.Fatal(err)
	}
	first, err := loginWith(rs.b, alice, "pw") // within the lag: B has the old password
	if err != nil {
		t.Fatalf("the attacker's login with the old password in B: %v", err)
	}
	if err := rs.b.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if err := rs.b.Logout(newRecorder(), newRequest(first)); err != nil {
		t.Fatal(err)
	}
	second, err := loginWith(rs.b, alice, "pw")
	if err != nil {
		t.Fatalf("the attacker's second login in B: %v", err)
	}
	rs.settled()
	for name, c := range map[string]*http.Cookie{"the attacker's first session": first, "the attacker's second session": second} {
		rs.expect(t, http.StatusUnauthorized, c, name)
	}
	owner, err := loginWith(rs.b, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusOK, owner, "the owner's login after the settlement")
}

// MREC: a Logout in A whose writes are held up on their way to B for
// longer than the idle timeout, while B keeps refreshing the session (B's
// writes reach A). TTL then runs in A. The end record must still be there
// when A's writes reach B, or B's later refreshes, which win over A's
// delete, bring the session back in both Regions: it lasts the session's
// absolute lifetime, past which no copy of the session is valid anyway.
func TestMRECLogoutHeldUpPastTheIdleTimeout(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0) // IdleTimeout 1h, RefreshInterval 10m
	alice := rs.alice()
	c, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	if err := rs.a.Logout(newRecorder(), newRequest(c)); err != nil {
		t.Fatal(err)
	}
	toA := func(to *ddbtest.Region, _ map[string]types.AttributeValue) bool { return to == rs.g.A }
	for range 18 { // three hours of requests in B, every ten minutes
		rs.clock.Advance(10 * time.Minute)
		if got := statusOf(rs.b, c); got != http.StatusOK {
			t.Fatalf("B before the Logout arrived: status %d, want 200", got)
		}
		if err := rs.b.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		rs.g.Deliver(toA) // B's refreshes reach A; A's writes stay on their way
	}
	ttlRuns(t, rs.g.A, rs.table, rs.clock.Now())
	rs.settled()
	rs.expect(t, http.StatusUnauthorized, c, "settled: the logged-out session")
}

// ttlRuns deletes, through Region r (so that the deletes replicate, as
// TTL's do), every item of r's replica whose TTL attribute is past at now.
func ttlRuns(t *testing.T, r *ddbtest.Region, table string, now time.Time) {
	t.Helper()
	out, err := r.Engine().Scan(context.Background(), &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, av := range out.Items {
		ttl, ok := av["expiresAt"].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		if at, _ := strconv.ParseInt(ttl.Value, 10, 64); at > now.Unix() {
			continue
		}
		key := map[string]types.AttributeValue{"pk": av["pk"], "sk": av["sk"]}
		if _, err := r.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &table, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
}

// mrsc is two instances, A and B, of a global table in multi-Region
// strong consistency: one engine, which every write reaches before it
// returns, and a third of the writes meeting a concurrent write in the
// other Region (ReplicatedWriteConflictException) and retried.
func mrsc(t *testing.T) (e *env, a, b *ddbsession.Manager[Member], alice ddbsession.UserKey) {
	t.Helper()
	var p *ddbtest.Probe
	e = newEnv(t, withProbe(&p))
	var writes atomic.Int32
	p.Fail = func(_ context.Context, op string, _ any) error {
		if (op == "UpdateItem" || op == "PutItem" || op == "DeleteItem") && writes.Add(1)%3 == 0 {
			return &types.ReplicatedWriteConflictException{Message: ptr("the item is being modified in another Region")}
		}
		return nil
	}
	a, b = e.members(), e.members()
	alice = ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := a.CreateUser(context.Background(), Member{PK: alice.PK, SK: alice.SK, Name: "alice", Password: "pw"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if writes.Load() < 3 {
			t.Error("no write met a conflict")
		}
	})
	return e, a, b, alice
}

// MRSC: the revocations of TestMRECRevocationsInTwoRegionsCompose, one in
// each Region. Strongly consistent, each holds in both Regions at once:
// every session before either is refused in both, and a login after both
// lives in both.
func TestMRSCRevocationsInTwoRegionsCompose(t *testing.T) {
	t.Parallel()
	for _, everyone := range []bool{false, true} {
		t.Run(map[bool]string{false: "RevokeAll", true: "RevokeEveryone"}[everyone], func(t *testing.T) {
			t.Parallel()
			_, a, b, alice := mrsc(t)
			revoke := func(m *ddbsession.Manager[Member]) {
				t.Helper()
				err := m.RevokeAll(context.Background(), alice)
				if everyone {
					err = m.RevokeEveryone(context.Background())
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var before []*http.Cookie
			for _, m := range []*ddbsession.Manager[Member]{a, b} {
				c, err := loginWith(m, alice, "pw")
				if err != nil {
					t.Fatal(err)
				}
				before = append(before, c)
			}
			revoke(a)
			between, err := loginWith(a, alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			revoke(b)
			after, err := loginWith(b, alice, "pw")
			if err != nil {
				t.Fatal(err)
			}
			for r, m := range map[string]*ddbsession.Manager[Member]{"A": a, "B": b} {
				for i, c := range append(before, between) {
					if got := statusOf(m, c); got != http.StatusUnauthorized {
						t.Errorf("Region %s: session %d, made before a revocation: status %d, want 401", r, i, got)
					}
				}
				if got := statusOf(m, after); got != http.StatusOK {
					t.Errorf("Region %s: the login after both: status %d, want 200", r, got)
				}
			}
		})
	}
}

// MRSC: the attacker of TestMRECPasswordChangeOutlivesTheAttackersRevokeAll
// meets the new password in B at once: their login with the old one
// fails, and their RevokeAll and Logout, of a session signed in before
// the change, leave them nothing; the owner's login lives in both Regions.
func TestMRSCPasswordChangeOutlivesTheAttackersRevokeAll(t *testing.T) {
	t.Parallel()
	e, a, b, alice := mrsc(t)
	stolen, err := loginWith(b, alice, "pw") // before the change
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: userItemKey(alice),
		UpdateExpression:          ptr("SET password = :p, credentialVersion = if_not_exists(credentialVersion, :zero) + :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": attrS("new"), ":zero": attrN(0), ":one": attrN(1)},
	}); err != nil {
		t.Fatal(err)
	}
	owner, err := loginWith(a, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loginWith(b, alice, "pw"); !errors.Is(err, errWrongPassword) {
		t.Errorf("the attacker's login in B with the old password: %v, want errWrongPassword", err)
	}
	if err := b.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if err := b.Logout(newRecorder(), newRequest(stolen)); err != nil {
		t.Fatal(err)
	}
	if _, err := loginWith(b, alice, "pw"); !errors.Is(err, errWrongPassword) {
		t.Errorf("the attacker's second login in B: %v, want errWrongPassword", err)
	}
	again, err := loginWith(a, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	for r, m := range map[string]*ddbsession.Manager[Member]{"A": a, "B": b} {
		if got := statusOf(m, stolen); got != http.StatusUnauthorized {
			t.Errorf("Region %s: the attacker's session: status %d, want 401", r, got)
		}
		if got := statusOf(m, owner); got != http.StatusUnauthorized {
			t.Errorf("Region %s: the owner's login before the attacker's RevokeAll: status %d, want 401", r, got)
		}
		if got := statusOf(m, again); got != http.StatusOK {
			t.Errorf("Region %s: the owner's login after: status %d, want 200", r, got)
		}
	}
}

// MRSC: a Login whose every write meets a write in the other Region
// (ReplicatedWriteConflictException, which the library retries until the
// deadline) fails closed within StoreTimeout, its undo included: no call
// it makes has a deadline past StoreTimeout from its first call's start.
// Its undo used to run on a deadline of its own after the call's, twice
// StoreTimeout in all.
func TestMRSCLoginFailsWithinStoreTimeout(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.StoreTimeout = 200 * time.Millisecond })
	alice := e.putUser("alice")
	var mu sync.Mutex
	var deadlines []time.Time
	var began time.Time // the first call's start: the Login's deadline is at most StoreTimeout after it
	p.Fail = func(ctx context.Context, op string, _ any) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Errorf("%s without a deadline", op)
		}
		mu.Lock()
		if began.IsZero() {
			began = time.Now()
		}
		deadlines = append(deadlines, d)
		mu.Unlock()
		if op == "UpdateItem" || op == "PutItem" || op == "DeleteItem" {
			return &types.ReplicatedWriteConflictException{Message: ptr("the item is being modified in another Region")}
		}
		return nil
	}
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); !errors.As(err, new(*types.ReplicatedWriteConflictException)) {
		t.Errorf("Login under endless conflicts = %v, want the conflict", err)
	}
	if c := sessionCookie(t, w.Result(), cookieName); c != nil {
		t.Errorf("the failed Login set a cookie: %v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) < 3 {
		t.Fatalf("%d calls, want the read, the writes and the undo", len(deadlines))
	}
	bound := began.Add(e.cfg.Limits.StoreTimeout)
	for i, d := range deadlines {
		if d.After(bound) {
			t.Errorf("call %d's deadline is %v past StoreTimeout from the Login's first call", i, d.Sub(bound))
		}
	}
}

// MREC: a user item deleted and made anew by the app, with a fresh
// sessions version, in one Region, does not inherit the sessions of the
// one before in either, though the user's revocation item, which holds the
// version RevokeAll changes, outlives the deleted user: the sessions copied
// the user item's own version too.
func TestMRECRecreatedUserInheritsNoSession(t *testing.T) {
	t.Parallel()
	rs := newRegions(t, 0, 0)
	alice := rs.alice()
	if err := rs.a.RevokeAll(context.Background(), alice); err != nil { // the revocation item exists
		t.Fatal(err)
	}
	old, err := loginWith(rs.a, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	if _, err := rs.g.A.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &rs.table, Key: userItemKey(alice)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.g.A.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &rs.table, Item: map[string]types.AttributeValue{
		"pk": attrS(alice.PK), "sk": attrS(alice.SK), "name": attrS("another alice"), "password": attrS("pw"), "sessionsVersion": newVersion(),
	}}); err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusUnauthorized, old, "the deleted user's session on the user item made anew")
	c, err := loginWith(rs.b, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	rs.settled()
	rs.expect(t, http.StatusOK, c, "the new user's login")
}
