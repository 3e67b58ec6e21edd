package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

func TestStoreFailureFailsClosed(t *testing.T) {
	t.Parallel()
	boom := errors.New("InternalServerError: boom")
	const twoReads, oneTrip = "HideUserKey", "one round trip"
	cases := []struct {
		name   string
		path   string // the read path it applies to; both if empty
		break_ func(p *probe, cfg *ddbsession.Config[User])
	}{
		{"session read fails", twoReads, func(p *probe, _ *ddbsession.Config[User]) { failOn(p, "GetItem", boom) }},
		{"user read fails", twoReads, func(p *probe, _ *ddbsession.Config[User]) { failNth(p, "GetItem", 2, boom) }},
		{"batch read fails", oneTrip, func(p *probe, _ *ddbsession.Config[User]) { failOn(p, "BatchGetItem", boom) }},
		{"keys left unprocessed past StoreTimeout", oneTrip, func(p *probe, cfg *ddbsession.Config[User]) {
			cfg.StoreTimeout = 50 * time.Millisecond
			cfg.Client = unprocessed{cfg.Client}
		}},
		{"store hangs past StoreTimeout", "", func(p *probe, cfg *ddbsession.Config[User]) {
			cfg.StoreTimeout = 50 * time.Millisecond
			p.fail = func(ctx context.Context, op string) error {
				if op != "GetItem" && op != "BatchGetItem" {
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
		{"custom loader fails", "", func(_ *probe, cfg *ddbsession.Config[User]) {
			cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, time.Time, error) {
				return User{}, time.Time{}, boom
			}
		}},
		{"custom loader panics", "", func(_ *probe, cfg *ddbsession.Config[User]) {
			cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, time.Time, error) {
				panic("loader bug")
			}
		}},
	}
	for _, path := range readPaths {
		for _, tc := range cases {
			if tc.path != "" && tc.path != path.name {
				continue
			}
			for _, mw := range []string{"RequireSession", "LoadSession"} {
				t.Run(path.name+"/"+tc.name+"/"+mw, func(t *testing.T) {
					t.Parallel()
					testStoreFailure(t, path.mutate, tc.break_, mw)
				})
			}
		}
	}
}

func testStoreFailure(t *testing.T, path func(*ddbsession.Config[User]), break_ func(*probe, *ddbsession.Config[User]), mw string) {
	var p *probe
	var cfg *ddbsession.Config[User]
	e := newEnv(t, path, func(c *ddbsession.Config[User]) { withProbe(&p)(c); cfg = c })
	cookie := e.login(e.putUser("alice"))
	broken := *cfg
	break_(p, &broken)
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
	if elapsed := time.Since(began); elapsed > 8*time.Second { // far above 50ms, below the hang's 10s
		t.Errorf("took %v", elapsed)
	}
	if c := sessionCookie(t, w.Result(), m.CookieName()); c != nil {
		t.Errorf("a store failure cleared a possibly valid session's cookie: %v", c)
	}
	token, _, _ := strings.Cut(cookie.Value, ".")
	for _, leak := range []string{"boom", "loader bug", token} {
		if strings.Contains(w.Body.String(), leak) {
			t.Errorf("response body %q reveals %q", w.Body, leak)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "failing closed") {
		t.Errorf("failure not logged as an error:\n%s", logs)
	}
	if strings.Contains(logs, token) || strings.Contains(logs, tokenHash(token)) {
		t.Errorf("log contains the token or its hash:\n%s", logs)
	}
}

// unprocessed is a store under throttling: every BatchGetItem leaves all its
// keys unprocessed, as DynamoDB may.
type unprocessed struct{ ddbsession.Client }

func (u unprocessed) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
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
	p.fail = func(context.Context, string) error { return errors.New("down") }
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
