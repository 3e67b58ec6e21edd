package main

import (
	"context"
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

// A browser signs up, sees its account, logs out and is sent to log in:
// the example server's routes and cookie, through a Function URL.
func TestBrowser(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	b := newClient()
	r := b.post(f, "/signup", url.Values{"username": {"Alice"}, "password": {"correct horse"}, "remember": {"on"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("sign-up: %d, Location %q", r.status, r.header.Get("Location"))
	}
	c := r.cookie(sessionCookie)
	if c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" || c.MaxAge <= 0 {
		t.Errorf("session cookie %+v: want __Host-session, Secure, HttpOnly, SameSite=Lax, Path=/, persistent", c)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}
	r = b.get(f, "/account")
	if r.status != http.StatusOK || !strings.Contains(r.body, "Signed in as alice") || !strings.Contains(r.body, "(this browser)") {
		t.Errorf("GET /account: %d %q", r.status, r.body)
	}
	if r := newClient().get(f, "/account"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next=%2Faccount" {
		t.Errorf("GET /account signed out: %d, Location %q", r.status, r.header.Get("Location"))
	}
	if r := b.post(f, "/logout", url.Values{}); r.status != http.StatusSeeOther || b.cookies[sessionCookie] != "" {
		t.Errorf("logout: %d, cookies %v", r.status, b.cookies)
	}
	if r := b.get(f, "/account"); r.status != http.StatusSeeOther {
		t.Errorf("GET /account after logout: %d", r.status)
	}
	if len(f.sessionItems()) != 0 {
		t.Errorf("sessions left after the only one logged out: %+v", f.sessionItems())
	}

	// The same user logs in; a wrong password and an unknown user get the
	// same answer.
	b.logIn(f, "alice", "correct horse")
	for _, form := range []url.Values{
		{"username": {"alice"}, "password": {"wrong horse"}},
		{"username": {"nobody"}, "password": {"correct horse"}},
	} {
		if r := newClient().post(f, "/login", form); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "Wrong username or password.") {
			t.Errorf("login %v: %d %q", form, r.status, r.body)
		}
	}
	if r := newClient().post(f, "/signup", url.Values{"username": {"alice"}, "password": {"another horse"}}); r.status != http.StatusConflict {
		t.Errorf("sign-up of a taken name: %d", r.status)
	}
}

// A request due for its refresh has its expiry written before the function
// answers: once the response is out, the table holds what the cookie
// promises, and nothing is left to run when the environment freezes.
func TestRefreshIsWrittenBeforeTheResponse(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	b := newClient()
	b.signUp(f, "alice", "correct horse")
	before := f.sessionItems()[0].ExpiresAt
	f.clock.Advance(11 * time.Minute)
	r := b.get(f, "/account")
	c := r.cookie(sessionCookie)
	if r.status != http.StatusOK || c == nil {
		t.Fatalf("the refresh-due request: %d, cookie %v", r.status, c)
	}
	// No Wait: the write is done with the request.
	after := f.sessionItems()[0].ExpiresAt
	want := time.Unix(f.clock.Now().Add(time.Hour).Unix(), 0)
	if !after.Equal(want) || !after.After(before) {
		t.Errorf("the table's expiry once the response is out: %v, want %v (was %v)", after, want, before)
	}
	if got := f.clock.Now().Add(time.Duration(c.MaxAge) * time.Second).Unix(); got != after.Unix() {
		t.Errorf("the cookie lives until %v, the table's session until %v", time.Unix(got, 0), after)
	}
}

// Failed logins are counted per username in the table: the eleventh in a
// minute is refused before the password is checked, even with the right
// password, until a token is back.
func TestFailedLoginsAreLimited(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	newClient().signUp(f, "alice", "correct horse")
	wrong := url.Values{"username": {"alice"}, "password": {"wrong horse"}}
	for i := range 10 {
		if r := newClient().post(f, "/login", wrong); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, r.status)
		}
	}
	right := url.Values{"username": {"alice"}, "password": {"correct horse"}}
	r := newClient().post(f, "/login", right)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "60" {
		t.Errorf("the eleventh attempt: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	f.clock.Advance(time.Minute)
	newClient().logIn(f, "alice", "correct horse")
}

// Logging out everywhere needs a recent authentication: an older one goes
// through /reauth first; then every session of the user ends.
func TestLogoutEverywhere(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	phone, laptop := newClient(), newClient()
	phone.signUp(f, "alice", "correct horse")
	laptop.logIn(f, "alice", "correct horse")
	f.clock.Advance(11 * time.Minute)
	r := laptop.post(f, "/logout-everywhere", url.Values{})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/reauth?next=/account" {
		t.Fatalf("an old authentication: %d, Location %q", r.status, r.header.Get("Location"))
	}
	if r := laptop.get(f, "/reauth?next=/account"); r.status != http.StatusOK || !strings.Contains(r.body, "Confirm it") {
		t.Errorf("GET /reauth: %d", r.status)
	}
	if r := laptop.post(f, "/reauth", url.Values{"password": {"wrong horse"}, "next": {"/account"}}); r.status != http.StatusUnauthorized {
		t.Errorf("re-authentication with a wrong password: %d", r.status)
	}
	if r := laptop.post(f, "/reauth", url.Values{"password": {"correct horse"}, "next": {"/account"}}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/account" {
		t.Fatalf("re-authentication: %d, Location %q", r.status, r.header.Get("Location"))
	}
	if r := laptop.post(f, "/logout-everywhere", url.Values{}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("logout everywhere: %d, Location %q", r.status, r.header.Get("Location"))
	}
	for name, c := range map[string]*client{"phone": phone, "laptop": laptop} {
		if r := c.get(f, "/account"); r.status != http.StatusSeeOther {
			t.Errorf("%s after logging out everywhere: %d", name, r.status)
		}
	}
}

// The account page lists the user's sessions, and revokes one.
func TestRevokeASession(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	phone, laptop := newClient(), newClient()
	phone.signUp(f, "alice", "correct horse")
	laptop.logIn(f, "alice", "correct horse")
	page := laptop.get(f, "/").body
	var list []sessionJSON
	jsonOf(t, laptop.get(f, "/api/sessions"), &list) // with the cookie, as the page's own
	var phoneID string
	for _, s := range list {
		if !strings.Contains(page, s.ID) {
			t.Errorf("the account page does not list session %s", s.ID)
		}
		if !s.Current {
			phoneID = s.ID
		}
	}
	if len(list) != 2 || phoneID == "" {
		t.Fatalf("sessions %+v: want the laptop's, current, and the phone's", list)
	}
	if r := laptop.post(f, "/sessions/revoke", url.Values{"id": {phoneID}}); r.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %q", r.status, r.body)
	}
	if r := phone.get(f, "/account"); r.status != http.StatusSeeOther {
		t.Errorf("the revoked session: %d", r.status)
	}
	if r := laptop.post(f, "/sessions/revoke", url.Values{"id": {phoneID}}); r.status != http.StatusNotFound {
		t.Errorf("revoke again: %d", r.status)
	}
}

// The API: a bearer token from /api/login, the user and the sessions, a
// session revoked after a re-authentication.
func TestAPI(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	browser, cli := newClient(), newClient()
	browser.signUp(f, "alice", "correct horse")
	cli.apiLogin(f, "alice", "correct horse")
	var me User
	jsonOf(t, cli.get(f, "/api/me"), &me)
	if me.Username != "alice" {
		t.Errorf("GET /api/me: %+v", me)
	}
	if r := cli.get(f, "/api/me"); strings.Contains(r.body, "argon2") {
		t.Errorf("GET /api/me shows the hash: %s", r.body)
	}
	var list []sessionJSON
	jsonOf(t, cli.get(f, "/api/sessions"), &list)
	if len(list) != 2 {
		t.Fatalf("GET /api/sessions: %+v", list)
	}
	var other string
	for _, s := range list {
		if !s.Current {
			other = s.ID
		}
		if !slices.Equal(s.Methods, []string{"password"}) {
			t.Errorf("session %s methods %q", s.ID, s.Methods)
		}
	}
	if r := cli.do(f, "DELETE", "/api/sessions/"+strings.Repeat("0", 32), nil, nil); r.status != http.StatusNotFound {
		t.Errorf("DELETE an unknown session: %d", r.status)
	}
	f.clock.Advance(11 * time.Minute)
	r := cli.do(f, "DELETE", "/api/sessions/"+other, nil, nil)
	if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), "insufficient_user_authentication") {
		t.Fatalf("DELETE with an old authentication: %d, WWW-Authenticate %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	old := cli.token
	r = cli.do(f, "POST", "/api/reauth", nil, map[string]string{"password": "correct horse"})
	var tok tokenJSON
	jsonOf(t, r, &tok)
	if r.status != http.StatusOK || tok.Token == "" || tok.Token == old {
		t.Fatalf("POST /api/reauth: %d %q", r.status, r.body)
	}
	cli.token = tok.Token
	if r := cli.do(f, "DELETE", "/api/sessions/"+other, nil, nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE after the re-authentication: %d %q", r.status, r.body)
	}
	if r := browser.get(f, "/account"); r.status != http.StatusSeeOther {
		t.Errorf("the browser's revoked session: %d", r.status)
	}
	if r := (&client{token: old}).get(f, "/api/me"); r.status != http.StatusUnauthorized {
		t.Errorf("the token the re-authentication replaced: %d", r.status)
	}
}

// An event that carries its cookies in the cookies field alone still
// reaches the handler with them.
func TestCookiesOfTheEvent(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	b := newClient()
	b.signUp(f, "alice", "correct horse")
	ev := b.request("GET", "/account", nil, nil)
	delete(ev.Headers, "cookie")
	if r := f.invoke(ev); r.status != http.StatusOK {
		t.Errorf("cookies in the event's cookies only: %d", r.status)
	}
}

// Malformed input gets a 4xx and never reaches DynamoDB; a form from
// another site is refused.
func TestMalformedInputCostsNoCall(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	f.front.Forget()
	for _, tc := range []struct {
		name string
		ev   func() response
		want int
	}{
		{"a malformed cookie", func() response {
			return f.invoke(event("GET", "/account", nil, []string{sessionCookie + "=not-a-token"}, ""))
		}, http.StatusSeeOther},
		{"a malformed bearer token", func() response {
			return (&client{token: "x"}).get(f, "/api/me")
		}, http.StatusUnauthorized},
		{"a username with a space", func() response {
			return newClient().post(f, "/login", url.Values{"username": {"al ice"}, "password": {"x"}})
		}, http.StatusBadRequest},
		{"an overlong password", func() response {
			return newClient().post(f, "/signup", url.Values{"username": {"alice"}, "password": {strings.Repeat("x", 1025)}})
		}, http.StatusBadRequest},
		{"a short new password", func() response {
			return newClient().post(f, "/signup", url.Values{"username": {"alice"}, "password": {"short"}})
		}, http.StatusBadRequest},
		{"JSON of another shape", func() response {
			return newClient().do(f, "POST", "/api/login", nil, map[string]any{"user": "alice"})
		}, http.StatusBadRequest},
		{"a form from another site", func() response {
			ev := newClient().request("POST", "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}}, nil)
			ev.Headers["sec-fetch-site"] = "cross-site"
			ev.Headers["origin"] = "https://evil.example"
			return f.invoke(ev)
		}, http.StatusForbidden},
	} {
		if r := tc.ev(); r.status != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, r.status, tc.want)
		}
	}
	if used := f.front.Used(); len(used) != 0 {
		t.Errorf("malformed input reached DynamoDB: %v", used)
	}
}

// A user who set one-time codes up on the example server is refused here,
// never let in on the password alone.
func TestOneTimeCodesAreRefused(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	newClient().signUp(f, "alice", "correct horse")
	_, err := f.admin.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 &f.table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "USER#alice"}, "sk": &types.AttributeValueMemberS{Value: "PROFILE"}},
		UpdateExpression:          strPtr("SET totpSecret = :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "JBSWY3DPEHPK3PXP"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := newClient()
	r := b.post(f, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	if r.status != http.StatusForbidden || b.cookies[sessionCookie] != "" {
		t.Errorf("login of a user with one-time codes: %d, cookies %v", r.status, b.cookies)
	}
	if r := (&client{}).do(f, "POST", "/api/login", nil, loginRequest{Username: "alice", Password: "correct horse"}); r.status != http.StatusForbidden {
		t.Errorf("API login of a user with one-time codes: %d", r.status)
	}
}

func strPtr(s string) *string { return &s }

// Every route, on one front: the function calls each action of its
// documented policy and no other (the front refuses what the policy
// lacks, and newFunction fails the test for it).
func TestFunctionUsesItsPolicy(t *testing.T) {
	t.Parallel()
	f := newFunction(t)
	phone, laptop, cli := newClient(), newClient(), newClient()
	phone.signUp(f, "alice", "correct horse")
	laptop.logIn(f, "alice", "correct horse")
	cli.apiLogin(f, "alice", "correct horse")
	laptop.get(f, "/")
	cli.get(f, "/api/me")
	cli.get(f, "/api/sessions")
	f.clock.Advance(11 * time.Minute) // refreshes; the sensitive routes ask to re-authenticate
	laptop.post(f, "/reauth", url.Values{"password": {"correct horse"}})
	var list []sessionJSON
	jsonOf(t, laptop.get(f, "/api/sessions"), &list)
	for _, s := range list {
		if !s.Current {
			laptop.post(f, "/sessions/revoke", url.Values{"id": {s.ID}})
			break
		}
	}
	laptop.post(f, "/logout-everywhere", url.Values{})
	phone.post(f, "/logout", url.Values{})
	if diff := cmp.Diff(functionActions(t), f.front.Used()); diff != "" {
		t.Errorf("actions (-documented +used):\n%s", diff)
	}
}
