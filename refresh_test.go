package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A refresh writes the session item alone: List reads the session items,
// so the index item, which expires with the session's absolute lifetime,
// needs no copy of the expiry. Past the login's expiry, the refreshed
// session is live and listed with its new one.
func TestRefreshWritesTheSessionItemAlone(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	cookie := e.login(alice)
	id := e.sessionFor(cookie).ID
	indexBefore := itemText(e.itemOf(kindIndex, id))
	e.clock.Advance(30 * time.Minute)
	p.Reset()
	w := e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
		t.Fatalf("refresh: status %d, Set-Cookie %q; want 200 and the cookie re-sent", w.Code, w.Header().Get("Set-Cookie"))
	}
	if err := e.m.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "UpdateItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls of a due refresh (-want +got):\n%s", diff)
	}
	refreshed := time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0)
	if got := itemExpiry(t, e.itemOf(kindSession, id)); !got.Equal(refreshed) {
		t.Errorf("session item expires %v, want the refreshed %v", got, refreshed)
	}
	if after := itemText(e.itemOf(kindIndex, id)); after != indexBefore {
		t.Errorf("the refresh changed the index item:\nbefore %s\nafter  %s", indexBefore, after)
	}
	e.clock.Advance(45 * time.Minute) // past the login's expiry
	if list := e.mustList(alice); len(list) != 1 || !list[0].ExpiresAt.Equal(refreshed) {
		t.Errorf("List past the login's expiry = %+v, want the session, expiring %v", list, refreshed)
	}
}

// A refresh whose session write landed but whose response was lost is no
// failure: the session is live past its old expiry, listed, and nothing
// logs an error.
func TestRefreshWithLostResponse(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	cookie := e.login(alice)
	e.clock.Advance(30 * time.Minute)
	lost := loseAnswer(p, "UpdateItem", 1, func(in any) bool { return strings.HasPrefix(updateKey(in), "SESSION#") })
	if got := e.status(cookie); got != http.StatusOK {
		t.Fatalf("status %d", got)
	}
	if err := e.m.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if lost() != 1 {
		t.Fatal("no session write lost its response")
	}
	want := time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0)
	e.clock.Advance(45 * time.Minute)
	if list := e.mustList(alice); len(list) != 1 || !list[0].ExpiresAt.Equal(want) {
		t.Errorf("List past the old expiry = %v, want the session expiring %v", list, want)
	}
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("a landed write was logged as failed:\n%s", e.logs)
	}
}

func TestRefreshIsThrottled(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	cookie := e.login(e.putUser("alice"))
	h := e.m.RequireSession(whoami(e.m))

	// Requests inside the interval cost no writes and send no cookie.
	p.Reset()
	for range 5 {
		e.clock.Advance(time.Minute)
		if w := e.get(h, cookie); w.Code != http.StatusOK || w.Header().Get("Set-Cookie") != "" {
			t.Fatalf("status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
		}
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 5}, p.Calls()); diff != "" {
		t.Errorf("calls between refreshes (-want +got):\n%s", diff)
	}

	// The first request past the interval writes once: the session and its
	// index item, and re-sends the cookie with the new Max-Age.
	e.clock.Advance(5 * time.Minute) // 10m after login
	p.Reset()
	w := e.get(h, cookie)
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "UpdateItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls of the refreshing request (-want +got):\n%s", diff)
	}
	now := e.clock.Now()
	want := now.Add(time.Hour).Unix()
	if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got != want {
		t.Errorf("stored expiresAt = %d, want %d (epoch seconds, now+IdleTimeout)", got, want)
	}
	c := sessionCookie(t, w.Result(), cookieName)
	if c == nil || c.Value != cookie.Value || c.MaxAge != 3600 {
		t.Fatalf("refresh cookie = %v, want the same token with Max-Age 3600", c)
	}
	assertPersonal(t, w.Header())

	// And the next requests are quiet again.
	p.Reset()
	e.clock.Advance(9 * time.Minute)
	e.get(h, cookie)
	if n := p.Count("UpdateItem"); n != 0 {
		t.Errorf("%d writes right after a refresh, want 0", n)
	}
}

// A session that keeps being used outlives its first expiry: that is what
// the refresh is for.
func TestRefreshKeepsActiveSessionAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.AbsoluteLifetime = 24 * time.Hour })
	cookie := e.login(e.putUser("alice"))
	for range 12 { // three hours of a request every 15 minutes
		e.clock.Advance(15 * time.Minute)
		if got := e.status(cookie); got != http.StatusOK {
			t.Fatalf("at %v: status %d, want 200", e.clock.Now().Sub(start), got)
		}
	}
	e.clock.Advance(time.Hour) // idle for the whole IdleTimeout
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("after an idle hour: status %d, want 401", got)
	}
}

// Concurrent requests in one process that all find the session due send
// one session write between them, and only the request that sent it
// re-sends the cookie. The write is held until every response is out, so
// that each request read the old expiry and found the session due.
func TestRefreshConcurrentRequestsWriteOnce(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	h := e.m.RequireSession(whoami(e.m))
	e.clock.Advance(30 * time.Minute)

	hold := make(chan struct{})
	p.Before = func(_ context.Context, op string, in any) {
		if op == "UpdateItem" && strings.HasPrefix(updateKey(in), "SESSION#") {
			<-hold
		}
	}
	p.Reset()
	const n = 100
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		cookies int
	)
	for range n {
		wg.Go(func() {
			r := httptest.NewRequest("GET", "/", nil)
			r.AddCookie(cookie)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r) // not e.get, which would wait for the held write
			if w.Code != http.StatusOK {
				t.Errorf("status %d", w.Code)
			}
			if c := sessionCookie(t, w.Result(), cookieName); c != nil {
				mu.Lock()
				cookies++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(hold)
	e.settle()
	if got := p.Count("UpdateItem"); got != 1 {
		t.Errorf("%d UpdateItems for %d concurrent requests, want 1 (the session once)", got, n)
	}
	if cookies != 1 {
		t.Errorf("%d responses re-sent the cookie, want 1", cookies)
	}
	if got, want := itemExpiry(t, e.itemOf(kindSession, "")).Unix(), e.clock.Now().Add(time.Hour).Unix(); got != want {
		t.Errorf("expiresAt = %d, want %d", got, want)
	}
}

// Concurrent refreshes from several processes (Managers) that read the same
// expiry: each tries its write, and the condition lets exactly one through.
func TestRefreshConcurrentInstancesWriteOnce(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(30 * time.Minute)

	// Hold every session write until all instances are ready to write, so
	// that each has read the session before any write lands.
	const n = 8
	var mu sync.Mutex
	arrived := 0
	gate := make(chan struct{})
	p.Before = func(_ context.Context, op string, in any) {
		if op != "UpdateItem" || !strings.HasPrefix(updateKey(in), "SESSION#") {
			return
		}
		mu.Lock()
		arrived++
		if arrived == n {
			close(gate)
		}
		mu.Unlock()
		select {
		case <-gate:
		case <-time.After(30 * time.Second):
			mu.Lock()
			t.Errorf("only %d of %d instances reached the session write", arrived, n)
			mu.Unlock()
		}
	}
	instances := make([]*ddbsession.Manager[User], n)
	for i := range instances {
		m, err := ddbsession.New(e.cfg)
		if err != nil {
			t.Fatal(err)
		}
		instances[i] = m
	}
	p.Reset()
	var wg sync.WaitGroup
	for _, m := range instances {
		wg.Go(func() {
			if w := e.get(m.RequireSession(whoami(m)), cookie); w.Code != http.StatusOK {
				t.Errorf("status %d", w.Code)
			}
			if err := m.Wait(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Every instance tried the session write; the condition let one
	// through, which then updated the index item too.
	if got := p.Count("UpdateItem"); got != n {
		t.Errorf("%d UpdateItems, want %d (one per instance, of which one lands)", got, n)
	}
	if got, want := itemExpiry(t, e.itemOf(kindSession, "")).Unix(), e.clock.Now().Add(time.Hour).Unix(); got != want {
		t.Errorf("expiresAt = %d, want %d", got, want)
	}
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("lost races were logged as errors:\n%s", e.logs)
	}
}

// A refresh that races a Logout must not bring the session back.
func TestRefreshNeverRevivesDeletedSession(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(30 * time.Minute)
	var once sync.Once
	p.Before = func(_ context.Context, op string, _ any) {
		if op == "UpdateItem" {
			once.Do(func() {
				r := httptest.NewRequest("POST", "/logout", nil)
				r.AddCookie(cookie)
				if err := e.m.Logout(httptest.NewRecorder(), r); err != nil {
					t.Error(err)
				}
			})
		}
	}
	w := e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if w.Code != http.StatusOK {
		t.Errorf("the request that read a live session: status %d, want 200", w.Code)
	}
	// The refresh runs after the response is decided, so its cookie went
	// out; it carries the same credential, which is dead.
	if c := sessionCookie(t, w.Result(), cookieName); c != nil && c.Value != cookie.Value {
		t.Errorf("a refresh sent another credential: %v", c)
	}
	if items := e.scanAll(); len(items) != 1 {
		t.Errorf("%d items after Logout raced a refresh, want only the user item: %v", len(items), items)
	}
	p.Before = nil
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("after Logout: status %d, want 401", got)
	}
}

// A refresh that finds the session expired in the table must not extend it:
// the condition checks the stored expiry, not the one the request read.
func TestRefreshNeverExtendsExpiredItem(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(30 * time.Minute)
	var once sync.Once
	p.Before = func(ctx context.Context, op string, in any) {
		if op != "UpdateItem" {
			return
		}
		once.Do(func() {
			// Another writer shortened the expiry to the past meanwhile.
			u := in.(*dynamodb.UpdateItemInput)
			_, err := e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: &e.table, Key: u.Key,
				UpdateExpression:          ptr("SET expiresAt = :past"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":past": &types.AttributeValueMemberN{Value: strconv.FormatInt(start.Unix(), 10)}},
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got != start.Unix() {
		t.Errorf("expiresAt = %d, want the past value %d left alone", got, start.Unix())
	}
}

func TestRefreshFailureDoesNotFailRequest(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	before := itemExpiry(t, e.itemOf(kindSession, "")).Unix()
	e.clock.Advance(30 * time.Minute)
	p.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateItem" {
			return errors.New("throttled")
		}
		return nil
	}
	w := e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Errorf("status %d %q, want 200 user:alice", w.Code, w.Body)
	}
	// The cookie went out before the write failed, with the same
	// credential: the table, not the cookie, decides.
	if c := sessionCookie(t, w.Result(), cookieName); c != nil && c.Value != cookie.Value {
		t.Errorf("a refresh sent another credential: %v", c)
	}
	if !strings.Contains(e.logs.String(), "refresh session") || !strings.Contains(e.logs.String(), "throttled") {
		t.Errorf("failed refresh not logged:\n%s", e.logs)
	}
	if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got != before {
		t.Errorf("expiresAt moved to %d despite the failure", got)
	}
	// A failed write is not remembered: the next request tries again.
	p.Fail = nil
	e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if got, want := itemExpiry(t, e.itemOf(kindSession, "")).Unix(), e.clock.Now().Add(time.Hour).Unix(); got != want {
		t.Errorf("expiresAt after the next request = %d, want %d", got, want)
	}
}

// Wait returns once the refresh writes that requests started have ended,
// and no sooner, or when its context ends.
func TestWaitForRefreshWrites(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(30 * time.Minute)
	hold := make(chan struct{})
	p.Before = func(_ context.Context, op string, _ any) {
		if op == "UpdateItem" {
			<-hold
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(cookie)
	w := httptest.NewRecorder()
	e.m.RequireSession(whoami(e.m)).ServeHTTP(w, r) // answered while the write is held
	if w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
		t.Fatalf("status %d, cookie %v: want 200 and the refreshed cookie before the write", w.Code, w.Header().Values("Set-Cookie"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.m.Wait(ctx); err == nil {
		t.Error("Wait returned while a refresh write was held")
	}
	close(hold)
	if err := e.m.Wait(context.Background()); err != nil {
		t.Errorf("Wait after the write: %v", err)
	}
	if got, want := itemExpiry(t, e.itemOf(kindSession, "")).Unix(), e.clock.Now().Add(time.Hour).Unix(); got != want {
		t.Errorf("expiresAt after Wait = %d, want %d", got, want)
	}
}

// A Logout (or a Revoke, or a Login that rotates the session) that lands
// between a refresh's read and its write deletes both items; the refresh's
// write, conditional on the item as read, must then not bring the session
// back, neither as a live session nor in List.
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
			return e.m.Login(newRecorder(), newRequest(cookie), user, nil)
		}},
	} {
		t.Run(end.name, func(t *testing.T) {
			t.Parallel()
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
			alice := e.putUser("alice")
			cookie := e.login(alice)
			id := e.sessionFor(cookie).ID
			e.clock.Advance(30 * time.Minute) // a refresh is due
			var once sync.Once
			p.Before = func(_ context.Context, _ string, in any) {
				if _, ok := in.(*dynamodb.UpdateItemInput); ok && strings.HasPrefix(updateKey(in), "SESSION#") {
					// The refresh's write is on its way.
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
			if err := e.m.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			p.Before = nil
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

// WriteBeforeResponse, or AWS Lambda's environment, makes a refresh write
// the session item before the handler runs, within the request's own
// StoreTimeout; elsewhere the handler runs while the write is on its way.
// Each side is staged by holding the write where it would reach the engine.
func TestWriteBeforeResponse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(*testing.T, *ddbsession.Config[User])
		inline bool
	}{
		{"by default", func(*testing.T, *ddbsession.Config[User]) {}, false},
		{"Config.WriteBeforeResponse", func(_ *testing.T, c *ddbsession.Config[User]) { c.WriteBeforeResponse = true }, true},
		{"on AWS Lambda", func(t *testing.T, _ *ddbsession.Config[User]) { t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "app") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "") // as this test's own environment says
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { tc.set(t, c) }) // RefreshInterval 10m
			cookie := e.login(e.putUser("alice"))
			e.clock.Advance(10 * time.Minute)

			handled := make(chan struct{})
			var readDeadline, writeDeadline time.Time
			p.Before = func(ctx context.Context, op string, _ any) {
				switch op {
				case "BatchGetItem":
					readDeadline, _ = ctx.Deadline()
				case "UpdateItem":
					writeDeadline, _ = ctx.Deadline()
					if tc.inline {
						// Held here, the write must keep the handler from
						// running. (The wait bounds only how surely a write
						// that does not would be caught.)
						select {
						case <-handled:
							t.Error("the handler ran while the refresh's write was held")
						case <-time.After(500 * time.Millisecond):
						}
						return
					}
					select { // the handler runs while the write is held here
					case <-handled:
					case <-time.After(time.Minute):
						t.Error("the handler did not run while the refresh's write was held")
					}
				}
			}
			h := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { close(handled) }))
			e.get(h, cookie)
			if got := p.Count("UpdateItem"); got != 1 {
				t.Fatalf("%d refresh writes, want 1", got)
			}
			if got, want := itemExpiry(t, e.itemOf(kindSession, "")), e.clock.Now().Add(time.Hour).Truncate(time.Second); !got.Equal(want) {
				t.Errorf("stored expiry %v, want %v", got, want)
			}
			// Inline, the write shares the request's deadline; after the
			// response, it has one of its own.
			if same := writeDeadline.Equal(readDeadline); same != tc.inline {
				t.Errorf("the write's deadline %v, the read's %v: same %v, want %v", writeDeadline, readDeadline, same, tc.inline)
			}
		})
	}
}
