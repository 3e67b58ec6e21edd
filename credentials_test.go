package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// Member is a user type that carries its credential, as LoginWith's verify
// needs; json:"-" keeps the hash out of any JSON the app writes.
type Member struct {
	PK       string `dynamodbav:"pk"`
	SK       string `dynamodbav:"sk"`
	Name     string `dynamodbav:"name"`
	Password string `dynamodbav:"password" json:"-"` // a stand-in for a hash
}

var errWrongPassword = errors.New("wrong password")

// checkPassword is the app's verify function for LoginWith.
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

// loginWith runs LoginWith on a fresh request and returns the cookie, or nil
// with the error.
func loginWith(m *ddbsession.Manager[Member], key ddbsession.UserKey, password string) (*http.Cookie, error) {
	w := newRecorder()
	if err := m.LoginWith(w, newRequest(), key, checkPassword(password)); err != nil {
		return nil, err
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == m.CookieName() {
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

// An attacker who knows the old password logs in while the owner changes
// it: the attacker's LoginWith is paused after it read the user item (old
// password, accepted) and before it writes its session; the change writes
// the new password and cuts off; then the login completes. Its session
// must be dead on arrival. The clock does not move at all, the hardest
// case: every timestamp is the same millisecond.
func TestLoginWithRacingPasswordChange(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	alice := e.createMember(m, "alice", "old")

	read, resume := make(chan struct{}), make(chan struct{})
	var paused atomic.Bool
	p.before = func(_ context.Context, op string, in any) {
		if op == "PutItem" && paused.CompareAndSwap(false, true) { // the attacker's first session write
			close(read)
			<-resume
		}
	}
	var attacker *http.Cookie
	var loginErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		attacker, loginErr = loginWith(m, alice, "old")
	}()
	<-read
	p.before = nil
	e.changePassword(m, alice, "new")
	close(resume)
	<-done
	if loginErr != nil {
		t.Fatalf("the attacker's login, which read the old password: %v", loginErr)
	}
	if got := statusOf(m, attacker); got != http.StatusUnauthorized {
		t.Errorf("the attacker's session, created from the old password: status %d, want 401", got)
	}
	// After the change, the old password fails and the new one works.
	if _, err := loginWith(m, alice, "old"); !errors.Is(err, errWrongPassword) {
		t.Errorf("LoginWith with the old password after the change: %v, want errWrongPassword", err)
	}
	c, err := loginWith(m, alice, "new")
	if err != nil {
		t.Fatal(err)
	}
	if got := statusOf(m, c); got != http.StatusOK {
		t.Errorf("a login with the new password: status %d, want 200", got)
	}
}

// The same race, as it happens: attackers on a second instance loop
// LoginWith with the old password while the owner changes it; none of
// their sessions survives the change, and the owner's own browser is signed
// in again with a fresh session.
func TestLoginWithLoopingAttackersDuringPasswordChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	owner := e.members()
	alice := e.createMember(owner, "alice", "old")
	ownerCookie, err := loginWith(owner, alice, "old")
	if err != nil {
		t.Fatal(err)
	}
	second := e.members() // another instance on the same table

	var (
		mu      sync.Mutex
		cookies []*http.Cookie
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 200 && !stop.Load(); i++ {
				c, err := loginWith(second, alice, "old")
				if err != nil {
					continue // refused once the new password is in
				}
				mu.Lock()
				cookies = append(cookies, c)
				mu.Unlock()
			}
		})
	}
	for { // let the attackers get going
		mu.Lock()
		n := len(cookies)
		mu.Unlock()
		if n >= 8 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	e.changePassword(owner, alice, "new")
	w := newRecorder()
	if err := owner.Login(w, newRequest(ownerCookie), alice); err != nil { // keep the owner signed in
		t.Fatal(err)
	}
	fresh := sessionCookie(t, w.Result(), owner.CookieName())
	stop.Store(true)
	wg.Wait()

	survivors := 0
	for _, c := range cookies {
		if statusOf(owner, c) == http.StatusOK {
			survivors++
		}
	}
	if survivors != 0 {
		t.Errorf("%d of %d attacker sessions survived the password change", survivors, len(cookies))
	}
	if statusOf(owner, ownerCookie) != http.StatusUnauthorized {
		t.Error("the owner's old session survived the change")
	}
	if statusOf(owner, fresh) != http.StatusOK {
		t.Error("the owner's fresh session after the change does not work")
	}
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

// Login and LoginWith refuse a user without an item, and write nothing.
func TestLoginWithoutUserItem(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	m := e.members()
	ghost := ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"}
	p.reset()
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), ghost); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login = %v, want ErrUserNotFound", err)
	}
	if _, err := loginWith(m, ghost, "x"); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("LoginWith = %v, want ErrUserNotFound", err)
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
	if err := m.LoginWith(w, newRequest(c), alice, checkPassword("guess")); !errors.Is(err, errWrongPassword) {
		t.Errorf("LoginWith with a wrong password = %v, want errWrongPassword", err)
	}
	if p.count("PutItem")+p.count("DeleteItem")+p.count("UpdateItem") != 0 || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("a refused LoginWith wrote: calls %v, cookies %q", p.calls, w.Header().Values("Set-Cookie"))
	}
	if got := statusOf(m, c); got != http.StatusOK {
		t.Errorf("the carried session after a refused login: %d, want 200", got)
	}
}

// RevokeAll ends the sessions of its own millisecond too, and a login right
// after it, in that same millisecond, holds.
func TestRevokeAllSameMillisecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // the clock stands still
	alice := e.putUser("alice")
	before := e.login(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	after := e.login(alice)
	if got := e.status(before); got != http.StatusUnauthorized {
		t.Errorf("session of the cutoff's millisecond: %d, want 401", got)
	}
	if got := e.status(after); got != http.StatusOK {
		t.Errorf("login right after RevokeAll, same millisecond: %d, want 200", got)
	}
	// A second RevokeAll in the same millisecond still ends that login.
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if got := e.status(after); got != http.StatusUnauthorized {
		t.Errorf("after a second RevokeAll in the same millisecond: %d, want 401", got)
	}
}

// A user item that does not decode into the app's type is the app's bug:
// the request fails closed with 500, not 503, and the log names the type
// and the attribute.
func TestUserItemThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: userItemKey(alice),
		UpdateExpression:          ptr("SET #n = :n"),
		ExpressionAttributeNames:  map[string]string{"#n": "name"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberBOOL{Value: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range readPaths {
		cfg := e.cfg
		if path.mutate != nil {
			path.mutate(&cfg)
		}
		m, err := ddbsession.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		called := false
		w := e.get(m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })), cookie)
		if w.Code != http.StatusInternalServerError || called {
			t.Errorf("%s: status %d, handler called %v; want 500, not called", path.name, w.Code, called)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `\"name\"`) || !strings.Contains(logs, "ddbsession_test.User") {
		t.Errorf("log does not name the attribute and the type:\n%s", logs)
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
	if err := e.m.Login(w, r, alice); err != nil {
		t.Fatal(err)
	}
	list := e.mustList(alice)
	if len(list) != 1 || list[0].UserAgent != "Mozilla/5.0 XNU Firefox" {
		t.Errorf("stored User-Agent = %q, want %q", list[0].UserAgent, "Mozilla/5.0 XNU Firefox")
	}
}
