package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
)

func TestStoreFailureFailsClosed(t *testing.T) {
	t.Parallel()
	boom := errors.New("InternalServerError: boom")
	cases := []struct {
		name   string
		break_ func(p *probe, cfg *ddbsession.Config[User])
	}{
		{"session read fails", func(p *probe, _ *ddbsession.Config[User]) { failOn(p, "GetItem", boom) }},
		{"user read fails", func(p *probe, _ *ddbsession.Config[User]) { failNth(p, "GetItem", 2, boom) }},
		{"store hangs past StoreTimeout", func(p *probe, cfg *ddbsession.Config[User]) {
			cfg.StoreTimeout = 50 * time.Millisecond
			p.fail = func(ctx context.Context, op string) error {
				if op != "GetItem" {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Second):
					return errors.New("StoreTimeout did not bound the request")
				}
			}
		}},
		{"custom loader fails", func(_ *probe, cfg *ddbsession.Config[User]) {
			cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, time.Time, error) {
				return User{}, time.Time{}, boom
			}
		}},
		{"custom loader panics", func(_ *probe, cfg *ddbsession.Config[User]) {
			cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, time.Time, error) {
				panic("loader bug")
			}
		}},
	}
	for _, tc := range cases {
		for _, mw := range []string{"RequireSession", "LoadSession"} {
			t.Run(tc.name+"/"+mw, func(t *testing.T) {
				t.Parallel()
				var p *probe
				var cfg *ddbsession.Config[User]
				e := newEnv(t, func(c *ddbsession.Config[User]) { withProbe(&p)(c); cfg = c })
				cookie := e.login(e.putUser("alice"))
				broken := *cfg
				tc.break_(p, &broken)
				m, err := ddbsession.New(broken)
				if err != nil {
					t.Fatal(err)
				}
				called := false
				next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
				h := m.RequireSession(next)
				if mw == "LoadSession" {
					h = m.LoadSession(next)
				}
				began := time.Now()
				w := e.get(h, cookie)
				if w.Code != http.StatusServiceUnavailable || called {
					t.Fatalf("status %d, handler called %v; want 503 and not called", w.Code, called)
				}
				if elapsed := time.Since(began); elapsed > 5*time.Second {
					t.Errorf("took %v", elapsed)
				}
				if c := sessionCookie(t, w.Result(), m.CookieName()); c != nil {
					t.Errorf("a store failure cleared a possibly valid session's cookie: %v", c)
				}
				for _, leak := range []string{"boom", "loader bug", cookie.Value} {
					if strings.Contains(w.Body.String(), leak) {
						t.Errorf("response body %q reveals %q", w.Body, leak)
					}
				}
				logs := e.logs.String()
				if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "failing closed") {
					t.Errorf("failure not logged as an error:\n%s", logs)
				}
				if strings.Contains(logs, cookie.Value) {
					t.Errorf("log contains the token:\n%s", logs)
				}
			})
		}
	}
}

func TestStoreFailureCustomResponse(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.StoreUnavailable = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		})
	})
	cookie := e.login(e.putUser("alice"))
	failOn(p, "GetItem", errors.New("down"))
	w := e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "5" {
		t.Errorf("got %d Retry-After %q, want the custom 503", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestLoginAndLogoutReportStoreFailure(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	cookie := e.login(alice)

	failOn(p, "PutItem", errors.New("down"))
	w := newRecorder()
	if err := e.m.Login(w, newRequest(cookie), alice); err == nil {
		t.Error("Login succeeded with the store down")
	} else if strings.Contains(err.Error(), cookie.Value) {
		t.Errorf("Login error reveals the token: %v", err)
	}
	if c := sessionCookie(t, w.Result(), e.m.CookieName()); c != nil && c.Value != "" {
		t.Errorf("failed Login set a session cookie: %v", c)
	}

	failOn(p, "DeleteItem", errors.New("down"))
	w = newRecorder()
	if err := e.m.Logout(w, newRequest(cookie)); err == nil {
		t.Error("Logout reported success with the store down")
	}
	if c := sessionCookie(t, w.Result(), e.m.CookieName()); c == nil || c.MaxAge >= 0 {
		t.Errorf("failed Logout did not clear the cookie: %v", c)
	}
}
