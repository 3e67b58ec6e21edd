package ddbsession_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
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
		t.Errorf("session of the cutoff's millisecond: %d, want 401", got)
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
// index item, which List shows until that item's own TTL. Revoking the
// session succeeds and removes the index item.
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
	if diff := cmp.Diff([]string{otherID, goneID}, listIDs(e.mustList(alice))); diff != "" {
		t.Fatalf("List before Revoke, with the stale index item (-want +got):\n%s", diff)
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
}

// RevokeAll must be right within one second: sessions made a few hundred
// milliseconds before it die, a login right after it lives.
func TestRevokeAllWithinOneSecond(t *testing.T) {
	t.Parallel()
	var p *probe
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

	p.reset()
	if err := e.m.RevokeAll(context.Background(), alice); err != nil { // 12:00:01.000
		t.Fatal(err)
	}
	// No scan, no query: one conditional write.
	if diff := cmp.Diff(map[string]int{"UpdateItem": 1}, p.calls); diff != "" {
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

	// The cutoff is stored in epoch milliseconds.
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.table,
		Key:       userItemKey(alice),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &types.AttributeValueMemberN{Value: "1796040001000"}
	if diff := cmp.Diff(want, out.Item["sessionsValidAfter"], cmp.AllowUnexported(types.AttributeValueMemberN{})); diff != "" {
		t.Errorf("sessionsValidAfter (-want +got):\n%s", diff)
	}
}

func TestRevokeAllNeverMovesCutoffBack(t *testing.T) {
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
		t.Errorf("session from before the later cutoff: status %d, want 401", got)
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
			if _, _, err := e.m.Check(context.Background(), old.Value); (err == nil) != tc.live {
				t.Errorf("Check(old session) = %v, want live %v", err, tc.live)
			}
			// The expired session is still in the table (TTL lags): List
			// leaves it out by itself.
			if n := len(itemsWithSID(e.scanAll(), oldID)); n != 2 {
				t.Errorf("old session has %d items in the table, want 2 (session and index)", n)
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
	lastMs := e.sessionFor(e.login(alice)).ID // 1ms before the cutoff
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
	// The revoked sessions' items are still there: List filters them.
	for _, id := range []string{early, lastMs} {
		if n := len(itemsWithSID(e.scanAll(), id)); n != 2 {
			t.Errorf("revoked session %s has %d items, want 2", id, n)
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
	if _, _, err := e.m.Check(context.Background(), id); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("Check(ID) = %v, want ErrNoSession", err)
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

// Sessions that RevokeAll ended cost nothing to list: the index sorts by
// creation time and List starts at the cutoff, so it reads only the live
// sessions, newest first.
func TestListAfterRevokeAllReadsOnlyLiveSessions(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	read := queriesRead(p)
	alice := e.putUser("alice")
	const revoked = 300
	for range revoked {
		e.clock.Advance(time.Millisecond)
		e.login(alice)
	}
	read()
	if got := len(e.mustList(alice)); got != revoked {
		t.Fatalf("List before RevokeAll: %d sessions, want %d", got, revoked)
	}
	if items, _ := read(); items != revoked {
		t.Errorf("List before RevokeAll read %d items, want %d", items, revoked)
	}

	e.clock.Advance(time.Second)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	first := e.sessionFor(e.login(alice))
	e.clock.Advance(time.Millisecond)
	second := e.sessionFor(e.login(alice))

	read()
	list := e.mustList(alice)
	if len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
		t.Fatalf("List after RevokeAll = %v, want the two new sessions, newest first", list)
	}
	items, queries := read()
	if items != 2 {
		t.Errorf("List after RevokeAll of %d sessions read %d items, want 2 (the live ones)", revoked, items)
	}
	if queries != 2 {
		t.Errorf("List made %d Queries, want 2 (this release's index items, earlier releases')", queries)
	}
}

// Index items that an earlier release wrote (random IDs, sort key
// "SID#<id>") stay readable: List merges them in by creation time, Revoke
// finds them by ID, and Logout removes them.
func TestLegacyIndexItems(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	older := newHandSession(alice) // created 5 minutes before start
	newer := newHandSession(alice)
	newer.createdMs = start.Add(time.Minute).UnixMilli()
	for _, h := range []handSession{older, newer} {
		session, index := h.items()
		e.putItem(index)
		e.putItem(session)
	}
	between := e.sessionFor(e.login(alice)) // at start, between the two

	list := e.mustList(alice)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if want := []string{newer.sid, between.ID, older.sid}; !slices.Equal(ids, want) {
		t.Errorf("List = %v, want %v (newest first, legacy items merged in)", ids, want)
	}

	if err := e.m.Revoke(context.Background(), alice, older.sid); err != nil {
		t.Errorf("Revoke of a legacy session: %v", err)
	}
	logout := newRequest(&http.Cookie{Name: cookieName, Value: newer.token})
	if err := e.m.Logout(newRecorder(), logout); err != nil {
		t.Fatal(err)
	}
	if got := e.mustList(alice); len(got) != 1 || got[0].ID != between.ID {
		t.Errorf("List after revoking and logging out the legacy sessions = %v, want only %s", got, between.ID)
	}
	if n := len(e.scanAll()); n != 3 {
		t.Errorf("%d items left, want 3 (the user, the live session and its index item): %v", n, itemsText(e.scanAll()))
	}
}

func TestExpiringWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withExpiryIndex(c)
		c.IdleTimeout = 24 * time.Hour // a 24-hour window: 192 Queries
	})
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	// Expiries, a day after each login: 12:00, 12:20, 12:40, 13:10, 13:40
	// UTC on Dec 1, all still live when Expiring runs.
	base := time.Unix(start.Add(24*time.Hour).Unix(), 0)
	offsets := []time.Duration{0, 20 * time.Minute, 40 * time.Minute, 70 * time.Minute, 100 * time.Minute}
	var sessions []ddbsession.Session
	for i, offset := range offsets {
		e.clock.Advance(offset - e.clock.Now().Sub(start))
		user := alice
		if i%2 == 1 {
			user = bob
		}
		c := e.login(user)
		sessions = append(sessions, loggedIn(e.sessionFor(c).ID, user, e.clock.Now(), 24*time.Hour))
	}
	for i, s := range sessions {
		if want := base.Add(offsets[i]); !s.ExpiresAt.Equal(want) {
			t.Fatalf("test setup: session %d expires %v, want %v", i, s.ExpiresAt, want)
		}
	}

	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []int
	}{
		{"inside one hour", base.Add(10 * time.Minute), base.Add(45 * time.Minute), []int{1, 2}},
		{"across an hour boundary", base.Add(30 * time.Minute), base.Add(80 * time.Minute), []int{2, 3}},
		{"bounds are inclusive", base.Add(20 * time.Minute), base.Add(70 * time.Minute), []int{1, 2, 3}},
		{"one second", base.Add(40 * time.Minute), base.Add(40 * time.Minute), []int{2}},
		{"to with a fraction after an expiry", base.Add(-time.Hour), base.Add(20*time.Minute + 500*time.Millisecond), []int{0, 1}},
		{"from a fraction after an expiry", base.Add(20*time.Minute + 500*time.Millisecond), base.Add(50 * time.Minute), []int{2}},
		{"before them all", base.Add(-2 * time.Hour), base.Add(-time.Second), nil},
		{"after them all", base.Add(100*time.Minute + time.Second), base.Add(5 * time.Hour), nil},
		{"24 hours", base.Add(-12 * time.Hour), base.Add(12 * time.Hour), []int{0, 1, 2, 3, 4}},
		{"from in another time zone", base.Add(10 * time.Minute).In(time.FixedZone("UTC-5:30", -(5*3600 + 1800))), base.Add(2 * time.Hour), []int{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []ddbsession.Session
			for _, i := range tc.want {
				want = append(want, sessions[i])
			}
			if diff := cmp.Diff(want, e.mustExpiring(tc.from, tc.to), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Expiring(%v, %v) (-want +got):\n%s", tc.from, tc.to, diff)
			}
		})
	}
}

func TestExpiringSpreadsOverShards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExpiryIndex) // IdleTimeout 1h: every session expires at 13:00:00 UTC
	alice := e.putUser("alice")
	const n = 20
	ids := map[string]bool{}
	for range n {
		ids[e.sessionFor(e.login(alice)).ID] = true
	}
	shards := map[int]int{}
	sessions := 0
	for _, item := range e.scanAll() {
		if attrText(item["kind"]) != "S:"+kindSession {
			if _, ok := item["expiryBucket"]; ok {
				t.Errorf("a non-session item carries expiryBucket: %v", item)
			}
			continue
		}
		sessions++
		hour, shard := bucketParts(t, item)
		if want := itemExpiry(t, item).UTC().Format("2006010215"); hour != want || hour != "2026113013" {
			t.Errorf("expiryBucket hour %s, want %s (the UTC hour of the expiry, 2026113013)", hour, want)
		}
		if shard >= 8 {
			t.Errorf("shard %d, want below the default 8 shards", shard)
		}
		shards[shard]++
	}
	if sessions != n {
		t.Fatalf("%d session items, want %d", sessions, n)
	}
	if len(shards) < 2 {
		t.Errorf("%d sessions of one hour all landed on shards %v, want them spread", n, shards)
	}

	expiry := time.Unix(start.Add(time.Hour).Unix(), 0)
	got := map[string]bool{}
	for _, s := range e.mustExpiring(expiry, expiry) {
		got[s.ID] = true
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("Expiring over all shards (-want +got):\n%s", diff)
	}
}

func TestExpiringFollowsRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExpiryIndex) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	e.clock.Advance(50 * time.Minute) // 12:50:00.25
	c := e.login(alice)
	s := loggedIn(e.sessionFor(c).ID, alice, e.clock.Now(), time.Hour) // expires 13:50:00
	oldHour, oldShard := bucketParts(t, e.itemOf(kindSession, s.ID))
	if oldHour != "2026113013" {
		t.Fatalf("expiryBucket hour before refresh = %s, want 2026113013", oldHour)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, time.UTC) }
	before := [2]time.Time{at(13, 45), at(13, 55)}
	after := [2]time.Time{at(14, 5), at(14, 15)}
	if diff := cmp.Diff([]ddbsession.Session{s}, e.mustExpiring(before[0], before[1])); diff != "" {
		t.Fatalf("Expiring before the refresh (-want +got):\n%s", diff)
	}

	e.clock.Advance(20 * time.Minute) // 13:10:00.25
	if w := e.get(e.m.RequireSession(whoami(e.m)), c); w.Code != http.StatusOK || w.Header().Get("Set-Cookie") == "" {
		t.Fatalf("refreshing request: status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	s.RefreshedAt = time.UnixMilli(e.clock.Now().UnixMilli())
	s.ExpiresAt = at(14, 10)

	if got := e.mustExpiring(before[0], before[1]); len(got) != 0 {
		t.Errorf("Expiring around the old expiry after the refresh = %+v, want none", got)
	}
	if diff := cmp.Diff([]ddbsession.Session{s}, e.mustExpiring(after[0], after[1])); diff != "" {
		t.Errorf("Expiring around the new expiry (-want +got):\n%s", diff)
	}
	item := e.itemOf(kindSession, s.ID)
	newHour, newShard := bucketParts(t, item)
	if newHour != "2026113014" || !itemExpiry(t, item).Equal(s.ExpiresAt) {
		t.Errorf("after refresh: expiryBucket hour %s, expiresAt %v; want 2026113014 and %v", newHour, itemExpiry(t, item), s.ExpiresAt)
	}
	if newShard != oldShard {
		t.Errorf("refresh moved the session from shard %d to %d; the shard should stay with the session", oldShard, newShard)
	}
}

func TestExpiringWithoutIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	c := e.login(alice)
	if got, err := e.m.Expiring(context.Background(), start, start.Add(2*time.Hour)); !needsExpiryIndex(err) {
		t.Errorf("Expiring without ExpiryIndex = %v, %v; want the error that an expiry index is needed", got, err)
	}
	e.clock.Advance(11 * time.Minute)
	if w := e.get(e.m.RequireSession(whoami(e.m)), c); w.Code != http.StatusOK || w.Header().Get("Set-Cookie") == "" {
		t.Fatalf("refreshing request: status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	// Neither Login nor the refresh pays for the index it does not have.
	for _, item := range e.scanAll() {
		if b, ok := item["expiryBucket"]; ok {
			t.Errorf("item %v carries expiryBucket %v without ExpiryIndex", item["pk"], b)
		}
	}
	out, err := e.client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &e.table})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Table.GlobalSecondaryIndexes); n != 0 {
		t.Errorf("CreateTable without ExpiryIndex made %d global secondary indexes", n)
	}
}

func TestExpiringRejectsBadWindows(t *testing.T) {
	t.Parallel()
	// The widest good window is 24 hours, 200 Queries: see TestExpiringWindow.
	e := newEnv(t, withExpiryIndex)
	alice := e.putUser("alice")
	e.login(alice) // expires 13:00:00
	from := start
	for _, tc := range []struct {
		name   string
		to     time.Time
		wantOK bool
	}{
		{"exactly 24 hours", from.Add(24 * time.Hour), true},
		{"24 hours and a second", from.Add(24*time.Hour + time.Second), false},
		{"25 hours", from.Add(25 * time.Hour), false},
		{"a week", from.Add(7 * 24 * time.Hour), false},
		{"to before from", from.Add(-time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.m.Expiring(context.Background(), from, tc.to)
			switch {
			case tc.wantOK && (err != nil || len(got) != 1):
				t.Errorf("Expiring(%v, %v) = %d sessions, %v; want the one session", from, tc.to, len(got), err)
			case !tc.wantOK && err == nil:
				t.Errorf("Expiring(%v, %v) = %d sessions, no error; want an error", from, tc.to, len(got))
			case !tc.wantOK && needsExpiryIndex(err):
				t.Errorf("Expiring(%v, %v) = %v, want a window error", from, tc.to, err)
			}
			if !tc.wantOK && got != nil {
				t.Errorf("Expiring with an error returned sessions too: %v", got)
			}
		})
	}
}

// A rolling deploy: instances of the release before this one next to this
// one's, on one table, with one clock. That release dated a session by its
// creation time, valid while after the user's cutoff, and wrote no "gen";
// this one keeps both meanings. It reads an earlier release's sessions by
// their creation time, as that release did; its own sessions were created
// after the cutoff they read, so an earlier release accepts them; and the
// two releases' RevokeAll write the same cutoff, which each release's
// reader then applies to every session. Old and new instances so agree on
// every session, before and after either revokes.
func TestRollingDeployKeepsEachReleasesSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	ctx := context.Background()
	cutoff := func() int64 { return storedNumber(t, e, userItemKey(alice), "sessionsValidAfter") }
	// earlierRelease is the previous release's reader, by its documented
	// rule: the session item is there, unexpired, and created after the
	// user's cutoff.
	earlierRelease := func(c *http.Cookie) bool {
		item := rawItem(t, e, sessionItemKey(c.Value))
		if item == nil {
			return false
		}
		_, hasCutoff := rawItem(t, e, userItemKey(alice))["sessionsValidAfter"]
		return numberOf(t, item, "expiresAt") > e.clock.Now().Unix() &&
			(!hasCutoff || numberOf(t, item, "createdAt") > cutoff())
	}
	// earlierLogin is a login of the previous release: its session and
	// index items, without "gen", created after the cutoff it read.
	earlierLogin := func() *http.Cookie {
		h := newHandSession(alice)
		now := e.clock.Now().UnixMilli()
		if _, ok := rawItem(t, e, userItemKey(alice))["sessionsValidAfter"]; ok {
			now = max(now, cutoff()+1)
		}
		h.createdMs, h.refreshedMs, h.expiresSec = now, now, e.clock.Now().Add(time.Hour).Unix()
		session, index := h.items()
		e.putItem(index)
		e.putItem(session)
		return &http.Cookie{Name: cookieName, Value: h.token}
	}
	// earlierRevokeAll is the previous release's RevokeAll: the cutoff to
	// its clock's now, if that is later.
	earlierRevokeAll := func() {
		_, err := e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &e.table, Key: userItemKey(alice),
			UpdateExpression:          ptr("SET sessionsValidAfter = :now"),
			ConditionExpression:       ptr("attribute_not_exists(sessionsValidAfter) OR sessionsValidAfter < :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": attrN(e.clock.Now().UnixMilli())},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	agree := func(when string, c *http.Cookie, want bool) {
		t.Helper()
		if got := e.status(c) == http.StatusOK; got != want {
			t.Errorf("%s: this release says valid %v, want %v", when, got, want)
		}
		if got := earlierRelease(c); got != want {
			t.Errorf("%s: the earlier release says valid %v, want %v", when, got, want)
		}
	}

	oldSession, newSession := earlierLogin(), e.login(alice)
	agree("an earlier release's session", oldSession, true)
	agree("this release's session", newSession, true)

	e.clock.Advance(time.Second)
	earlierRevokeAll()
	agree("an earlier release's session after its RevokeAll", oldSession, false)
	agree("this release's session after the earlier release's RevokeAll", newSession, false)

	e.clock.Advance(time.Second)
	oldSession, newSession = earlierLogin(), e.login(alice)
	agree("an earlier release's login after its RevokeAll", oldSession, true)
	agree("this release's login after the earlier release's RevokeAll", newSession, true)

	e.clock.Advance(time.Second)
	if err := e.m.RevokeAll(ctx, alice); err != nil {
		t.Fatal(err)
	}
	agree("an earlier release's session after this release's RevokeAll", oldSession, false)
	agree("this release's session after its RevokeAll", newSession, false)
	agree("an earlier release's login after this release's RevokeAll", earlierLogin(), true)
	agree("this release's login after its RevokeAll", e.login(alice), true)
}

// RevokeEveryone ends every session of every user with one write: at once
// on the instance that calls it, and on another within its
// RevokeEveryoneWithin, when that instance's copy of the global generation
// is that old and its next request reads it with the session, in the same
// round trip; the requests in between read nothing more. The instances'
// clocks, 5 s apart either way, play no part. A login afterwards lives on
// both, and a session of an earlier release dies with the others.
func TestRevokeEveryone(t *testing.T) {
	t.Parallel()
	const within = time.Second
	var p *probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) {
		c.RevokeEveryoneWithin = within
		c.Now = func() time.Time { return start.Add(5 * time.Second) }
	})
	otherCfg := e.cfg
	otherCfg.Now = func() time.Time { return start.Add(-5 * time.Second) }
	other := primed(t, otherCfg)
	alice, bob := e.putUser("alice"), e.putUser("bob")
	sessions := []*http.Cookie{e.login(alice), e.login(bob)}
	legacy := newHandSession(alice)
	legacy.createdMs, legacy.refreshedMs, legacy.expiresSec = start.UnixMilli(), start.UnixMilli(), start.Add(time.Hour).Unix()
	legacySession, legacyIndex := legacy.items()
	e.putItem(legacyIndex)
	e.putItem(legacySession)
	sessions = append(sessions, &http.Cookie{Name: cookieName, Value: legacy.token})
	status := func(m *ddbsession.Manager[User], c *http.Cookie) int {
		return e.get(m.RequireSession(whoami(m)), c).Code
	}
	for _, c := range sessions {
		if status(e.m, c) != http.StatusOK || status(other, c) != http.StatusOK {
			t.Fatal("a session before RevokeEveryone does not work")
		}
	}

	p.reset()
	began := time.Now()
	if err := e.m.RevokeEveryone(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.count("UpdateItem") != 1 || p.total() != 2 {
		t.Errorf("RevokeEveryone: %d calls (%d UpdateItem), want one write and its read back", p.total(), p.count("UpdateItem"))
	}
	for _, c := range sessions {
		if got := status(e.m, c); got != http.StatusUnauthorized {
			t.Errorf("the revoking instance, at once: status %d, want 401", got)
		}
	}
	// The other instance: its copy is fresh, so it still lets the sessions
	// through, reading nothing but each request's session and user.
	for time.Since(began) < within/2 {
		p.reset()
		if got := status(other, sessions[0]); got != http.StatusOK {
			t.Fatalf("the other instance within its bound: status %d, want 200 until its copy is %v old", got, within)
		}
		if p.total() != 1 || p.count("BatchGetItem") != 1 {
			t.Errorf("a request between re-reads: %v, want one BatchGetItem", p.calls)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(within)
	for i, c := range sessions {
		p.reset()
		if got := status(other, c); got != http.StatusUnauthorized {
			t.Errorf("the other instance past its bound, session %d: status %d, want 401", i, got)
		}
		if i == 0 && p.total() != 1 {
			t.Errorf("the request that read the generation anew: %v, want one call", p.calls)
		}
	}
	fresh := e.login(alice)
	for name, m := range map[string]*ddbsession.Manager[User]{"revoking": e.m, "other": other} {
		if got := status(m, fresh); got != http.StatusOK {
			t.Errorf("a login after RevokeEveryone, on the %s instance: status %d, want 200", name, got)
		}
	}
}

// An instance that cannot read the global generation once its copy is too
// old fails its requests closed: a global item it cannot read (another
// release's format, say) refuses every session with 503, and lets none
// through.
func TestRevokeEveryoneFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.RevokeEveryoneWithin = time.Second })
	c := e.login(e.putUser("alice"))
	e.putItem(map[string]types.AttributeValue{"pk": attrS("SESSION#GLOBAL"), "sk": attrS("STATE"), "v": attrN(9), "kind": attrS("sessions-global"), "gen": attrN(1)})
	time.Sleep(time.Second)
	called := false
	w := e.get(e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })), c)
	if w.Code != http.StatusServiceUnavailable || called {
		t.Errorf("a request with an unreadable global item: status %d, handler called %v; want 503, not called", w.Code, called)
	}
}
