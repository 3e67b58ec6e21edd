package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

// Two Managers in one app (users and admins, say) must not read each other's
// signed-in user from a request context.
func TestManagersDoNotShareContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	adminCfg := e.cfg
	adminCfg.CookieName = "admin"
	admins, err := ddbsession.New(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	cookie := e.login(e.putUser("mallory"))
	var asUser, asAdmin, adminSession bool
	e.get(e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, asUser = e.m.User(r.Context())
		_, asAdmin = admins.User(r.Context())
		_, adminSession = admins.Session(r.Context())
	})), cookie)
	if !asUser {
		t.Fatal("the Manager that checked the session does not see its user")
	}
	if asAdmin || adminSession {
		t.Errorf("another Manager reports the user (%v) or session (%v) as its own", asAdmin, adminSession)
	}
}

// A refresh whose index-item write fails leaves the index item stale, with
// the login's expiry. Once TTL has removed it there, the session lives on
// but is missing from List, until its next refresh writes the index item
// anew.
func TestRefreshRepairsIndexItem(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	cookie := e.login(alice)
	id := e.sessionFor(cookie).ID
	loginExpiry := time.Unix(start.Add(time.Hour).Unix(), 0)
	h := e.m.RequireSession(whoami(e.m))

	// The session's UpdateItem succeeds, the index item's fails.
	e.clock.Advance(30 * time.Minute)
	failNth(p, "UpdateItem", 2, errors.New("throttled"))
	p.reset()
	w := e.get(h, cookie)
	if w.Code != http.StatusOK || sessionCookie(t, w.Result(), e.m.CookieName()) == nil {
		t.Fatalf("refresh with a failed index write: status %d, Set-Cookie %q; want 200 and the cookie re-sent", w.Code, w.Header().Get("Set-Cookie"))
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "UpdateItem": 2}, p.calls); diff != "" {
		t.Errorf("calls of the refresh with a failed index write (-want +got):\n%s", diff)
	}
	refreshed := time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0)
	if got := itemExpiry(t, e.itemOf(kindSession, id)); !got.Equal(refreshed) {
		t.Errorf("session item expires %v, want the refreshed %v", got, refreshed)
	}
	stale := e.itemOf(kindIndex, id)
	if got := itemExpiry(t, stale); !got.Equal(loginExpiry) {
		t.Fatalf("index item expires %v, want the stale %v: the failure missed the index write", got, loginExpiry)
	}
	if !strings.Contains(e.logs.String(), "refresh session index item") {
		t.Errorf("failed index write not logged:\n%s", e.logs)
	}
	if list := e.mustList(alice); len(list) != 1 || !list[0].ExpiresAt.Equal(loginExpiry) {
		t.Errorf("List with the stale index item = %+v, want the session with expiry %v", list, loginExpiry)
	}

	// Past the stale expiry, TTL removes the index item; the session,
	// refreshed, lives on, and its next refresh is due.
	p.fail = nil
	e.clock.Advance(45 * time.Minute)
	e.deleteItem(map[string]types.AttributeValue{"pk": stale["pk"], "sk": stale["sk"]})
	if n := len(e.itemsOf(kindIndex, id)); n != 0 {
		t.Fatalf("%d index items after TTL's delete, want 0", n)
	}
	if list := e.mustList(alice); len(list) != 0 {
		t.Errorf("List without the index item = %+v, want none", list)
	}

	// That refresh finds the index item missing, writes it anew, and reads
	// the session again to be sure it was not deleted meanwhile.
	p.reset()
	w = e.get(h, cookie)
	if w.Code != http.StatusOK || sessionCookie(t, w.Result(), e.m.CookieName()) == nil {
		t.Fatalf("repairing refresh: status %d, Set-Cookie %q; want 200 and the cookie re-sent", w.Code, w.Header().Get("Set-Cookie"))
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "UpdateItem": 2, "PutItem": 1, "GetItem": 1}, p.calls); diff != "" {
		t.Errorf("calls of the repairing refresh (-want +got):\n%s", diff)
	}
	now := e.clock.Now()
	want := loggedIn(id, alice, start, time.Hour)
	want.RefreshedAt = time.UnixMilli(now.UnixMilli())
	want.ExpiresAt = time.Unix(now.Add(time.Hour).Unix(), 0)
	repaired := e.itemOf(kindIndex, id)
	if got := itemExpiry(t, repaired); !got.Equal(want.ExpiresAt) {
		t.Errorf("repaired index item expires %v, want %v", got, want.ExpiresAt)
	}
	// Revoke finds the session item through this attribute.
	if got, want := attrText(repaired["sessionPK"]), "S:SESSION#"+tokenHash(cookie.Value); got != want {
		t.Errorf("repaired index item's sessionPK = %s, want %s", got, want)
	}
	if diff := cmp.Diff([]ddbsession.SessionInfo{{Session: want}}, e.mustList(alice)); diff != "" {
		t.Errorf("List after the repairing refresh (-want +got):\n%s", diff)
	}
}

func TestClientHangUpIsNotAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	r.AddCookie(cookie)
	w := httptest.NewRecorder()
	called := false
	e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).ServeHTTP(w, r)
	if called || w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, handler called %v; want 503, not called", w.Code, called)
	}
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("a client hang-up was logged as an error:\n%s", e.logs)
	}
}

// Signing out and closing the tab at once must still sign out.
func TestLogoutSurvivesClientHangUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/logout", nil)
	r.AddCookie(cookie)
	if err := e.m.Logout(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.Check(context.Background(), cookie.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("token after Logout from a gone client: %v, want ErrNoSession", err)
	}
}

// Login's undo of a half-written session is bounded by StoreTimeout too.
func TestLoginUndoIsBounded(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.StoreTimeout = 100 * time.Millisecond
	})
	alice := e.putUser("alice")
	p.fail = func(ctx context.Context, op string) error {
		switch {
		case op == "PutItem" && p.count("PutItem") == 2:
			return errors.New("session write failed")
		case op == "DeleteItem":
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
				return errors.New("not bounded")
			}
		}
		return nil
	}
	began := time.Now()
	if err := e.m.Login(httptest.NewRecorder(), newRequest(), alice); err == nil {
		t.Fatal("Login succeeded though its session write failed")
	}
	if took := time.Since(began); took > 4*time.Second { // far above 100ms, below the hang's 5s
		t.Errorf("Login took %v with StoreTimeout 100ms", took)
	}
}

// Lowering AbsoluteLifetime ends older sessions at once, not at their
// stored expiry.
func TestAbsoluteLifetimeCheckedOnRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(50 * time.Minute)
	stricter := e.cfg
	stricter.AbsoluteLifetime = 45 * time.Minute
	m, err := ddbsession.New(stricter)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Check(context.Background(), cookie.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("50-minute-old session under a 45-minute AbsoluteLifetime: %v, want ErrNoSession", err)
	}
	if _, _, err := e.m.Check(context.Background(), cookie.Value); err != nil {
		t.Errorf("the same session under the default lifetime: %v", err)
	}
}

// A refresh racing a Logout must not leave an index item behind for the
// deleted session: the refresh has written the session item, and the
// Logout deletes both items before the refresh reaches the index item,
// which it then finds missing and would write anew.
func TestRefreshRacingLogoutLeavesNoIndexItem(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	cookie := e.login(alice)
	e.clock.Advance(30 * time.Minute)
	var once sync.Once
	p.before = func(_ context.Context, op string, in any) {
		if op == "UpdateItem" && strings.HasPrefix(updateKey(in), "USERSESSIONS#") {
			once.Do(func() {
				if err := e.m.Logout(newRecorder(), newRequest(cookie)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if got := e.status(cookie); got != http.StatusOK {
		t.Fatalf("the refreshing request: status %d", got)
	}
	if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
		t.Errorf("index items of the logged-out session: %v", itemsText(items))
	}
	if list := e.mustList(alice); len(list) != 0 {
		t.Errorf("List after Logout raced a refresh = %v, want none", list)
	}
}

// A refresh whose session write landed but whose response was lost still
// moves the index item's expiry, or List would hide the live session once
// the index item's old expiry passed.
func TestRefreshWithLostResponseKeepsIndexItem(t *testing.T) {
	t.Parallel()
	var lossy *lostResponse
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		lossy = &lostResponse{Client: c.Client}
		c.Client = lossy
	})
	alice := e.putUser("alice")
	cookie := e.login(alice)
	e.clock.Advance(30 * time.Minute)
	lossy.armed.Store(true)
	if got := e.status(cookie); got != http.StatusOK {
		t.Fatalf("status %d", got)
	}
	if lossy.armed.Load() {
		t.Fatal("no session write lost its response")
	}
	want := time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0)
	if got := itemExpiry(t, e.itemOf(kindIndex, "")); !got.Equal(want) {
		t.Errorf("index item's expiry %v, want the session's new one %v", got, want)
	}
	// Past the old expiry, the session is live and listed.
	e.clock.Advance(45 * time.Minute)
	if list := e.mustList(alice); len(list) != 1 || !list[0].ExpiresAt.Equal(want) {
		t.Errorf("List past the index item's old expiry = %v, want the session", list)
	}
}

// lostResponse passes the first session UpdateItem after it is armed to the
// engine, and then answers it with an error, as a dropped connection does.
type lostResponse struct {
	ddbsession.Client
	armed atomic.Bool
}

func (l *lostResponse) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.Client.UpdateItem(ctx, in, o...)
	if err == nil && strings.HasPrefix(updateKey(in), "SESSION#") && l.armed.CompareAndSwap(true, false) {
		return nil, errors.New("connection reset by peer")
	}
	return out, err
}
