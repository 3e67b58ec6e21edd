package ddbsession_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// A refresh has two writes: the session item, then its index item. A
// Logout (or a Revoke, or a Login that rotates the session) that lands
// between them deletes both items; the refresh's second write must then
// not write the index item anew, or List shows the signed-out session
// (until TTL removes it, an idle timeout plus up to 48 hours later) on
// the user's "where you're signed in" page.
func TestRefreshRacingLogoutLeavesNoListedSession(t *testing.T) {
	t.Parallel()
	for _, end := range []struct {
		name string
		run  func(e *env, user ddbsession.UserKey, cookie *http.Cookie, id string) error
	}{
		{"Logout", func(e *env, _ ddbsession.UserKey, cookie *http.Cookie, _ string) error {
			return e.m.Logout(newRecorder(), newRequest(cookie))
		}},
		{"Revoke", func(e *env, user ddbsession.UserKey, _ *http.Cookie, id string) error {
			return e.m.Revoke(context.Background(), user, id)
		}},
		{"Login rotating it", func(e *env, user ddbsession.UserKey, cookie *http.Cookie, _ string) error {
			return e.m.Login(newRecorder(), newRequest(cookie), user)
		}},
	} {
		t.Run(end.name, func(t *testing.T) {
			t.Parallel()
			var p *probe
			e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
			alice := e.putUser("alice")
			cookie := e.login(alice)
			id := e.sessionFor(cookie).ID
			e.clock.Advance(30 * time.Minute) // a refresh is due
			var once sync.Once
			p.before = func(_ context.Context, _ string, in any) {
				if _, ok := in.(*dynamodb.UpdateItemInput); ok && strings.HasPrefix(updateKey(in), "USERSESSIONS#") {
					// The session item is refreshed; its index item is next.
					once.Do(func() {
						if err := end.run(e, alice, cookie, id); err != nil {
							t.Errorf("%s: %v", end.name, err)
						}
					})
				}
			}
			if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK {
				t.Fatalf("the request that read a live session: status %d, want 200", w.Code)
			}
			p.before = nil
			if got := e.status(cookie); got != http.StatusUnauthorized {
				t.Errorf("after %s: status %d, want 401", end.name, got)
			}
			for _, s := range e.mustList(alice) {
				if s.ID == id {
					t.Errorf("List shows the session that %s ended: %+v", end.name, s)
				}
			}
			if items := e.itemsOf(kindIndex, id); len(items) != 0 {
				t.Errorf("index items of the ended session: %v", itemsText(items))
			}
			if items := e.itemsOf(kindSession, id); len(items) != 0 {
				t.Errorf("session items of the ended session: %v", itemsText(items))
			}
		})
	}
}
