package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestDeviceBindingConfigRefused(t *testing.T) {
	t.Parallel()
	client := ddbtest.NewProbe(nil)
	for _, d := range []ddbsession.DeviceBinding{
		{Enabled: true, RegistrationPath: "/dbsc/régister"},
		{Enabled: true, RefreshPath: "/dbsc/refresh\x01"},
		{Enabled: true, RefreshPath: `/dbsc\refresh`},
		{Enabled: true, RefreshPath: "/dbsc/refresh?x=1"},
		{Enabled: true, RefreshPath: "dbsc/refresh"},
		{Enabled: true, RegistrationPath: "/dbsc/x", RefreshPath: "/dbsc/x"},
		{Enabled: true, CookieLifetime: 9 * time.Second},
		{Enabled: true, CookieLifetime: time.Hour + time.Second},
		{Enabled: true, CookieName: "__Host-session"},
	} {
		if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t", DeviceBinding: d}); err == nil {
			t.Errorf("New accepted DeviceBinding %+v", d)
		}
	}
	if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t", Cookie: ddbsession.Cookie{InsecureDevMode: true}, DeviceBinding: ddbsession.DeviceBinding{Enabled: true}}); err == nil {
		t.Error("New accepted DeviceBinding with InsecureDevMode")
	}
	if _, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "t", DeviceBinding: ddbsession.DeviceBinding{
		Enabled: true, RegistrationPath: "/a-b_c.d~e/r!$&'()*+=:@%20", CookieLifetime: time.Hour,
	}}); err != nil {
		t.Errorf("New refused a valid DeviceBinding: %v", err)
	}
}

// A bound session on the request path: what gets in, what does not, what
// it costs, and how the session's own sliding expiry and the device list
// treat it.

// TestBoundSessionRefusedWithoutBoundCookie: a bound session needs a valid
// bound cookie of its own. Without one the request is 401; the session
// cookie is not cleared and the session is not ended (it is most likely a
// copy that was refused, and the device's browser carries on), and the
// table is unchanged.
func TestBoundSessionRefusedWithoutBoundCookie(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, _ := newBoundEnv(t, withBearer)
		alice := e.putUser("alice")
		b := e.bound(devicesOf(alg)[0], alice)
		other := e.bound(devicesOf(alg)[1], e.putUser("bob"))
		expired := *b.bound
		// The control: an unbound session's token as a bearer token
		// gets in, so the refusals below are the binding's.
		if w := e.bearerGet("Bearer " + e.login(alice).Value); w.Code != http.StatusOK {
			t.Fatalf("an unbound session's token as a bearer token: status %d, want 200", w.Code)
		}
		for _, c := range []struct {
			name    string
			advance time.Duration
			send    func() *httptest.ResponseRecorder
		}{
			{"the session cookie alone", 0, func() *httptest.ResponseRecorder { return e.get(e.m.RequireSession(whoami(e.m)), b.session) }},
			{"another bound session's bound cookie", 0, func() *httptest.ResponseRecorder {
				return e.get(e.m.RequireSession(whoami(e.m)), b.session, other.bound)
			}},
			{"the session's bound cookie as the value of another name", 0, func() *httptest.ResponseRecorder {
				return e.get(e.m.RequireSession(whoami(e.m)), b.session, &http.Cookie{Name: "bound", Value: b.bound.Value})
			}},
			{"a malformed bound cookie", 0, func() *httptest.ResponseRecorder {
				return e.get(e.m.RequireSession(whoami(e.m)), b.session, &http.Cookie{Name: "__Host-bound", Value: "x"})
			}},
			{"its session token as a bearer token", 0, func() *httptest.ResponseRecorder { return e.bearerGet("Bearer " + b.session.Value) }},
			{"its session token as a bearer token, with the bound cookie", 0, func() *httptest.ResponseRecorder {
				return e.bearerGet("Bearer "+b.session.Value, b.bound)
			}},
			// Last: the clock moves past the bound cookie's expiry.
			{"an expired bound cookie", 10 * time.Minute, func() *httptest.ResponseRecorder {
				return e.get(e.m.RequireSession(whoami(e.m)), b.session, &expired)
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				e.use(t)
				e.clock.Advance(c.advance)
				before := e.snapshot()
				w := c.send()
				if w.Code != http.StatusUnauthorized {
					t.Errorf("status %d, want 401", w.Code)
				}
				if cookies := w.Result().Cookies(); len(cookies) != 0 {
					t.Errorf("the refusal sets cookies %v", cookies)
				}
				e.assertUnchanged(before, "a refused request")
			})
		}
		// Both sessions are alive: the device refreshes and gets in.
		b.refresh()
		other.refresh()
		for _, x := range []*boundBrowser{b, other} {
			if got := x.status(); got != http.StatusOK {
				t.Errorf("the device after the refusals: status %d", got)
			}
		}
		if _, _, err := e.m.Authenticate(context.Background(), b.session.Value); !errors.Is(err, ddbsession.ErrNoSession) {
			t.Errorf("Authenticate of a bound session: %v, want ErrNoSession", err)
		}
	})
}

// TestBoundCookieCostsNoCall: the bound cookie is checked against the
// session item that the request reads anyway: a bound request costs what
// an unbound one does, one BatchGetItem, and so does a refused one.
func TestBoundCookieCostsNoCall(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		alice := e.putUser("alice")
		unbound := e.login(alice)
		b := e.bound(devicesOf(alg)[0], alice)
		calls := func(cookies ...*http.Cookie) (int, int) {
			p.Reset()
			code := e.statusWith(cookies...)
			if p.Count("BatchGetItem") != 1 {
				t.Errorf("%d BatchGetItem calls, want 1", p.Count("BatchGetItem"))
			}
			return code, p.Total()
		}
		code, plain := calls(unbound)
		if code != http.StatusOK || plain != 1 {
			t.Fatalf("unbound request: status %d, %d calls; want 200 after 1", code, plain)
		}
		if code, n := calls(b.session, b.bound); code != http.StatusOK || n != plain {
			t.Errorf("bound request: status %d, %d calls; want 200 after %d", code, n, plain)
		}
		if code, n := calls(b.session); code != http.StatusUnauthorized || n != plain {
			t.Errorf("bound session without its bound cookie: status %d, %d calls; want 401 after %d", code, n, plain)
		}
	})
}

// TestBoundSessionSlidingExpiry: the session's own refresh (its expiry
// moved forward by a request) keeps it bound: the session item stays
// version 2 with its key and bound cookies, and List, which reads it,
// shows the session bound.
func TestBoundSessionSlidingExpiry(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, _ := newBoundEnv(t)
		alice := e.putUser("alice")
		b := e.bound(devicesOf(alg)[0], alice)
		assertBoundItems := func(when string) {
			t.Helper()
			s := e.itemOf(kindSession, b.id)
			if attrText(s["v"]) != "N:5" || s["boundKey"] == nil || s["boundCookie"] == nil {
				t.Errorf("%s: session item %s, want v 5 with its key and bound cookie", when, itemText(s))
			}
			if list := e.mustList(alice); len(list) != 1 || !list[0].DeviceBound {
				t.Errorf("%s: List %+v, want one device-bound session", when, list)
			}
		}
		for round := range 2 {
			e.clock.Advance(11 * time.Minute) // past RefreshInterval, and the bound cookie's lifetime
			b.refresh()
			expiry := itemExpiry(t, e.itemOf(kindSession, b.id))
			w := e.get(e.m.RequireSession(whoami(e.m)), b.session, b.bound)
			if w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
				t.Fatalf("round %d: status %d, cookies %v; want 200 and a refreshed session cookie", round, w.Code, w.Result().Cookies())
			}
			if got := itemExpiry(t, e.itemOf(kindSession, b.id)); !got.After(expiry) {
				t.Fatalf("round %d: expiry %v, was %v: no refresh happened", round, got, expiry)
			}
			assertBoundItems("after the session's refresh")
			if got := b.status(); got != http.StatusOK {
				t.Errorf("round %d: the device afterwards: status %d", round, got)
			}
			if w := e.get(e.m.RequireSession(whoami(e.m)), b.session); w.Code != http.StatusUnauthorized {
				t.Errorf("round %d: the session cookie alone: status %d, want 401", round, w.Code)
			}
		}
	})
}

// TestBoundSessionsListedAndEnded: List marks bound sessions; Revoke,
// RevokeAll and Logout end them as any other, and their refresh then ends
// the binding in the browser.
func TestBoundSessionsListedAndEnded(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, _ := newBoundEnv(t)
		alice := e.putUser("alice")
		unbound := e.login(alice)
		e.clock.Advance(time.Millisecond)
		revoked := e.bound(devicesOf(alg)[0], alice)
		e.clock.Advance(time.Millisecond)
		loggedOut := e.bound(devicesOf(alg)[1], alice)
		e.clock.Advance(time.Millisecond)
		last := e.bound(devicesOf(alg)[2], alice)

		bound := map[string]bool{revoked.id: true, loggedOut.id: true, last.id: true, e.sessionFor(unbound).ID: false}
		list := e.mustList(alice)
		if len(list) != 4 {
			t.Fatalf("List: %d sessions, want 4", len(list))
		}
		for _, s := range list {
			if want, ok := bound[s.ID]; !ok || s.DeviceBound != want {
				t.Errorf("List: session %s DeviceBound %v, want %v (known %v)", s.ID, s.DeviceBound, want, ok)
			}
		}

		if err := e.m.Revoke(context.Background(), alice, revoked.id); err != nil {
			t.Fatal(err)
		}
		lw := httptest.NewRecorder()
		if err := e.m.Logout(lw, newRequest(loggedOut.session, loggedOut.bound)); err != nil {
			t.Fatal(err)
		}
		if c := sessionCookie(t, lw.Result(), "__Host-bound"); c == nil || c.MaxAge >= 0 {
			t.Errorf("Logout of a bound session: cookies %v, want the bound cookie cleared", lw.Result().Cookies())
		}
		for _, b := range []*boundBrowser{revoked, loggedOut} {
			if got := b.status(); got != http.StatusUnauthorized {
				t.Errorf("ended session: status %d, want 401", got)
			}
			if items := itemsWithSID(e.scanAll(), b.id); len(items) != 0 {
				t.Errorf("items of an ended session: %v", itemsText(items))
			}
			assertEnded(t, b.chromiumRefresh(), b.id, "refresh of an ended session")
		}
		if got := listIDs(e.mustList(alice)); len(got) != 2 || got[0] != last.id {
			t.Errorf("List after Revoke and Logout: %v, want [%s <unbound>]", got, last.id)
		}
		if got := last.status(); got != http.StatusOK {
			t.Errorf("the remaining bound session: status %d", got)
		}

		e.clock.Advance(time.Millisecond)
		if err := e.m.RevokeAll(context.Background(), alice); err != nil {
			t.Fatal(err)
		}
		if got := last.status(); got != http.StatusUnauthorized {
			t.Errorf("after RevokeAll: status %d, want 401", got)
		}
		assertEnded(t, last.chromiumRefresh(), last.id, "refresh after RevokeAll")
		if list := e.mustList(alice); len(list) != 0 {
			t.Errorf("List after RevokeAll: %+v", list)
		}
	})
}
