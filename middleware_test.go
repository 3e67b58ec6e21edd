package ddbsession_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

// The two read paths: by default the cookie names the user and a request
// reads session and user in one BatchGetItem; with HideUserKey it reads
// them with two GetItems, one after the other.
var readPaths = []struct {
	name   string
	mutate func(*ddbsession.Config[User])
	calls  map[string]int // per authenticated request
}{
	{"one round trip", nil, map[string]int{"BatchGetItem": 1}},
	{"HideUserKey", func(c *ddbsession.Config[User]) { c.HideUserKey = true }, map[string]int{"GetItem": 2}},
}

func TestRequireSessionLetsValidSessionThrough(t *testing.T) {
	t.Parallel()
	for _, path := range readPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			testValidSessionThrough(t, path.mutate, path.calls)
		})
	}
}

func testValidSessionThrough(t *testing.T, mutate func(*ddbsession.Config[User]), calls map[string]int) {
	var p *probe
	e := newEnv(t, withProbe(&p), mutate)
	alice := e.putUser("alice")
	cookie := e.login(alice)

	var got ddbsession.Session
	h := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := e.m.User(r.Context())
		if !ok {
			t.Error("User: no user in context")
		}
		if diff := cmp.Diff(User{PK: "USER#alice", SK: "PROFILE", Name: "alice"}, u); diff != "" {
			t.Errorf("User (-want +got):\n%s", diff)
		}
		got, _ = e.m.Session(r.Context())
		w.Write([]byte("ok"))
	}))
	p.reset()
	w := e.get(h, cookie)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, body %q; want 200", w.Code, w.Body)
	}
	// The hot path: strongly consistent reads of session and user, no writes.
	if diff := cmp.Diff(calls, p.calls); diff != "" {
		t.Errorf("DynamoDB calls per request (-want +got):\n%s", diff)
	}
	if got.User != alice || len(got.ID) != 32 || got.UserAgent != "test-agent/1.0" {
		t.Errorf("Session in context = %+v", got)
	}
	if !got.ExpiresAt.Equal(time.Unix(start.Add(time.Hour).Unix(), 0)) {
		t.Errorf("ExpiresAt = %v, want %v", got.ExpiresAt, start.Add(time.Hour).Truncate(time.Second))
	}
	if v := w.Header().Values("Vary"); !cmp.Equal(v, []string{"Cookie"}) {
		t.Errorf("Vary = %q, want [Cookie]", v)
	}
	if w.Header().Get("Set-Cookie") != "" {
		t.Errorf("a request between refreshes set a cookie: %q", w.Header().Get("Set-Cookie"))
	}
}

func TestRequireSessionReadsConsistently(t *testing.T) {
	t.Parallel()
	for _, path := range readPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			var p *probe
			e := newEnv(t, withProbe(&p), path.mutate)
			cookie := e.login(e.putUser("alice"))
			var reads []bool
			p.before = func(_ context.Context, op string, in any) {
				switch in := in.(type) {
				case *dynamodb.GetItemInput:
					reads = append(reads, in.ConsistentRead != nil && *in.ConsistentRead)
				case *dynamodb.BatchGetItemInput:
					for _, ka := range in.RequestItems {
						for range ka.Keys {
							reads = append(reads, ka.ConsistentRead != nil && *ka.ConsistentRead)
						}
					}
				}
			}
			if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			if diff := cmp.Diff([]bool{true, true}, reads); diff != "" {
				t.Errorf("ConsistentRead of each item read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequireSessionRejectsMalformedCookieWithoutDynamoDB(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice")).Value
	valid, user, _ := strings.Cut(cookie, ".") // the token, and the user key that follows it
	b64 := base64.RawURLEncoding.EncodeToString
	h := e.m.RequireSession(whoami(e.m))

	cases := map[string]string{
		"empty":         "",
		"one short":     valid[:25],
		"one long":      valid + "A",
		"lowercase":     strings.ToLower(valid),
		"base64 chars":  valid[:24] + "+/",
		"digit 8":       valid[:25] + "8",
		"padding":       valid[:25] + "=",
		"space":         valid[:25] + " ",
		"unicode":       valid[:24] + "é",
		"sql-ish":       "' OR '1'='1' --xxxxxxxxxxx",
		"public ID":     strings.Repeat("ab", 16),
		"very long":     strings.Repeat("A", 4096),
		"control bytes": valid[:25] + "\x00",
		// The user key that may follow the token must fit the table and be
		// one that a user item could have.
		"token and a dot":        valid + ".",
		"no sort key":            valid + "." + b64([]byte("USER#alice")),
		"three key parts":        valid + "." + user + "." + b64([]byte("x")),
		"empty partition key":    valid + ".." + b64([]byte("PROFILE")),
		"empty sort key":         valid + "." + b64([]byte("USER#alice")) + ".",
		"padded base64":          valid + "." + base64.URLEncoding.EncodeToString([]byte("USER#alice")) + "." + b64([]byte("PROFILE")),
		"standard base64":        valid + "." + base64.RawStdEncoding.EncodeToString([]byte("USER?>alice")) + "." + b64([]byte("PROFILE")),
		"not UTF-8":              valid + "." + b64([]byte("USER#\xff")) + "." + b64([]byte("PROFILE")),
		"a session item's key":   valid + "." + b64([]byte("SESSION#"+tokenHash(valid))) + "." + b64([]byte("SESSION")),
		"an index partition":     valid + "." + b64([]byte("USERSESSIONS#10#USER#alicePROFILE")) + "." + b64([]byte("SID#x")),
		"a user key over 1024 B": valid + "." + b64([]byte(strings.Repeat("U", 1000))) + "." + b64([]byte(strings.Repeat("S", 25))),
		"the user key, no token": user,
		"a lowercase token":      strings.ToLower(valid) + "." + user,
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			p.reset()
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Cookie", e.m.CookieName()+"="+value)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", w.Code)
			}
			if n := p.total(); n != 0 {
				t.Errorf("malformed cookie cost %d DynamoDB calls, want 0", n)
			}
		})
	}
}

func TestRequireSessionRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// spoil turns a fresh, valid session into one that must be refused.
		spoil func(e *env, alice ddbsession.UserKey, cookie *http.Cookie) *http.Cookie
	}{
		{"no cookie", func(*env, ddbsession.UserKey, *http.Cookie) *http.Cookie { return nil }},
		{"unknown token", func(_ *env, _ ddbsession.UserKey, c *http.Cookie) *http.Cookie {
			c.Value = strings.Repeat("A", 26)
			return c
		}},
		{"expired but still in the table", func(e *env, _ ddbsession.UserKey, c *http.Cookie) *http.Cookie {
			// expiresAt is start+1h in whole seconds; at that instant the
			// session is over, though TTL has deleted nothing.
			e.clock.Advance(time.Hour - 250*time.Millisecond)
			return c
		}},
		{"user item deleted", func(e *env, alice ddbsession.UserKey, c *http.Cookie) *http.Cookie {
			e.deleteItem(userItemKey(alice))
			return c
		}},
		{"created before the user's cutoff", func(e *env, alice ddbsession.UserKey, c *http.Cookie) *http.Cookie {
			e.clock.Advance(time.Millisecond)
			if err := e.m.RevokeAll(context.Background(), alice); err != nil {
				e.t.Fatal(err)
			}
			return c
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			alice := e.putUser("alice")
			cookie := e.login(alice)
			// The session works before it is spoiled, so the case below
			// fails for the reason it names.
			if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK {
				t.Fatalf("fresh session: status %d", w.Code)
			}
			cookie = tc.spoil(e, alice, cookie)
			called := false
			h := e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
			var w *httptest.ResponseRecorder
			if cookie == nil {
				w = e.get(h)
			} else {
				w = e.get(h, cookie)
			}
			if w.Code != http.StatusUnauthorized || called {
				t.Fatalf("status %d, handler called %v; want 401 and not called", w.Code, called)
			}
			if body := w.Body.String(); len(body) > 64 {
				t.Errorf("rejection body is not short: %q", body)
			}
			cleared := sessionCookie(t, w.Result(), e.m.CookieName())
			if cookie != nil && (cleared == nil || cleared.MaxAge >= 0) {
				t.Errorf("rejected session's cookie not cleared: %v", cleared)
			}
			if cookie == nil && cleared != nil {
				t.Errorf("request without cookie got Set-Cookie %v", cleared)
			}
		})
	}
}

func TestRequireSessionCustomRejection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.Unauthorized = http.RedirectHandler("/login", http.StatusSeeOther)
	})
	w := e.get(e.m.RequireSession(whoami(e.m)))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Errorf("got %d Location %q, want 303 to /login", w.Code, w.Header().Get("Location"))
	}
}

func TestLoadSessionLetsAnonymousThrough(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	h := e.m.LoadSession(whoami(e.m))

	cases := []struct {
		name    string
		cookie  *http.Cookie
		want    string
		cleared bool
	}{
		{"signed in", cookie, "user:alice", false},
		{"no cookie", nil, "anonymous\n", false},
		{"unknown token", &http.Cookie{Name: e.m.CookieName(), Value: strings.Repeat("B", 26)}, "anonymous\n", true},
		{"malformed", &http.Cookie{Name: e.m.CookieName(), Value: "nope"}, "anonymous\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w *httptest.ResponseRecorder
			if tc.cookie == nil {
				w = e.get(h)
			} else {
				w = e.get(h, tc.cookie)
			}
			if w.Code != http.StatusOK || w.Body.String() != tc.want {
				t.Errorf("got %d %q, want 200 %q", w.Code, w.Body, tc.want)
			}
			c := sessionCookie(t, w.Result(), e.m.CookieName())
			if cleared := c != nil && c.MaxAge < 0; cleared != tc.cleared {
				t.Errorf("cookie cleared = %v, want %v", cleared, tc.cleared)
			}
		})
	}
}

func TestContextAccessorsWithoutSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if _, ok := e.m.User(context.Background()); ok {
		t.Error("User reported a user in an empty context")
	}
	if _, ok := e.m.Session(context.Background()); ok {
		t.Error("Session reported a session in an empty context")
	}
}

func TestCheckWithoutHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	s, u, err := e.m.Check(context.Background(), cookie.Value)
	if err != nil || u.Name != "alice" || s.User.PK != "USER#alice" {
		t.Fatalf("Check(valid) = %+v, %+v, %v", s, u, err)
	}
	for _, token := range []string{"", "x", strings.Repeat("C", 26)} {
		if _, _, err := e.m.Check(context.Background(), token); err != ddbsession.ErrNoSession {
			t.Errorf("Check(%q) error = %v, want ErrNoSession", token, err)
		}
	}
}

// A service whose users live elsewhere plugs in its own loader: its user is
// what the handler sees, and its cutoff decides.
func TestCustomLoadUser(t *testing.T) {
	t.Parallel()
	directory := map[string]struct {
		user   User
		cutoff time.Time
	}{
		"EXT#carol": {User{Name: "carol from the directory"}, time.Time{}},
		"EXT#dave":  {User{Name: "dave"}, time.Time{}}, // revoked after login, below
	}
	var p *probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.LoadUser = func(_ context.Context, key ddbsession.UserKey) (User, time.Time, error) {
			d, ok := directory[key.PK]
			if !ok {
				return User{}, time.Time{}, ddbsession.ErrUserNotFound
			}
			return d.user, d.cutoff, nil
		}
	})
	carol := e.login(ddbsession.UserKey{PK: "EXT#carol", SK: "-"})
	dave := e.login(ddbsession.UserKey{PK: "EXT#dave", SK: "-"})
	directory["EXT#dave"] = struct {
		user   User
		cutoff time.Time
	}{User{Name: "dave"}, start.Add(time.Second)}
	// Login asks the loader too: a user it does not know gets no session.
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), ddbsession.UserKey{PK: "EXT#erin", SK: "-"}); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login of a user unknown to the loader = %v, want ErrUserNotFound", err)
	}
	if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("refused Login sent Set-Cookie %q", c)
	}
	// A token that was never issued: carol's with its last character changed
	// (rand.Text ends in "A" one time in 32, so "A" alone would sometimes be carol's).
	last := "A"
	if strings.HasSuffix(carol.Value, last) {
		last = "B"
	}
	erin := &http.Cookie{Name: e.m.CookieName(), Value: carol.Value[:25] + last}
	h := e.m.RequireSession(whoami(e.m))

	p.reset()
	if w := e.get(h, carol); w.Code != http.StatusOK || w.Body.String() != "user:carol from the directory" {
		t.Errorf("carol: %d %q", w.Code, w.Body)
	}
	// The table is read for the session only; the user comes from the loader.
	if diff := cmp.Diff(map[string]int{"GetItem": 1}, p.calls); diff != "" {
		t.Errorf("calls with a custom loader (-want +got):\n%s", diff)
	}
	if w := e.get(h, dave); w.Code != http.StatusUnauthorized {
		t.Errorf("dave, created before his cutoff: %d, want 401", w.Code)
	}
	if w := e.get(h, erin); w.Code != http.StatusUnauthorized {
		t.Errorf("erin, unknown to the loader: %d, want 401", w.Code)
	}
}

// Several cookies may share the session cookie's name. The middleware
// ignores malformed ones and decides by the first well-formed token alone:
// a valid session behind an unknown token is not looked up.
func TestRequireSessionWithSeveralCookies(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	valid := e.login(e.putUser("alice"))
	malformed := &http.Cookie{Name: e.m.CookieName(), Value: "nope"}
	unknown := &http.Cookie{Name: e.m.CookieName(), Value: strings.Repeat("A", 26)}
	h := e.m.RequireSession(whoami(e.m))

	for _, tc := range []struct {
		name    string
		cookies []*http.Cookie
		want    int
		reads   int // the calls: one BatchGetItem for the valid cookie, which names its user; one GetItem for the unknown token
	}{
		{"malformed, then valid", []*http.Cookie{malformed, valid}, http.StatusOK, 1},
		{"valid, then malformed", []*http.Cookie{valid, malformed}, http.StatusOK, 1},
		{"valid, then unknown", []*http.Cookie{valid, unknown}, http.StatusOK, 1},
		{"unknown, then valid", []*http.Cookie{unknown, valid}, http.StatusUnauthorized, 1},
		{"malformed, then unknown", []*http.Cookie{malformed, unknown}, http.StatusUnauthorized, 1},
		{"two malformed", []*http.Cookie{malformed, malformed}, http.StatusUnauthorized, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.reset()
			w := e.get(h, tc.cookies...)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
			if tc.want == http.StatusOK && w.Body.String() != "user:alice" {
				t.Errorf("body %q, want user:alice", w.Body)
			}
			if reads := p.count("GetItem") + p.count("BatchGetItem"); reads != tc.reads || p.total() != reads {
				t.Errorf("%d DynamoDB calls, %d of them reads; want %d reads only", p.total(), reads, tc.reads)
			}
			c := sessionCookie(t, w.Result(), e.m.CookieName())
			if cleared := c != nil && c.MaxAge < 0; cleared != (tc.want != http.StatusOK) {
				t.Errorf("cookie cleared = %v, want %v", cleared, tc.want != http.StatusOK)
			}
		})
	}
}

// Check reads a session that is due for refresh and leaves it as it was:
// no write of any kind, the stored expiry unchanged.
func TestCheckNeverWrites(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	cookie := e.login(alice)
	want := loggedIn(e.sessionFor(cookie).ID, alice, start, time.Hour)
	before := itemsText(e.scanAll())

	e.clock.Advance(30 * time.Minute)
	p.reset()
	s, u, err := e.m.Check(context.Background(), cookie.Value)
	if err != nil || u.Name != "alice" {
		t.Fatalf("Check of a live session = %+v, %v", u, err)
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("session from Check (-want +got):\n%s", diff)
	}
	for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem"} {
		if n := p.count(op); n != 0 {
			t.Errorf("Check made %d %s calls, want none", n, op)
		}
	}
	if got := itemExpiry(t, e.itemOf(kindSession, s.ID)); !got.Equal(want.ExpiresAt) {
		t.Errorf("stored expiresAt after Check = %v, want %v unchanged", got, want.ExpiresAt)
	}
	if diff := cmp.Diff(before, itemsText(e.scanAll())); diff != "" {
		t.Errorf("table after Check (-before +after):\n%s", diff)
	}

	// The session was due: a request through the middleware refreshes it.
	p.reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || p.count("UpdateItem") == 0 {
		t.Errorf("request after Check: status %d, %d UpdateItems; want 200 and a refresh", w.Code, p.count("UpdateItem"))
	}
}
