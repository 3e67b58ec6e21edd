package ddbsession_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
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
	{"HideUserKey", func(c *ddbsession.Config[User]) { c.Cookie.HideUserKey = true }, map[string]int{"GetItem": 2}},
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
	var p *ddbtest.Probe
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
	p.Reset()
	w := e.get(h, cookie)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, body %q; want 200", w.Code, w.Body)
	}
	// The hot path: strongly consistent reads of session and user, no writes.
	if diff := cmp.Diff(calls, p.Calls()); diff != "" {
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
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p), path.mutate)
			cookie := e.login(e.putUser("alice"))
			var reads []bool
			p.Before = func(_ context.Context, op string, in any) {
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	cookie := withUser(e.login(alice), alice).Value // v0.2.0's form, with the user key in the plain
	valid, user, _ := strings.Cut(cookie, ".")      // the token, and the user key that follows it
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
			p.Reset()
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Cookie", cookieName+"="+value)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", w.Code)
			}
			if n := p.Total(); n != 0 {
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
		{"created before the user's RevokeAll", func(e *env, alice ddbsession.UserKey, c *http.Cookie) *http.Cookie {
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
			cleared := sessionCookie(t, w.Result(), cookieName)
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
	var p *ddbtest.Probe
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
		{"unknown token", &http.Cookie{Name: cookieName, Value: strings.Repeat("B", 26)}, "anonymous\n", true},
		{"malformed", &http.Cookie{Name: cookieName, Value: "nope"}, "anonymous\n", true},
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
			c := sessionCookie(t, w.Result(), cookieName)
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
	s, u, err := e.m.Authenticate(context.Background(), cookie.Value)
	if err != nil || u.Name != "alice" || s.User.PK != "USER#alice" {
		t.Fatalf("Authenticate(valid) = %+v, %+v, %v", s, u, err)
	}
	for _, token := range []string{"", "x", strings.Repeat("C", 26)} {
		if _, _, err := e.m.Authenticate(context.Background(), token); err != ddbsession.ErrNoSession {
			t.Errorf("Authenticate(%q) error = %v, want ErrNoSession", token, err)
		}
	}
}

// Several cookies may share the session cookie's name. The middleware
// ignores malformed ones and decides by the first well-formed token alone:
// a valid session behind an unknown token is not looked up.
func TestRequireSessionWithSeveralCookies(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	valid := e.login(e.putUser("alice"))
	malformed := &http.Cookie{Name: cookieName, Value: "nope"}
	unknown := &http.Cookie{Name: cookieName, Value: strings.Repeat("A", 26)}
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
			p.Reset()
			w := e.get(h, tc.cookies...)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
			if tc.want == http.StatusOK && w.Body.String() != "user:alice" {
				t.Errorf("body %q, want user:alice", w.Body)
			}
			if reads := p.Count("GetItem") + p.Count("BatchGetItem"); reads != tc.reads || p.Total() != reads {
				t.Errorf("%d DynamoDB calls, %d of them reads; want %d reads only", p.Total(), reads, tc.reads)
			}
			c := sessionCookie(t, w.Result(), cookieName)
			if cleared := c != nil && c.MaxAge < 0; cleared != (tc.want != http.StatusOK) {
				t.Errorf("cookie cleared = %v, want %v", cleared, tc.want != http.StatusOK)
			}
		})
	}
}

// Authenticate reads a session that is due for refresh and leaves it as it was:
// no write of any kind, the stored expiry unchanged.
func TestCheckNeverWrites(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	cookie := e.login(alice)
	want := loggedIn(e.sessionFor(cookie).ID, alice, start, time.Hour)
	before := itemsText(e.scanAll())

	e.clock.Advance(30 * time.Minute)
	p.Reset()
	s, u, err := e.m.Authenticate(context.Background(), cookie.Value)
	if err != nil || u.Name != "alice" {
		t.Fatalf("Authenticate of a live session = %+v, %v", u, err)
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("session from Authenticate (-want +got):\n%s", diff)
	}
	for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem"} {
		if n := p.Count(op); n != 0 {
			t.Errorf("Authenticate made %d %s calls, want none", n, op)
		}
	}
	if got := itemExpiry(t, e.itemOf(kindSession, s.ID)); !got.Equal(want.ExpiresAt) {
		t.Errorf("stored expiresAt after Authenticate = %v, want %v unchanged", got, want.ExpiresAt)
	}
	if diff := cmp.Diff(before, itemsText(e.scanAll())); diff != "" {
		t.Errorf("table after Authenticate (-before +after):\n%s", diff)
	}

	// The session was due: a request through the middleware refreshes it.
	p.Reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || p.Count("UpdateItem") == 0 {
		t.Errorf("request after Authenticate: status %d, %d UpdateItems; want 200 and a refresh", w.Code, p.Count("UpdateItem"))
	}
}

// A valid token can never be paired with someone else's user: a cookie
// that carries alice's token with bob's key is refused, though both items
// exist, and it costs the one read.
func TestCookieUserMustBeTheSessions(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice, bob := e.putUser("alice"), e.putUser("bob")
	cookie := e.login(alice)
	e.login(bob)

	p.Reset()
	w := e.get(e.m.RequireSession(whoami(e.m)), withUser(cookie, bob))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("alice's token with bob's key: status %d %q, want 401", w.Code, w.Body)
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if c := sessionCookie(t, w.Result(), cookieName); c == nil || c.MaxAge >= 0 {
		t.Errorf("cookie not cleared: %v", c)
	}
	// Through Authenticate, and through the two-read path (a custom loader), too.
	if _, _, err := e.m.Authenticate(context.Background(), withUser(cookie, bob).Value); err != ddbsession.ErrNoSession {
		t.Errorf("Authenticate of alice's token with bob's key = %v, want ErrNoSession", err)
	}
	cfg := e.cfg
	cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, int64, error) {
		return User{Name: "loaded"}, 0, nil
	}
	custom, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := e.get(custom.RequireSession(whoami(custom)), withUser(cookie, bob)); w.Code != http.StatusUnauthorized {
		t.Errorf("with a custom loader: status %d, want 401", w.Code)
	}
	// And the cookie as issued still works.
	if got := e.status(cookie); got != http.StatusOK {
		t.Errorf("alice's own cookie: %d", got)
	}
}

// A well-formed but unknown credential costs one call at most, with a user
// key or without; a user item alone grants nothing.
func TestUnknownCredentialCostsOneCall(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	unknown := &http.Cookie{Name: cookieName, Value: strings.Repeat("A", 26)}
	for _, c := range []*http.Cookie{unknown, withUser(unknown, alice), withUser(unknown, ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"})} {
		p.Reset()
		if got := e.status(c); got != http.StatusUnauthorized {
			t.Errorf("%q: status %d, want 401", c.Value, got)
		}
		if p.Total() != 1 {
			t.Errorf("%q: %d calls %v, want 1", c.Value, p.Total(), p.Calls())
		}
	}
}

// A session whose user item is gone is refused on the one-round-trip path.
func TestOneRoundTripUserGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	e.deleteItem(userItemKey(alice))
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", got)
	}
}

// Two Managers in one app (users and admins, say) must not read each other's
// signed-in user from a request context.
func TestManagersDoNotShareContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	adminCfg := e.cfg
	adminCfg.Cookie.Name = "admin"
	admins, err := ddbsession.New(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	cookie := e.login(e.putUser("mallory"))
	var asUser, asAdmin, adminSession bool
	e.get(e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, asUser = e.m.User(r.Context())
		_, asAdmin = admins.User(r.Context())
		_, adminSession = admins.Session(r.Context())
	})), cookie)
	if !asUser {
		t.Fatal("the Manager that checked the session does not see its user")
	}
	if asAdmin || adminSession {
		t.Errorf("another Manager reports the user (%v) or session (%v) as its own", asAdmin, adminSession)
	}
}

func TestClientHangUpIsNotAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	r.AddCookie(cookie)
	w := httptest.NewRecorder()
	called := false
	e.m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).ServeHTTP(w, r)
	if called || w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, handler called %v; want 503, not called", w.Code, called)
	}
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("a client hang-up was logged as an error:\n%s", e.logs)
	}
}

func TestStoreFailureFailsClosed(t *testing.T) {
	t.Parallel()
	boom := errors.New("InternalServerError: boom")
	const twoReads, oneTrip = "HideUserKey", "one round trip"
	cases := []struct {
		name   string
		path   string // the read path it applies to; both if empty
		break_ func(p *ddbtest.Probe, cfg *ddbsession.Config[User])
	}{
		{"session read fails", twoReads, func(p *ddbtest.Probe, _ *ddbsession.Config[User]) { failOn(p, "GetItem", boom) }},
		{"user read fails", twoReads, func(p *ddbtest.Probe, _ *ddbsession.Config[User]) { failNth(p, "GetItem", 2, boom) }},
		{"batch read fails", oneTrip, func(p *ddbtest.Probe, _ *ddbsession.Config[User]) { failOn(p, "BatchGetItem", boom) }},
		{"keys left unprocessed past StoreTimeout", oneTrip, func(p *ddbtest.Probe, cfg *ddbsession.Config[User]) {
			cfg.Limits.StoreTimeout = 50 * time.Millisecond
			unprocessedKeys(p, false)
		}},
		{"store hangs past StoreTimeout", "", func(p *ddbtest.Probe, cfg *ddbsession.Config[User]) {
			cfg.Limits.StoreTimeout = 50 * time.Millisecond
			p.Fail = func(ctx context.Context, op string, _ any) error {
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
		{"custom loader fails", oneTrip, func(_ *ddbtest.Probe, cfg *ddbsession.Config[User]) {
			cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, int64, error) {
				return User{}, 0, boom
			}
		}},
		{"custom loader panics", oneTrip, func(_ *ddbtest.Probe, cfg *ddbsession.Config[User]) {
			cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, int64, error) {
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

func testStoreFailure(t *testing.T, path func(*ddbsession.Config[User]), break_ func(*ddbtest.Probe, *ddbsession.Config[User]), mw string) {
	var p *ddbtest.Probe
	var cfg *ddbsession.Config[User]
	e := newEnv(t, path, func(c *ddbsession.Config[User]) { withProbe(&p)(c); cfg = c })
	cookie := e.login(e.putUser("alice"))
	broken := *cfg
	break_(p, &broken)
	fail, answer := p.Fail, p.Answer
	p.Fail, p.Answer = nil, nil
	m := primed(t, broken) // read the global generation before the store breaks
	p.Fail, p.Answer = fail, answer
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
	if c := sessionCookie(t, w.Result(), cookieName); c != nil {
		t.Errorf("a store failure cleared a possibly valid session's cookie: %v", c)
	}
	token := cookie.Value[:26]
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

func TestStoreFailureCustomResponse(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.StoreUnavailable = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		})
	})
	cookie := e.login(e.putUser("alice"))
	p.Fail = func(context.Context, string, any) error { return errors.New("down") }
	w := e.get(e.m.RequireSession(whoami(e.m)), cookie)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "5" {
		t.Errorf("got %d Retry-After %q, want the custom 503", w.Code, w.Header().Get("Retry-After"))
	}
}

// An app's handler unit test puts a session and user in the context
// without DynamoDB.
func TestNewContextForHandlerTests(t *testing.T) {
	t.Parallel()
	m, err := ddbsession.New(ddbsession.Config[User]{Client: ddbtest.NewProbe(nil), Table: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(m.NewContext(r.Context(), ddbsession.Session{ID: "s1"}, User{Name: "alice"}))
	w := httptest.NewRecorder()
	whoami(m).ServeHTTP(w, r)
	if w.Body.String() != "user:alice" {
		t.Errorf("handler saw %q, want user:alice", w.Body)
	}
	if s, ok := m.Session(r.Context()); !ok || s.ID != "s1" {
		t.Errorf("Session = %+v, %v", s, ok)
	}
}

// A response that a session let through is the user's own: no shared cache
// may keep it, for a cookie or a bearer token alike, since some caches
// ignore Vary (OWASP ASVS 5.0 14.3.2); a handler's own Cache-Control
// stands. Where bearer tokens are accepted, every response through the
// guard says that it varies by Authorization as well as by Cookie. An
// anonymous page of LoadSession stays cacheable.
func TestAuthenticatedResponsesAreNotCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withBearer)
	alice := e.putUser("alice")
	cookie, token := e.login(alice), e.bearerLogin(alice)
	plain := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	own := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, max-age=60")
	})
	send := func(h http.Handler, authorization string, cookies ...*http.Cookie) http.Header {
		t.Helper()
		r := httptest.NewRequest("GET", "https://example.test/", nil)
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Header()
	}
	for _, tc := range []struct {
		name      string
		header    http.Header
		wantCache string
	}{
		{"cookie", send(e.m.RequireSession(plain), "", cookie), "private, no-store"},
		{"bearer token", send(e.m.RequireSession(plain), "Bearer "+token.Token), "private, no-store"},
		{"LoadSession with a session", send(e.m.LoadSession(plain), "", cookie), "private, no-store"},
		{"the handler's own", send(e.m.RequireSession(own), "", cookie), "private, max-age=60"},
		{"LoadSession, anonymous", send(e.m.LoadSession(plain), ""), ""},
	} {
		if got := tc.header.Get("Cache-Control"); got != tc.wantCache {
			t.Errorf("%s: Cache-Control %q, want %q", tc.name, got, tc.wantCache)
		}
		if got := tc.header.Values("Vary"); !cmp.Equal(got, []string{"Cookie", "Authorization"}) {
			t.Errorf("%s: Vary %q, want [Cookie Authorization]", tc.name, got)
		}
	}
	cookiesOnly, err := ddbsession.New(func() ddbsession.Config[User] { c := e.cfg; c.BearerTokens = false; return c }())
	if err != nil {
		t.Fatal(err)
	}
	if got := send(cookiesOnly.RequireSession(plain), "", cookie).Values("Vary"); !cmp.Equal(got, []string{"Cookie"}) {
		t.Errorf("without BearerTokens: Vary %q, want [Cookie]", got)
	}
}

// RequireAuthentication lets a session through while its user's last
// authentication is recent and strong enough, reading nothing more than
// RequireSession does; past that, a browser goes to re-authenticate and
// back, an API client gets RFC 9470's challenge, and the session lives on.
// Login on the same browser re-authenticates: a new session with a fresh
// time, the old token dead, the user's other sessions untouched.
func TestRequireAuthentication(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	log := &eventLog{}
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) {
		c.StepUp, c.BearerTokens, c.OnEvent = ddbsession.Redirect("/reauth"), true, log.record
	})
	alice := e.putUser("alice")
	login := func(carried *http.Cookie, methods ...string) *http.Cookie {
		t.Helper()
		w, r := newRecorder(), newRequest()
		if carried != nil {
			r.AddCookie(carried)
		}
		if err := e.m.Login(w, r, alice, nil, methods...); err != nil {
			t.Fatal(err)
		}
		return sessionCookie(t, w.Result(), cookieName)
	}
	browser := login(nil, "password")
	phone := login(nil, "password")
	recent := e.m.RequireAuthentication(10*time.Minute, "password")
	guarded := e.m.RequireSession(recent(whoami(e.m)))
	serve := func(r *http.Request, c *http.Cookie) *httptest.ResponseRecorder {
		t.Helper()
		if c != nil {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		guarded.ServeHTTP(w, r)
		e.settle()
		return w
	}

	p.Reset()
	if w := serve(httptest.NewRequest("GET", "https://example.test/account", nil), browser); w.Code != http.StatusOK {
		t.Fatalf("a fresh session: %d %q", w.Code, w.Body)
	}
	if calls := p.Total(); calls != 1 {
		t.Errorf("a guarded request made %d DynamoDB calls (%v), want RequireSession's one", calls, p.Calls())
	}
	if w := serve(httptest.NewRequest("GET", "/", nil), browser); w.Code != http.StatusOK {
		t.Fatalf("a fresh session again: %d", w.Code)
	}

	e.clock.Advance(11 * time.Minute)
	log.take()
	for _, tc := range []struct {
		name, method, target, referer, want string
	}{
		{"GET", "GET", "https://example.test/account?tab=2", "", "/reauth?next=%2Faccount%3Ftab%3D2"},
		{"form POST", "POST", "https://example.test/logout-everywhere", "https://example.test/account", "/reauth?next=%2Faccount"},
		{"POST from another origin", "POST", "https://example.test/logout-everywhere", "https://evil.example/account", "/reauth"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.referer != "" {
			r.Header.Set("Referer", tc.referer)
		}
		w := serve(r, browser)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tc.want {
			t.Errorf("%s after 11 minutes: %d Location %q, want 303 %q", tc.name, w.Code, w.Header().Get("Location"), tc.want)
		}
		if c := sessionCookie(t, w.Result(), cookieName); c != nil && c.MaxAge < 0 {
			t.Errorf("%s: the guard cleared the session cookie: %v", tc.name, c)
		}
	}
	stepUps := slices.DeleteFunc(log.take(), func(l string) bool { return !strings.HasPrefix(l, "step-up") })
	if !slices.Equal(stepUps, []string{"step-up #1", "step-up #1", "step-up #1"}) {
		t.Errorf("step-up events = %q, want one for each", stepUps)
	}
	if e.status(browser) != http.StatusOK {
		t.Error("the guard ended the session")
	}

	// An API client: RFC 9470's challenge, with max_age in seconds.
	token, _, err := e.m.LoginBearer(newRequest(), alice, nil, "password")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(11 * time.Minute)
	r := httptest.NewRequest("DELETE", "https://example.test/api/sessions/x", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := serve(r, nil)
	wantChallenge := `Bearer error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age=600, acr_values="password"`
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != wantChallenge {
		t.Errorf("bearer past 10 minutes: %d WWW-Authenticate %q, want 401 %q", w.Code, w.Header().Get("WWW-Authenticate"), wantChallenge)
	}
	// A method the session lacks: the challenge names it in acr_values.
	needsOTP := e.m.RequireSession(e.m.RequireAuthentication(time.Hour, "otp")(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	r = httptest.NewRequest("DELETE", "https://example.test/api/sessions/x", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w = httptest.NewRecorder()
	needsOTP.ServeHTTP(w, r)
	wantChallenge = `Bearer error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age=3600, acr_values="otp"`
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != wantChallenge {
		t.Errorf("bearer without otp: %d WWW-Authenticate %q, want 401 %q", w.Code, w.Header().Get("WWW-Authenticate"), wantChallenge)
	}
	// LoginBearer with the token re-authenticates it: a new token, the old
	// one dead.
	r = newRequest()
	r.Header.Set("Authorization", "Bearer "+token)
	fresh, _, err := e.m.LoginBearer(r, alice, nil, "password")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.Authenticate(context.Background(), token); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("the bearer token after its re-authentication: %v, want ErrNoSession", err)
	}
	r = httptest.NewRequest("DELETE", "https://example.test/api/sessions/x", nil)
	r.Header.Set("Authorization", "Bearer "+fresh)
	if w := serve(r, nil); w.Code != http.StatusOK {
		t.Errorf("the re-authenticated bearer token: %d", w.Code)
	}

	// The browser re-authenticates: Login on the signed-in request.
	again := login(browser, "password")
	if w := serve(httptest.NewRequest("POST", "/logout-everywhere", nil), again); w.Code != http.StatusOK {
		t.Errorf("after re-authenticating: %d", w.Code)
	}
	if e.status(browser) != http.StatusUnauthorized {
		t.Error("the session before the re-authentication still works")
	}
	if e.status(phone) != http.StatusOK {
		t.Error("the re-authentication ended the user's other session")
	}
	if w := serve(httptest.NewRequest("GET", "/", nil), phone); w.Code != http.StatusSeeOther {
		t.Errorf("the other session, not re-authenticated: %d, want 303", w.Code)
	}

	// A method the session lacks.
	withCode := e.m.RequireSession(e.m.RequireAuthentication(time.Hour, "password", "otp")(whoami(e.m)))
	w = httptest.NewRecorder()
	r = httptest.NewRequest("GET", "/", nil)
	r.AddCookie(again)
	withCode.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther {
		t.Errorf("a password-only session where a code is needed: %d, want 303", w.Code)
	}
	// No session at all: Unauthorized, as RequireSession without it.
	w = httptest.NewRecorder()
	recent(whoami(e.m)).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("the guard without a session: %d, want 401", w.Code)
	}
}

// Without ReauthPath the step-up answer is a plain 401, or the app's own
// StepUp handler; a nonsensical window is a programming error.
func TestRequireAuthenticationAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.login(e.putUser("alice"))
	e.clock.Advance(2 * time.Minute)
	h := e.m.RequireSession(e.m.RequireAuthentication(time.Minute)(whoami(e.m)))
	if w := e.get(h, c); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("default answer: %d WWW-Authenticate %q, want a plain 401", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	custom := newEnv(t, func(cfg *ddbsession.Config[User]) {
		cfg.StepUp = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "prove it", http.StatusForbidden) })
	})
	c = custom.login(custom.putUser("alice"))
	custom.clock.Advance(2 * time.Minute)
	if w := custom.get(custom.m.RequireSession(custom.m.RequireAuthentication(time.Minute)(whoami(custom.m))), c); w.Code != http.StatusForbidden {
		t.Errorf("Config.StepUp: %d, want its 403", w.Code)
	}
	defer func() {
		if recover() == nil {
			t.Error("RequireAuthentication(0) did not panic")
		}
	}()
	e.m.RequireAuthentication(0)
}

// A handler wrapped in RequireSession twice (a route inside a group that
// guards it already) reads its session once, and the first such request
// logs a warning that says so; the user is in the context all the same.
func TestRequireSessionTwice(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	c := e.login(e.putUser("alice"))
	h := e.m.RequireSession(e.m.RequireSession(whoami(e.m)))
	for range 2 {
		p.Reset()
		w := e.get(h, c)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "alice") {
			t.Errorf("a request through RequireSession twice: status %d, body %q", w.Code, w.Body)
		}
		if p.Total() != 1 {
			t.Errorf("a request through RequireSession twice made %v calls, want one BatchGetItem", p.Calls())
		}
	}
	if n := strings.Count(e.logs.String(), "wrapped in RequireSession or LoadSession twice"); n != 1 {
		t.Errorf("%d warnings of the double wrap, want 1:\n%s", n, e.logs)
	}
}
