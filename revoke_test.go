package ddbsession_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

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
	if err := e.m.Revoke(context.Background(), alice, phoneID); !errors.Is(err, ddbsession.ErrSessionNotFound) {
		t.Errorf("second Revoke of the same ID = %v, want ErrSessionNotFound", err)
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
			if err := e.m.Revoke(context.Background(), tc.user, tc.id); !errors.Is(err, ddbsession.ErrSessionNotFound) {
				t.Errorf("Revoke(%+v, %q) = %v, want ErrSessionNotFound", tc.user, tc.id, err)
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
	if err := e.m.Revoke(context.Background(), alice, goneID); !errors.Is(err, ddbsession.ErrSessionNotFound) {
		t.Errorf("second Revoke = %v, want ErrSessionNotFound", err)
	}
}
