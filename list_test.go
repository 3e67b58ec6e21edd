package ddbsession_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
)

func TestListNewestFirstWithCurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // IdleTimeout 1h
	alice := e.putUser("alice")
	bob := e.putUser("bob")

	var cookies []*http.Cookie
	var want []ddbsession.SessionInfo
	for i := range 3 {
		if i > 0 {
			e.clock.Advance(1500 * time.Millisecond)
		}
		at := e.clock.Now()
		c := e.login(alice)
		cookies = append(cookies, c)
		s := loggedIn(e.sessionFor(c).ID, alice, at, time.Hour)
		want = append([]ddbsession.SessionInfo{{Session: s}}, want...) // newest first

		// A session created a moment ago is already listed.
		got := e.mustList(alice)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("List right after login %d (-want +got):\n%s", i+1, diff)
		}
	}
	e.login(bob)

	for i, c := range cookies {
		wantNow := make([]ddbsession.SessionInfo, len(want))
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
	forged := &http.Cookie{Name: e.m.CookieName(), Value: id}
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
	if diff := cmp.Diff([]ddbsession.SessionInfo{{Session: s, Current: true}}, e.listIn(c, alice)); diff != "" {
		t.Fatalf("List before the refresh (-want +got):\n%s", diff)
	}

	e.clock.Advance(11*time.Minute + 7*time.Millisecond)
	now := e.clock.Now()
	w := e.get(e.m.RequireSession(whoami(e.m)), c)
	if w.Code != http.StatusOK || sessionCookie(t, w.Result(), e.m.CookieName()) == nil {
		t.Fatalf("refreshing request: status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	s.RefreshedAt = time.UnixMilli(now.UnixMilli())
	s.ExpiresAt = time.Unix(now.Add(time.Hour).Unix(), 0)
	if diff := cmp.Diff([]ddbsession.SessionInfo{{Session: s}}, e.mustList(alice)); diff != "" {
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
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.HashOnly = true })
	alice := e.putUser("alice")
	c := e.login(alice)
	id := e.sessionFor(c).ID
	if list, err := e.m.List(context.Background(), alice); !errors.Is(err, ddbsession.ErrNoSortKey) {
		t.Errorf("List in a hash-only table = %v, %v; want ErrNoSortKey", list, err)
	}
	if err := e.m.Revoke(context.Background(), alice, id); !errors.Is(err, ddbsession.ErrNoSortKey) {
		t.Errorf("Revoke in a hash-only table = %v, want ErrNoSortKey", err)
	}
	if got := e.status(c); got != http.StatusOK {
		t.Errorf("session after the refused Revoke: status %d, want 200", got)
	}
}
