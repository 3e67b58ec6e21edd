package ddbsession_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
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
	if _, _, err := e.m.Authenticate(context.Background(), cookie.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("token after Logout from a gone client: %v, want ErrNoSession", err)
	}
}

// Login's undo of a half-written session is bounded by StoreTimeout too.
func TestLoginUndoIsBounded(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.Limits.StoreTimeout = 100 * time.Millisecond
	})
	alice := e.putUser("alice")
	p.Fail = func(ctx context.Context, op string, _ any) error {
		switch {
		case op == "PutItem" && p.Count("PutItem") == 2:
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
	var p *ddbtest.Probe
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

	// The failed Login deleted the carried session: Logout gets a live one,
	// which it reads and then deletes.
	p.Fail = nil
	cookie = e.login(alice)
	for _, op := range []string{"GetItem", "DeleteItem"} {
		failOn(p, op, errors.New("down"))
		w = newRecorder()
		if err := e.m.Logout(w, newRequest(cookie)); err == nil {
			t.Errorf("Logout reported success with %s failing", op)
		}
		if c := sessionCookie(t, w.Result(), cookieName); c == nil || c.MaxAge >= 0 {
			t.Errorf("Logout with %s failing did not clear the cookie: %v", op, c)
		}
	}
}

// "Keep me signed in": a login the app does not keep gets a cookie without
// Max-Age, which ends with the browser; a refresh keeps it so; a kept one
// gets Max-Age.
func TestKeepSignedIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.Cookie.KeepSignedIn = func(r *http.Request) bool { return r.URL.Query().Get("remember") == "on" }
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	var puts []*dynamodb.PutItemInput
	p.Before = func(_ context.Context, op string, in any) {
		if op == "PutItem" {
			puts = append(puts, in.(*dynamodb.PutItemInput))
		}
	}
	e.login(e.putUser("alice"))
	if len(puts) == 0 {
		t.Fatal("Login made no PutItem")
	}
	for _, in := range puts {
		if attrText(in.Item["kind"]) == "S:session-history" {
			continue // an event, under a key of its own, which nothing else takes
		}
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	var carried []*http.Cookie
	for range 50 {
		carried = append(carried, &http.Cookie{Name: cookieName, Value: rand.Text()})
	}
	p.Reset()
	e.login(alice, carried...)
	if n := p.Count("DeleteItem"); n > 4 {
		t.Errorf("Login with 50 carried cookies made %d DeleteItems, want at most 4", n)
	}
}

// Login writes the index item first, then the session item. When the
// second write fails, it deletes the index item again, so that a failed
// Login leaves neither item behind.
func TestLoginUndoesIndexItemWhenSessionWriteFails(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	p.Fail = func(_ context.Context, op string, in any) error {
		if op == "PutItem" && attrText(in.(*dynamodb.PutItemInput).Item["kind"]) == "S:session" {
			return errors.New("session write failed")
		}
		return nil
	}
	indexItemsAtUndo := -1
	p.Before = func(_ context.Context, op string, _ any) {
		if op == "DeleteItem" {
			indexItemsAtUndo = len(e.itemsOf(kindIndex, ""))
		}
	}
	p.Reset()
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
	// The login reads the user alone: this instance's copy of the global
	// revocation generation is fresh. The undo puts a void over the
	// session's key, lest the failed write have landed or be on its way,
	// and deletes the index item. The sign-in's history event, written
	// first, stays: the history may show a sign-in that did not complete,
	// never hide one that did.
	if diff := cmp.Diff(map[string]int{"GetItem": 1, "PutItem": 4, "DeleteItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls of the failed Login (-want +got):\n%s", diff)
	}
	if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
		t.Errorf("index items left after the failed Login: %v", itemsText(items))
	}
	if items := e.itemsOf(kindSession, ""); len(items) != 0 {
		t.Errorf("session items left after the failed Login: %v", itemsText(items))
	}
	if n := len(e.scanAll()); n != 2 {
		t.Errorf("%d items after the failed Login, want 2 (the user, and the void that TTL removes)", n)
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	old := e.login(alice)
	oldID := e.sessionFor(old).ID
	before := itemsText(e.scanAll())

	failOn(p, "DeleteItem", errors.New("down"))
	p.Reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(old), alice, nil); err == nil {
		t.Fatal("Login succeeded though deleting the carried session failed")
	}
	if c := sessionCookie(t, w.Result(), cookieName); c != nil && c.Value != "" {
		t.Errorf("failed Login sent a new session cookie: %v", c)
	}
	if n := p.Count("DeleteItem"); n != 1 {
		t.Errorf("%d DeleteItems, want 1 (the carried session's)", n)
	}
	if n := p.Count("PutItem"); n != 0 {
		t.Errorf("failed Login made %d PutItems, want none", n)
	}
	if diff := cmp.Diff(before, itemsText(e.scanAll())); diff != "" {
		t.Errorf("table after the failed Login (-before +after):\n%s", diff)
	}

	p.Fail = nil
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
		Limits: e.cfg.Limits,
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
// again: CreateUser gives the new item a sessions version of its own.
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
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	ghost := ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}
	p.Reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), ghost, nil); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login = %v, want ErrUserNotFound", err)
	}
	if _, err := loginWith(m, ghost, "x"); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login with verify = %v, want ErrUserNotFound", err)
	}
	if len(w.Header().Values("Set-Cookie")) != 0 || p.Count("PutItem") != 0 || len(e.scanAll()) != 0 {
		t.Errorf("a refused Login wrote: cookies %q, %d PutItems, items %v", w.Header().Values("Set-Cookie"), p.Count("PutItem"), itemsText(e.scanAll()))
	}
}

// A wrong password writes nothing but its count in the history, and ends
// no carried session.
func TestLoginWithRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	alice := e.createMember(m, "alice", "pw")
	c, err := loginWith(m, alice, "pw")
	if err != nil {
		t.Fatal(err)
	}
	p.Reset()
	w := newRecorder()
	if err := m.Login(w, newRequest(c), alice, checkPassword("guess")); !errors.Is(err, errWrongPassword) {
		t.Errorf("Login with verify with a wrong password = %v, want errWrongPassword", err)
	}
	// The one write is the count of failed sign-ins in the user's history.
	if p.Count("PutItem")+p.Count("DeleteItem") != 0 || p.Count("UpdateItem") != 1 || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("a refused Login with verify wrote: calls %v, cookies %q", p.Calls(), w.Header().Values("Set-Cookie"))
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
			var p *ddbtest.Probe
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

// A Logout, or a Login's rotation, whose delete of the session item is
// applied but whose answer is lost gets, from the SDK's retry, an answer
// that names nothing: the item is gone already. The index item goes all
// the same, so List does not keep showing the ended session. It is named
// by a copy of the session: one that RequireSession read in the request,
// or else one read first.
func TestSessionDeleteWhoseAnswerIsLostLeavesNoListedSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		logout    bool
		guarded   bool  // behind RequireSession
		wantReads int32 // GetItems of the session in the flow
	}{
		{"Logout", true, false, 1},
		{"Logout behind RequireSession", true, true, 0},
		{"Login's rotation", false, false, 1},
		{"Login's rotation behind RequireSession", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *ddbtest.Probe
			e := newEnv(t, withProbe(&p))
			alice := e.putUser("alice")
			cookie := e.login(alice)
			old := e.sessionFor(cookie)
			var lost atomic.Int32
			p.Answer = func(ctx context.Context, op string, in any) (any, bool) {
				del, ok := in.(*dynamodb.DeleteItemInput)
				if !ok || !strings.HasPrefix(del.Key["pk"].(*types.AttributeValueMemberS).Value, "SESSION#") || !lost.CompareAndSwap(0, 1) {
					return nil, false
				}
				e.deleteItem(del.Key)                     // applied...
				return &dynamodb.DeleteItemOutput{}, true // ...and the retry's answer: nothing was there
			}
			var next *http.Cookie
			flow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var err error
				if tc.logout {
					err = e.m.Logout(w, r)
				} else if err = e.m.Login(w, r, alice, nil); err == nil {
					next = sessionCookie(t, w.(*httptest.ResponseRecorder).Result(), cookieName)
				}
				if err != nil {
					t.Error(err)
				}
			})
			h := http.Handler(flow)
			if tc.guarded {
				h = e.m.RequireSession(flow)
			}
			var reads atomic.Int32
			p.Before = func(_ context.Context, op string, in any) {
				if get, ok := in.(*dynamodb.GetItemInput); ok && strings.HasPrefix(attrText(get.Key["pk"]), "S:SESSION#") {
					reads.Add(1)
				}
			}
			h.ServeHTTP(httptest.NewRecorder(), newRequest(cookie))
			if reads := reads.Load(); reads != tc.wantReads {
				t.Errorf("%s made %d GetItems, want %d", tc.name, reads, tc.wantReads)
			}
			if lost.Load() != 1 {
				t.Fatal("no session delete was answered as lost")
			}
			var want []string
			if next != nil {
				want = []string{e.sessionFor(next).ID}
			}
			var got []string
			for _, s := range e.mustList(alice) {
				got = append(got, s.ID)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("List after %s ended session %s (-want +got):\n%s", tc.name, old.ID, diff)
			}
			if items := e.itemsOf(kindIndex, old.ID); len(items) != 0 {
				t.Errorf("the ended session's index item is left: %v", itemsText(items))
			}
		})
	}
}

// A session item of a later release's format, which this one cannot
// read, still goes when a Logout or a Login carries its token: during a
// rolling deploy or a rollback, "every session the request carries ends"
// holds on the old instances too.
func TestEndingSessionOfLaterFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.putUser("alice")
	for _, logout := range []bool{true, false} {
		hs := newHandSession(alice, storedNumber(t, e, userItemKey(alice), "sessionsVersion"))
		session, _ := hs.items()
		session["v"] = attrN(9)
		e.putItem(session)
		r := newRequest(&http.Cookie{Name: cookieName, Value: hs.token})
		var err error
		if logout {
			err = e.m.Logout(httptest.NewRecorder(), r)
		} else {
			err = e.m.Login(httptest.NewRecorder(), r, alice, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range e.scanAll() {
			if attrText(it["pk"]) == attrText(session["pk"]) {
				t.Errorf("%s: the session item of a later format is left: %v", map[bool]string{true: "Logout", false: "Login"}[logout], itemsText([]map[string]types.AttributeValue{it}))
			}
		}
	}
}

// With Config.Cookie.ClearSiteData, Logout asks the browser to clear what it
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
			e := newEnv(t, func(c *ddbsession.Config[User]) { c.Cookie.ClearSiteData = tc.directives })
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

// Login records how the user proved themselves and when, and every request
// reads it with the session, at no extra call; List shows it too. Methods
// beyond their bounds are refused before any call.
func TestLoginRecordsAuthentication(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	e.clock.Advance(time.Minute)
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil, "password", "otp"); err != nil {
		t.Fatal(err)
	}
	c := sessionCookie(t, w.Result(), cookieName)
	at := time.UnixMilli(e.clock.Now().UnixMilli())
	p.Reset()
	e.inRequest(c, func(ctx context.Context) {
		s, _ := e.m.Session(ctx)
		if !s.AuthenticatedAt.Equal(at) || !slices.Equal(s.Methods, []string{"password", "otp"}) {
			t.Errorf("session: AuthenticatedAt %v Methods %q, want %v [password otp]", s.AuthenticatedAt, s.Methods, at)
		}
	})
	if p.Total() != 1 {
		t.Errorf("the request made %v, want one BatchGetItem", p.Calls())
	}
	if list := e.mustList(alice); len(list) != 1 || !slices.Equal(list[0].Methods, []string{"password", "otp"}) {
		t.Errorf("List = %+v, want the session with its methods", list)
	}
	p.Reset()
	for _, methods := range [][]string{{""}, {"pass word"}, {strings.Repeat("x", 33)}, {"a", "b", "c", "d", "e"}, {"café"}} {
		if err := e.m.Login(newRecorder(), newRequest(), alice, nil, methods...); err == nil || !strings.Contains(err.Error(), "method") {
			t.Errorf("Login with methods %q = %v, want it refused", methods, err)
		}
	}
	if p.Total() != 0 {
		t.Errorf("refused logins made %v", p.Calls())
	}
}

// The user keys that no item can have are refused before any call, with an
// error that says what is wrong: an empty one is what Session gives outside
// RequireSession.
func TestMalformedUserKeysAreRefused(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	ctx := context.Background()
	p.Reset()
	for _, tc := range []struct {
		key  ddbsession.UserKey
		want string
	}{
		{ddbsession.UserKey{}, "has no PK: pass the "},
		{ddbsession.UserKey{PK: "USER#alice"}, "has no SK, which the table's sort key needs"},
	} {
		for name, call := range map[string]func() error{
			"Login":     func() error { return e.m.Login(newRecorder(), newRequest(), tc.key, nil) },
			"RevokeAll": func() error { return e.m.RevokeAll(ctx, tc.key) },
			"Revoke":    func() error { return e.m.Revoke(ctx, tc.key, strings.Repeat("a", 32)) },
			"List":      func() error { _, err := e.m.List(ctx, tc.key); return err },
			"BeginLogin": func() error {
				return e.m.BeginLogin(newRecorder(), newRequest(), tc.key, nil)
			},
		} {
			err := call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s(%+v) = %v, want it to say %q", name, tc.key, err, tc.want)
			}
			// A login's request is not signed in: Session(ctx).User is no
			// help there, the key the user entered is.
			login := strings.Contains(name, "Login")
			if tc.key.PK == "" && err != nil && strings.Contains(err.Error(), "Session(ctx).User") == login {
				t.Errorf("%s(%+v) = %v: Session(ctx).User is advised %v, want %v", name, tc.key, err, login, !login)
			}
		}
	}
	if p.Total() != 0 {
		t.Errorf("malformed keys reached DynamoDB: %v", p.Calls())
	}
}

// pendingCookie is the cookie of a login waiting for its second factor.
const pendingCookie = cookieName + "-pending"

var errWrongCode = errors.New("wrong code")

// code is a second-factor check that accepts want.
func code(got, want string) func(User) error {
	return func(User) error {
		if got != want {
			return errWrongCode
		}
		return nil
	}
}

// beginLogin runs BeginLogin for key on a request carrying cookies, and
// returns the pending cookie.
func (e *env) beginLogin(key ddbsession.UserKey, cookies ...*http.Cookie) *http.Cookie {
	e.t.Helper()
	w := newRecorder()
	if err := e.m.BeginLogin(w, newRequest(cookies...), key, nil, "password"); err != nil {
		e.t.Fatalf("BeginLogin: %v", err)
	}
	if sessionCookie(e.t, w.Result(), cookieName) != nil {
		e.t.Error("BeginLogin set a session cookie")
	}
	c := sessionCookie(e.t, w.Result(), pendingCookie)
	if c == nil || c.MaxAge != 300 || !c.HttpOnly || !c.Secure {
		e.t.Fatalf("BeginLogin's pending cookie = %v, want HttpOnly, Secure, Max-Age 300", c)
	}
	return c
}

// completeLogin runs CompleteLogin with a code on a request carrying
// cookies, and returns its error and response.
func (e *env) completeLogin(got string, cookies ...*http.Cookie) (*http.Response, error) {
	w := newRecorder()
	err := e.m.CompleteLogin(w, newRequest(cookies...), code(got, "123456"), "otp")
	return w.Result(), err
}

// A two-step login: the first step leaves a pending session that nothing
// but CompleteLogin takes, from the browser that has its cookie; a right
// code signs in with both steps' methods and ends the pending session; a
// wrong one leaves it for another try, five in all; it lives minutes.
func TestTwoStepLogin(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.OnEvent = log.record; c.BearerTokens = true })
	alice := e.putUser("alice")
	pending := e.beginLogin(alice)
	firstFactor := time.UnixMilli(e.clock.Now().UnixMilli())

	// Not a session, in any slot a credential may come in.
	if got := e.status(&http.Cookie{Name: cookieName, Value: pending.Value}); got != http.StatusUnauthorized {
		t.Errorf("the pending token as a session cookie: %d, want 401", got)
	}
	if _, _, err := e.m.Authenticate(context.Background(), pending.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("Authenticate of the pending token: %v, want ErrNoSession", err)
	}
	if list := e.mustList(alice); len(list) != 0 {
		t.Errorf("List shows the pending login: %+v", list)
	}
	// A completion must check something.
	if err := e.m.CompleteLogin(newRecorder(), newRequest(pending), nil, "otp"); err == nil || !strings.Contains(err.Error(), "verify is nil") {
		t.Errorf("CompleteLogin without verify: %v, want it refused", err)
	}
	// Another browser, without the cookie, cannot complete it.
	if _, err := e.completeLogin("123456"); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("CompleteLogin without the pending cookie: %v, want ErrNoSession", err)
	}
	// A wrong code: its error, and the pending session stays.
	res, err := e.completeLogin("000000", pending)
	if !errors.Is(err, errWrongCode) || sessionCookie(t, res, cookieName) != nil || sessionCookie(t, res, pendingCookie) != nil {
		t.Errorf("a wrong code: %v, cookies %v; want errWrongCode and no cookie change", err, res.Cookies())
	}
	e.clock.Advance(time.Minute)
	res, err = e.completeLogin("123456", pending)
	if err != nil {
		t.Fatalf("the right code: %v", err)
	}
	c := sessionCookie(t, res, cookieName)
	if cleared := sessionCookie(t, res, pendingCookie); c == nil || cleared == nil || cleared.MaxAge >= 0 {
		t.Fatalf("the right code: session cookie %v, pending cookie %v; want a session and the pending cookie cleared", c, cleared)
	}
	// Authenticated as of the first factor, a minute before the second:
	// the password counts from when it was proven.
	s := e.sessionFor(c)
	if !slices.Equal(s.Methods, []string{"password", "otp"}) || !s.AuthenticatedAt.Equal(firstFactor) {
		t.Errorf("completed session: Methods %q AuthenticatedAt %v, want [password otp] at %v", s.Methods, s.AuthenticatedAt, firstFactor)
	}
	if got := e.status(c); got != http.StatusOK {
		t.Errorf("the completed session: %d", got)
	}
	if _, err := e.completeLogin("123456", pending); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("completing it again: %v, want ErrNoSession", err)
	}
	if got := log.take(); !slices.Contains(got, "pending #1") || !slices.Contains(got, "second-factor-failed #1") || !slices.Contains(got, "created #2") {
		t.Errorf("events %q, want pending, second-factor-failed and created", got)
	}

	// Five wrong codes end it; the sixth try, right or not, finds nothing.
	pending = e.beginLogin(alice)
	for i := range 5 {
		res, err := e.completeLogin("000000", pending)
		if !errors.Is(err, errWrongCode) && !(i == 4 && errors.Is(err, ddbsession.ErrNoSession)) {
			t.Errorf("wrong code %d: %v", i+1, err)
		}
		if cleared := sessionCookie(t, res, pendingCookie); (i == 4) != (cleared != nil) {
			t.Errorf("wrong code %d: pending cookie %v", i+1, cleared)
		}
	}
	if _, err := e.completeLogin("123456", pending); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("the right code after five wrong ones: %v, want ErrNoSession", err)
	}

	// It lives PendingLifetime.
	pending = e.beginLogin(alice)
	e.clock.Advance(5*time.Minute + time.Second)
	if _, err := e.completeLogin("123456", pending); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("the right code after five minutes: %v, want ErrNoSession", err)
	}

	// A password change between the steps voids the first.
	pending = e.beginLogin(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if _, err := e.completeLogin("123456", pending); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("completing across a RevokeAll: %v, want ErrNoSession", err)
	}
	for _, item := range e.scanAll() {
		// A try's record stays until TTL removes it with the pending
		// session's expiry: it holds nothing a request can use.
		if attrText(item["pk"]) == attrText(sessionItemKey(pending.Value)["pk"]) && attrText(item["kind"]) != "S:session-try" {
			t.Errorf("the voided pending session is left: %s", itemText(item))
		}
	}
}

// A signed-in browser that re-authenticates with two factors stays signed
// in until the second step, which rotates its session; Logout ends a
// pending login too.
func TestTwoStepReauthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.putUser("alice")
	signedIn := e.login(alice)
	pending := e.beginLogin(alice, signedIn)
	if got := e.status(signedIn); got != http.StatusOK {
		t.Errorf("the signed-in session during a two-step re-authentication: %d", got)
	}
	res, err := e.completeLogin("123456", signedIn, pending)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.status(signedIn); got != http.StatusUnauthorized {
		t.Errorf("the session before the re-authentication: %d, want 401", got)
	}
	if got := e.status(sessionCookie(t, res, cookieName)); got != http.StatusOK {
		t.Errorf("the re-authenticated session: %d", got)
	}

	pending = e.beginLogin(alice)
	w := newRecorder()
	if err := e.m.Logout(w, newRequest(pending)); err != nil {
		t.Fatal(err)
	}
	if cleared := sessionCookie(t, w.Result(), pendingCookie); cleared == nil || cleared.MaxAge >= 0 {
		t.Errorf("Logout left the pending cookie: %v", cleared)
	}
	if _, err := e.completeLogin("123456", pending); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("completing after Logout: %v, want ErrNoSession", err)
	}
}

// With MaxSessions, the login past the limit ends the oldest session, or,
// with RefuseAtMaxSessions, is refused; a session that ended otherwise
// frees its slot; a re-authentication takes its own session's slot.
func TestSessionLimit(t *testing.T) {
	t.Parallel()
	t.Run("end the oldest", func(t *testing.T) {
		t.Parallel()
		log := &eventLog{}
		e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 2; c.OnEvent = log.record })
		alice, bob := e.putUser("alice"), e.putUser("bob")
		first := e.login(alice)
		e.clock.Advance(time.Second)
		second := e.login(alice)
		e.login(bob) // another user's sessions do not count
		e.clock.Advance(time.Second)
		log.take()
		third := e.login(alice)
		if got := log.take(); !slices.Contains(got, "evicted #1 session-limit") {
			t.Errorf("events %q, want the first session evicted", got)
		}
		for i, c := range []*http.Cookie{first, second, third} {
			want := http.StatusOK
			if i == 0 {
				want = http.StatusUnauthorized
			}
			if got := e.status(c); got != want {
				t.Errorf("session %d of 3: %d, want %d", i+1, got, want)
			}
		}
		if list := e.mustList(alice); len(list) != 2 {
			t.Errorf("List shows %d sessions, want 2", len(list))
		}
		// Re-authenticating the newest takes its own slot: the second lives.
		e.login(alice, third)
		if got := e.status(second); got != http.StatusOK {
			t.Errorf("a re-authentication at the limit ended another session: %d", got)
		}
	})
	t.Run("refuse", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 2; c.Limits.RefuseAtMaxSessions = true })
		alice := e.putUser("alice")
		first := e.login(alice)
		second := e.login(alice)
		w := newRecorder()
		if err := e.m.Login(w, newRequest(), alice, nil); !errors.Is(err, ddbsession.ErrTooManySessions) || sessionCookie(t, w.Result(), cookieName) != nil {
			t.Errorf("the third login: %v, want ErrTooManySessions and no cookie", err)
		}
		for _, c := range []*http.Cookie{first, second} {
			if got := e.status(c); got != http.StatusOK {
				t.Errorf("a session before the refused login: %d", got)
			}
		}
		e.login(alice, second) // a re-authentication frees its own slot
		if err := e.m.Logout(newRecorder(), newRequest(first)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2 * time.Minute) // past the slot of a login in flight
		e.login(alice)                   // the slot Logout left is free
	})
}

// Revoked sessions hold no slot: after a RevokeEveryone, and after a
// RevokeAll from an instance whose clock lags the login instance's, a user
// at the limit with refusal on signs in at once.
func TestSessionLimitFreesRevokedSlots(t *testing.T) {
	t.Parallel()
	for _, revoke := range []string{"RevokeEveryone", "RevokeAll from a clock an hour behind"} {
		t.Run(revoke, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions, c.Limits.RefuseAtMaxSessions = 2, true })
			behind := e.cfg
			behind.Now = func() time.Time { return e.clock.Now().Add(-time.Hour) }
			revoker := primed(t, behind)
			alice := e.putUser("alice")
			e.login(alice)
			e.login(alice)
			var err error
			if revoke == "RevokeEveryone" {
				err = revoker.RevokeEveryone(context.Background())
			} else {
				err = revoker.RevokeAll(context.Background(), alice)
			}
			if err != nil {
				t.Fatal(err)
			}
			if revoke == "RevokeEveryone" {
				if err := e.m.CreateTable(context.Background()); err != nil { // this instance reads the generation anew
					t.Fatal(err)
				}
			}
			w := newRecorder()
			if err := e.m.Login(w, newRequest(), alice, nil); err != nil {
				t.Fatalf("a login at the limit after %s: %v, want a session", revoke, err)
			}
			if got := e.status(sessionCookie(t, w.Result(), cookieName)); got != http.StatusOK {
				t.Errorf("the login after %s: status %d, want 200", revoke, got)
			}
		})
	}
}

// A session limit ends the sessions in the order they took their slots,
// also of logins in the same millisecond: the first of three, at a limit of
// two.
func TestSessionLimitEndsInOrder(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 2 })
		alice := e.putUser("alice")
		first, second, third := e.login(alice), e.login(alice), e.login(alice) // one millisecond
		for i, c := range []*http.Cookie{first, second, third} {
			want := http.StatusOK
			if i == 0 {
				want = http.StatusUnauthorized
			}
			if got := e.status(c); got != want {
				t.Errorf("round %d, session %d of 3: %d, want %d", round, i+1, got, want)
			}
		}
	}
}

// A session's times are the clock of the instance that creates it: a
// RevokeAll or a sign-up from an instance an hour fast pushes no later
// login's creation or authentication an hour ahead, so a step-up's window
// and the absolute lifetime run as long as they say.
func TestFastClockStretchesNoSession(t *testing.T) {
	t.Parallel()
	for _, write := range []string{"RevokeAll", "CreateUser"} {
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			fast := e.cfg
			fast.Now = func() time.Time { return e.clock.Now().Add(time.Hour) }
			ahead := primed(t, fast)
			alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
			if write == "CreateUser" {
				if err := ahead.CreateUser(context.Background(), User{PK: alice.PK, SK: alice.SK, Name: "alice"}); err != nil {
					t.Fatal(err)
				}
			} else {
				alice = e.putUser("alice")
				if err := ahead.RevokeAll(context.Background(), alice); err != nil {
					t.Fatal(err)
				}
			}
			s := e.sessionFor(e.login(alice))
			now := time.UnixMilli(e.clock.Now().UnixMilli())
			if !s.CreatedAt.Equal(now) || !s.AuthenticatedAt.Equal(now) {
				t.Errorf("the login after a %s an hour ahead: created %v, authenticated %v; want both %v", write, s.CreatedAt, s.AuthenticatedAt, now)
			}
		})
	}
}

// A Login whose session write hangs until its deadline has written the
// index item already: its undo runs in the quarter of StoreTimeout that
// the work leaves it, so no index item outlives the session that was never
// written, and List shows nothing. (StoreTimeout is 4 s, the undo's second
// ample for a delete on a busy machine; the test waits out the 3 s.)
func TestLoginUndoesItsIndexItemWithinTheDeadline(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.StoreTimeout = 4 * time.Second })
	alice := e.putUser("alice")
	p.Before = func(ctx context.Context, op string, in any) {
		if put, ok := in.(*dynamodb.PutItemInput); ok && strings.HasPrefix(attrText(put.Item["pk"]), "S:SESSION#") {
			<-ctx.Done() // the session write hangs past the deadline
		}
	}
	if err := e.m.Login(newRecorder(), newRequest(), alice, nil); err == nil {
		t.Fatal("a Login whose session write hung past its deadline succeeded")
	}
	p.Before = nil
	if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
		t.Errorf("index items left by the failed Login: %v", itemsText(items))
	}
	if list := e.mustList(alice); len(list) != 0 {
		t.Errorf("List after the failed Login: %+v, want none", list)
	}
}
