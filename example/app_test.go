package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestSignup(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, owaspHashing)
	alice := ta.browser("browser-A")
	alice.signup("alice", "correct horse")

	if alice.token() == "" {
		t.Fatalf("no %s cookie after sign-up", cookieName)
	}
	res := alice.get("/api/me")
	if res.code != http.StatusOK {
		t.Fatalf("GET /api/me: %d %s", res.code, res.body)
	}
	if diff := cmp.Diff(`{"username":"alice"}`, strings.TrimSpace(res.body)); diff != "" {
		t.Errorf("GET /api/me body (-want +got):\n%s", diff)
	}
	page := alice.get("/")
	if page.code != http.StatusOK || !strings.Contains(page.body, `Signed in as <strong>alice</strong>`) {
		t.Errorf("GET / after sign-up: %d, want the signed-in page; body:\n%s", page.code, page.body)
	}

	// The user item holds an argon2id hash, never the password.
	out, err := ta.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &ta.table, Key: dynamoKey(userKey("alice")), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	var item userItem
	if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
		t.Fatal(err)
	}
	if item.Username != "alice" || !strings.HasPrefix(string(item.PasswordHash), "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(string(item.PasswordHash), "correct horse") {
		t.Errorf("user item = %+v, want username alice and an argon2id hash", item)
	}

	// A taken username gets 409 and does not touch the existing user.
	mallory := ta.browser("browser-M")
	res = mallory.post("/signup", url.Values{"username": {"alice"}, "password": {"taken over"}})
	if res.code != http.StatusConflict {
		t.Errorf("sign-up with a taken username: %d, want 409", res.code)
	}
	if mallory.token() != "" {
		t.Errorf("failed sign-up set a session cookie")
	}
	if res := mallory.post("/login", url.Values{"username": {"alice"}, "password": {"taken over"}}); res.code != http.StatusUnauthorized {
		t.Errorf("login with the rejected sign-up's password: %d, want 401", res.code)
	}
	ta.browser("browser-C").login("alice", "correct horse")
}

func TestAnonymous(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	anon := ta.browser("anon")

	page := anon.get("/")
	if page.code != http.StatusOK || !strings.Contains(page.body, `id="signup-form"`) || !strings.Contains(page.body, `id="login-form"`) {
		t.Errorf("GET / signed out: %d, want the sign-up and log-in forms; body:\n%s", page.code, page.body)
	}
	for _, tc := range []struct {
		method, path string
		want         int
		location     string
	}{
		// The API answers in JSON.
		{"GET", "/api/me", http.StatusUnauthorized, ""},
		{"GET", "/api/sessions", http.StatusUnauthorized, ""},
		// Pages send a browser to log in, and back for a GET.
		{"GET", "/account", http.StatusSeeOther, "/login?next=%2Faccount"},
		{"POST", "/logout-everywhere", http.StatusSeeOther, "/login"},
		{"POST", "/password", http.StatusSeeOther, "/login"},
		{"POST", "/sessions/revoke", http.StatusSeeOther, "/login"},
		{"POST", "/logout", http.StatusSeeOther, "/"}, // harmless without a session
		{"GET", "/login", http.StatusOK, ""},
		{"PUT", "/login", http.StatusMethodNotAllowed, ""},
		{"GET", "/nowhere", http.StatusNotFound, ""},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			var res response
			switch tc.method {
			case "GET":
				res = anon.get(tc.path)
			case "POST":
				res = anon.post(tc.path, url.Values{"id": {"0123456789abcdef0123456789abcdef"}, "current": {"x"}, "new": {"y"}})
			default:
				r, _ := http.NewRequest(tc.method, ta.srv.URL+tc.path, nil)
				res = anon.do(r)
			}
			if res.code != tc.want || res.header.Get("Location") != tc.location {
				t.Errorf("%s %s: %d to %q, want %d to %q; body: %s", tc.method, tc.path, res.code, res.header.Get("Location"), tc.want, tc.location, res.body)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	signedIn := ta.browser("browser-A")
	signedIn.signup("alice", "correct horse")

	long := func(n int) string { return strings.Repeat("x", n) }
	creds := func(user, pass string) url.Values { return url.Values{"username": {user}, "password": {pass}} }
	for _, tc := range []struct {
		name     string
		signedIn bool
		path     string
		body     string // raw, form-encoded
		want     int
		message  string // part of the page's message
	}{
		{"signup without username", false, "/signup", creds("", "correct horse").Encode(), 400, "username is required"},
		{"signup without password", false, "/signup", creds("bob", "").Encode(), 400, "password is required"},
		{"signup with neither", false, "/signup", "", 400, "username is required\npassword is required"},
		{"signup username over 64 bytes", false, "/signup", creds(long(65), "correct horse").Encode(), 400, "longer than 64 bytes"},
		{"signup username of 64 multibyte runes", false, "/signup", creds(strings.Repeat("é", 33), "correct horse").Encode(), 400, "longer than 64 bytes"},
		{"signup username not UTF-8", false, "/signup", creds("bob\xff", "correct horse").Encode(), 400, "must be text"},
		{"signup username with a newline", false, "/signup", creds("bob\nadmin", "correct horse").Encode(), 400, "no spaces, symbols, control or invisible characters"},
		{"signup username of white space", false, "/signup", creds(" \t\u3000", "correct horse").Encode(), 400, "username is required"},
		{"signup password over 1 KiB", false, "/signup", creds("bob", long(1025)).Encode(), 400, "longer than 1024 bytes"},
		{"signup username of exactly 64 bytes", false, "/signup", creds(long(64), "correct horse").Encode(), 303, ""},
		{"signup password of exactly 1 KiB", false, "/signup", creds("carol", long(1024)).Encode(), 303, ""},
		{"login without password", false, "/login", creds("alice", "").Encode(), 400, "password is required"},
		{"login password over 1 KiB", false, "/login", creds("alice", long(1025)).Encode(), 400, "longer than 1024 bytes"},
		{"login username over 64 bytes", false, "/login", creds(long(65), "pw").Encode(), 400, "longer than 64 bytes"},
		{"malformed form", false, "/login", "username=%zz", 400, "could not be read"},
		{"body over 16 KiB", false, "/signup", creds("bob", long(maxBody)).Encode(), 413, "too large"},
		{"password change without new", true, "/password", url.Values{"current": {"correct horse"}}.Encode(), 400, "new password is required"},
		{"password change without current", true, "/password", url.Values{"new": {"next"}}.Encode(), 400, "current password is required"},
		{"password change new over 1 KiB", true, "/password", url.Values{"current": {"correct horse"}, "new": {long(1025)}}.Encode(), 400, "new password is longer than 1024 bytes"},
		{"revoke without id", true, "/sessions/revoke", "", 400, "id is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ta.browser("browser-X")
			if tc.signedIn {
				b = signedIn
			}
			r, err := http.NewRequest("POST", ta.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res := b.do(r)
			if res.code != tc.want {
				t.Fatalf("POST %s: %d, want %d; body:\n%s", tc.path, res.code, tc.want, res.body)
			}
			if msg := pageMessage(t, res.body); tc.message != "" && !strings.Contains(msg, tc.message) {
				t.Errorf("message %q does not contain %q", msg, tc.message)
			}
		})
	}
	if signedIn.meStatus() != http.StatusOK {
		t.Errorf("bad password-change input signed the user out")
	}
	if res := ta.browser("browser-Y").post("/login", creds("alice", "correct horse")); res.code != http.StatusSeeOther {
		t.Errorf("bad password-change input changed the password: login %d", res.code)
	}
}

// pageMessage returns the message of an error page, or of a form shown
// again, unescaped: the text of the element with id "message".
func pageMessage(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `id="message"`)
	_, rest, ok2 := strings.Cut(rest, ">")
	msg, _, ok3 := strings.Cut(rest, "</p>")
	if !ok || !ok2 || !ok3 {
		return ""
	}
	r := strings.NewReplacer("&#39;", "'", "&quot;", `"`, "&#34;", `"`, "&lt;", "<", "&gt;", ">", "&amp;", "&")
	return r.Replace(msg)
}

func TestLogin(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	ta.browser("browser-A").signup("alice", "correct horse")

	for _, tc := range []struct {
		name, username, password string
		want                     int
	}{
		{"right password", "alice", "correct horse", http.StatusSeeOther},
		{"wrong password", "alice", "Correct horse", http.StatusUnauthorized},
		{"unknown user", "bob", "correct horse", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ta.browser("browser-B")
			res := b.post("/login", url.Values{"username": {tc.username}, "password": {tc.password}})
			if res.code != tc.want {
				t.Fatalf("login: %d, want %d; body:\n%s", res.code, tc.want, res.body)
			}
			signedIn := b.token() != ""
			if signedIn != (tc.want == http.StatusSeeOther) {
				t.Errorf("session cookie set: %v, want %v", signedIn, !signedIn)
			}
			// Unknown user and wrong password must look the same.
			if tc.want == http.StatusUnauthorized {
				if msg := pageMessage(t, res.body); msg != "Wrong username or password." {
					t.Errorf("message %q, want the one message for both cases", msg)
				}
			}
		})
	}

	t.Run("rotates the session", func(t *testing.T) {
		b := ta.browser("browser-B")
		b.login("alice", "correct horse")
		first := b.token()
		b.login("alice", "correct horse")
		second := b.token()
		if second == "" || second == first {
			t.Fatalf("second login kept token %q", first)
		}
		if code := ta.withToken(first).meStatus(); code != http.StatusUnauthorized {
			t.Errorf("token from before the login: /api/me %d, want 401", code)
		}
		if code := ta.withToken(second).meStatus(); code != http.StatusOK {
			t.Errorf("new token: /api/me %d, want 200", code)
		}
	})
}

func TestLogout(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	b := ta.browser("browser-A")
	b.signup("alice", "correct horse")
	token := b.token()

	res := b.mustPost(http.StatusSeeOther, "/logout", nil)
	if !strings.Contains(res.header.Get("Set-Cookie"), cookieName+"=;") {
		t.Errorf("logout did not clear the cookie: Set-Cookie %q", res.header.Get("Set-Cookie"))
	}
	// The browser is asked to drop the rest of what it kept of the site.
	if got, want := res.header.Get("Clear-Site-Data"), `"storage"`; got != want {
		t.Errorf("logout's Clear-Site-Data: %q, want %q", got, want)
	}
	if b.token() != "" || b.meStatus() != http.StatusUnauthorized {
		t.Errorf("still signed in after logout")
	}
	// The session is gone on the server too, not just from the browser.
	if code := ta.withToken(token).meStatus(); code != http.StatusUnauthorized {
		t.Errorf("replayed token after logout: /api/me %d, want 401", code)
	}
}

func TestSessionsAndRevoke(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a, b := ta.browser("browser-A"), ta.browser("browser-B")
	a.signup("alice", "correct horse")
	b.login("alice", "correct horse")
	m := ta.browser("browser-M")
	m.signup("mallory", "mallory's password")

	list := a.sessions()
	want := []sessionJSON{{UserAgent: "browser-B", Methods: passwordOnly}, {UserAgent: "browser-A", Current: true, Methods: passwordOnly}} // newest first
	if diff := cmp.Diff(want, list, cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress")); diff != "" {
		t.Fatalf("alice's sessions (-want +got):\n%s", diff)
	}
	for _, s := range list {
		if len(s.ID) != 32 || !s.ExpiresAt.After(s.CreatedAt) || time.Since(s.CreatedAt) > time.Minute {
			t.Errorf("session %+v: want a 32-character ID, a recent creation and a later expiry", s)
		}
	}
	if list[0].ID == list[1].ID {
		t.Errorf("two sessions share ID %s", list[0].ID)
	}
	bID, malloryID := list[0].ID, m.sessions()[0].ID

	for _, tc := range []struct {
		name, id string
		want     int
	}{
		{"another user's session", malloryID, http.StatusNotFound},
		{"unknown ID", "0123456789abcdef0123456789abcdef", http.StatusNotFound},
		{"malformed ID", "../../USER#mallory", http.StatusNotFound},
		{"own other session", bID, http.StatusSeeOther},
		{"same session again", bID, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := a.post("/sessions/revoke", url.Values{"id": {tc.id}}); res.code != tc.want {
				t.Errorf("revoke %q: %d, want %d; body:\n%s", tc.id, res.code, tc.want, res.body)
			}
		})
	}
	if code := m.meStatus(); code != http.StatusOK {
		t.Errorf("mallory after alice tried to revoke her session: /api/me %d, want 200", code)
	}
	if code := b.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("revoked browser B: /api/me %d, want 401", code)
	}
	if code := a.meStatus(); code != http.StatusOK {
		t.Errorf("browser A after revoking B: /api/me %d, want 200", code)
	}
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Current: true, Methods: passwordOnly}}, a.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress")); diff != "" {
		t.Errorf("alice's sessions after the revoke (-want +got):\n%s", diff)
	}
	// The sessions list, not the new-device notice or the history, which
	// keep browser-B's sign-in.
	page := a.get("/")
	listed := section(t, page.body, `<table id="sessions"`, "</table>")
	if !strings.Contains(listed, "browser-A") || strings.Contains(listed, "browser-B") {
		t.Errorf("GET / should list browser-A only; body:\n%s", page.body)
	}
}

// TestListDuringLogin: a List that runs while a login of the same user is
// half-way (its index item written, its session item not yet) leaves the
// new session listed once the login is done: the session lives, so List
// must show it (what the soak's checks caught, issue 26 item 10).
func TestListDuringLogin(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")

	pause := ta.faults.pauseAfter("PutItem", putsPK("USERSESSIONS#"))
	defer pause.release()
	b := ta.browser("browser-B")
	done := make(chan error, 1)
	go func() {
		res, err := b.postForm(context.Background(), ta.srv.URL, "/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
		if err == nil && res.code != http.StatusSeeOther {
			err = fmt.Errorf("%d %s", res.code, res.body)
		}
		done <- err
	}()
	pause.waitReached(t)
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Current: true, Methods: passwordOnly}}, a.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress")); diff != "" {
		t.Errorf("alice's sessions while B's login is half-way (-want +got):\n%s", diff)
	}
	pause.release()
	if err := <-done; err != nil {
		t.Fatalf("B's login: %v", err)
	}
	if code := b.meStatus(); code != http.StatusOK {
		t.Fatalf("B after its login: /api/me %d, want 200", code)
	}
	if diff := cmp.Diff([]sessionJSON{{UserAgent: "browser-A", Current: true, Methods: passwordOnly}, {UserAgent: "browser-B", Methods: passwordOnly}},
		a.sessions(), cmpopts.IgnoreFields(sessionJSON{}, "ID", "CreatedAt", "ExpiresAt", "Address", "LastAddress"), byUserAgent); diff != "" {
		t.Errorf("alice's sessions once B's login is done (-want +got):\n%s", diff)
	}
}

func TestPasswordChange(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a, b := ta.browser("browser-A"), ta.browser("browser-B")
	a.signup("alice", "old password")
	b.login("alice", "old password")
	before := a.token()

	res := a.post("/password", url.Values{"current": {"wrong"}, "new": {"new password"}})
	if res.code != http.StatusUnauthorized {
		t.Fatalf("wrong current password: %d, want 401", res.code)
	}
	if a.meStatus() != http.StatusOK || b.meStatus() != http.StatusOK {
		t.Fatalf("a refused password change signed someone out")
	}

	a.mustPost(http.StatusSeeOther, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
	if after := a.token(); after == "" || after == before {
		t.Errorf("password change kept this browser's token; want a fresh one")
	}
	if code := a.meStatus(); code != http.StatusOK {
		t.Errorf("the browser that changed the password: /api/me %d, want 200", code)
	}
	if code := b.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the other browser after the change: /api/me %d, want 401", code)
	}
	if code := ta.withToken(before).meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the changing browser's old token: /api/me %d, want 401", code)
	}
	if n := len(a.sessions()); n != 1 {
		t.Errorf("%d sessions after the change, want 1", n)
	}
	if res := ta.browser("C").post("/login", url.Values{"username": {"alice"}, "password": {"old password"}}); res.code != http.StatusUnauthorized {
		t.Errorf("login with the old password: %d, want 401", res.code)
	}
	ta.browser("D").login("alice", "new password")
}

func TestLogoutEverywhere(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a, b := ta.browser("browser-A"), ta.browser("browser-B")
	a.signup("alice", "correct horse")
	b.login("alice", "correct horse")
	bob := ta.browser("browser-bob")
	bob.signup("bob", "bob's password")

	res := a.mustPost(http.StatusSeeOther, "/logout-everywhere", nil)
	if got, want := res.header.Get("Clear-Site-Data"), `"storage"`; got != want {
		t.Errorf("logging out everywhere: Clear-Site-Data %q, want %q", got, want)
	}
	if code := a.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("browser A after logging out everywhere: /api/me %d, want 401", code)
	}
	if code := b.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("browser B after A logged out everywhere: /api/me %d, want 401", code)
	}
	if code := bob.meStatus(); code != http.StatusOK {
		t.Errorf("another user after alice logged out everywhere: /api/me %d, want 200", code)
	}
	// A session created after logging out everywhere is valid.
	a.login("alice", "correct horse")
	if code := a.meStatus(); code != http.StatusOK {
		t.Errorf("logging in again after logging out everywhere: /api/me %d, want 200", code)
	}
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	id := a.sessions()[0].ID

	forms := map[string]url.Values{
		"/signup":            {"username": {"eve"}, "password": {"eve's password"}},
		"/login":             {"username": {"alice"}, "password": {"correct horse"}},
		"/logout":            nil,
		"/logout-everywhere": nil,
		"/password":          {"current": {"correct horse"}, "new": {"eve's choice"}},
		"/sessions/revoke":   {"id": {id}},
		"/reauth":            {"password": {"correct horse"}},
	}
	for path, form := range forms {
		for _, header := range [][]string{
			{"Sec-Fetch-Site", "cross-site"},
			{"Origin", "https://evil.example"}, // older browsers send no Sec-Fetch-Site
		} {
			t.Run(path+" "+header[0], func(t *testing.T) {
				if res := a.post(path, form, header...); res.code != http.StatusForbidden {
					t.Errorf("cross-origin POST %s: %d, want 403", path, res.code)
				}
			})
		}
	}
	// None of them did anything.
	if code := a.meStatus(); code != http.StatusOK {
		t.Errorf("alice after the refused POSTs: /api/me %d, want 200", code)
	}
	ta.browser("B").login("alice", "correct horse")
	if res := ta.browser("C").post("/login", url.Values{"username": {"eve"}, "password": {"eve's password"}}); res.code != http.StatusUnauthorized {
		t.Errorf("refused sign-up of eve created her anyway: login %d", res.code)
	}
	// The same request from the same origin goes through.
	a.post("/logout", nil, "Sec-Fetch-Site", "same-origin")
	if code := a.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("same-origin logout did not log out: /api/me %d", code)
	}
}

func TestStoreOutage(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	token := a.token()

	t.Run("sessions index only", func(t *testing.T) {
		ta.faults.setDown("Query")
		defer ta.faults.setDown()
		for _, path := range []string{"/", "/api/sessions"} {
			if res := a.get(path); res.code != http.StatusServiceUnavailable {
				t.Errorf("GET %s with Query failing: %d, want 503", path, res.code)
			}
		}
		if res := a.get("/api/sessions"); !strings.HasPrefix(res.body, `{"error":`) {
			t.Errorf("GET /api/sessions with Query failing: body %q, want JSON", res.body)
		}
		if !strings.Contains(ta.logs.String(), "op=\"list sessions\"") {
			t.Errorf("the failed List was not logged; logs:\n%s", ta.logs)
		}
	})

	t.Run("user reads only", func(t *testing.T) {
		// The failure count is written, but the login cannot read the user
		// (with the table's global revocation item, in one BatchGetItem).
		ta.faults.setDown("GetItem", "BatchGetItem")
		defer ta.faults.setDown()
		if res := ta.browser("B").post("/login", url.Values{"username": {"alice"}, "password": {"correct horse"}}); res.code != http.StatusServiceUnavailable {
			t.Errorf("POST /login with reads failing: %d, want 503", res.code)
		}
	})

	t.Run("everything", func(t *testing.T) {
		ta.faults.setDown("*")
		defer ta.faults.setDown()
		if res := ta.browser("anon").get("/"); res.code != http.StatusOK {
			t.Errorf("GET / with no cookie needs no DynamoDB: %d, want 200", res.code)
		}
		for _, tc := range []struct {
			name string
			do   func() response
		}{
			{"GET /", func() response { return a.get("/") }},
			{"GET /api/me", func() response { return a.get("/api/me") }},
			{"POST /signup", func() response {
				return ta.browser("B").post("/signup", url.Values{"username": {"bob"}, "password": {"bob's password"}})
			}},
			{"POST /login", func() response {
				return ta.browser("B").post("/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
			}},
			{"POST /logout", func() response { return a.post("/logout", nil) }},
			{"POST /api/login", func() response {
				return ta.apiClient("cli/1.0").request("POST", "/api/login", credsJSON("alice", "correct horse"))
			}},
		} {
			res := tc.do()
			if res.code != http.StatusServiceUnavailable {
				t.Errorf("%s in an outage: %d, want 503; body:\n%s", tc.name, res.code, res.body)
			}
			// The API answers in JSON.
			if got := res.header.Get("Content-Type"); strings.Contains(tc.name, "/api/") && got != "application/json" {
				t.Errorf("%s in an outage: Content-Type %q, want application/json", tc.name, got)
			}
		}
	})

	logs := ta.logs.String()
	for _, op := range []string{"reserve a username", "count a login attempt", "log in", "log out"} {
		if !strings.Contains(logs, fmt.Sprintf("op=%q", op)) {
			t.Errorf("failed %q was not logged", op)
		}
	}
	if strings.Contains(logs, token) {
		t.Errorf("a session token reached the logs:\n%s", logs)
	}
	// The logout above could not delete the session, so it lives on: that
	// is why the app answers 503 rather than pretending it logged out.
	if code := ta.withToken(token).meStatus(); code != http.StatusOK {
		t.Errorf("after the outage: /api/me %d, want 200", code)
	}
}

func TestNewAppRefusesAWrongTable(t *testing.T) {
	t.Parallel()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	_, err := client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = newApp(context.Background(), appConfig{Client: client, Table: table})
	if err == nil || !strings.Contains(err.Error(), `has key (hash "id"), and the layout wants (hash "pk", range "sk")`) {
		t.Errorf("newApp on a table with the wrong key schema: %v, want the key schema's mismatch", err)
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	const hsts = "max-age=63072000; includeSubDomains"
	for _, tc := range []struct {
		name     string
		options  []func(*appConfig)
		wantHSTS string
	}{
		{"HTTPS", nil, hsts},
		{"dev mode", []func(*appConfig){dev}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ta := newTestApp(t, tc.options...)
			b := ta.browser("browser-A")
			// Every kind of answer, from every layer: the pages, the
			// session middleware, the mux, the body limit and the
			// cross-origin check.
			for name, res := range map[string]response{
				"GET / (200)":                  b.get("/"),
				"GET /api/me (401)":            b.get("/api/me"),
				"GET /nowhere (404)":           b.get("/nowhere"),
				"GET /login (405)":             b.get("/login"),
				"POST /login bad form (400)":   b.post("/login", url.Values{"username": {""}}),
				"POST /signup too large (413)": b.post("/signup", url.Values{"username": {strings.Repeat("x", maxBody)}}),
				"cross-origin POST (403)":      b.post("/logout", nil, "Sec-Fetch-Site", "cross-site"),
				"POST /signup (303)":           b.post("/signup", url.Values{"username": {"alice"}, "password": {"correct horse"}}),
				"GET /api/sessions (200)":      b.get("/api/sessions"),
			} {
				if got := res.header.Get("Strict-Transport-Security"); got != tc.wantHSTS {
					t.Errorf("%s: Strict-Transport-Security %q, want %q", name, got, tc.wantHSTS)
				}
				if got := res.header.Get("Cache-Control"); got != "no-store" {
					t.Errorf("%s: Cache-Control %q, want no-store", name, got)
				}
				if res.header.Get("Content-Security-Policy") == "" || res.header.Get("X-Content-Type-Options") != "nosniff" {
					t.Errorf("%s: lacks the other security headers: %v", name, res.header)
				}
			}
		})
	}
}
