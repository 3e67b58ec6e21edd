package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// deviceCookieName is the device cookie's name: the session cookie's and
// "-device".
const deviceCookieName = cookieName + "-device"

// withDevices turns Cookie.RememberDevices on, and records the events.
func withDevices(log *eventLog) func(*ddbsession.Config[User]) {
	return func(c *ddbsession.Config[User]) {
		c.Cookie.RememberDevices = true
		c.OnEvent = log.record
	}
}

// newDevices takes the EventNewDevice events from log.
func newDevices(log *eventLog) []ddbsession.Event {
	log.mu.Lock()
	defer log.mu.Unlock()
	var out []ddbsession.Event
	for _, ev := range log.events {
		if ev.Kind == ddbsession.EventNewDevice {
			out = append(out, ev)
		}
	}
	log.events = nil
	return out
}

// A login from a browser the user has not signed in from raises
// EventNewDevice once, with what the app needs to tell the user; a second
// login from it does not, another browser does, and so does another
// user's first from it. The device cookie holds a random ID, no session's
// secret, and the table only the ID's digest.
func TestNewDevice(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, withDevices(log))
	alice, bob := e.putUser("alice"), e.putUser("bob")
	login := func(user ddbsession.UserKey, agent string, device *http.Cookie) (session, dev *http.Cookie) {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "https://example.test/login", nil)
		r.Header.Set("User-Agent", agent)
		if device != nil {
			r.AddCookie(device)
		}
		if err := e.m.Login(w, r, user, nil, "password"); err != nil {
			t.Fatalf("Login: %v", err)
		}
		e.clock.Advance(time.Second) // the history's order
		session, dev = sessionCookie(t, w.Result(), cookieName), sessionCookie(t, w.Result(), deviceCookieName)
		if dev == nil || dev.MaxAge < 399*24*3600 || !dev.Secure || !dev.HttpOnly {
			t.Fatalf("the device cookie: %+v, want a long-lived Secure HttpOnly one", dev)
		}
		return session, dev
	}

	first, laptop := login(alice, "Firefox/140", nil)
	got := newDevices(log)
	if len(got) != 1 || got[0].User != alice || got[0].SessionID != e.sessionFor(first).ID || got[0].UserAgent != "Firefox/140" || got[0].Device == "" ||
		got[0].Address != testAddr || !slices.Equal(got[0].Methods, []string{"password"}) || got[0].Time.IsZero() {
		t.Fatalf("the first login: new-device events %+v, want one with the session, User-Agent, address, methods and time", got)
	}
	second, again := login(alice, "Firefox/140", laptop)
	if got := newDevices(log); len(got) != 0 || again.Value != laptop.Value {
		t.Errorf("a second login from the laptop: new-device events %+v, device cookie %q (was %q)", got, again.Value, laptop.Value)
	}
	login(bob, "Firefox/140", laptop) // bob's first from it
	if got := newDevices(log); len(got) != 1 || got[0].User != bob {
		t.Errorf("bob's first login from the laptop: %+v, want one new-device event of bob's", got)
	}
	_, phone := login(alice, "Safari/18", nil)
	if got := newDevices(log); len(got) != 1 || got[0].UserAgent != "Safari/18" || phone.Value == laptop.Value {
		t.Errorf("alice's login from a phone: %+v, want one new-device event, and a device of its own", got)
	}
	// A cookie that is no device ID this Manager made is a new device.
	login(alice, "Firefox/140", &http.Cookie{Name: deviceCookieName, Value: "not-an-id"})
	if got := newDevices(log); len(got) != 1 {
		t.Errorf("a made-up device cookie: %+v, want a new device", got)
	}

	// DeviceOf names a browser per user, as the new-device event and the
	// history do: an app tells this browser's sign-ins from others'.
	deviceOf := func(user ddbsession.UserKey, device *http.Cookie) string {
		r := httptest.NewRequest("GET", "/", nil)
		if device != nil {
			r.AddCookie(device)
		}
		return e.m.DeviceOf(r, user)
	}
	if laptopOf := deviceOf(alice, laptop); laptopOf == "" || laptopOf == deviceOf(bob, laptop) || laptopOf == deviceOf(alice, phone) || deviceOf(alice, nil) != "" {
		t.Errorf("DeviceOf: alice's laptop %q, bob's %q, alice's phone %q, no cookie %q; want distinct names, none without a cookie",
			laptopOf, deviceOf(bob, laptop), deviceOf(alice, phone), deviceOf(alice, nil))
	}
	if history, _ := e.historyOf(alice); len(history) == 0 || history[len(history)-1].Device != deviceOf(alice, laptop) {
		t.Errorf("alice's first sign-in in the history: %+v, want the laptop's name", history)
	}

	// KnownDevice, which an app asks before the login.
	known := func(user ddbsession.UserKey, device *http.Cookie) bool {
		r := httptest.NewRequest("POST", "https://example.test/login", nil)
		if device != nil {
			r.AddCookie(device)
		}
		ok, err := e.m.KnownDevice(r, user)
		if err != nil {
			t.Fatalf("KnownDevice: %v", err)
		}
		return ok
	}
	if !known(alice, laptop) || !known(bob, laptop) || !known(alice, phone) || known(alice, nil) || known(e.putUser("carol"), laptop) {
		t.Error("KnownDevice: want alice's and bob's laptop and alice's phone known, no cookie and carol's first unknown")
	}

	// The history holds new-device for the sign-ins from a new device.
	events, _ := e.historyOf(alice)
	var kinds []ddbsession.EventKind
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
	}
	if want := []ddbsession.EventKind{ddbsession.EventNewDevice, ddbsession.EventNewDevice, ddbsession.EventCreated, ddbsession.EventNewDevice}; !slices.Equal(kinds, want) {
		t.Errorf("alice's history: %v, want %v", kinds, want)
	}
	// No item holds a device ID; no device cookie holds a session's token.
	devices := 0
	keys := map[string]bool{} // the device items' sort keys
	for _, it := range e.scanWithHistory() {
		text := itemText(it)
		if strings.Contains(text, "session-device") {
			keys[attrText(it["sk"])] = true
		}
		devices += strings.Count(text, "session-device")
		for _, c := range []*http.Cookie{laptop, phone} {
			if strings.Contains(text, c.Value) {
				t.Errorf("an item holds a device ID: %s", text)
			}
		}
	}
	if devices != 4 { // alice's laptop, phone and made-up one; bob's laptop
		t.Errorf("%d device items, want 4", devices)
	}
	// Alice's laptop and bob's share no key that would tie their accounts
	// together for a reader of the table.
	if len(keys) != devices {
		t.Errorf("%d device items under %d sort keys: one browser's users share a key", devices, len(keys))
	}
	for _, s := range []*http.Cookie{first, second} {
		for _, d := range []*http.Cookie{laptop, phone} {
			if strings.Contains(s.Value, d.Value) || strings.Contains(d.Value, s.Value) {
				t.Errorf("the device cookie %q and the session cookie %q share their secret", d.Value, s.Value)
			}
		}
	}
}

// Of racing first logins from one device, one raises EventNewDevice.
func TestNewDeviceRacingLogins(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, withDevices(log))
	alice := e.putUser("alice")
	device := &http.Cookie{Name: deviceCookieName, Value: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"} // well-formed, unknown
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := httptest.NewRequest("POST", "https://example.test/login", nil)
			r.AddCookie(device)
			if err := e.m.Login(httptest.NewRecorder(), r, alice, nil); err != nil {
				t.Errorf("Login: %v", err)
			}
		})
	}
	wg.Wait()
	if got := newDevices(log); len(got) != 1 {
		t.Errorf("%d new-device events of 4 racing first logins from one device, want 1", len(got))
	}
}

// Off, as by default, a login sends no device cookie and writes no device
// item; KnownDevice says it is off, and New refuses devices without the
// history that keeps them.
func TestNewDeviceOff(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.OnEvent = log.record })
	alice := e.putUser("alice")
	w := httptest.NewRecorder()
	if err := e.m.Login(w, httptest.NewRequest("POST", "https://example.test/login", nil), alice, nil); err != nil {
		t.Fatalf("Login: %v", err)
	}
	if c := sessionCookie(t, w.Result(), deviceCookieName); c != nil {
		t.Errorf("a device cookie without RememberDevices: %+v", c)
	}
	if got := newDevices(log); len(got) != 0 {
		t.Errorf("new-device events without RememberDevices: %+v", got)
	}
	for _, it := range e.scanWithHistory() {
		if text := itemText(it); strings.Contains(text, "session-device") {
			t.Errorf("a device item without RememberDevices: %s", text)
		}
	}
	if _, err := e.m.KnownDevice(httptest.NewRequest("GET", "/", nil), alice); err == nil {
		t.Error("KnownDevice without RememberDevices: no error")
	}
	cfg := e.cfg
	cfg.Cookie.RememberDevices, cfg.Limits.HistoryRetention = true, -1
	if _, err := ddbsession.New(cfg); err == nil || !strings.Contains(err.Error(), "RememberDevices") {
		t.Errorf("New with RememberDevices and no history: %v, want an error naming it", err)
	}
	// Clear-Site-Data's "cookies" would erase the device cookie at each
	// logout, and every login would be from a new device.
	for _, clear := range []string{"cookies", "*"} {
		cfg := e.cfg
		cfg.Cookie.RememberDevices, cfg.Cookie.ClearSiteData = true, []string{"storage", clear}
		if _, err := ddbsession.New(cfg); err == nil || !strings.Contains(err.Error(), "erases the device cookie") {
			t.Errorf("New with RememberDevices and Clear-Site-Data %q: %v, want an error saying why", clear, err)
		}
	}
}

// A device whose record expired (400 days on) is new again, before TTL
// deletes the record: of racing logins from it, paused together where
// each has read the expired record and is about to write its own, one
// raises EventNewDevice.
func TestNewDeviceAgainOnceItsRecordExpired(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	var p *ddbtest.Probe
	e := newEnv(t, withDevices(log), withProbe(&p))
	alice := e.putUser("alice")
	device := &http.Cookie{Name: deviceCookieName, Value: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	login := func() {
		r := httptest.NewRequest("POST", "https://example.test/login", nil)
		r.AddCookie(device)
		if err := e.m.Login(httptest.NewRecorder(), r, alice, nil); err != nil {
			t.Errorf("Login: %v", err)
		}
	}
	login()
	if got := newDevices(log); len(got) != 1 {
		t.Fatalf("the first login: %d new-device events, want 1", len(got))
	}
	e.clock.Advance(401 * 24 * time.Hour) // the record is past its TTL, and still there
	if known, err := e.m.KnownDevice(httptest.NewRequest("GET", "/", nil), alice); err != nil || known {
		t.Fatalf("KnownDevice without the cookie: %v, %v", known, err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(device)
	if known, err := e.m.KnownDevice(r, alice); err != nil || known {
		t.Fatalf("KnownDevice of an expired record: %v, %v, want false", known, err)
	}
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	p.Before = func(_ context.Context, op string, in any) {
		if op == "PutItem" && attrText(in.(*dynamodb.PutItemInput).Item["kind"]) == "S:session-device" {
			arrived <- struct{}{}
			<-release
		}
	}
	var wg sync.WaitGroup
	wg.Go(login)
	wg.Go(login)
	<-arrived
	<-arrived // both read the expired record
	close(release)
	wg.Wait()
	if got := newDevices(log); len(got) != 1 {
		t.Errorf("%d new-device events of 2 racing logins from a device whose record expired, want 1", len(got))
	}
}

// A login that records a new device and then fails (here, its session's
// write) forgets the device again: the next login from it is the one
// that reports it.
func TestNewDeviceForgottenWhenTheLoginFails(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	var p *ddbtest.Probe
	e := newEnv(t, withDevices(log), withProbe(&p))
	alice := e.putUser("alice")
	device := &http.Cookie{Name: deviceCookieName, Value: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	login := func() error {
		r := httptest.NewRequest("POST", "https://example.test/login", nil)
		r.AddCookie(device)
		return e.m.Login(httptest.NewRecorder(), r, alice, nil)
	}
	p.Fail = func(_ context.Context, op string, in any) error {
		if op == "PutItem" && attrText(in.(*dynamodb.PutItemInput).Item["kind"]) == "S:"+kindSession {
			return errors.New("session write failed")
		}
		return nil
	}
	if err := login(); err == nil {
		t.Fatal("a login whose session's write failed succeeded")
	}
	p.Fail = nil
	if got := newDevices(log); len(got) != 0 {
		t.Errorf("the failed login reported a new device: %+v", got)
	}
	if err := login(); err != nil {
		t.Fatalf("Login: %v", err)
	}
	if got := newDevices(log); len(got) != 1 {
		t.Errorf("the login after a failed one: %d new-device events, want 1", len(got))
	}
}

// A user made anew under a deleted user's key inherits nothing of the
// former user: not their history, which TTL keeps for months, older than
// the hour or in it, nor their devices; and the new user's own events
// show, a failed sign-in counted in that hour's item among them, and an
// event written by an instance whose clock is behind the one that made
// the user.
func TestUserMadeAnewInheritsNoHistoryOrDevice(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, withDevices(log))
	alice := e.putUser("alice")
	login := func(m *ddbsession.Manager[User], r *http.Request, verify func(User) error) (*http.Cookie, error) {
		w := httptest.NewRecorder()
		err := m.Login(w, r, alice, verify, "password")
		return sessionCookie(t, w.Result(), deviceCookieName), err
	}
	newLogin := func() *http.Request { return httptest.NewRequest("POST", "https://example.test/login", nil) }
	wrong := func(User) error { return errWrongPassword }
	// The former user: a sign-in two days before, one at 12:00 and a
	// failed one at 12:40, in the hour the new user is made, at 12:50.
	if _, err := login(e.m, newLogin(), nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(48 * time.Hour)
	device, err := login(e.m, newLogin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(40 * time.Minute)
	if _, err := login(e.m, newLogin(), wrong); err == nil {
		t.Fatal("a refused Login succeeded")
	}
	if events, _ := e.historyOf(alice); len(events) != 3 {
		t.Fatalf("the former user's history: %+v, want two sign-ins and a failed one", events)
	}
	e.clock.Advance(10 * time.Minute)
	e.deleteItem(userItemKey(alice)) // the account closed, its name freed
	if err := e.m.CreateUser(context.Background(), User{PK: alice.PK, SK: alice.SK, Name: "another person"}); err != nil {
		t.Fatal(err)
	}
	if events, _ := e.historyOf(alice); len(events) != 0 {
		t.Errorf("the new user's history holds the former user's events: %+v", events)
	}
	r := newLogin()
	r.AddCookie(device)
	if known, err := e.m.KnownDevice(r, alice); err != nil || known {
		t.Errorf("KnownDevice of the former user's browser: %v, %v; want false", known, err)
	}
	// An instance whose clock is 30 seconds behind signs the new user in
	// from that browser: a new device to them, in their history; then a
	// wrong password, counted from the hour's start, before the user was.
	slow := e.cfg
	slow.Now = func() time.Time { return e.clock.Now().Add(-30 * time.Second) }
	m, err := ddbsession.New(slow)
	if err != nil {
		t.Fatal(err)
	}
	newDevices(log)
	if _, err := login(m, r, nil); err != nil {
		t.Fatal(err)
	}
	if got := newDevices(log); len(got) != 1 {
		t.Errorf("the new user's first login from the former user's browser: %d new-device events, want 1", len(got))
	}
	if _, err := login(e.m, newLogin(), wrong); err == nil {
		t.Fatal("a refused Login succeeded")
	}
	events, _ := e.historyOf(alice)
	if len(events) != 2 || events[0].Kind != ddbsession.EventNewDevice || events[1].Kind != ddbsession.EventSignInFailed || events[1].Count != 1 {
		t.Errorf("the new user's history: %+v, want their sign-in and their one failed sign-in", events)
	}
}

// A CreateUser whose clearing of a former user's items fails makes no
// user: it undoes its write, so that the app's retry does it all, rather
// than find the name taken.
func TestCreateUserUndoneWhenItCannotClear(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	failOn(p, "Query", errors.New("query failed"))
	if err := e.m.CreateUser(context.Background(), User{PK: alice.PK, SK: alice.SK, Name: "alice"}); err == nil {
		t.Fatal("CreateUser succeeded though it could not clear a former user's items")
	}
	p.Fail = nil
	if err := e.m.CreateUser(context.Background(), User{PK: alice.PK, SK: alice.SK, Name: "alice"}); err != nil {
		t.Errorf("CreateUser again: %v, want the user made", err)
	}
}

// CreateUser clears a former user's items whatever the caller does, and
// only theirs: a client that hangs up midway leaves no user half made; a
// shorter retention since, or a page made up to start before the new
// user, shows none of the former's; a login of the new user that races
// the clearing keeps its event.
func TestUserMadeAnewWhateverHappens(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	log := &eventLog{}
	e := newEnv(t, withDevices(log), withProbe(&p), func(c *ddbsession.Config[User]) { c.Limits.HistoryRetention = 365 * 24 * time.Hour })
	alice := e.putUser("alice")
	signIn := func(m *ddbsession.Manager[User]) {
		t.Helper()
		if err := m.Login(httptest.NewRecorder(), httptest.NewRequest("POST", "https://example.test/login", nil), alice, nil, "password"); err != nil {
			t.Fatal(err)
		}
	}
	signIn(e.m)
	e.clock.Advance(48 * time.Hour)
	e.deleteItem(userItemKey(alice))

	// The client hangs up as the clearing begins.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	p.Before = func(_ context.Context, op string, _ any) {
		if op == "Query" {
			once.Do(cancel)
		}
	}
	// A Manager with a shorter retention, and a login of the new user
	// racing the clearing, paused where it has written the user item.
	short := e.cfg
	short.Limits.HistoryRetention = 90 * 24 * time.Hour
	m, err := ddbsession.New(short)
	if err != nil {
		t.Fatal(err)
	}
	var race sync.Once
	p.After = func(_ context.Context, op string, in, _ any, err error) error {
		if pin, ok := in.(*dynamodb.PutItemInput); ok && op == "PutItem" && err == nil && attrText(pin.Item["name"]) == "S:another person" {
			race.Do(func() { signIn(e.m) })
		}
		return err
	}
	made := e.clock.Now()
	if err := m.CreateUser(ctx, User{PK: alice.PK, SK: alice.SK, Name: "another person"}); err != nil {
		t.Fatalf("CreateUser of a client that hung up: %v", err)
	}
	p.Before, p.After = nil, nil
	events, _ := e.historyOf(alice)
	if len(events) != 1 || events[0].Kind != ddbsession.EventNewDevice {
		t.Errorf("the new user's history: %+v, want their racing sign-in alone", events)
	}
	e.clock.Advance(100 * 24 * time.Hour) // past the shorter retention
	page := fmt.Sprintf("%012x#ffffffff", e.clock.Now().Add(-24*time.Hour).UnixMilli())
	for _, page := range []string{"", page} {
		events, _, err := m.History(context.Background(), alice, page)
		if err != nil || slices.ContainsFunc(events, func(ev ddbsession.Event) bool { return ev.Time.Before(made) }) {
			t.Errorf("History(%q), 100 days on: %+v, %v; want none of the former user's", page, events, err)
		}
	}
}
