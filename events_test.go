package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
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
	line := e.Kind.String()
	if e.SessionID != "" {
		if _, ok := l.ids[e.SessionID]; !ok {
			l.ids[e.SessionID] = len(l.ids) + 1
		}
		line += fmt.Sprintf(" #%d", l.ids[e.SessionID])
	}
	if e.Reason != 0 {
		line += " " + e.Reason.String()
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
	second := e.login(alice, first) // rotates
	if err := e.m.Logout(newRecorder(), newRequest(second)); err != nil {
		t.Fatal(err)
	}
	want := []string{"created #1", "refreshed #1", "rotated #1", "created #2", "ended #2"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of login, refresh, login again, logout (-want +got):\n%s", diff)
	}

	// Rejections, each with its reason.
	third := e.login(alice)
	e.deleteItem(userItemKey(alice))
	e.status(third)
	e.putUser("alice")
	e.status(&http.Cookie{Name: e.m.CookieName(), Value: "not a token"})
	e.status(&http.Cookie{Name: e.m.CookieName(), Value: strings.Repeat("A", 26)})
	e.status(withUser(third, e.putUser("bob")))
	e.clock.Advance(2 * time.Hour)
	e.status(third)
	want = []string{"created #3", "rejected #3 user-missing", "rejected malformed", "rejected unknown", "rejected #3 user-mismatch", "rejected #3 expired"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of rejections (-want +got):\n%s", diff)
	}

	// Revocations, and a cutoff.
	fourth := e.login(alice)
	if err := e.m.Revoke(context.Background(), alice, e.sessionFor(fourth).ID); err != nil {
		t.Fatal(err)
	}
	fifth := e.login(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	e.status(fifth)
	want = []string{"created #4", "revoked #4", "created #5", "revoked-all", "rejected #5 cutoff"}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("events of revocations (-want +got):\n%s", diff)
	}
	for _, ev := range log.events {
		if ev.Kind == ddbsession.EventRevokedAll && ev.User != alice {
			t.Errorf("revoked-all for %+v, want alice", ev.User)
		}
	}
}

func TestEventsOfAStoreFailure(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	var p *probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.OnEvent = log.record })
	cookie := e.login(e.putUser("alice"))
	log.take()
	p.fail = func(context.Context, string) error { return errors.New("down") }
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
	token, _, _ := strings.Cut(c.Value, ".")
	for _, ev := range log.events {
		text := fmt.Sprintf("%+v", ev)
		if strings.Contains(text, token) || strings.Contains(text, tokenHash(token)) {
			t.Errorf("event %s holds the token or its hash", text)
		}
	}
}

// "Keep me signed in": a login the app does not keep gets a cookie without
// Max-Age, which ends with the browser; a refresh keeps it so; a kept one
// gets Max-Age.
func TestKeepSignedIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.KeepSignedIn = func(r *http.Request) bool { return r.URL.Query().Get("remember") == "on" }
	})
	alice := e.putUser("alice")
	login := func(target string) *http.Cookie {
		w := httptest.NewRecorder()
		if err := e.m.Login(w, httptest.NewRequest("POST", target, nil), alice); err != nil {
			t.Fatal(err)
		}
		return sessionCookie(t, w.Result(), e.m.CookieName())
	}
	browser := login("https://example.test/login")
	if browser.MaxAge != 0 || !browser.Expires.IsZero() || strings.Contains(browser.Raw, "Max-Age") {
		t.Errorf("a login not kept: cookie %q, want no Max-Age and no Expires", browser.Raw)
	}
	kept := login("https://example.test/login?remember=on")
	if kept.MaxAge != 3600 {
		t.Errorf("a kept login: cookie %q, want Max-Age=3600", kept.Raw)
	}
	e.clock.Advance(30 * time.Minute)
	for _, tc := range []struct {
		name   string
		c      *http.Cookie
		maxAge int
	}{{"not kept", browser, 0}, {"kept", kept, 3600}} {
		w := e.get(e.m.RequireSession(whoami(e.m)), tc.c)
		c := sessionCookie(t, w.Result(), e.m.CookieName())
		if w.Code != http.StatusOK || c == nil || c.MaxAge != tc.maxAge {
			t.Errorf("%s: refresh status %d, cookie %v; want Max-Age %d", tc.name, w.Code, c, tc.maxAge)
		}
	}
	// Without KeepSignedIn every cookie is persistent, as before.
	plain := newEnv(t)
	if c := plain.login(plain.putUser("alice")); c.MaxAge != 3600 {
		t.Errorf("default: cookie Max-Age %d, want 3600", c.MaxAge)
	}
}

// An app's handler unit test puts a session and user in the context
// without DynamoDB.
func TestNewContextForHandlerTests(t *testing.T) {
	t.Parallel()
	m, err := ddbsession.New(ddbsession.Config[User]{Client: newProbe(nil), Table: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(m.NewContext(r.Context(), ddbsession.Session{ID: "s1"}, User{Name: "alice"}))
	w := httptest.NewRecorder()
	whoami(m).ServeHTTP(w, r)
	if w.Body.String() != "user:alice" {
		t.Errorf("handler saw %q, want user:alice", w.Body)
	}
	if s, ok := m.Session(r.Context()); !ok || s.ID != "s1" {
		t.Errorf("Session = %+v, %v", s, ok)
	}
}
