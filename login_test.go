package ddbsession_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

func TestLoginRotatesSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	old := e.login(alice)
	if e.status(old) != http.StatusOK {
		t.Fatal("first session does not work")
	}
	fresh := e.login(alice, old)
	if fresh.Value == old.Value {
		t.Fatal("Login kept the old token")
	}
	if got := e.status(old); got != http.StatusUnauthorized {
		t.Errorf("old token after Login: status %d, want 401", got)
	}
	if got := e.status(fresh); got != http.StatusOK {
		t.Errorf("new token: status %d, want 200", got)
	}
}

// An attacker who plants a token of their own in the victim's browser before
// the victim signs in must not share the victim's session afterwards.
func TestLoginDefeatsSessionFixation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	planted := e.login(e.putUser("mallory"))
	victim := e.login(e.putUser("alice"), planted)
	if got := e.status(planted); got != http.StatusUnauthorized {
		t.Errorf("planted token after the victim's Login: status %d, want 401", got)
	}
	if w := e.get(e.m.RequireSession(whoami(e.m)), victim); w.Body.String() != "user:alice" {
		t.Errorf("victim's session serves %q", w.Body)
	}
}

func TestLogoutKillsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	other := e.login(alice)
	r := httptest.NewRequest("POST", "/logout", nil)
	r.AddCookie(cookie)
	if err := e.m.Logout(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("token after Logout: status %d, want 401", got)
	}
	if got := e.status(other); got != http.StatusOK {
		t.Errorf("the user's other session after Logout: status %d, want 200", got)
	}
	// Only the user item and the other session's two items remain.
	if n := len(e.scanAll()); n != 3 {
		t.Errorf("%d items left after Logout, want 3 (user, session, index)", n)
	}
}

// The session item is written with attribute_not_exists, so that a write
// can never replace a live session. Replaying Login's own PutItem against
// the engine must fail.
func TestLoginNeverOverwritesASession(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	var puts []*dynamodb.PutItemInput
	p.before = func(_ context.Context, op string, in any) {
		if op == "PutItem" {
			puts = append(puts, in.(*dynamodb.PutItemInput))
		}
	}
	e.login(e.putUser("alice"))
	if len(puts) == 0 {
		t.Fatal("Login made no PutItem")
	}
	for _, in := range puts {
		_, err := e.client.PutItem(context.Background(), in)
		var cond *types.ConditionalCheckFailedException
		if !errors.As(err, &cond) {
			t.Errorf("replayed PutItem of %v: error %v, want ConditionalCheckFailedException", in.Item["pk"], err)
		}
	}
}

func TestLoginRejectsKeyThatDoesNotFitTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, key := range []ddbsession.UserKey{{}, {PK: "USER#a"}, {SK: "PROFILE"}} {
		if err := e.m.Login(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), key); err == nil {
			t.Errorf("Login(%+v) succeeded in a table with a sort key", key)
		}
	}
}

// A request stuffed with session cookies must not multiply Login's writes.
func TestLoginBoundsCarriedCookies(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	var carried []*http.Cookie
	for range 50 {
		carried = append(carried, &http.Cookie{Name: e.m.CookieName(), Value: rand.Text()})
	}
	p.reset()
	e.login(alice, carried...)
	if n := p.count("DeleteItem"); n > 4 {
		t.Errorf("Login with 50 carried cookies made %d DeleteItems, want at most 4", n)
	}
}

// Login writes the index item first, then the session item. When the
// second write fails, it deletes the index item again, so that a failed
// Login leaves neither item behind.
func TestLoginUndoesIndexItemWhenSessionWriteFails(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	failNth(p, "PutItem", 2, errors.New("session write failed"))
	indexItemsAtUndo := -1
	p.before = func(_ context.Context, op string, _ any) {
		if op == "DeleteItem" {
			indexItemsAtUndo = len(e.itemsOf(kindIndex, ""))
		}
	}
	p.reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice); err == nil {
		t.Fatal("Login succeeded though its session write failed")
	}
	if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("failed Login sent Set-Cookie %q", c)
	}
	// The index item did reach the table, and the undo removed it.
	if indexItemsAtUndo != 1 {
		t.Errorf("%d index items when the undo began, want 1 (the engine took the first write)", indexItemsAtUndo)
	}
	if diff := cmp.Diff(map[string]int{"GetItem": 1, "PutItem": 2, "DeleteItem": 1}, p.calls); diff != "" {
		t.Errorf("calls of the failed Login (-want +got):\n%s", diff)
	}
	if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
		t.Errorf("index items left after the failed Login: %v", itemsText(items))
	}
	if items := e.itemsOf(kindSession, ""); len(items) != 0 {
		t.Errorf("session items left after the failed Login: %v", itemsText(items))
	}
	if n := len(e.scanAll()); n != 1 {
		t.Errorf("%d items after the failed Login, want 1 (the user)", n)
	}
}

// Login and Logout end every well-formed session token the request carries,
// up to four, whoever's sessions they are; malformed cookies among them do
// not use up that bound. A session the request does not carry lives on.
func TestLoginAndLogoutEndEveryCarriedSession(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"Login", "Logout"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			alice := e.putUser("alice")
			bob := e.putUser("bob")
			malformed := &http.Cookie{Name: e.m.CookieName(), Value: "nope"}
			var carried []*http.Cookie
			for _, user := range []ddbsession.UserKey{alice, bob, alice, bob} {
				carried = append(carried, e.login(user))
			}
			kept := e.login(alice)
			cookies := []*http.Cookie{malformed, carried[0], carried[1], malformed, carried[2], malformed, carried[3]}

			w := newRecorder()
			var err error
			if end == "Login" {
				err = e.m.Login(w, newRequest(cookies...), alice)
			} else {
				err = e.m.Logout(w, newRequest(cookies...))
			}
			if err != nil {
				t.Fatalf("%s: %v", end, err)
			}
			for i, c := range carried {
				if got := e.status(c); got != http.StatusUnauthorized {
					t.Errorf("carried session %d after %s: status %d, want 401", i+1, end, got)
				}
			}
			if got := e.status(kept); got != http.StatusOK {
				t.Errorf("session not carried: status %d, want 200", got)
			}
			want := 2 + 2 // the users, and the kept session's two items
			if end == "Login" {
				want += 2
				c := sessionCookie(t, w.Result(), e.m.CookieName())
				if c == nil || c.Value == "" || e.status(c) != http.StatusOK {
					t.Errorf("Login's new session cookie %v does not work", c)
				}
			}
			if n := len(e.scanAll()); n != want {
				t.Errorf("%d items after %s, want %d: %v", n, end, want, itemsText(e.scanAll()))
			}
		})
	}
}

// Login deletes the sessions the request carries before it creates one. If
// a delete fails, it stops there: no new session, no new cookie, and the
// old session, which it could not end, still works.
func TestLoginStopsWhenEndingCarriedSessionFails(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	old := e.login(alice)
	oldID := e.sessionFor(old).ID
	before := itemsText(e.scanAll())

	failOn(p, "DeleteItem", errors.New("down"))
	p.reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(old), alice); err == nil {
		t.Fatal("Login succeeded though deleting the carried session failed")
	}
	if c := sessionCookie(t, w.Result(), e.m.CookieName()); c != nil && c.Value != "" {
		t.Errorf("failed Login sent a new session cookie: %v", c)
	}
	if n := p.count("DeleteItem"); n != 1 {
		t.Errorf("%d DeleteItems, want 1 (the carried session's)", n)
	}
	if n := p.count("PutItem"); n != 0 {
		t.Errorf("failed Login made %d PutItems, want none", n)
	}
	if diff := cmp.Diff(before, itemsText(e.scanAll())); diff != "" {
		t.Errorf("table after the failed Login (-before +after):\n%s", diff)
	}

	p.fail = nil
	if got := e.status(old); got != http.StatusOK {
		t.Errorf("old session after the failed Login: status %d, want 200", got)
	}
	if diff := cmp.Diff([]string{oldID}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("alice's sessions after the failed Login (-want +got):\n%s", diff)
	}
}
