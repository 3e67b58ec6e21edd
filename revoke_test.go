package ddbsession_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// RevokeAll ends the sessions of its own millisecond too, and a login right
// after it, in that same millisecond, holds.
func TestRevokeAllSameMillisecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // the clock stands still
	alice := e.putUser("alice")
	before := e.login(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	after := e.login(alice)
	if got := e.status(before); got != http.StatusUnauthorized {
		t.Errorf("session of the RevokeAll's millisecond: %d, want 401", got)
	}
	if got := e.status(after); got != http.StatusOK {
		t.Errorf("login right after RevokeAll, same millisecond: %d, want 200", got)
	}
	// A second RevokeAll in the same millisecond still ends that login.
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if got := e.status(after); got != http.StatusUnauthorized {
		t.Errorf("after a second RevokeAll in the same millisecond: %d, want 401", got)
	}
}

func TestRevokeEndsOneSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	phone := e.login(alice)
	e.clock.Advance(time.Second)
	laptop := e.login(alice)
	bobs := e.login(bob)
	phoneID := e.sessionFor(phone).ID
	laptopID := e.sessionFor(laptop).ID

	// Revoke from the laptop's own request, as a "sign out that device" page does.
	var err error
	e.inRequest(laptop, func(ctx context.Context) {
		s, _ := e.m.Session(ctx)
		err = e.m.Revoke(ctx, s.User, phoneID)
	})
	if err != nil {
		t.Fatalf("Revoke(phone): %v", err)
	}

	for name, tc := range map[string]struct {
		c    *http.Cookie
		want int
	}{
		"revoked session":        {phone, http.StatusUnauthorized},
		"the user's other":       {laptop, http.StatusOK},
		"another user's session": {bobs, http.StatusOK},
	} {
		if got := e.status(tc.c); got != tc.want {
			t.Errorf("%s: status %d, want %d", name, got, tc.want)
		}
	}
	if diff := cmp.Diff([]string{laptopID}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("alice's sessions after Revoke (-want +got):\n%s", diff)
	}
	// Both of the session's items are gone, not just hidden.
	if items := itemsWithSID(e.scanAll(), phoneID); len(items) != 0 {
		t.Errorf("revoked session still has %d items: %v", len(items), items)
	}
	if err := e.m.Revoke(context.Background(), alice, phoneID); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("second Revoke of the same ID = %v, want ErrNoSession", err)
	}
}

func TestRevokeRefusesIDsThatAreNotTheUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	// Keys that a naive PK+SK concatenation would put in one index partition.
	a := ddbsession.UserKey{PK: "USER#a#", SK: "b"}
	b := ddbsession.UserKey{PK: "USER#a", SK: "#b"}
	e.putUserAt(a, "a")
	e.putUserAt(b, "b")

	cookies := map[string]*http.Cookie{}
	ids := map[string]string{}
	for name, key := range map[string]ddbsession.UserKey{"alice": alice, "bob": bob, "a": a, "b": b} {
		cookies[name] = e.login(key)
		ids[name] = e.sessionFor(cookies[name]).ID
	}
	var random [16]byte
	rand.Read(random[:])
	before := len(e.scanAll())

	for _, tc := range []struct {
		name string
		user ddbsession.UserKey
		id   string
	}{
		{"another user's session", alice, ids["bob"]},
		{"colliding key a, b's session", a, ids["b"]},
		{"colliding key b, a's session", b, ids["a"]},
		{"unknown well-formed ID", alice, hex.EncodeToString(random[:])},
		{"empty", alice, ""},
		{"uppercase of the user's own ID", alice, strings.ToUpper(ids["alice"])},
		{"own ID with a suffix", alice, ids["alice"] + "0"},
		{"own ID cut short", alice, ids["alice"][:31]},
		{"own ID as an index sort key", alice, "SID#" + ids["alice"]},
		{"the user's own token", alice, cookies["alice"].Value},
		{"another user's token", alice, cookies["bob"].Value},
		{"own ID for an unknown user", ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}, ids["alice"]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.m.Revoke(context.Background(), tc.user, tc.id); !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("Revoke(%+v, %q) = %v, want ErrNoSession", tc.user, tc.id, err)
			}
			for name, c := range cookies {
				if got := e.status(c); got != http.StatusOK {
					t.Errorf("%s's session after the refused Revoke: status %d, want 200", name, got)
				}
			}
			if after := len(e.scanAll()); after != before {
				t.Errorf("refused Revoke changed the item count from %d to %d", before, after)
			}
		})
	}
}

// A session item deleted behind the library's back (by TTL, say) leaves its
// index item, which List never shows: it reads the session items, and
// drops the index item of one that is gone. Revoking the session before
// that succeeds and removes the index item.
func TestRevokeSessionItemAlreadyGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	gone := e.login(alice)
	goneID := e.sessionFor(gone).ID
	e.clock.Advance(time.Second)
	other := e.login(alice)
	otherID := e.sessionFor(other).ID

	e.deleteItem(sessionItemKey(gone.Value))
	if got := e.status(gone); got != http.StatusUnauthorized {
		t.Fatalf("session without its item: status %d, want 401", got)
	}
	if err := e.m.Revoke(context.Background(), alice, goneID); err != nil {
		t.Fatalf("Revoke of a session whose item is gone = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{otherID}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("List after Revoke (-want +got):\n%s", diff)
	}
	if items := itemsWithSID(e.scanAll(), goneID); len(items) != 0 {
		t.Errorf("items of the revoked session left: %v", itemsText(items))
	}
	if got := e.status(other); got != http.StatusOK {
		t.Errorf("the user's other session after Revoke: status %d, want 200", got)
	}
	if n := len(e.itemsOf(kindIndex, otherID)); n != 1 {
		t.Errorf("the other session has %d index items, want 1", n)
	}
	if err := e.m.Revoke(context.Background(), alice, goneID); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("second Revoke = %v, want ErrNoSession", err)
	}

	// List, with a stale index item: the session is left out, and the
	// index item, once it is too old to be a login's on its way, dropped.
	third := e.login(alice)
	thirdID := e.sessionFor(third).ID
	e.deleteItem(sessionItemKey(third.Value))
	e.clock.Advance(time.Minute + e.cfg.Limits.StoreTimeout)
	if diff := cmp.Diff([]string{otherID}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("List with a stale index item (-want +got):\n%s", diff)
	}
	if items := itemsWithSID(e.scanAll(), thirdID); len(items) != 0 {
		t.Errorf("List left the stale index item: %v", itemsText(items))
	}
}

// RevokeAll must be right within one second: sessions made a few hundred
// milliseconds before it die, a login right after it lives.
func TestRevokeAllWithinOneSecond(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	bob := e.putUser("bob")

	first := e.login(alice) // 12:00:00.250
	e.clock.Advance(500 * time.Millisecond)
	second := e.login(alice) // 12:00:00.750
	e.clock.Advance(249 * time.Millisecond)
	last := e.login(alice) // 12:00:00.999, one millisecond before the revoke
	bobs := e.login(bob)
	e.clock.Advance(time.Millisecond)

	p.Reset()
	if err := e.m.RevokeAll(context.Background(), alice); err != nil { // 12:00:01.000
		t.Fatal(err)
	}
	// No scan, no query: one conditional write, and the user's history
	// event.
	if diff := cmp.Diff(map[string]int{"UpdateItem": 1, "PutItem": 1}, p.Calls()); diff != "" {
		t.Errorf("RevokeAll's DynamoDB calls (-want +got):\n%s", diff)
	}
	sameMillisecond := e.login(alice) // 12:00:01.000
	e.clock.Advance(100 * time.Millisecond)
	later := e.login(alice)

	for name, tc := range map[string]struct {
		c    *http.Cookie
		want int
	}{
		"750ms before":                {first, http.StatusUnauthorized},
		"250ms before":                {second, http.StatusUnauthorized},
		"1ms before":                  {last, http.StatusUnauthorized},
		"login in the same ms, after": {sameMillisecond, http.StatusOK},
		"login 100ms after":           {later, http.StatusOK},
		"another user's session":      {bobs, http.StatusOK},
	} {
		if got := e.status(tc.c); got != tc.want {
			t.Errorf("%s: status %d, want %d", name, got, tc.want)
		}
	}

	// The next RevokeAll changes the version again, with one write, and
	// never to a version a session copied.
	version := func() int64 {
		return storedNumber(t, e, userItemKey(alice), "sessionsVersion")
	}
	before := version()
	p.Reset()
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"UpdateItem": 1, "PutItem": 1}, p.Calls()); diff != "" {
		t.Errorf("second RevokeAll's DynamoDB calls (-want +got):\n%s", diff)
	}
	if after := version(); after == before {
		t.Errorf("sessionsVersion %d after the second RevokeAll: unchanged", after)
	}
	if got := e.status(later); got != http.StatusUnauthorized {
		t.Errorf("a session before the second RevokeAll: status %d, want 401", got)
	}
}

func TestRevokeAllNeverMovesTheVersionBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	e.clock.Advance(time.Minute)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	// An instance whose clock lags a minute revokes too; sessions made in
	// that minute must stay revoked.
	e.clock.Advance(-time.Minute)
	stale := e.login(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatalf("RevokeAll with a lagging clock: %v", err)
	}
	if got := e.status(stale); got != http.StatusUnauthorized {
		t.Errorf("session from before the later RevokeAll: status %d, want 401", got)
	}
}

// Two RevokeAlls race on a user item the app wrote without a version: both
// find none, and the other starts it while this one is on its way to. This
// one must still change the version, or a login between the two writes
// would outlive a RevokeAll that returned after it.
func TestRevokeAllsRacingToStartTheVersion(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUnversionedUser("alice")
	var writes atomic.Int32
	var between *http.Cookie
	p.Before = func(_ context.Context, op string, in any) {
		if op != "UpdateItem" || updateKey(in) != alice.PK || writes.Add(1) != 2 {
			return
		}
		// This RevokeAll found no version and is about to start one.
		if err := e.m.RevokeAll(context.Background(), alice); err != nil {
			t.Errorf("the racing RevokeAll: %v", err)
		}
		between = e.login(alice)
	}
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if between == nil {
		t.Fatal("the race was not staged")
	}
	if got := e.status(between); got != http.StatusUnauthorized {
		t.Errorf("a login before RevokeAll returned: status %d, want 401", got)
	}
	if got := e.status(e.login(alice)); got != http.StatusOK {
		t.Errorf("a login after both: status %d, want 200", got)
	}
}

func TestRevokeAllUnknownUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	err := e.m.RevokeAll(context.Background(), ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"})
	if !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("RevokeAll(unknown) = %v, want ErrUserNotFound", err)
	}
	if items := e.scanAll(); len(items) != 0 {
		t.Errorf("RevokeAll of an unknown user wrote %d items", len(items))
	}
}

func TestListNewestFirstWithCurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // IdleTimeout 1h
	alice := e.putUser("alice")
	bob := e.putUser("bob")

	var cookies []*http.Cookie
	var want []ddbsession.Session
	for i := range 3 {
		if i > 0 {
			e.clock.Advance(1500 * time.Millisecond)
		}
		at := e.clock.Now()
		c := e.login(alice)
		cookies = append(cookies, c)
		s := loggedIn(e.sessionFor(c).ID, alice, at, time.Hour)
		want = append([]ddbsession.Session{s}, want...) // newest first

		// A session created a moment ago is already listed.
		got := e.mustList(alice)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("List right after login %d (-want +got):\n%s", i+1, diff)
		}
	}
	e.login(bob)

	for i, c := range cookies {
		wantNow := make([]ddbsession.Session, len(want))
		copy(wantNow, want)
		wantNow[len(want)-1-i].Current = true
		if diff := cmp.Diff(wantNow, e.listIn(c, alice)); diff != "" {
			t.Errorf("List in a request of session %d (-want +got):\n%s", i+1, diff)
		}
	}
	// Outside a request, or listing someone else's sessions, nothing is current.
	for _, s := range e.mustList(alice) {
		if s.Current {
			t.Errorf("List without a session in ctx marks %s as current", s.ID)
		}
	}
	for _, s := range e.listIn(cookies[0], bob) {
		if s.Current {
			t.Errorf("List of bob in alice's request marks %s as current", s.ID)
		}
	}
}

func TestListLeavesOutExpiredSessions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after time.Duration // time from the old session's login
		live  bool
	}{
		{"a second before expiry", time.Hour - time.Second, true},
		{"in the second of expiry", time.Hour, false},
		{"an hour after expiry", 2 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil) // IdleTimeout 1h
			alice := e.putUser("alice")
			old := e.login(alice)
			oldID := e.sessionFor(old).ID
			e.clock.Advance(tc.after - time.Minute)
			fresh := e.login(alice)
			freshID := e.sessionFor(fresh).ID
			e.clock.Advance(time.Minute)

			want := []string{freshID}
			if tc.live {
				want = append(want, oldID)
			}
			if diff := cmp.Diff(want, listIDs(e.mustList(alice))); diff != "" {
				t.Errorf("listed IDs (-want +got):\n%s", diff)
			}
			// List agrees with the middleware about which sessions live.
			if _, _, err := e.m.Authenticate(context.Background(), old.Value); (err == nil) != tc.live {
				t.Errorf("Authenticate(old session) = %v, want live %v", err, tc.live)
			}
			// The expired session is still in the table (TTL lags): List
			// leaves it out by itself, and drops its index item.
			wantItems := 2 // session and index
			if !tc.live {
				wantItems = 1 // the session item, until TTL removes it
			}
			if n := len(itemsWithSID(e.scanAll(), oldID)); n != wantItems {
				t.Errorf("old session has %d items in the table, want %d", n, wantItems)
			}
		})
	}
}

func TestListLeavesOutSessionsBeforeRevokeAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	early := e.sessionFor(e.login(alice)).ID
	e.clock.Advance(999 * time.Millisecond)
	lastMs := e.sessionFor(e.login(alice)).ID // 1ms before the RevokeAll
	bobs := e.sessionFor(e.login(bob)).ID
	e.clock.Advance(time.Millisecond)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	sameMs := e.sessionFor(e.login(alice)).ID
	e.clock.Advance(time.Second)
	later := e.sessionFor(e.login(alice)).ID

	if diff := cmp.Diff([]string{later, sameMs}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("alice's sessions after RevokeAll (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{bobs}, listIDs(e.mustList(bob))); diff != "" {
		t.Errorf("bob's sessions after alice's RevokeAll (-want +got):\n%s", diff)
	}
	// List left the revoked sessions out and dropped their index items,
	// so that the next List reads them no more; their session items stay
	// until TTL removes them, and are rejected meanwhile.
	for _, id := range []string{early, lastMs} {
		if items := itemsWithSID(e.scanAll(), id); len(items) != 1 || attrText(items[0]["kind"]) != "S:session" {
			t.Errorf("revoked session %s: items %v, want its session item alone", id, itemsText(items))
		}
	}
}

func TestListShowsOnlyTheUsersOwnSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	// Keys that a naive PK+SK or PK+"#"+SK concatenation would merge.
	a := ddbsession.UserKey{PK: "USER#a#", SK: "b"}
	b := ddbsession.UserKey{PK: "USER#a", SK: "#b"}
	e.putUserAt(a, "a")
	e.putUserAt(b, "b")
	carol := e.putUser("carol") // no sessions

	users := map[string]ddbsession.UserKey{"alice": alice, "bob": bob, "USER#a#|b": a, "USER#a|#b": b, "carol": carol}
	own := map[string][]string{}
	for _, name := range []string{"alice", "bob", "USER#a#|b", "USER#a|#b", "alice", "USER#a|#b", "USER#a#|b"} {
		e.clock.Advance(time.Second)
		id := e.sessionFor(e.login(users[name])).ID
		own[name] = append([]string{id}, own[name]...) // newest first
	}
	for name, key := range users {
		t.Run(name, func(t *testing.T) {
			list := e.mustList(key)
			if diff := cmp.Diff(own[name], listIDs(list), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("listed IDs (-want +got):\n%s", diff)
			}
			for _, s := range list {
				if s.User != key {
					t.Errorf("session %s listed for %+v belongs to %+v", s.ID, key, s.User)
				}
			}
		})
	}
	if list := e.mustList(ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}); len(list) != 0 {
		t.Errorf("List of a user without an item = %v, want none", listIDs(list))
	}
}

func TestListIDIsNotTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	c := e.login(alice)
	list := e.mustList(alice)
	if len(list) != 1 {
		t.Fatalf("List = %d sessions, want 1", len(list))
	}
	id := list[0].ID
	if !sessionIDFormat.MatchString(id) {
		t.Errorf("ID %q is not 32 lowercase hex digits", id)
	}
	sum := sha256.Sum256([]byte(c.Value))
	for what, secret := range map[string]string{
		"the token":                 c.Value,
		"the token, lowercased":     strings.ToLower(c.Value),
		"base64url(SHA-256(token))": tokenHash(c.Value),
		"hex(SHA-256(token))":       hex.EncodeToString(sum[:]),
		"base64(SHA-256(token))":    base64.StdEncoding.EncodeToString(sum[:]),
	} {
		if strings.Contains(secret, id) || strings.Contains(id, secret) {
			t.Errorf("ID %q overlaps %s %q", id, what, secret)
		}
	}
	if id[:16] == hex.EncodeToString(sum[:8]) {
		t.Errorf("ID %q starts with the token's hash", id)
	}
	// The ID does not work as a cookie.
	forged := &http.Cookie{Name: cookieName, Value: id}
	if got := e.status(forged); got != http.StatusUnauthorized {
		t.Errorf("request with the session ID as cookie: status %d, want 401", got)
	}
	if _, _, err := e.m.Authenticate(context.Background(), id); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("Authenticate(ID) = %v, want ErrNoSession", err)
	}
	if got := e.status(c); got != http.StatusOK {
		t.Errorf("the real cookie: status %d, want 200", got)
	}
}

func TestListFollowsRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	c := e.login(alice)
	s := loggedIn(e.sessionFor(c).ID, alice, start, time.Hour)
	if diff := cmp.Diff([]ddbsession.Session{current(s)}, e.listIn(c, alice)); diff != "" {
		t.Fatalf("List before the refresh (-want +got):\n%s", diff)
	}

	e.clock.Advance(11*time.Minute + 7*time.Millisecond)
	now := e.clock.Now()
	w := e.get(e.m.RequireSession(whoami(e.m)), c)
	if w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
		t.Fatalf("refreshing request: status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	s.RefreshedAt = time.UnixMilli(now.UnixMilli())
	s.ExpiresAt = time.Unix(now.Add(time.Hour).Unix(), 0)
	if diff := cmp.Diff([]ddbsession.Session{s}, e.mustList(alice)); diff != "" {
		t.Errorf("List after the refresh (-want +got):\n%s", diff)
	}

	// Past the original expiry the refreshed session is still listed.
	e.clock.Advance(55 * time.Minute) // 1h06m after login, 4m before the new expiry
	if diff := cmp.Diff([]string{s.ID}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("List past the original expiry (-want +got):\n%s", diff)
	}
}

func TestListAndRevokeNeedASortKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true })
	alice := e.putUser("alice")
	c := e.login(alice)
	id := e.sessionFor(c).ID
	if list, err := e.m.List(context.Background(), alice); !needsSortKey(err) {
		t.Errorf("List in a hash-only table = %v, %v; want the error that a sort key is needed", list, err)
	}
	if err := e.m.Revoke(context.Background(), alice, id); !needsSortKey(err) {
		t.Errorf("Revoke in a hash-only table = %v, want the error that a sort key is needed", err)
	}
	if got := e.status(c); got != http.StatusOK {
		t.Errorf("session after the refused Revoke: status %d, want 200", got)
	}
}

// Sessions that RevokeAll ended cost one List to forget: it reads their
// index items once, with their session items, leaves them out, and drops
// the index items; the next List reads only the live sessions, newest
// first. Each List is two calls: the Query and one BatchGetItem.
func TestListAfterRevokeAllDropsRevokedSessions(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	read := queriesRead(p)
	alice := e.putUser("alice")
	const revoked = 90
	for range revoked {
		e.clock.Advance(time.Millisecond)
		e.login(alice)
	}
	read()
	if got := len(e.mustList(alice)); got != revoked {
		t.Fatalf("List before RevokeAll: %d sessions, want %d", got, revoked)
	}
	if items, _ := read(); items != revoked {
		t.Errorf("List before RevokeAll read %d index items, want %d", items, revoked)
	}

	e.clock.Advance(time.Second)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	first := e.sessionFor(e.login(alice))
	e.clock.Advance(time.Millisecond)
	second := e.sessionFor(e.login(alice))

	for round, wantItems := range []int32{revoked + 2, 2} {
		read()
		p.Reset()
		list := e.mustList(alice)
		if len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
			t.Fatalf("List %d after RevokeAll = %v, want the two new sessions, newest first", round+1, list)
		}
		items, queries := read()
		if items != wantItems {
			t.Errorf("List %d after RevokeAll of %d sessions read %d index items, want %d", round+1, revoked, items, wantItems)
		}
		if queries != 1 || p.Count("BatchGetItem") != 1 {
			t.Errorf("List %d made %d Queries and %d BatchGetItems, want 1 and 1", round+1, queries, p.Count("BatchGetItem"))
		}
	}
}

// RevokeEveryone ends every session of every user with one write: at once
// on the instance that calls it, and on another within its
// RevokeEveryoneWithin, when that instance's copy of the global generation
// is that old and its next request reads it with the session, in the same
// round trip; the requests in between read nothing more. The instances'
// clocks, 5 s apart either way, play no part. A login afterwards lives on
// both.
func TestRevokeEveryone(t *testing.T) {
	t.Parallel()
	const within = time.Second
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) {
		c.Limits.RevokeEveryoneWithin = within
		c.Now = func() time.Time { return start.Add(5 * time.Second) }
	})
	otherCfg := e.cfg
	otherCfg.Now = func() time.Time { return start.Add(-5 * time.Second) }
	other := primed(t, otherCfg)
	var otherClock ddbtest.Mono
	ddbsession.SetMonotonicClock(other, otherClock.Now)
	alice, bob := e.putUser("alice"), e.putUser("bob")
	sessions := []*http.Cookie{e.login(alice), e.login(bob)}
	status := func(m *ddbsession.Manager[User], c *http.Cookie) int {
		return e.get(m.RequireSession(whoami(m)), c).Code
	}
	for _, c := range sessions {
		if status(e.m, c) != http.StatusOK || status(other, c) != http.StatusOK {
			t.Fatal("a session before RevokeEveryone does not work")
		}
	}

	p.Reset()
	if err := e.m.RevokeEveryone(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.Count("UpdateItem") != 1 || p.Total() != 2 {
		t.Errorf("RevokeEveryone: %d calls (%d UpdateItem), want one write and its read back", p.Total(), p.Count("UpdateItem"))
	}
	for _, c := range sessions {
		if got := status(e.m, c); got != http.StatusUnauthorized {
			t.Errorf("the revoking instance, at once: status %d, want 401", got)
		}
	}
	// The other instance: its copy is fresh, so it still lets the sessions
	// through, reading nothing but each request's session and user, until
	// the copy is within old.
	for range 3 {
		p.Reset()
		if got := status(other, sessions[0]); got != http.StatusOK {
			t.Fatalf("the other instance within its bound: status %d, want 200 until its copy is %v old", got, within)
		}
		if p.Total() != 1 || p.Count("BatchGetItem") != 1 {
			t.Errorf("a request between re-reads: %v, want one BatchGetItem", p.Calls())
		}
		otherClock.Advance(within / 4)
	}
	otherClock.Advance(within / 4) // the copy is within old
	for i, c := range sessions {
		p.Reset()
		if got := status(other, c); got != http.StatusUnauthorized {
			t.Errorf("the other instance past its bound, session %d: status %d, want 401", i, got)
		}
		if i == 0 && p.Total() != 1 {
			t.Errorf("the request that read the generation anew: %v, want one call", p.Calls())
		}
	}
	fresh := e.login(alice)
	for name, m := range map[string]*ddbsession.Manager[User]{"revoking": e.m, "other": other} {
		if got := status(m, fresh); got != http.StatusOK {
			t.Errorf("a login after RevokeEveryone, on the %s instance: status %d, want 200", name, got)
		}
	}
}

// A login reads the global generation only when its instance's copy is
// stale, as a request does, so that no item is read by every login of the
// table. A login on an instance whose copy is fresh, just after a
// RevokeEveryone elsewhere, copies the generation as that instance knows
// it: the session lives until the copy is stale, then ends with those
// from before, and its user signs in once more, for good.
func TestLoginBesideAFreshCopy(t *testing.T) {
	t.Parallel()
	const within = time.Second
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.RevokeEveryoneWithin = within })
	other := primed(t, e.cfg)
	var otherClock ddbtest.Mono
	ddbsession.SetMonotonicClock(other, otherClock.Now)
	alice := e.putUser("alice")
	loginOn := func(m *ddbsession.Manager[User]) *http.Cookie {
		t.Helper()
		w := httptest.NewRecorder()
		if err := m.Login(w, newRequest(), alice, nil); err != nil {
			t.Fatal(err)
		}
		return sessionCookie(t, w.Result(), cookieName)
	}
	status := func(m *ddbsession.Manager[User], c *http.Cookie) int {
		return e.get(m.RequireSession(whoami(m)), c).Code
	}
	if got := status(other, loginOn(other)); got != http.StatusOK { // reads the copy
		t.Fatalf("a login before RevokeEveryone: status %d", got)
	}

	if err := e.m.RevokeEveryone(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	early := loginOn(other)
	if diff := cmp.Diff(map[string]int{"GetItem": 1, "PutItem": 3}, p.Calls()); diff != "" { // the session, its index and its history event
		t.Errorf("a login beside a fresh copy: calls (-want +got):\n%s", diff)
	}
	if got := status(other, early); got != http.StatusOK {
		t.Errorf("the early login, on its instance while the copy is fresh: status %d, want 200", got)
	}
	if got := status(e.m, early); got != http.StatusUnauthorized {
		t.Errorf("the early login, on the revoking instance: status %d, want 401", got)
	}
	otherClock.Advance(within)
	if got := status(other, early); got != http.StatusUnauthorized {
		t.Errorf("the early login, once its instance's copy is stale: status %d, want 401", got)
	}
	again := loginOn(other)
	for name, m := range map[string]*ddbsession.Manager[User]{"revoking": e.m, "other": other} {
		if got := status(m, again); got != http.StatusOK {
			t.Errorf("the login after that, on the %s instance: status %d, want 200", name, got)
		}
	}

	// A login beside a stale copy reads the global item with the user.
	otherClock.Advance(within)
	p.Reset()
	late := loginOn(other)
	if p.Count("BatchGetItem") != 1 || p.Count("GetItem") != 0 {
		t.Errorf("a login beside a stale copy: calls %v, want the user and the global item in one BatchGetItem", p.Calls())
	}
	if got := status(e.m, late); got != http.StatusOK {
		t.Errorf("a login beside a stale copy, on the revoking instance: status %d, want 200", got)
	}
}

// An instance that cannot read the global generation once its copy is too
// old fails its requests closed: a global item it cannot read (another
// release's format, say) refuses every session with 503, and lets none
// through.
func TestRevokeEveryoneFailsClosed(t *testing.T) {
	t.Parallel()
	var clock ddbtest.Mono
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.RevokeEveryoneWithin = time.Second })
	ddbsession.SetMonotonicClock(e.m, clock.Now)
	c := e.login(e.putUser("alice"))
	e.putItem(map[string]types.AttributeValue{"pk": attrS("SESSION#GLOBAL"), "sk": attrS("STATE"), "v": attrN(9), "kind": attrS("sessions-global"), "gen": attrN(1)})
	clock.Advance(time.Second)
	called := false
	w := e.get(e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })), c)
	if w.Code != http.StatusServiceUnavailable || called {
		t.Errorf("a request with an unreadable global item: status %d, handler called %v; want 503, not called", w.Code, called)
	}
}

// A List that comes between a Login's index item and its session item
// (staged there) neither shows the session nor drops its index item: the
// Login is on its way, and the List after it shows the session. (A List
// that dropped it would leave a live session out of every List after.)
func TestListRacingALogin(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	first := e.sessionFor(e.login(alice)).ID
	var between []string
	var fired atomic.Bool
	p.Before = func(_ context.Context, op string, in any) {
		put, ok := in.(*dynamodb.PutItemInput)
		if !ok || !strings.HasPrefix(attrText(put.Item["pk"]), "S:SESSION#") || !fired.CompareAndSwap(false, true) {
			return
		}
		between = listIDs(e.mustList(alice))
	}
	// A millisecond on, so that the second session sorts first: IDs sort
	// by creation time, and the same millisecond leaves them to chance.
	e.clock.Advance(time.Millisecond)
	second := e.sessionFor(e.login(alice)).ID
	if !fired.Load() {
		t.Fatal("the race was not staged")
	}
	if diff := cmp.Diff([]string{first}, between); diff != "" {
		t.Errorf("List between the Login's writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{second, first}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("List after the Login (-want +got):\n%s", diff)
	}
}

// An instance's copy of the global generation is read again by one read
// at a time, whatever the concurrency: 32 requests that find the copy
// stale at once read the global item once. Each makes its own read of its
// session and user; the one that leads adds the global item to it, and the
// others wait for that read after theirs. (Each used to add the global
// item to its own read until one of them came back.)
func TestRevokeEveryoneCopyIsReadOnceAtATime(t *testing.T) {
	t.Parallel()
	const inFlight = 32
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	var mono ddbtest.Mono
	ddbsession.SetMonotonicClock(e.m, mono.Now)
	e.status(e.login(e.putUser("warm-up"))) // the copy, read on the test's clock
	var cookies []*http.Cookie
	for i := range inFlight {
		cookies = append(cookies, e.login(e.putUser(fmt.Sprintf("user%d", i))))
	}
	mono.Advance(time.Minute) // past RevokeEveryoneWithin: the copy is stale

	globalPK := "SESSION#GLOBAL"
	var mu sync.Mutex
	reads, globalReads := 0, 0
	allIn := make(chan struct{})
	p.Before = func(ctx context.Context, op string, in any) {
		keys := readKeys(in)
		if keys == nil {
			return
		}
		global := slices.ContainsFunc(keys, func(k map[string]types.AttributeValue) bool { return attrText(k["pk"]) == "S:"+globalPK })
		mu.Lock()
		reads++
		if global {
			globalReads++
		}
		if reads == inFlight {
			close(allIn)
		}
		mu.Unlock()
		if global {
			// Hold the global read until every request has made its read:
			// they are all in flight while the copy is stale.
			select {
			case <-allIn:
			case <-ctx.Done():
			}
		}
	}
	var wg sync.WaitGroup
	for _, c := range cookies {
		wg.Go(func() {
			if got := e.status(c); got != http.StatusOK {
				t.Errorf("a request while the copy was read again: status %d, want 200", got)
			}
		})
	}
	wg.Wait()
	if globalReads != 1 {
		t.Errorf("%d requests in flight on a stale copy read the global item %d times, want once", inFlight, globalReads)
	}
}

// RevokeEveryone applies on its own instance at once, even while a read of
// the copy that began before its write is under way: it waits that read
// out and reads again, rather than take the generation from before its
// write, which would accept every session for RevokeEveryoneWithin more.
// The test holds a request's read of the copy once the engine answered it,
// and lets it go once RevokeEveryone, its write made, has found that read
// under way (its first look at the instance's clock after the write: the
// copy's lock is held then, so the read cannot land before it is found).
func TestRevokeEveryoneOutwaitsAnEarlierRead(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	var mono ddbtest.Mono
	written := make(chan struct{})
	var watching atomic.Bool
	ddbsession.SetMonotonicClock(e.m, func() int64 {
		if watching.CompareAndSwap(true, false) {
			close(written)
		}
		return mono.Now()
	})
	c := e.login(e.putUser("alice"))
	if got := e.status(c); got != http.StatusOK {
		t.Fatalf("before: status %d, want 200", got)
	}
	mono.Advance(time.Minute) // past RevokeEveryoneWithin: the next request reads the copy

	globalPK := "S:SESSION#GLOBAL"
	held := make(chan struct{})
	var once sync.Once
	p.After = func(ctx context.Context, op string, in, out any, err error) error {
		switch {
		case slices.ContainsFunc(readKeys(in), func(k map[string]types.AttributeValue) bool { return attrText(k["pk"]) == globalPK }):
			once.Do(func() {
				close(held)
				<-written // RevokeEveryone found this read under way
			})
		case op == "UpdateItem" && attrText(in.(*dynamodb.UpdateItemInput).Key["pk"]) == globalPK:
			watching.Store(true)
		}
		return err
	}
	request := make(chan int)
	go func() { request <- e.status(c) }()
	<-held
	if err := e.m.RevokeEveryone(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-request; got != http.StatusOK {
		t.Errorf("the request whose read began before RevokeEveryone: status %d, want 200", got)
	}
	if got := e.status(c); got != http.StatusUnauthorized {
		t.Errorf("a session from before RevokeEveryone on its own instance, at once: status %d, want 401", got)
	}
}

// readKeys returns the keys that a GetItem or BatchGetItem input reads, or
// nil for another call.
func readKeys(in any) []map[string]types.AttributeValue {
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		return []map[string]types.AttributeValue{in.Key}
	case *dynamodb.BatchGetItemInput:
		var keys []map[string]types.AttributeValue
		for _, ka := range in.RequestItems {
			keys = append(keys, ka.Keys...)
		}
		return keys
	}
	return nil
}

// A session records the address it signed in from and, with each refresh
// and only then, the address it was last seen at: RemoteAddr's, never a
// forwarding header, which any client can write. List shows both.
func TestListShowsAddresses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.putUser("alice")
	from := func(remote, forwarded string, cookies ...*http.Cookie) *http.Request {
		r := httptest.NewRequest("GET", "https://example.test/", nil)
		r.RemoteAddr = remote
		if forwarded != "" {
			r.Header.Set("X-Forwarded-For", forwarded)
		}
		for _, c := range cookies {
			r.AddCookie(c)
		}
		return r
	}
	w := httptest.NewRecorder()
	if err := e.m.Login(w, from("[::ffff:198.51.100.7]:5000", "203.0.113.99"), alice, nil); err != nil {
		t.Fatal(err)
	}
	c := sessionCookie(t, w.Result(), cookieName)
	addresses := func() (signIn, last string) {
		t.Helper()
		list := e.mustList(alice)
		if len(list) != 1 {
			t.Fatalf("List: %d sessions, want 1", len(list))
		}
		return list[0].Address, list[0].LastAddress
	}
	request := func(remote, forwarded string) {
		t.Helper()
		w := httptest.NewRecorder()
		e.m.RequireSession(whoami(e.m)).ServeHTTP(w, from(remote, forwarded, c))
		e.settle()
		if w.Code != http.StatusOK {
			t.Fatalf("request from %s: status %d", remote, w.Code)
		}
	}
	check := func(step, wantSignIn, wantLast string) {
		t.Helper()
		if signIn, last := addresses(); signIn != wantSignIn || last != wantLast {
			t.Errorf("%s: addresses %s, %s; want %s, %s", step, signIn, last, wantSignIn, wantLast)
		}
	}
	check("after the login (spoofed header ignored, IPv4-mapped unmapped)", "198.51.100.7", "198.51.100.7")

	e.clock.Advance(time.Minute) // no refresh due
	request("[2001:db8::5]:443", "203.0.113.99")
	check("a request between refreshes", "198.51.100.7", "198.51.100.7")

	e.clock.Advance(10 * time.Minute) // a refresh is due
	request("[2001:db8::5%eth0]:443", "203.0.113.99")
	check("a request that refreshes", "198.51.100.7", "2001:db8::5")

	e.clock.Advance(time.Minute)
	request("@", "") // a Unix socket: no address, the last one stays
	check("a request without an IP", "198.51.100.7", "2001:db8::5")
}
