package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// A session whose index item missed a refresh, and was then removed by TTL,
// is listed again after its next refresh.
func TestRefreshRepairsIndexItem(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	cookie := e.login(alice)

	e.clock.Advance(30 * time.Minute)
	p.fail = func(_ context.Context, op string) error {
		if op == "UpdateItem" && p.count("UpdateItem") == 2 { // the index item's
			return errors.New("throttled")
		}
		return nil
	}
	p.reset()
	if got := e.status(cookie); got != http.StatusOK {
		t.Fatalf("status %d", got)
	}
	p.fail = nil
	// TTL removes the index item at its stale expiry.
	for _, item := range e.scanAll() {
		if k, _ := item["kind"].(*types.AttributeValueMemberS); k != nil && k.Value == "session-index" {
			key := map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]}
			if _, err := e.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.table, Key: key}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.clock.Advance(45 * time.Minute) // past the stale expiry, refresh due
	if got := e.status(cookie); got != http.StatusOK {
		t.Fatalf("status %d", got)
	}
	list, err := e.m.List(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !list[0].ExpiresAt.Equal(time.Unix(e.clock.Now().Add(time.Hour).Unix(), 0)) {
		t.Errorf("List after the repairing refresh = %+v, want the session with its new expiry", list)
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
	if took := time.Since(began); took > 2*time.Second {
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
