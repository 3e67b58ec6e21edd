package ddbsessionoidc_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
)

// signedIn is the state of the tests' browsers: one per session.
type signedIn struct {
	firstOIDC, secondOIDC, password, otherUser *browser
}

// signInAll signs in, on instance a: the user through the provider in two
// browsers (two provider sessions), the same user with a password in a
// third, and another user through the provider in a fourth.
func (e *env) signInAll() signedIn {
	e.t.Helper()
	s := signedIn{e.newBrowser(), e.newBrowser(), e.newBrowser(), e.newBrowser()}
	s.firstOIDC.signIn(e, "test-user2")
	s.secondOIDC.signIn(e, "test-user2")
	s.otherUser.signIn(e, "test-user@127.0.0.1")
	resp := s.password.post(e.aURL+"/password-login", map[string][]string{"pk": {keyOf(e.provider.issuer, "id2").PK}})
	body(e.t, resp)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("password login: %s", resp.Status)
	}
	if e.provider.sidOf(s.firstOIDC) == e.provider.sidOf(s.secondOIDC) || e.provider.sidOf(s.firstOIDC) == "" {
		e.t.Fatalf("the two browsers share the provider session %q", e.provider.sidOf(s.firstOIDC))
	}
	return s
}

// alive reports which of the browsers' sessions instance a still accepts.
func (e *env) alive(s signedIn) map[string]bool {
	e.t.Helper()
	return map[string]bool{
		"first provider session":  s.firstOIDC.signedIn(e.aURL),
		"second provider session": s.secondOIDC.signedIn(e.aURL),
		"password session":        s.password.signedIn(e.aURL),
		"another user":            s.otherUser.signedIn(e.aURL),
	}
}

// A logout token with a sid, sent to the second instance, ends the session
// of that provider session on the first, and leaves the user's other
// provider session, the user's password session and another user alone.
// A sign-in of the ended provider session that was still on its way is
// refused.
func TestBackChannelLogoutEndsTheProviderSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInAll()
	late := s.firstOIDC.startSignIn(e, "test-user2") // the same provider session, not yet back
	sid := e.provider.sidOf(s.firstOIDC)
	e.b.calls.Reset()
	answer := e.backChannel(e.bURL, e.provider.logoutToken(e.provider.logoutClaims("id2", sid)))
	if diff := cmp.Diff(logoutAnswer{Status: http.StatusOK, CacheControl: "no-store"}, answer); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	// The cost, as docs/oidc.md gives it: the jti's PutItem, the provider
	// session's UpdateItem, and per session Revoke's GetItem and two
	// DeleteItems and its history event's PutItem, and the record's
	// DeleteItem; and, this being the first call of instance b's Provider
	// and of its Manager, which has read nothing yet, their checks of the
	// layout record, one each.
	want := map[string]int{"BatchGetItem": 2, "PutItem": 2, "UpdateItem": 1, "GetItem": 1, "DeleteItem": 3}
	if diff := cmp.Diff(want, e.b.calls.Take()); diff != "" {
		t.Errorf("calls of a back-channel logout of one session (-want +got):\n%s", diff)
	}
	wantAlive := map[string]bool{"first provider session": false, "second provider session": true, "password session": true, "another user": true}
	if diff := cmp.Diff(wantAlive, e.alive(s)); diff != "" {
		t.Errorf("sessions alive after the logout (-want +got):\n%s", diff)
	}
	resp := s.firstOIDC.get(late)
	body(t, resp)
	if resp.StatusCode != http.StatusBadRequest || s.firstOIDC.signedIn(e.aURL) {
		t.Errorf("a sign-in of the ended provider session: %s; want 400 and signed out", resp.Status)
	}
}

// A logout token with a sub alone ends every session that the subject
// signed in through the provider before it, in both provider sessions, and
// no other: not the user's password session (it is no RevokeAll), and not
// a sign-in whose ID token is newer than the logout.
func TestBackChannelLogoutEndsTheSubjectsSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInAll()
	e.b.calls.Reset()
	answer := e.backChannel(e.bURL, e.provider.logoutToken(e.provider.logoutClaims("id2", "")))
	if diff := cmp.Diff(logoutAnswer{Status: http.StatusOK, CacheControl: "no-store"}, answer); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	// The cost, as docs/oidc.md gives it: the jti's PutItem, the subject's
	// UpdateItem and the one that drops the ended links, and five calls
	// per session (a Revoke's history event among them), for two; and,
	// this being the first call of instance b's Provider and of its
	// Manager, their checks of the layout record, one each.
	want := map[string]int{"BatchGetItem": 2, "PutItem": 3, "UpdateItem": 2, "GetItem": 2, "DeleteItem": 6}
	if diff := cmp.Diff(want, e.b.calls.Take()); diff != "" {
		t.Errorf("calls of a back-channel logout of two sessions (-want +got):\n%s", diff)
	}
	wantAlive := map[string]bool{"first provider session": false, "second provider session": false, "password session": true, "another user": true}
	if diff := cmp.Diff(wantAlive, e.alive(s)); diff != "" {
		t.Errorf("sessions alive after the logout (-want +got):\n%s", diff)
	}

	// A logout issued before a sign-in's ID token leaves that sign-in:
	// another user's, who signed in a moment ago.
	older := e.provider.logoutClaims("id1", "")
	older.IssuedAt = zoidc.FromTime(time.Now().Add(-time.Minute))
	if answer := e.backChannel(e.bURL, e.provider.logoutToken(older)); answer.Status != http.StatusOK {
		t.Fatalf("an older logout: %+v", answer)
	}
	if !s.otherUser.signedIn(e.aURL) {
		t.Errorf("a logout issued before the sign-in ended it")
	}
}

// A sign-in that the provider session's logout overtakes between the
// Login and its record is refused, and the session Login made, whose
// cookie the browser never got, is revoked: paused at the write of the
// provider session's link, while instance b serves the logout.
func TestSignInRacingALogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBrowser()
	callback := b.startSignIn(e, "test-user2")
	sid := e.provider.sidOf(b)
	user := keyOf(e.provider.issuer, "id2")
	var answer logoutAnswer
	var paused atomic.Bool
	e.a.calls.Before = func(_ context.Context, op string, in any) {
		if op == "UpdateItem" && strings.HasPrefix(pkOf(in.(*dynamodb.UpdateItemInput).Key), "OIDC#SID#") && paused.CompareAndSwap(false, true) {
			answer = e.backChannel(e.bURL, e.provider.logoutToken(e.provider.logoutClaims("id2", sid)))
		}
	}
	resp := b.get(callback)
	body(t, resp)
	if answer.Status != http.StatusOK {
		t.Fatalf("the logout: %+v", answer)
	}
	if resp.StatusCode != http.StatusBadRequest || b.signedIn(e.aURL) {
		t.Errorf("the overtaken sign-in: %s; want 400 and signed out", resp.Status)
	}
	if cookieValue(t, b, e.aURL, "__Host-session") != "" {
		t.Errorf("the overtaken sign-in sent a session cookie")
	}
	list, err := e.a.sessions.List(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("the user has %d sessions, want none: the overtaken sign-in's session lives", len(list))
	}
}

// Bad logout tokens are refused with 400 and an OAuth error, and end
// nothing: those that do not verify make no DynamoDB call, and a replay
// one conditional PutItem that fails.
func TestBadLogoutTokensEndNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInAll()
	sid := e.provider.sidOf(s.firstOIDC)
	claims := func(edit func(*zoidc.LogoutTokenClaims)) *zoidc.LogoutTokenClaims {
		c := e.provider.logoutClaims("id2", sid)
		edit(c)
		return c
	}
	idToken := func() string {
		c := zoidc.NewIDTokenClaims(e.provider.issuer, "id2", zoidc.Audience{clientID}, time.Now().Add(time.Hour), time.Now(), "", "", nil, clientID, 0)
		c.SessionID = sid
		return e.provider.signed(c)
	}
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"another audience", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.Audience = zoidc.Audience{"another-app"} }))},
		{"with a nonce", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.Claims = map[string]any{"nonce": "n"} }))},
		{"badly signed", e.provider.forgedToken(claims(func(*zoidc.LogoutTokenClaims) {}))},
		{"another issuer", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.Issuer = "https://other.example" }))},
		{"no event", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.Events = nil }))},
		{"an ID token", idToken()},
		{"no sid or sub", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.SessionID, c.Subject = "", "" }))},
		{"no jti", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.JWTID = "" }))},
		{"expired", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.Expiration = zoidc.FromTime(time.Now().Add(-time.Minute)) }))},
		{"issued in the future", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.IssuedAt = zoidc.FromTime(time.Now().Add(time.Hour)) }))},
		{"no iat", e.provider.logoutToken(claims(func(c *zoidc.LogoutTokenClaims) { c.IssuedAt = 0 }))},
		{"not a JWT", "not-a-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.b.calls.Reset()
			answer := e.backChannel(e.bURL, tc.token)
			if diff := cmp.Diff(logoutAnswer{Status: http.StatusBadRequest, Error: "invalid_request", CacheControl: "no-store"}, answer); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if calls := e.b.calls.Take(); len(calls) != 0 {
				t.Errorf("a token that does not verify made calls %v", calls)
			}
		})
	}
	t.Run("requests that are no logout", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, contentType, body string
			status                          int
		}{
			{"GET", http.MethodGet, "", "", http.StatusMethodNotAllowed},
			{"JSON", http.MethodPost, "application/json", `{"logout_token":"x"}`, http.StatusBadRequest},
			{"no token", http.MethodPost, "application/x-www-form-urlencoded", "other=x", http.StatusBadRequest},
			{"two tokens", http.MethodPost, "application/x-www-form-urlencoded", "logout_token=a&logout_token=b", http.StatusBadRequest},
		} {
			req, _ := http.NewRequest(tc.method, e.bURL+"/backchannel-logout", strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := e.provider.server.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body(t, resp)
			if resp.StatusCode != tc.status || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: %s, Cache-Control %q; want %d, no-store", tc.name, resp.Status, resp.Header.Get("Cache-Control"), tc.status)
			}
		}
		if calls := e.b.calls.Take(); len(calls) != 0 {
			t.Errorf("requests that are no logout made calls %v", calls)
		}
	})
	wantAlive := map[string]bool{"first provider session": true, "second provider session": true, "password session": true, "another user": true}
	if diff := cmp.Diff(wantAlive, e.alive(s)); diff != "" {
		t.Fatalf("sessions alive after the bad tokens (-want +got):\n%s", diff)
	}

	// A replay, to the other instance: the first delivery of a subject's
	// logout ends its sessions; the second, after the user signed in
	// again, is refused for its jti, before it reads the subject.
	// (Issued a few seconds ago: a sign-in whose ID token is of the same
	// second as a logout of its subject is refused.)
	first := e.provider.logoutClaims("id2", "")
	first.IssuedAt = zoidc.FromTime(time.Now().Add(-2 * time.Second))
	token := e.provider.logoutToken(first)
	if answer := e.backChannel(e.bURL, token); answer.Status != http.StatusOK {
		t.Fatalf("first delivery: %+v", answer)
	}
	again := e.newBrowser()
	again.signIn(e, "test-user2")
	e.a.calls.Reset()
	answer := e.backChannel(e.aURL, token)
	if diff := cmp.Diff(logoutAnswer{Status: http.StatusBadRequest, Error: "invalid_request", CacheControl: "no-store"}, answer); diff != "" {
		t.Errorf("replay answer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"PutItem": 1}, e.a.calls.Take()); diff != "" {
		t.Errorf("calls of a replay (-want +got):\n%s", diff)
	}
	if !again.signedIn(e.aURL) {
		t.Errorf("the replay ended a session")
	}
}

// A logout token whose sub is not the subject that signed in with its sid
// ends nothing.
func TestLogoutTokenWithAnotherSubjectsSID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInAll()
	answer := e.backChannel(e.bURL, e.provider.logoutToken(e.provider.logoutClaims("id1", e.provider.sidOf(s.firstOIDC))))
	if diff := cmp.Diff(logoutAnswer{Status: http.StatusBadRequest, Error: "invalid_request", CacheControl: "no-store"}, answer); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	if !s.firstOIDC.signedIn(e.aURL) {
		t.Errorf("the session ended")
	}
}

// When the sessions cannot be ended, the answer says so and the token's
// jti is forgotten, so that the provider's retry of the same token ends
// them.
func TestBackChannelLogoutRetriedAfterAStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInAll()
	token := e.provider.logoutToken(e.provider.logoutClaims("id2", e.provider.sidOf(s.firstOIDC)))
	outage := errors.New("injected outage")
	e.b.calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "GetItem" { // Revoke's read of the index item
			return outage
		}
		return nil
	}
	answer := e.backChannel(e.bURL, token)
	if diff := cmp.Diff(logoutAnswer{Status: http.StatusBadRequest, Error: "temporarily_unavailable", CacheControl: "no-store"}, answer); diff != "" {
		t.Errorf("answer in an outage (-want +got):\n%s", diff)
	}
	if !s.firstOIDC.signedIn(e.aURL) {
		t.Fatalf("the session ended in an outage that kept Revoke from running")
	}
	e.b.calls.Fail = nil
	if answer := e.backChannel(e.bURL, token); answer.Status != http.StatusOK {
		t.Errorf("the retry: %+v, want 200", answer)
	}
	if s.firstOIDC.signedIn(e.aURL) {
		t.Errorf("the retry did not end the session")
	}
}

// A logout token issued longer ago than a logout token lives (the two
// minutes that Back-Channel Logout 1.0 recommends) and the 5 minutes of
// clock skew allow, 7 minutes on the app's clock, is refused as a token
// that does not verify is, however far ahead its exp: 400, no DynamoDB
// call, nothing ended. One issued just within the bound ends its session.
func TestBackChannelLogoutRefusesAnOldToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBrowser()
	b.signIn(e, "test-user2")
	sid := e.provider.sidOf(b)
	issuedAgo := func(age time.Duration) string {
		c := e.provider.logoutClaims("id2", sid)
		c.IssuedAt = zoidc.FromTime(e.clock.Now().Add(-age))
		c.Expiration = zoidc.FromTime(e.clock.Now().Add(2 * time.Minute))
		return e.provider.logoutToken(c)
	}
	for _, age := range []time.Duration{30 * 24 * time.Hour, 7*time.Minute + 5*time.Second} {
		e.b.calls.Reset()
		answer := e.backChannel(e.bURL, issuedAgo(age))
		if diff := cmp.Diff(logoutAnswer{Status: http.StatusBadRequest, Error: "invalid_request", CacheControl: "no-store"}, answer); diff != "" {
			t.Errorf("a logout token issued %v ago: answer (-want +got):\n%s", age, diff)
		}
		if calls := e.b.calls.Take(); len(calls) != 0 {
			t.Errorf("a logout token issued %v ago made calls %v", age, calls)
		}
	}
	if !b.signedIn(e.aURL) {
		t.Fatalf("an old logout token ended the session")
	}
	if answer := e.backChannel(e.bURL, issuedAgo(7*time.Minute-5*time.Second)); answer.Status != http.StatusOK {
		t.Errorf("a logout token within the bound: %+v, want 200", answer)
	}
	if b.signedIn(e.aURL) {
		t.Errorf("a logout token within the bound left the session")
	}
}
