package ddbsessionoidc_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// A browser signs in through the provider's authorization endpoint and
// login page, and lands signed in on the page it asked for, with the
// provider named in its session's methods. The table keeps the attempt's
// digests only, and the attempt is gone once used.
func TestSignInThroughTheProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBrowser()
	callback := b.startSignIn(e, "test-user2")
	state := mustParse(t, callback).Query().Get("state")
	secret := cookieValue(t, b, e.aURL, "__Host-oidc-signin")
	if state == "" || secret == "" {
		t.Fatalf("state %q, attempt cookie %q", state, secret)
	}
	e.a.calls.Reset()
	resp := b.get(callback)
	text := body(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/account" {
		t.Fatalf("the callback ended with %s at %s: %s", resp.Status, resp.Request.URL, text)
	}
	// The cost of a callback, as docs/oidc.md gives it: the attempt's
	// delete; Login (the user's read, its history event, the session and
	// its index item);
	// the read of the new session; the links and the record; and the
	// account page's read. The User mapping's CreateUser is the test app's
	// own PutItem, and, for a user it made, a Query for a former user's
	// history and devices; being the first call of the instance's Manager,
	// it checks the layout record first, in a BatchGetItem with the global
	// item, so that Login reads the user alone, in a GetItem.
	want := map[string]int{"DeleteItem": 1, "BatchGetItem": 3, "GetItem": 1, "PutItem": 5, "Query": 1, "UpdateItem": 2}
	if diff := cmp.Diff(want, e.a.calls.Take()); diff != "" {
		t.Errorf("calls of the callback and the account page (-want +got):\n%s", diff)
	}
	// The user logged in at the provider's login page for this sign-in:
	// its auth_time says so, and the session is fresh.
	if !strings.Contains(text, `"methods":["oidc","oidc-fresh"]`) || !strings.Contains(text, "USER#"+e.provider.issuer+"|id2") {
		t.Errorf("account page %s: want the subject's user, and the methods oidc and oidc-fresh", text)
	}
	stored := e.itemsText()
	for name, v := range map[string]string{"state": state, "cookie secret": secret} {
		if strings.Contains(stored, v) {
			t.Errorf("the table holds the attempt's %s", name)
		}
	}
	kinds := map[string]int{}
	for _, item := range e.scanTable() {
		if k, ok := item["kind"].(*types.AttributeValueMemberS); ok {
			kinds[k.Value]++
		}
	}
	if kinds["oidc-attempt"] != 0 {
		t.Errorf("the used attempt is still in the table")
	}
	for _, k := range []string{"oidc-provider-session", "oidc-subject", "oidc-session"} {
		if kinds[k] != 1 {
			t.Errorf("%d items of kind %s, want 1 (kinds %v)", kinds[k], k, kinds)
		}
	}
	if got := cookieValue(t, b, e.aURL, "__Host-oidc-signin"); got != "" {
		t.Errorf("the attempt's cookie outlives the callback")
	}
}

// The attempt is single-use, bound to the browser that began it, and
// expires; malformed ones cost no call. Each refusal leaves the browser
// signed out.
func TestCallbackRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("replayed", func(t *testing.T) {
		b := e.newBrowser()
		callback := b.startSignIn(e, "test-user2")
		secret := cookieValue(t, b, e.aURL, "__Host-oidc-signin")
		resp := b.get(callback)
		body(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("first callback: %s", resp.Status)
		}
		// The same browser, its attempt cookie put back: only the
		// attempt's single use stops it.
		replay := e.newBrowser()
		setCookie(t, replay, e.aURL, "__Host-oidc-signin", secret)
		resp = replay.get(callback)
		body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || replay.signedIn(e.aURL) {
			t.Errorf("the callback again: %s; want 400 and signed out", resp.Status)
		}
	})

	t.Run("another browser", func(t *testing.T) {
		victim, attacker := e.newBrowser(), e.newBrowser()
		callback := attacker.startSignIn(e, "test-user2")
		// The attacker's callback, in a victim's browser (login CSRF).
		victim.get(e.aURL + "/signin") // the victim's own attempt cookie
		resp := victim.get(callback)
		body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || victim.signedIn(e.aURL) {
			t.Errorf("another browser's callback: %s, signed in %v; want 400 and signed out", resp.Status, victim.signedIn(e.aURL))
		}
		// The attempt is left for its own browser.
		resp = attacker.get(callback)
		body(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the attempt's own browser after another's try: %s, want 200", resp.Status)
		}
	})

	t.Run("expired", func(t *testing.T) {
		b := e.newBrowser()
		callback := b.startSignIn(e, "test-user2")
		e.clock.Advance(10*time.Minute + time.Second)
		defer e.clock.Advance(-(10*time.Minute + time.Second))
		resp := b.get(callback)
		body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || b.signedIn(e.aURL) {
			t.Errorf("an expired attempt's callback: %s; want 400 and signed out", resp.Status)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		for _, query := range []string{"", "?state=x&code=y", "?state=" + strings.Repeat("A", 43) + "&code=y"} {
			b := e.newBrowser()
			e.a.calls.Reset()
			resp := b.get(e.aURL + "/callback" + query)
			body(t, resp)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("callback%s: %s, want 400", query, resp.Status)
			}
			if calls := e.a.calls.Take(); len(calls) != 0 {
				t.Errorf("callback%s without an attempt cookie made calls %v", query, calls)
			}
		}
	})

	t.Run("the provider's error", func(t *testing.T) {
		b := e.newBrowser()
		callback := mustParse(t, b.startSignIn(e, "test-user2"))
		q := callback.Query()
		q.Del("code")
		q.Set("error", "access_denied")
		callback.RawQuery = q.Encode()
		resp := b.get(callback.String())
		text := body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || b.signedIn(e.aURL) {
			t.Errorf("the provider's refusal: %s %s; want 400 and signed out", resp.Status, text)
		}
	})
}

// setCookie puts a cookie into b's jar for base, as a browser that kept
// it would send it.
func setCookie(t *testing.T, b *browser, base, name, value string) {
	t.Helper()
	b.http.Jar.SetCookies(mustParse(t, base), []*http.Cookie{{Name: name, Value: value, Path: "/", Secure: true, HttpOnly: true}})
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// cookieValue returns the value of b's cookie name for base; "" for none.
func cookieValue(t *testing.T, b *browser, base, name string) string {
	t.Helper()
	cookies := b.http.Jar.Cookies(mustParse(t, base))
	if i := slices.IndexFunc(cookies, func(c *http.Cookie) bool { return c.Name == name }); i >= 0 {
		return cookies[i].Value
	}
	return ""
}

// A sign-in whose record cannot be written fails closed: 503, no session
// cookie, and the session Login made is revoked. A store failure at the
// start answers 503 too.
func TestSignInStoreFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outage := errors.New("injected outage")
	b := e.newBrowser()
	callback := b.startSignIn(e, "test-user2")
	e.a.calls.Fail = func(_ context.Context, op string, in any) error {
		if op == "PutItem" && strings.HasPrefix(pkOf(in.(*dynamodb.PutItemInput).Item), "OIDC#SESSION#") {
			return outage
		}
		return nil
	}
	resp := b.get(callback)
	body(t, resp)
	e.a.calls.Fail = nil
	if resp.StatusCode != http.StatusServiceUnavailable || cookieValue(t, b, e.aURL, "__Host-session") != "" {
		t.Errorf("a sign-in whose record failed: %s, session cookie %q; want 503 and none", resp.Status, cookieValue(t, b, e.aURL, "__Host-session"))
	}
	list, err := e.a.sessions.List(context.Background(), keyOf(e.provider.issuer, "id2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("%d sessions live after the failed sign-in, want none", len(list))
	}

	e.a.calls.Fail = func(context.Context, string, any) error { return outage }
	resp = e.newBrowser().get(e.aURL + "/signin")
	body(t, resp)
	e.a.calls.Fail = nil
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("SignIn in an outage: %s, want 503", resp.Status)
	}
}

// TestReauthenticate: a re-authentication asks the provider to make the
// user log in again, and counts only if the ID token's auth_time says it
// did; a sign-in takes the provider's session as it is.
func TestReauthenticate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := func(at time.Time) time.Time { return at.Add(-(10*time.Minute + time.Second)) }
	none := func(time.Time) time.Time { return time.Time{} }

	t.Run("asks the provider to authenticate again", func(t *testing.T) {
		b := e.newBrowser()
		b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp := b.get(e.aURL + "/reauth?next=/account")
		body(t, resp)
		b.http.CheckRedirect = nil
		q := mustParse(t, resp.Header.Get("Location")).Query()
		if resp.StatusCode != http.StatusSeeOther || q.Get("prompt") != "login" || q.Get("max_age") != "0" {
			t.Errorf("Reauthenticate answered %s to %q; want 303 with prompt=login and max_age=0", resp.Status, resp.Header.Get("Location"))
		}
		resp = b.get(e.aURL + "/signin?next=/account")
		body(t, resp)
		for _, p := range []string{"prompt=", "max_age="} {
			if strings.Contains(resp.Request.URL.RawQuery, p) {
				t.Errorf("SignIn's authorization request has %s: %s", p, resp.Request.URL)
			}
		}
	})

	t.Run("the provider authenticated the user again", func(t *testing.T) {
		b := e.newBrowser()
		resp := b.get(b.startAt(e, "/reauth", "test-user2"))
		text := body(t, resp)
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/account" {
			t.Fatalf("the callback ended with %s at %s: %s", resp.Status, resp.Request.URL, text)
		}
		if !strings.Contains(text, `"methods":["oidc","oidc-fresh"]`) {
			t.Errorf("a re-authentication's session %s: want the methods oidc and oidc-fresh", text)
		}
	})

	for _, tc := range []struct {
		name     string
		authTime func(time.Time) time.Time
	}{
		{"an auth_time older than the attempt's lifetime", old},
		{"no auth_time", none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.provider.setAuthTime(tc.authTime)
			defer e.provider.setAuthTime(nil)
			b := e.newBrowser()
			callback := b.startAt(e, "/reauth", "test-user2")
			e.a.calls.Reset()
			resp := b.get(callback)
			body(t, resp)
			// The attempt's delete alone: no session, no link, no record.
			if diff := cmp.Diff(map[string]int{"DeleteItem": 1}, e.a.calls.Take()); diff != "" {
				t.Errorf("calls of the refused callback (-want +got):\n%s", diff)
			}
			if resp.StatusCode != http.StatusBadRequest || b.signedIn(e.aURL) {
				t.Errorf("a re-authentication with %s: %s; want 400 and signed out", tc.name, resp.Status)
			}
			// A sign-in takes the same answer: single sign-on is the
			// provider's session, however old. But its session, whose
			// AuthenticatedAt is the app's sign-in, is no fresh
			// authentication: without FreshMethod a step-up guard would
			// take a plain SignIn for the Reauthenticate it refused.
			b = e.newBrowser()
			resp = b.get(b.startSignIn(e, "test-user2"))
			text := body(t, resp)
			if resp.StatusCode != http.StatusOK || !b.signedIn(e.aURL) {
				t.Errorf("a sign-in with %s: %s; want 200 and signed in", tc.name, resp.Status)
			}
			if !strings.Contains(text, `"methods":["oidc"]`) {
				t.Errorf("a sign-in with %s: session %s; want the method oidc alone, not oidc-fresh", tc.name, text)
			}
		})
	}
}

// loginAges are sign-ins whose attempt is attemptAge old on the app's
// clock when the provider sends the browser back, and whose ID token
// says that the user logged in loginAge before it was issued, on the
// provider's clock; fresh says whether that login is the attempt's own.
// Each age is on one clock, so the tests' clock, which stands still
// while the provider's runs, can give the attempt any age.
var loginAges = []struct {
	name                 string
	attemptAge, loginAge time.Duration
	fresh                bool
}{
	{"a provider session 2 minutes old, an attempt of a moment", 0, 2 * time.Minute, false},
	{"a provider session 9 minutes old, an attempt of a minute", time.Minute, 9 * time.Minute, false},
	{"a login 10 seconds before an attempt of 3 minutes", 3 * time.Minute, 3*time.Minute + 10*time.Second, false},
	{"a login as an attempt of 3 minutes began", 3 * time.Minute, 3 * time.Minute, true},
	{"a login a minute into an attempt of 3 minutes", 3 * time.Minute, 2 * time.Minute, true},
}

// signInAged starts a sign-in at start (/signin or /reauth), lets the
// attempt age attemptAge on the app's clock, and has the provider say
// that the user logged in loginAge before its ID token. It returns the
// callback's status, the page it ended on, and whether the browser is
// signed in then.
func (e *env) signInAged(start string, attemptAge, loginAge time.Duration) (status int, page string, signedIn bool) {
	e.t.Helper()
	e.provider.setAuthTime(func(exchange time.Time) time.Time { return exchange.Add(-loginAge) })
	defer e.provider.setAuthTime(nil)
	b := e.newBrowser()
	callback := b.startAt(e, start, "test-user2")
	e.clock.Advance(attemptAge)
	defer e.clock.Advance(-attemptAge)
	resp := b.get(callback)
	page = body(e.t, resp)
	return resp.StatusCode, page, b.signedIn(e.aURL)
}

// A sign-in's session carries FreshMethod only if the provider's login
// happened within the attempt; a SignIn that the provider answers from a
// session it held before, however recent, signs the user in with Method
// alone, or a step-up guard would take it for a login.
func TestFreshOnlyForALoginWithinTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range loginAges {
		t.Run(tc.name, func(t *testing.T) {
			status, page, signedIn := e.signInAged("/signin", tc.attemptAge, tc.loginAge)
			want := `"methods":["oidc"]`
			if tc.fresh {
				want = `"methods":["oidc","oidc-fresh"]`
			}
			if status != http.StatusOK || !signedIn || !strings.Contains(page, want) {
				t.Errorf("a sign-in: %d, signed in %v, page %s; want 200, signed in, %s", status, signedIn, page, want)
			}
		})
	}
}

// A re-authentication counts only if the provider's login happened within
// the attempt: a provider that ignores prompt=login and answers from a
// session it held before, however recent, is refused, and the browser
// stays signed out.
func TestReauthenticateRefusesALoginBeforeTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range loginAges {
		t.Run(tc.name, func(t *testing.T) {
			status, page, signedIn := e.signInAged("/reauth", tc.attemptAge, tc.loginAge)
			switch {
			case tc.fresh && (status != http.StatusOK || !signedIn || !strings.Contains(page, `"methods":["oidc","oidc-fresh"]`)):
				t.Errorf("a re-authentication: %d, signed in %v, page %s; want 200, signed in, oidc and oidc-fresh", status, signedIn, page)
			case !tc.fresh && (status != http.StatusBadRequest || signedIn):
				t.Errorf("a re-authentication: %d, signed in %v; want 400 and signed out", status, signedIn)
			}
		})
	}
}

// An attempt without its start, as v0.1.0 wrote them, cannot show that a
// login was its own: its sign-in is not fresh, and its re-authentication
// is refused.
func TestAnAttemptWithoutItsStartIsNotFresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, start := range []string{"/signin", "/reauth"} {
		b := e.newBrowser()
		callback := b.startAt(e, start, "test-user2")
		e.forgetAttemptStarts()
		resp := b.get(callback)
		page := body(t, resp)
		switch {
		case start == "/signin" && (resp.StatusCode != http.StatusOK || !strings.Contains(page, `"methods":["oidc"]`)):
			t.Errorf("a sign-in: %s, page %s; want 200 and the method oidc alone", resp.Status, page)
		case start == "/reauth" && (resp.StatusCode != http.StatusBadRequest || b.signedIn(e.aURL)):
			t.Errorf("a re-authentication: %s; want 400 and signed out", resp.Status)
		}
	}
}

// forgetAttemptStarts removes the start from every attempt in the table.
func (e *env) forgetAttemptStarts() {
	e.t.Helper()
	for _, item := range e.scanTable() {
		if k, _ := item["kind"].(*types.AttributeValueMemberS); k == nil || k.Value != "oidc-attempt" {
			continue
		}
		update := "REMOVE #started"
		_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                &e.table,
			Key:                      map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]},
			UpdateExpression:         &update,
			ExpressionAttributeNames: map[string]string{"#started": "started"},
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}
