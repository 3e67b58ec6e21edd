package ddbsession_test

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/ddbsession/ddbsession"
)

// An attacker who knows the old password logs in while the owner changes
// it: the attacker's LoginWith is paused after it read the user item (old
// password, accepted) and before it writes its session; the change writes
// the new password and cuts off; then the login completes. Its session
// must be dead on arrival. The clock does not move at all, the hardest
// case: every timestamp is the same millisecond.
func TestLoginWithRacingPasswordChange(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	alice := e.createMember(m, "alice", "old")

	read, resume := make(chan struct{}), make(chan struct{})
	var paused atomic.Bool
	p.before = func(_ context.Context, op string, in any) {
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
	p.before = nil
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
		t.Errorf("LoginWith with the old password after the change: %v, want errWrongPassword", err)
	}
	c, err := loginWith(m, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	if got := statusOf(m, c); got != http.StatusOK {
		t.Errorf("a login with the new password: status %d, want 200", got)
	}
}

// The same race, as it happens: attackers on a second instance loop
// LoginWith with the old password while the owner changes it; none of
// their sessions survives the change, and the owner's own browser is signed
// in again with a fresh session.
func TestLoginWithLoopingAttackersDuringPasswordChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	owner := e.members()
	alice := e.createMember(owner, "alice", "old")
	ownerCookie, err := loginWith(owner, alice, "old")
	if err != nil {
		t.Fatal(err)
	}
	second := e.members() // another instance on the same table

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
		if n >= 8 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	e.changePassword(owner, alice, "new")
	w := newRecorder()
	if err := owner.Login(w, newRequest(ownerCookie), alice); err != nil { // keep the owner signed in
		t.Fatal(err)
	}
	fresh := sessionCookie(t, w.Result(), cookieName)
	stop.Store(true)
	wg.Wait()

	survivors := 0
	for _, c := range cookies {
		if statusOf(owner, c) == http.StatusOK {
			survivors++
		}
	}
	if survivors != 0 {
		t.Errorf("%d of %d attacker sessions survived the password change", survivors, len(cookies))
	}
	if statusOf(owner, ownerCookie) != http.StatusUnauthorized {
		t.Error("the owner's old session survived the change")
	}
	if statusOf(owner, fresh) != http.StatusOK {
		t.Error("the owner's fresh session after the change does not work")
	}
}

// TestRevokeAllRacingLoginsAndRefreshes runs RevokeAll several times while
// logins (Login on one instance, LoginWith on another) and requests that
// refresh sessions run at full speed against the same user, with the
// injected clock advancing under all of them. Afterwards the table decides:
// with the user's final stored cutoff, every session created at or before
// it (its stored createdAt) is rejected by Check and left out of List, and
// every session created after it is accepted, with that createdAt, and
// listed. Both kinds must exist, and refreshes must have happened, or the
// race was not run.
func TestRevokeAllRacingLoginsAndRefreshes(t *testing.T) {
	t.Parallel()
	// A refresh is due a millisecond after the last, so that every request
	// whose expiry (whole seconds) can move writes one.
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.RefreshInterval = time.Millisecond })
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
					if err = first.Login(w, newRequest(), alice); err == nil {
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
	awaitLogins(final + 25) // logins after the final cutoff
	stop.Store(true)
	wg.Wait()
	for _, m := range []interface{ Wait(context.Context) error }{first, second} {
		if err := m.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	// The table's word: the final cutoff, and for each session the cutoff
	// its login read (gen). A session lives if and only if its login read
	// the final cutoff: every login that began after the final RevokeAll
	// returned lives, every one that ended before it began dies, and those
	// that raced it go the way of the cutoff they read.
	cutoff := storedNumber(t, e, userItemKey(alice), "sessionsValidAfter")
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
		case o.afterFinal && gen != cutoff:
			t.Errorf("a login after the final RevokeAll read the cutoff %d, not the final %d", gen, cutoff)
		case o.beforeFinal && gen == cutoff:
			t.Errorf("a login before the final RevokeAll read its cutoff %d", cutoff)
		case !o.afterFinal && !o.beforeFinal:
			raced++
		}
		s, _, err := first.Check(context.Background(), c.Value)
		if gen != cutoff {
			dead++
			if !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("session of a login that read the cutoff %d, before the final %d: Check = %v, want ErrNoSession", gen, cutoff, err)
			}
			continue
		}
		alive++
		wantListed = append(wantListed, attrText(stored["sid"])[len("S:"):])
		if err != nil || s.CreatedAt.UnixMilli() != created {
			t.Errorf("session of a login that read the final cutoff %d: Check = %v, createdAt %v, want %d", cutoff, err, s.CreatedAt.UnixMilli(), created)
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
		t.Errorf("List has %d sessions, want the %d created after the final cutoff", len(got), len(wantListed))
	}
	t.Logf("%d logins, %d refreshes started (%d sessions refreshed), %d cutoffs; final cutoff %d: %d sessions before it, %d after, %d of them racing it",
		len(cookies), refreshes.Load(), refreshed, rounds, cutoff, dead, alive, raced)
	if dead == 0 || alive == 0 || refreshed == 0 {
		t.Errorf("the race did not run: %d sessions before the cutoff, %d after, %d refreshed", dead, alive, refreshed)
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
		p.before = nil
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
// out or revoked between its read and its writes, either before the
// session item is bound or between that and the index item, leaves neither
// item behind: nothing to list, nothing to let in.
func TestDeviceRegistrationRacingEnd(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, point := range []struct{ name, prefix string }{
			{"before the session item is bound", "SESSION#"},
			{"before the index item is marked", "USERSESSIONS#"},
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
					p.before = nil
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
				p.before = nil
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
// issues does not let the session in: the user's cutoff still applies. After
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
				p.before = nil
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
				if _, _, err := e.m.Check(context.Background(), b.session.Value); !errors.Is(err, ddbsession.ErrNoSession) {
					t.Errorf("Check: %v, want ErrNoSession", err)
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
