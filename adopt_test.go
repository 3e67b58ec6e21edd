package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// oldCookie is the old store's cookie in these tests; its value is the
// user's name, and "tampered" is one the old store does not vouch for.
const oldCookie = "old-session"

// oldStore is the app's reading of its old session: the user key of the
// name the cookie holds, proven by password at authAt.
func oldStore(authAt time.Time) func(*http.Request) (ddbsession.Adoption, bool, error) {
	return func(r *http.Request) (ddbsession.Adoption, bool, error) {
		c, err := r.Cookie(oldCookie)
		if err != nil || c.Value == "tampered" {
			return ddbsession.Adoption{}, false, nil
		}
		return ddbsession.Adoption{User: ddbsession.UserKey{PK: "USER#" + c.Value, SK: "PROFILE"}, Methods: []string{"password"}, AuthenticatedAt: authAt}, true, nil
	}
}

// adoptGet sends a GET with cookies through h.
func adoptGet(e *env, h http.Handler, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.get(h, cookies...)
}

// setCookie returns the cookie named name that w sets, or nil.
func setCookie(w *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range w.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// writes counts the write calls among calls.
func writes(calls map[string]int) int {
	n := 0
	for op, c := range calls {
		if strings.HasPrefix(op, "Put") || strings.HasPrefix(op, "Update") || strings.HasPrefix(op, "Delete") || strings.HasPrefix(op, "BatchWrite") || strings.HasPrefix(op, "TransactWrite") {
			n += c
		}
	}
	return n
}

// A browser with the old store's cookie of a known user is signed in on
// its first request, with no credential: the response sets the session
// cookie and clears the old one, and the request itself goes on signed
// in. It costs the writes a Login costs, on that request only; the
// session says how and when the old store's sign-in was, marked
// "migrated", and step-up counts it as not recent until a Login.
func TestAdopt(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	log := &eventLog{}
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.OnEvent = log.record })
	alice := e.putUser("alice")
	authAt := e.clock.Now().Add(-time.Minute).Truncate(time.Millisecond)
	adopt := e.m.Adopt(http.Cookie{Name: oldCookie}, oldStore(authAt))
	h := adopt(e.m.RequireSession(whoami(e.m)))

	// What a Login writes, for comparison.
	p.Take()
	e.login(e.putUser("bob"))
	loginWrites := writes(p.Take())

	w := adoptGet(e, h, &http.Cookie{Name: oldCookie, Value: "alice"})
	calls := p.Take()
	if w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Fatalf("the adopting request: %d %q, want 200 user:alice", w.Code, w.Body.String())
	}
	session := setCookie(w, cookieName)
	if session == nil || session.Value == "" {
		t.Fatalf("no session cookie set: %v", w.Header()["Set-Cookie"])
	}
	if old := setCookie(w, oldCookie); old == nil || old.MaxAge >= 0 || old.Path != "/" {
		t.Errorf("the old cookie is not cleared: %v", old)
	}
	t.Logf("the adopting request: %v; a Login writes %d times", calls, loginWrites)
	if got := writes(calls); got != loginWrites {
		t.Errorf("the adopting request wrote %d times, want a Login's %d", got, loginWrites)
	}
	s := e.sessionFor(session)
	if s.User != alice || !s.AuthenticatedAt.Equal(authAt) || !slices.Equal(s.Methods, []string{"password", "migrated"}) {
		t.Errorf("the adopted session: %+v, want alice's, authenticated at %v by password, migrated", s, authAt)
	}
	if got, want := log.take(), []string{"created #1", "created #2", "adopted #2"}; !cmp.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	// The user's history says the session was adopted, how and from where.
	if h, _, err := e.m.History(context.Background(), alice, ""); err != nil || len(h) != 1 || h[0].Kind != ddbsession.EventAdopted ||
		h[0].SessionID != s.ID || !slices.Equal(h[0].Methods, s.Methods) || h[0].Address != testAddr {
		t.Errorf("alice's history: %+v, %v; want the adoption", h, err)
	}

	// After: a request with the session costs what any does, no write,
	// and Adopt does nothing (the old cookie is gone, or still sent).
	p.Take()
	if w := adoptGet(e, h, session, &http.Cookie{Name: oldCookie, Value: "alice"}); w.Code != http.StatusOK || setCookie(w, cookieName) != nil {
		t.Errorf("the next request: %d, cookies %v", w.Code, w.Header()["Set-Cookie"])
	}
	if calls := p.Take(); writes(calls) != 0 {
		t.Errorf("the next request wrote: %v", calls)
	}

	// Step-up: not recent, whatever its time, until a Login.
	recent := e.m.RequireSession(e.m.RequireAuthentication(time.Hour)(whoami(e.m)))
	if w := adoptGet(e, recent, session); w.Code != http.StatusUnauthorized {
		t.Errorf("step-up on the adopted session: %d, want 401", w.Code)
	}
	again := e.login(alice, session)
	if w := adoptGet(e, recent, again); w.Code != http.StatusOK {
		t.Errorf("step-up after a Login on it: %d, want 200", w.Code)
	}
}

// Nothing is made, and nothing written, for an old cookie that the old
// store does not vouch for, of a user without an item, or of a user whose
// sessions a RevokeAll ended after the old sign-in (or ever, if its time
// is unknown); a request with this Manager's cookie is not adopted again,
// and a failing old store fails the request closed.
func TestAdoptRefuses(t *testing.T) {
	t.Parallel()
	for _, mrec := range []bool{false, true} {
		var p *ddbtest.Probe
		e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Layout.MREC = mrec })
		alice := e.putUser("alice")
		before := e.clock.Now()
		e.clock.Advance(time.Minute)
		if err := e.m.RevokeAll(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		after := e.clock.Now()
		e.putUser("bob")
		failing := func(*http.Request) (ddbsession.Adoption, bool, error) {
			return ddbsession.Adoption{}, false, errors.New("redis: connection refused")
		}
		bobs := e.login(ddbsession.UserKey{PK: "USER#bob", SK: "PROFILE"})
		for _, tc := range []struct {
			name    string
			from    func(*http.Request) (ddbsession.Adoption, bool, error)
			cookies []*http.Cookie
			code    int
			cleared bool // the old cookie
		}{
			{"tampered", oldStore(after), []*http.Cookie{{Name: oldCookie, Value: "tampered"}}, http.StatusUnauthorized, false},
			{"unknown user", oldStore(after), []*http.Cookie{{Name: oldCookie, Value: "carol"}}, http.StatusUnauthorized, true},
			{"revoked since", oldStore(before), []*http.Cookie{{Name: oldCookie, Value: "alice"}}, http.StatusUnauthorized, true},
			{"revoked, time unknown", oldStore(time.Time{}), []*http.Cookie{{Name: oldCookie, Value: "alice"}}, http.StatusUnauthorized, true},
			{"old store fails", failing, []*http.Cookie{{Name: oldCookie, Value: "alice"}}, http.StatusServiceUnavailable, false},
			{"signed in already", failing, []*http.Cookie{bobs, {Name: oldCookie, Value: "alice"}}, http.StatusOK, false},
			{"no old cookie", failing, nil, http.StatusUnauthorized, false},
		} {
			p.Take()
			w := adoptGet(e, e.m.Adopt(http.Cookie{Name: oldCookie}, tc.from)(e.m.RequireSession(whoami(e.m))), tc.cookies...)
			calls := p.Take()
			if w.Code != tc.code || setCookie(w, cookieName) != nil || writes(calls) != 0 {
				t.Errorf("MREC %v, %s: %d, cookies %v, calls %v; want %d, no session, no write", mrec, tc.name, w.Code, w.Header()["Set-Cookie"], calls, tc.code)
			}
			if old := setCookie(w, oldCookie); (old != nil) != tc.cleared {
				t.Errorf("MREC %v, %s: the old cookie cleared %v, want %v", mrec, tc.name, old != nil, tc.cleared)
			}
		}
		// Signed in by the old store after the RevokeAll: adopted.
		w := adoptGet(e, e.m.Adopt(http.Cookie{Name: oldCookie}, oldStore(after))(e.m.RequireSession(whoami(e.m))), &http.Cookie{Name: oldCookie, Value: "alice"})
		if w.Code != http.StatusOK || setCookie(w, cookieName) == nil {
			t.Errorf("MREC %v: a sign-in after the RevokeAll: %d, cookies %v; want adopted", mrec, w.Code, w.Header()["Set-Cookie"])
		}
	}
}

// Only a same-site navigation is adopted: a cross-site form (the old
// store's cookie may lack SameSite) and a page's fetches pass through
// untouched and signed out, writing nothing, so that a burst of a page's
// requests before its first answer makes one session, which evicts none
// of the user's others.
func TestAdoptOnlyNavigations(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 2 })
	alice := e.putUser("alice")
	phone := e.login(alice)
	acted := 0
	h := e.m.Adopt(http.Cookie{Name: oldCookie}, oldStore(e.clock.Now()))(e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { acted++ })))
	send := func(method, site, mode string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "https://example.test/note", strings.NewReader("text=pwned"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
			r.Header.Set("Sec-Fetch-Mode", mode)
		}
		r.AddCookie(&http.Cookie{Name: oldCookie, Value: "alice"})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		e.settle()
		return w
	}
	p.Take()
	for _, tc := range []struct{ method, site, mode string }{
		{"POST", "cross-site", "navigate"}, // a form on another site
		{"POST", "", ""},                   // one of a browser that does not say
		{"POST", "same-origin", "navigate"},
		{"GET", "cross-site", "navigate"},
		{"GET", "same-origin", "cors"}, // the page's fetch
		{"GET", "same-origin", "no-cors"},
	} {
		if w := send(tc.method, tc.site, tc.mode); w.Code != http.StatusUnauthorized || setCookie(w, cookieName) != nil || setCookie(w, oldCookie) != nil {
			t.Errorf("%+v: %d, cookies %v; want 401 and no cookie set or cleared", tc, w.Code, w.Header()["Set-Cookie"])
		}
	}
	if calls := p.Take(); acted != 0 || len(calls) != 0 {
		t.Errorf("requests that are not navigations reached the handler %d times, with calls %v", acted, calls)
	}

	// A burst: the page, then its script and its API call, all sent
	// before the page's answer.
	made := 0
	for _, mode := range []string{"navigate", "no-cors", "cors"} {
		if setCookie(send("GET", "same-origin", mode), cookieName) != nil {
			made++
		}
	}
	if made != 1 {
		t.Errorf("the page's burst made %d sessions, want 1", made)
	}
	if code := e.status(phone); code != http.StatusOK {
		t.Errorf("the user's phone session after the adoption: %d, want 200", code)
	}
}

// The old cookie is cleared where it was set, and with Secure on an HTTPS
// site or for a prefixed name, without which a browser ignores the
// clearing and the old cookie adopts again after a logout.
func TestAdoptClearsOldCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putUser("alice")
	from := func(*http.Request) (ddbsession.Adoption, bool, error) {
		return ddbsession.Adoption{User: ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}}, true, nil
	}
	old := http.Cookie{Name: "__Secure-old", Path: "/app", Domain: "example.test"}
	w := adoptGet(e, e.m.Adopt(old, from)(e.m.RequireSession(whoami(e.m))), &http.Cookie{Name: old.Name, Value: "alice"})
	c := setCookie(w, old.Name)
	if c == nil || c.MaxAge >= 0 || !c.Secure || c.Path != "/app" || c.Domain != "example.test" {
		t.Errorf("the clearing of %s: %q; want Max-Age=0, Secure, Path=/app, Domain=example.test", old.Name, w.Header()["Set-Cookie"])
	}
}

// A session adopted without the old sign-in's time counts as proven at the
// Unix epoch: no freshness check of the app's own passes it.
func TestAdoptedSessionNotFresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.putUser("alice")
	from := func(*http.Request) (ddbsession.Adoption, bool, error) {
		return ddbsession.Adoption{User: ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}, Methods: []string{"password", "otp"}}, true, nil
	}
	w := adoptGet(e, e.m.Adopt(http.Cookie{Name: oldCookie}, from)(e.m.RequireSession(whoami(e.m))), &http.Cookie{Name: oldCookie, Value: "alice"})
	c := setCookie(w, cookieName)
	if c == nil {
		t.Fatalf("not adopted: %d", w.Code)
	}
	s := e.sessionFor(c)
	if fresh := e.clock.Now().Sub(s.AuthenticatedAt) < 10*time.Minute && slices.Contains(s.Methods, "otp"); fresh || !s.AuthenticatedAt.Equal(time.UnixMilli(0)) {
		t.Errorf("the adopted session: AuthenticatedAt %v, methods %v; want the epoch, not fresh", s.AuthenticatedAt, s.Methods)
	}
}

// RevokeEveryone, and an app's credential change that sets revokedAt as
// docs/item-format.md asks, end an old store's sessions as RevokeAll does:
// one signed in before either (or at an unknown time) is not adopted.
func TestAdoptAfterRevokeEveryoneAndCredentialChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.putUser("alice"), e.putUser("bob")
	before := e.clock.Now()
	e.clock.Advance(time.Minute)
	if err := e.m.RevokeEveryone(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	between := e.clock.Now()
	e.clock.Advance(time.Minute)
	if _, err := e.client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName:                 &e.table,
		Key:                       userItemKey(bob),
		UpdateExpression:          aws.String("SET passwordHash = :p, revokedAt = :at ADD credentialVersion :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": attrS("new-hash"), ":at": attrN(e.clock.Now().UnixMilli()), ":one": attrN(1)},
	}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	after := e.clock.Now()
	for _, tc := range []struct {
		name    string
		user    ddbsession.UserKey
		authAt  time.Time
		adopted bool
	}{
		{"before RevokeEveryone", alice, before, false},
		{"time unknown, after a RevokeEveryone", alice, time.Time{}, false},
		{"after RevokeEveryone", alice, between, true},
		{"before the credential change", bob, between, false},
		{"after the credential change", bob, after, true},
	} {
		from := func(*http.Request) (ddbsession.Adoption, bool, error) {
			return ddbsession.Adoption{User: tc.user, AuthenticatedAt: tc.authAt}, true, nil
		}
		w := adoptGet(e, e.m.Adopt(http.Cookie{Name: oldCookie}, from)(e.m.RequireSession(whoami(e.m))), &http.Cookie{Name: oldCookie, Value: "x"})
		c := setCookie(w, cookieName)
		if (c != nil) != tc.adopted || (w.Code == http.StatusOK) != tc.adopted {
			t.Errorf("%s: %d, cookies %v; want adopted %v", tc.name, w.Code, w.Header()["Set-Cookie"], tc.adopted)
		}
		if c != nil && e.status(c) != http.StatusOK {
			t.Errorf("%s: the adopted session is refused on the next request", tc.name)
		}
	}
}
