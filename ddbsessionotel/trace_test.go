package ddbsessionotel_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbsession/ddbsession"
)

// Each way a check ends, with RequireSession and LoadSession: the span's
// outcome, its DynamoDB children, and what the app's handler sees.
func TestCheckOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		require  bool
		cookie   func(valid *http.Cookie) *http.Cookie // nil: none
		wantCode int
		wantBody string
		wantTree string
	}{{
		name:     "RequireSession without a cookie",
		require:  true,
		wantCode: http.StatusUnauthorized,
		wantTree: "GET /account\n  ddbsession.check ddbsession.check.outcome=none\n",
	}, {
		name:     "LoadSession without a cookie",
		wantCode: http.StatusOK,
		wantBody: "hello stranger",
		wantTree: "GET /account\n  ddbsession.check ddbsession.check.outcome=none\n  account\n",
	}, {
		name:     "LoadSession with a session",
		cookie:   func(valid *http.Cookie) *http.Cookie { return valid },
		wantCode: http.StatusOK,
		wantBody: "hello USER#alice-",
		wantTree: "GET /account\n  ddbsession.check ddbsession.check.outcome=accepted\n    DynamoDB.BatchGetItem\n  account\n",
	}, {
		name:     "LoadSession with a malformed cookie",
		cookie:   func(valid *http.Cookie) *http.Cookie { return &http.Cookie{Name: valid.Name, Value: "not a token"} },
		wantCode: http.StatusOK,
		wantBody: "hello stranger",
		wantTree: "GET /account\n  ddbsession.check ddbsession.check.outcome=rejected ddbsession.rejection.reason=malformed\n  account\n",
	}, {
		name:    "RequireSession with another user's key",
		require: true,
		cookie: func(valid *http.Cookie) *http.Cookie {
			// The user key of a user with no item: the check reads both in
			// one BatchGetItem and finds the session is not that user's.
			return &http.Cookie{Name: valid.Name, Value: tokenOf(valid) + ".VVNFUiNib2I.UFJPRklMRQ"}
		},
		wantCode: http.StatusUnauthorized,
		wantTree: "GET /account\n  ddbsession.check ddbsession.check.outcome=rejected ddbsession.rejection.reason=user-mismatch\n    DynamoDB.BatchGetItem\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.start()
			var cookie *http.Cookie
			if tc.cookie != nil {
				cookie = tc.cookie(e.quietLogin(e.newUser()))
			}
			guard := e.m.LoadSession
			if tc.require {
				guard = e.m.RequireSession
			}
			var cookies []*http.Cookie
			if cookie != nil {
				cookies = append(cookies, cookie)
			}
			w := e.serve(e.tel.Guard(guard, e.m.Session)(e.account()), http.MethodGet, "/account", cookies...)
			if w.Code != tc.wantCode || (tc.wantBody != "" && !strings.HasPrefix(w.Body.String(), tc.wantBody)) {
				t.Errorf("GET /account: %d %q, want %d %q", w.Code, w.Body, tc.wantCode, tc.wantBody)
			}
			if diff := cmp.Diff(tc.wantTree, e.spanTree()); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
		})
	}
}

// A store failure fails the request closed: the check span says so, with
// its BatchGetItem's error, and so does the store-failed counter.
func TestCheckStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Table += "-missing" })
	cookie := e.quietLogin(e.newUser())
	w := e.serve(e.tel.Guard(e.m.RequireSession, e.m.Session)(e.account()), http.MethodGet, "/account", cookie)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /account with the table missing: %d %q, want 503", w.Code, w.Body)
	}
	want := "GET /account\n" +
		"  ddbsession.check ddbsession.check.outcome=store-failed error.type=ResourceNotFoundException status=error\n" +
		"    DynamoDB.BatchGetItem error.type=*http.ResponseError status=error\n"
	if diff := cmp.Diff(want, e.spanTree()); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	wantMetrics := map[string]float64{"ddbsession.store.failed{error.type=ResourceNotFoundException}": 1}
	if diff := cmp.Diff(wantMetrics, e.metricValues()); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// The app's handler gets the session and user that the guard put in the
// context, with the span current before the check current again.
func TestHandlerContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.newUser()
	cookie := e.quietLogin(alice)
	var (
		handlerSpan trace.SpanContext
		user        User
		hasSession  bool
	)
	h := e.tel.Guard(e.m.RequireSession, e.m.Session)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerSpan = trace.SpanContextFromContext(r.Context())
		user, _ = e.m.User(r.Context())
		_, hasSession = e.m.Session(r.Context())
	}))
	if w := e.serve(h, http.MethodGet, "/account", cookie); w.Code != http.StatusOK {
		t.Fatalf("GET /account: %d %q", w.Code, w.Body)
	}
	server := e.span("GET /account").SpanContext()
	if !handlerSpan.Equal(server) {
		t.Errorf("the handler's current span is %v, want the server's %v", handlerSpan.SpanID(), server.SpanID())
	}
	if user.PK != alice.PK || !hasSession {
		t.Errorf("the handler's context has user %+v and a session: %v, want %s's", user, hasSession, alice.PK)
	}
	if check := e.span("ddbsession.check"); check.Parent().SpanID() != server.SpanID() {
		t.Errorf("the check span's parent is %v, want the server's %v", check.Parent().SpanID(), server.SpanID())
	}
}
