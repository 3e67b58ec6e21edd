package ddbsession_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

// Signing out and closing the tab at once must still sign out.
func TestLogoutSurvivesClientHangUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/logout", nil)
	r.AddCookie(cookie)
	if err := e.m.Logout(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.Check(context.Background(), cookie.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("token after Logout from a gone client: %v, want ErrNoSession", err)
	}
}

// Login's undo of a half-written session is bounded by StoreTimeout too.
func TestLoginUndoIsBounded(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.StoreTimeout = 100 * time.Millisecond
	})
	alice := e.putUser("alice")
	p.fail = func(ctx context.Context, op string) error {
		switch {
		case op == "PutItem" && p.count("PutItem") == 2:
			return errors.New("session write failed")
		case op == "DeleteItem":
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
				return errors.New("not bounded")
			}
		}
		return nil
	}
	began := time.Now()
	if err := e.m.Login(httptest.NewRecorder(), newRequest(), alice, nil); err == nil {
		t.Fatal("Login succeeded though its session write failed")
	}
	if took := time.Since(began); took > 4*time.Second { // far above 100ms, below the hang's 5s
		t.Errorf("Login took %v with StoreTimeout 100ms", took)
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
	if err := e.m.Login(w, newRequest(cookie), alice, nil); err == nil {
		t.Error("Login succeeded with the store down")
	} else if strings.Contains(err.Error(), cookie.Value) {
		t.Errorf("Login error reveals the token: %v", err)
	}
	if c := sessionCookie(t, w.Result(), cookieName); c != nil && c.Value != "" {
		t.Errorf("failed Login set a session cookie: %v", c)
	}

	failOn(p, "DeleteItem", errors.New("down"))
	w = newRecorder()
	if err := e.m.Logout(w, newRequest(cookie)); err == nil {
		t.Error("Logout reported success with the store down")
	}
	if c := sessionCookie(t, w.Result(), cookieName); c == nil || c.MaxAge >= 0 {
		t.Errorf("failed Logout did not clear the cookie: %v", c)
	}
}

// "Keep me signed in": a login the app does not keep gets a cookie without
// Max-Age, which ends with the browser; a refresh keeps it so; a kept one
// gets Max-Age.
func TestKeepSignedIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.KeepSignedIn = func(r *http.Request) bool { return r.URL.Query().Get("remember") == "on" }
	})
	alice := e.putUser("alice")
	login := func(target string) *http.Cookie {
		w := httptest.NewRecorder()
		if err := e.m.Login(w, httptest.NewRequest("POST", target, nil), alice, nil); err != nil {
			t.Fatal(err)
		}
		return sessionCookie(t, w.Result(), cookieName)
	}
	browser := login("https://example.test/login")
	if browser.MaxAge != 0 || !browser.Expires.IsZero() || strings.Contains(browser.Raw, "Max-Age") {
		t.Errorf("a login not kept: cookie %q, want no Max-Age and no Expires", browser.Raw)
	}
	kept := login("https://example.test/login?remember=on")
	if kept.MaxAge != 3600 {
		t.Errorf("a kept login: cookie %q, want Max-Age=3600", kept.Raw)
	}
	e.clock.Advance(30 * time.Minute)
	for _, tc := range []struct {
		name   string
		c      *http.Cookie
		maxAge int
	}{{"not kept", browser, 0}, {"kept", kept, 3600}} {
		w := e.get(e.m.RequireSession(whoami(e.m)), tc.c)
		c := sessionCookie(t, w.Result(), cookieName)
		if w.Code != http.StatusOK || c == nil || c.MaxAge != tc.maxAge {
			t.Errorf("%s: refresh status %d, cookie %v; want Max-Age %d", tc.name, w.Code, c, tc.maxAge)
		}
	}
	// Without KeepSignedIn every cookie is persistent, as before.
	plain := newEnv(t)
	if c := plain.login(plain.putUser("alice")); c.MaxAge != 3600 {
		t.Errorf("default: cookie Max-Age %d, want 3600", c.MaxAge)
	}
}

func TestLoginRotatesSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	old := e.login(alice)
	if e.status(old) != http.StatusOK {
		t.Fatal("first session does not work")
	}
	fresh := e.login(alice, old)
	if fresh.Value == old.Value {
		t.Fatal("Login kept the old token")
	}
	if got := e.status(old); got != http.StatusUnauthorized {
		t.Errorf("old token after Login: status %d, want 401", got)
	}
	if got := e.status(fresh); got != http.StatusOK {
		t.Errorf("new token: status %d, want 200", got)
	}
}

// An attacker who plants a token of their own in the victim's browser before
// the victim signs in must not share the victim's session afterwards.
func TestLoginDefeatsSessionFixation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	planted := e.login(e.putUser("mallory"))
	victim := e.login(e.putUser("alice"), planted)
	if got := e.status(planted); got != http.StatusUnauthorized {
		t.Errorf("planted token after the victim's Login: status %d, want 401", got)
	}
	if w := e.get(e.m.RequireSession(whoami(e.m)), victim); w.Body.String() != "user:alice" {
		t.Errorf("victim's session serves %q", w.Body)
	}
}

func TestLogoutKillsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	other := e.login(alice)
	r := httptest.NewRequest("POST", "/logout", nil)
	r.AddCookie(cookie)
	if err := e.m.Logout(httptest.NewRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("token after Logout: status %d, want 401", got)
	}
	if got := e.status(other); got != http.StatusOK {
		t.Errorf("the user's other session after Logout: status %d, want 200", got)
	}
	// Only the user item and the other session's two items remain.
	if n := len(e.scanAll()); n != 3 {
		t.Errorf("%d items left after Logout, want 3 (user, session, index)", n)
	}
}

// The session item is written with attribute_not_exists, so that a write
// can never replace a live session. Replaying Login's own PutItem against
// the engine must fail.
func TestLoginNeverOverwritesASession(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	var puts []*dynamodb.PutItemInput
	p.before = func(_ context.Context, op string, in any) {
		if op == "PutItem" {
			puts = append(puts, in.(*dynamodb.PutItemInput))
		}
	}
	e.login(e.putUser("alice"))
	if len(puts) == 0 {
		t.Fatal("Login made no PutItem")
	}
	for _, in := range puts {
		_, err := e.client.PutItem(context.Background(), in)
		var cond *types.ConditionalCheckFailedException
		if !errors.As(err, &cond) {
			t.Errorf("replayed PutItem of %v: error %v, want ConditionalCheckFailedException", in.Item["pk"], err)
		}
	}
}

func TestLoginRejectsKeyThatDoesNotFitTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, key := range []ddbsession.UserKey{{}, {PK: "USER#a"}, {SK: "PROFILE"}} {
		if err := e.m.Login(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), key, nil); err == nil {
			t.Errorf("Login(%+v) succeeded in a table with a sort key", key)
		}
	}
}

// A request stuffed with session cookies must not multiply Login's writes.
func TestLoginBoundsCarriedCookies(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	var carried []*http.Cookie
	for range 50 {
		carried = append(carried, &http.Cookie{Name: cookieName, Value: rand.Text()})
	}
	p.reset()
	e.login(alice, carried...)
	if n := p.count("DeleteItem"); n > 4 {
		t.Errorf("Login with 50 carried cookies made %d DeleteItems, want at most 4", n)
	}
}

// Login writes the index item first, then the session item. When the
// second write fails, it deletes the index item again, so that a failed
// Login leaves neither item behind.
func TestLoginUndoesIndexItemWhenSessionWriteFails(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	failNth(p, "PutItem", 2, errors.New("session write failed"))
	indexItemsAtUndo := -1
	p.before = func(_ context.Context, op string, _ any) {
		if op == "DeleteItem" {
			indexItemsAtUndo = len(e.itemsOf(kindIndex, ""))
		}
	}
	p.reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); err == nil {
		t.Fatal("Login succeeded though its session write failed")
	}
	if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("failed Login sent Set-Cookie %q", c)
	}
	// The index item did reach the table, and the undo removed it.
	if indexItemsAtUndo != 1 {
		t.Errorf("%d index items when the undo began, want 1 (the engine took the first write)", indexItemsAtUndo)
	}
	// The login reads the user and the global revocation item in one
	// BatchGetItem.
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "PutItem": 2, "DeleteItem": 1}, p.calls); diff != "" {
		t.Errorf("calls of the failed Login (-want +got):\n%s", diff)
	}
	if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
		t.Errorf("index items left after the failed Login: %v", itemsText(items))
	}
	if items := e.itemsOf(kindSession, ""); len(items) != 0 {
		t.Errorf("session items left after the failed Login: %v", itemsText(items))
	}
	if n := len(e.scanAll()); n != 1 {
		t.Errorf("%d items after the failed Login, want 1 (the user)", n)
	}
}

// Login and Logout end every well-formed session token the request carries,
// up to four, whoever's sessions they are; malformed cookies among them do
// not use up that bound. A session the request does not carry lives on.
func TestLoginAndLogoutEndEveryCarriedSession(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"Login", "Logout"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			alice := e.putUser("alice")
			bob := e.putUser("bob")
			malformed := &http.Cookie{Name: cookieName, Value: "nope"}
			var carried []*http.Cookie
			for _, user := range []ddbsession.UserKey{alice, bob, alice, bob} {
				carried = append(carried, e.login(user))
			}
			kept := e.login(alice)
			cookies := []*http.Cookie{malformed, carried[0], carried[1], malformed, carried[2], malformed, carried[3]}

			w := newRecorder()
			var err error
			if end == "Login" {
				err = e.m.Login(w, newRequest(cookies...), alice, nil)
			} else {
				err = e.m.Logout(w, newRequest(cookies...))
			}
			if err != nil {
				t.Fatalf("%s: %v", end, err)
			}
			for i, c := range carried {
				if got := e.status(c); got != http.StatusUnauthorized {
					t.Errorf("carried session %d after %s: status %d, want 401", i+1, end, got)
				}
			}
			if got := e.status(kept); got != http.StatusOK {
				t.Errorf("session not carried: status %d, want 200", got)
			}
			want := 2 + 2 // the users, and the kept session's two items
			if end == "Login" {
				want += 2
				c := sessionCookie(t, w.Result(), cookieName)
				if c == nil || c.Value == "" || e.status(c) != http.StatusOK {
					t.Errorf("Login's new session cookie %v does not work", c)
				}
			}
			if n := len(e.scanAll()); n != want {
				t.Errorf("%d items after %s, want %d: %v", n, end, want, itemsText(e.scanAll()))
			}
		})
	}
}

// Login deletes the sessions the request carries before it creates one. If
// a delete fails, it stops there: no new session, no new cookie, and the
// old session, which it could not end, still works.
func TestLoginStopsWhenEndingCarriedSessionFails(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	old := e.login(alice)
	oldID := e.sessionFor(old).ID
	before := itemsText(e.scanAll())

	failOn(p, "DeleteItem", errors.New("down"))
	p.reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(old), alice, nil); err == nil {
		t.Fatal("Login succeeded though deleting the carried session failed")
	}
	if c := sessionCookie(t, w.Result(), cookieName); c != nil && c.Value != "" {
		t.Errorf("failed Login sent a new session cookie: %v", c)
	}
	if n := p.count("DeleteItem"); n != 1 {
		t.Errorf("%d DeleteItems, want 1 (the carried session's)", n)
	}
	if n := p.count("PutItem"); n != 0 {
		t.Errorf("failed Login made %d PutItems, want none", n)
	}
	if diff := cmp.Diff(before, itemsText(e.scanAll())); diff != "" {
		t.Errorf("table after the failed Login (-before +after):\n%s", diff)
	}

	p.fail = nil
	if got := e.status(old); got != http.StatusOK {
		t.Errorf("old session after the failed Login: status %d, want 200", got)
	}
	if diff := cmp.Diff([]string{oldID}, listIDs(e.mustList(alice))); diff != "" {
		t.Errorf("alice's sessions after the failed Login (-want +got):\n%s", diff)
	}
}

// Member is a user type that carries its credential, as Login's verify
// needs; json:"-" keeps the hash out of any JSON the app writes.
type Member struct {
	PK       string `dynamodbav:"pk"`
	SK       string `dynamodbav:"sk"`
	Name     string `dynamodbav:"name"`
	Password string `dynamodbav:"password" json:"-"` // a stand-in for a hash
}

var errWrongPassword = errors.New("wrong password")

// checkPassword is the app's verify function for Login with verify.
func checkPassword(password string) func(Member) error {
	return func(a Member) error {
		if a.Password != password {
			return errWrongPassword
		}
		return nil
	}
}

// accounts is a Manager of Accounts on e's table, with e's clock and logs.
func (e *env) members(mutate ...func(*ddbsession.Config[Member])) *ddbsession.Manager[Member] {
	e.t.Helper()
	cfg := ddbsession.Config[Member]{
		Client: e.cfg.Client, Table: e.table, Now: e.cfg.Now, Logger: e.cfg.Logger,
		IdleTimeout: e.cfg.IdleTimeout, RefreshInterval: e.cfg.RefreshInterval, StoreTimeout: e.cfg.StoreTimeout,
	}
	for _, f := range mutate {
		f(&cfg)
	}
	m, err := ddbsession.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// loginWith runs Login with verify on a fresh request and returns the cookie, or nil
// with the error.
func loginWith(m *ddbsession.Manager[Member], key ddbsession.UserKey, password string) (*http.Cookie, error) {
	w := newRecorder()
	if err := m.Login(w, newRequest(), key, checkPassword(password)); err != nil {
		return nil, err
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName {
			return c, nil
		}
	}
	return nil, errors.New("no cookie")
}

// statusOf is a request through m's RequireSession with c.
func statusOf(m *ddbsession.Manager[Member], c *http.Cookie) int {
	w := newRecorder()
	m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, newRequest(c))
	return w.Code
}

// changePassword is a credential change in the documented order: write the
// new credential, then cut off.
func (e *env) changePassword(m *ddbsession.Manager[Member], key ddbsession.UserKey, password string) {
	e.t.Helper()
	_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: userItemKey(key),
		UpdateExpression:          ptr("SET password = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": attrS(password)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := m.RevokeAll(context.Background(), key); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createMember(m *ddbsession.Manager[Member], name, password string) ddbsession.UserKey {
	e.t.Helper()
	key := ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
	if err := m.CreateUser(context.Background(), Member{PK: key.PK, SK: key.SK, Name: name, Password: password}); err != nil {
		e.t.Fatal(err)
	}
	return key
}

// A deleted user's sessions do not come back when the same key is created
// again: CreateUser stamps the new item with a cutoff of its creation.
func TestCreateUserEndsSessionsOfAnEarlierUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	m := e.members()
	bob := e.createMember(m, "bob", "pw")
	old, err := loginWith(m, bob, "pw")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	e.deleteItem(userItemKey(bob))
	if got := statusOf(m, old); got != http.StatusUnauthorized {
		t.Errorf("session of a deleted user: %d, want 401", got)
	}
	if err := m.CreateUser(context.Background(), Member{PK: bob.PK, SK: bob.SK, Name: "another bob", Password: "pw2"}); err != nil {
		t.Fatal(err)
	}
	if got := statusOf(m, old); got != http.StatusUnauthorized {
		t.Errorf("the earlier user's session on the re-created account: %d, want 401", got)
	}
	// The new account signs in at once (the same millisecond as its creation).
	c, err := loginWith(m, bob, "pw2")
	if err != nil {
		t.Fatal(err)
	}
	if got := statusOf(m, c); got != http.StatusOK {
		t.Errorf("a login right after CreateUser: %d, want 200", got)
	}
	if err := m.CreateUser(context.Background(), Member{PK: bob.PK, SK: bob.SK}); !errors.Is(err, ddbsession.ErrUserExists) {
		t.Errorf("CreateUser of an existing key = %v, want ErrUserExists", err)
	}
	if err := m.CreateUser(context.Background(), map[string]string{"name": "keyless"}); err == nil {
		t.Error("CreateUser of an item without the table's key succeeded")
	}
}

// Login and Login with verify refuse a user without an item, and write nothing.
func TestLoginWithoutUserItem(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	ghost := ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}
	p.reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), ghost, nil); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login = %v, want ErrUserNotFound", err)
	}
	if _, err := loginWith(m, ghost, "x"); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login with verify = %v, want ErrUserNotFound", err)
	}
	if len(w.Header().Values("Set-Cookie")) != 0 || p.count("PutItem") != 0 || len(e.scanAll()) != 0 {
		t.Errorf("a refused Login wrote: cookies %q, %d PutItems, items %v", w.Header().Values("Set-Cookie"), p.count("PutItem"), itemsText(e.scanAll()))
	}
}

// A wrong password writes nothing and ends no carried session.
func TestLoginWithRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	alice := e.createMember(m, "alice", "pw")
	c, err := loginWith(m, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	p.reset()
	w := newRecorder()
	if err := m.Login(w, newRequest(c), alice, checkPassword("guess")); !errors.Is(err, errWrongPassword) {
		t.Errorf("Login with verify with a wrong password = %v, want errWrongPassword", err)
	}
	if p.count("PutItem")+p.count("DeleteItem")+p.count("UpdateItem") != 0 || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("a refused Login with verify wrote: calls %v, cookies %q", p.calls, w.Header().Values("Set-Cookie"))
	}
	if got := statusOf(m, c); got != http.StatusOK {
		t.Errorf("the carried session after a refused login: %d, want 200", got)
	}
}

// A stored User-Agent has no control or format characters, so that a
// right-to-left override cannot disguise a session in the device list.
func TestUserAgentIsCleaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	r := newRequest()
	r.Header.Set("User-Agent", "Mozilla/5.0 \u202eXNU\u202c Fire\u200bfox\x07")
	w := newRecorder()
	if err := e.m.Login(w, r, alice, nil); err != nil {
		t.Fatal(err)
	}
	list := e.mustList(alice)
	if len(list) != 1 || list[0].UserAgent != "Mozilla/5.0 XNU Firefox" {
		t.Errorf("stored User-Agent = %q, want %q", list[0].UserAgent, "Mozilla/5.0 XNU Firefox")
	}
}

// A Login that fails must leave nothing that List shows. Login writes the
// index item first; when that write is applied but its answer lost, Login
// fails, and the index item must not stay behind as a session on the
// user's "where you're signed in" page (until TTL, an idle timeout plus up
// to 48 hours later). When the second write (the session item) is lost,
// Login already undoes the index item; that case is here to keep it so.
func TestLoginWhoseWriteIsLostLeavesNoListedSession(t *testing.T) {
	t.Parallel()
	retried := &types.ConditionalCheckFailedException{Message: ptr("The conditional request failed")}
	for _, tc := range []struct {
		name   string
		put    int
		answer error
	}{
		{"index item write lost", 1, errLost},
		{"session item write lost", 2, errLost},
		// The SDK's retry of a lost answer meets its own write: a put
		// that must not overwrite fails its condition.
		{"index item write retried", 1, retried},
		{"session item write retried", 2, retried},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The put is applied, but its answer lost.
			var p *probe
			e := newEnv(t, withProbe(&p))
			answerApplied(p, "PutItem", tc.put, nil, tc.answer)
			alice := e.putUser("alice")
			if err := e.m.Login(httptest.NewRecorder(), newRequest(), alice, nil); err == nil {
				t.Fatal("Login succeeded though a write's answer was lost")
			}
			if list := e.mustList(alice); len(list) != 0 {
				t.Errorf("List after a failed Login = %+v, want none", list)
			}
			if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
				t.Errorf("index items after a failed Login: %v", itemsText(items))
			}
		})
	}
}

// With Config.ClearSiteData, Logout asks the browser to clear what it
// names, in the header's grammar; without it, Logout sends no such header,
// since the directives reach the whole registrable domain.
func TestLogoutClearSiteData(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		directives []string
		want       string
	}{
		{"off by default", nil, ""},
		{"cache, cookies, storage", []string{"cache", "cookies", "storage"}, `"cache", "cookies", "storage"`},
		{"everything", []string{"*"}, `"*"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *ddbsession.Config[User]) { c.ClearSiteData = tc.directives })
			c := e.login(e.putUser("alice"))
			w := newRecorder()
			if err := e.m.Logout(w, newRequest(c)); err != nil {
				t.Fatal(err)
			}
			if got := w.Header().Get("Clear-Site-Data"); got != tc.want {
				t.Errorf("Clear-Site-Data %q, want %q", got, tc.want)
			}
		})
	}
}
