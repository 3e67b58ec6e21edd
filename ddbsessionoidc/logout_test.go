package ddbsessionoidc_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The app's logout ends the session and sends the browser to the
// provider's end-session endpoint with the ID token, kept in the table, as
// id_token_hint: the provider accepts it (a hint it did not sign would be
// refused), ends its session, tells the app by back-channel logout, which
// ends the browser's other session of the same provider session, and
// sends the browser back to the post-logout URL.
func TestLogoutEndsTheProvidersSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b, sameProviderSession, other := e.newBrowser(), e.newBrowser(), e.newBrowser()
	b.signIn(e, "test-user2")
	other.signIn(e, "test-user2")
	// A second app session of b's provider session: the browser's cookies
	// at the provider, in another jar, as after a sign-in in a second
	// profile that shares them.
	// (Cookies are per host, not per port: the provider's alone.)
	setCookie(t, sameProviderSession, e.provider.issuer, "op_session", cookieValue(t, b, e.provider.issuer, "op_session"))
	sameProviderSession.signIn(e, "test-user2")
	if e.provider.sidOf(sameProviderSession) != e.provider.sidOf(b) {
		t.Fatal("the second app session is of another provider session")
	}
	e.provider.mu.Lock()
	e.provider.backChannel = e.bURL + "/backchannel-logout"
	e.provider.mu.Unlock()

	var endSession string
	b.http.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), e.provider.issuer) && endSession == "" {
			endSession = req.URL.String()
		}
		return nil
	}
	e.a.calls.Reset()
	resp := b.post(e.aURL+"/logout", nil)
	text := body(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != e.aURL+"/signed-out" {
		t.Fatalf("the logout ended with %s at %s: %s", resp.Status, resp.Request.URL, text)
	}
	q := mustParse(t, endSession).Query()
	if q.Get("post_logout_redirect_uri") != e.aURL+"/signed-out" || q.Get("client_id") != clientID || q.Get("id_token_hint") == "" {
		t.Errorf("the end-session request %s lacks a parameter", endSession)
	}
	for _, c := range b.http.Jar.Cookies(mustParse(t, e.aURL)) {
		if hint := q.Get("id_token_hint"); hint != "" && strings.Contains(c.Value, hint) {
			t.Errorf("cookie %s holds the ID token", c.Name)
		}
	}
	// The cost, as docs/oidc.md gives it: the request's own read, the
	// record's GetItem, the Manager's Logout (two DeleteItems and its
	// history event) and the record's DeleteItem; then, from the provider,
	// the back-channel logout at instance b.
	want := map[string]int{"BatchGetItem": 1, "GetItem": 1, "DeleteItem": 3, "PutItem": 1}
	if diff := cmp.Diff(want, e.a.calls.Take()); diff != "" {
		t.Errorf("calls of the logout (-want +got):\n%s", diff)
	}
	e.provider.mu.Lock()
	status := e.provider.backChannelStatus
	e.provider.mu.Unlock()
	if status != http.StatusOK {
		t.Errorf("the provider's back-channel logout got %d", status)
	}
	wantAlive := map[string]bool{"logged out": false, "same provider session": false, "another provider session": true}
	gotAlive := map[string]bool{"logged out": b.signedIn(e.aURL), "same provider session": sameProviderSession.signedIn(e.aURL), "another provider session": other.signedIn(e.aURL)}
	if diff := cmp.Diff(wantAlive, gotAlive); diff != "" {
		t.Errorf("sessions alive after the logout (-want +got):\n%s", diff)
	}
	if strings.Contains(e.itemsText(), q.Get("id_token_hint")) {
		t.Errorf("the ended session's ID token is still in the table")
	}
	// The ID token is no logout token: the back-channel endpoint refuses
	// it.
	if answer := e.backChannel(e.bURL, q.Get("id_token_hint")); answer.Status != http.StatusBadRequest {
		t.Errorf("an ID token as the logout token: %+v", answer)
	}
}

// A session that did not sign in through the provider logs out here
// alone, straight to the post-logout URL.
func TestLogoutOfAnotherSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBrowser()
	b.signIn(e, "test-user2") // the user item
	password := e.newBrowser()
	resp := password.post(e.aURL+"/password-login", map[string][]string{"pk": {keyOf(e.provider.issuer, "id2").PK}})
	body(t, resp)
	resp = password.post(e.aURL+"/logout", nil)
	body(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != e.aURL+"/signed-out" {
		t.Errorf("the logout ended with %s at %s, want the post-logout page directly", resp.Status, resp.Request.URL)
	}
	if password.signedIn(e.aURL) || !b.signedIn(e.aURL) {
		t.Errorf("the logout ended the wrong session")
	}
}
