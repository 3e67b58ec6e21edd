package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// recorder collects events as "kind reason" lines, with the session's
// number in order of appearance instead of its random ID.
type eventLog struct {
	mu     sync.Mutex
	lines  []string
	ids    map[string]int
	events []ddbsession.Event
}

func (l *eventLog) record(_ context.Context, e ddbsession.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids = map[string]int{}
	}
	line := string(e.Kind)
	if e.SessionID != "" {
		if _, ok := l.ids[e.SessionID]; !ok {
			l.ids[e.SessionID] = len(l.ids) + 1
		}
		line += fmt.Sprintf(" #%d", l.ids[e.SessionID])
	}
	if e.Reason != "" {
		line += " " + string(e.Reason)
	}
	l.lines = append(l.lines, line)
	l.events = append(l.events, e)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	l.lines = nil
	return lines
}

func TestEventsOfASessionsLife(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.OnEvent = log.record })
	alice := e.putUser("alice")
	first := e.login(alice)
	e.clock.Advance(30 * time.Minute)
	e.status(first)                 // refreshes
	second := e.login(alice, first) // rotates: alice's own session, so a re-authentication
	if err := e.m.Logout(newRecorder(), newRequest(second)); err != nil {
		t.Fatal(err)
	}
	want := []string{"created #1", "refreshed #1", "rotated #1", "created #2", "reauthenticated #2", "ended #2"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of login, refresh, login again, logout (-want +got):\n%s", diff)
	}

	// Rejections, each with its reason.
	third := e.login(alice)
	e.deleteItem(userItemKey(alice))
	e.status(third)
	e.putUser("alice")
	e.status(&http.Cookie{Name: cookieName, Value: "not a token"})
	e.status(&http.Cookie{Name: cookieName, Value: strings.Repeat("A", 26)})
	e.status(withUser(third, e.putUser("bob")))
	e.clock.Advance(2 * time.Hour)
	e.status(third)
	want = []string{"created #3", "rejected #3 user-missing", "rejected malformed", "rejected unknown", "rejected #3 user-mismatch", "rejected #3 expired"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of rejections (-want +got):\n%s", diff)
	}

	// Revocations.
	fourth := e.login(alice)
	if err := e.m.Revoke(context.Background(), alice, e.sessionFor(fourth).ID); err != nil {
		t.Fatal(err)
	}
	fifth := e.login(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	e.status(fifth)
	want = []string{"created #4", "revoked #4", "created #5", "revoked-all", "rejected #5 revoked"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of revocations (-want +got):\n%s", diff)
	}
	for _, ev := range log.events {
		if ev.Kind == ddbsession.EventRevokedAll && ev.User != alice {
			t.Errorf("revoked-all for %+v, want alice", ev.User)
		}
		if ev.Kind == ddbsession.EventRefreshed && ev.Elapsed <= 0 {
			t.Errorf("refreshed with Elapsed %v, want how long its writes took", ev.Elapsed)
		}
	}

	// Everyone's sessions at once.
	sixth := e.login(alice)
	if err := e.m.RevokeEveryone(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.status(sixth)
	want = []string{"created #6", "revoked-everyone", "rejected #6 revoked-everyone"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of RevokeEveryone (-want +got):\n%s", diff)
	}
}

func TestEventsOfAStoreFailure(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.OnEvent = log.record })
	cookie := e.login(e.putUser("alice"))
	log.take()
	p.Fail = func(context.Context, string, any) error { return errors.New("down") }
	e.status(cookie)
	if diff := cmp.Diff([]string{"store-failed"}, log.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if ev := log.events[len(log.events)-1]; ev.Err == nil || !strings.Contains(ev.Err.Error(), "down") {
		t.Errorf("store-failed event's Err = %v", ev.Err)
	}
}

// No event, and no error string, holds a token or its hash.
func TestEventsHoldNoToken(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.OnEvent = log.record })
	alice := e.putUser("alice")
	c := e.login(alice)
	e.clock.Advance(30 * time.Minute)
	e.status(c)
	e.m.Logout(newRecorder(), newRequest(c))
	e.status(c)
	token := c.Value[:26]
	for _, ev := range log.events {
		text := fmt.Sprintf("%+v", ev)
		if strings.Contains(text, token) || strings.Contains(text, tokenHash(token)) {
			t.Errorf("event %s holds the token or its hash", text)
		}
	}
}
