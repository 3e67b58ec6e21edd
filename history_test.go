package ddbsession_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// historyOf reads every page of user's history, and the size of each.
func (e *env) historyOf(user ddbsession.UserKey) (events []ddbsession.Event, pages []int) {
	e.t.Helper()
	page := ""
	for {
		got, next, err := e.m.History(context.Background(), user, page)
		if err != nil {
			e.t.Fatalf("History(%q): %v", page, err)
		}
		events, pages = append(events, got...), append(pages, len(got))
		if next == "" {
			return events, pages
		}
		if len(pages) > 20 {
			e.t.Fatalf("History: more than 20 pages, last %q", next)
		}
		page = next
	}
}

// historyItems are the table's history items.
func (e *env) historyItems() []map[string]types.AttributeValue {
	e.t.Helper()
	return slices.DeleteFunc(e.scanWithHistory(), func(av map[string]types.AttributeValue) bool {
		return attrText(av["kind"]) != "S:session-history"
	})
}

// A user's history holds each kind of event, newest first, in pages of at
// most 25 items, each event once: sign-ins with how and from where, wrong
// passwords counted in one entry an hour, a step-up, a Logout, a Revoke,
// a session limit's evictions, a RevokeAll, and the table's
// RevokeEveryone, which no user's partition holds. Another user's history
// holds none of it.
func TestHistoryEachEventNewestFirstInPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 2 })
	m := e.members(func(c *ddbsession.Config[Member]) { c.Limits.MaxSessions = 2 })
	// e.m reads the history, as another instance: its copy of the global
	// item ages on mono.
	var mono ddbtest.Mono
	ddbsession.SetMonotonicClock(e.m, mono.Now)
	const password, guess = "alice's long password", "a wrong guess of hers"
	alice := e.createMember(m, "alice", password)
	bob := e.createMember(m, "bob", password)
	step := func() { e.clock.Advance(time.Second) }
	from := func(addr string, cookies ...*http.Cookie) *http.Request {
		r := newRequest(cookies...)
		r.RemoteAddr, r.Header["User-Agent"] = addr+":4000", []string{"Firefox/140"}
		return r
	}
	login := func(r *http.Request, password string, methods ...string) *http.Cookie {
		t.Helper()
		w := newRecorder()
		if err := m.Login(w, r, alice, checkPassword(password), methods...); err != nil {
			t.Fatalf("Login: %v", err)
		}
		step()
		return sessionCookie(t, w.Result(), cookieName)
	}

	first := login(from("198.51.100.1"), password, "password") // sign-in
	for range 3 {                                              // three wrong passwords, one entry
		if err := m.Login(newRecorder(), from("203.0.113.9"), alice, checkPassword(guess)); !errors.Is(err, errWrongPassword) {
			t.Fatalf("a wrong password: %v", err)
		}
		step()
	}
	again := login(from("198.51.100.1", first), password, "password", "otp") // step-up: the user's own session
	other := login(from("198.51.100.2"), password, "password")
	otherID := e.sessionFor(other).ID
	if err := m.Revoke(context.Background(), alice, otherID); err != nil { // revoke
		t.Fatal(err)
	}
	step()
	if err := m.Logout(newRecorder(), from("198.51.100.1", again)); err != nil { // sign-out
		t.Fatal(err)
	}
	step()
	for range 3 { // each beyond the limit of 2 ends the oldest
		login(from("198.51.100.3"), password, "password")
	}
	if err := m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	step()
	if err := m.RevokeEveryone(context.Background()); err != nil {
		t.Fatal(err)
	}
	step()
	for range 20 { // more than a page
		login(from("198.51.100.4"), password, "password")
	}

	// The RevokeEveryone shows once the reader's copy of the global item
	// is read anew: within RevokeEveryoneWithin.
	e.historyOf(alice)
	mono.Advance(10 * time.Second)
	events, pages := e.historyOf(alice)
	for i, n := range pages {
		// 25 of the user's items, and the RevokeEveryone in the page it
		// falls in; the last page may be empty: the Query before it
		// stopped at 25 with nothing after.
		if n > 26 || (n == 0 && i < len(pages)-1) {
			t.Errorf("pages %v: page %d holds %d events, want 1 to 26", pages, i, n)
		}
	}
	if len(pages) < 2 {
		t.Errorf("pages %v: want more than one", pages)
	}
	for i := 1; i < len(events); i++ {
		if events[i].Time.After(events[i-1].Time) {
			t.Errorf("event %d (%s at %v) is newer than event %d (%s at %v)", i, events[i].Kind, events[i].Time, i-1, events[i-1].Kind, events[i-1].Time)
		}
	}
	count := map[ddbsession.EventKind]int{}
	for _, ev := range events {
		count[ev.Kind]++
		if ev.User != alice {
			t.Errorf("event %+v: user %v, want alice", ev, ev.User)
		}
	}
	want := map[ddbsession.EventKind]int{
		ddbsession.EventCreated:         1 + 1 + 3 + 20,
		ddbsession.EventSignInFailed:    1,
		ddbsession.EventReauthenticated: 1,
		ddbsession.EventRevoked:         1,
		ddbsession.EventEnded:           1,
		// The limit of 2 ends the oldest at each login beyond it: the
		// first login's (ended by the Logout already: its slot only), then
		// the others' in turn.
		ddbsession.EventEvicted:         count[ddbsession.EventEvicted],
		ddbsession.EventRevokedAll:      1,
		ddbsession.EventRevokedEveryone: 1,
	}
	if count[ddbsession.EventEvicted] == 0 {
		t.Error("no eviction in the history")
	}
	for kind, n := range want {
		if count[kind] != n {
			t.Errorf("%d events of kind %s, want %d", count[kind], kind, n)
		}
	}
	if len(count) != len(want) {
		t.Errorf("event kinds %v, want those of %v", count, want)
	}
	find := func(kind ddbsession.EventKind) ddbsession.Event {
		i := slices.IndexFunc(events, func(ev ddbsession.Event) bool { return ev.Kind == kind })
		if i < 0 {
			t.Fatalf("no %s event", kind)
		}
		return events[i]
	}
	if got := find(ddbsession.EventSignInFailed); got.Count != 3 || got.Address != "203.0.113.9" || !got.Time.Equal(start.Truncate(time.Hour)) {
		t.Errorf("the failed sign-ins: %+v, want 3 counted at the hour's start, from the last attempt's address", got)
	}
	if got := find(ddbsession.EventReauthenticated); !slices.Equal(got.Methods, []string{"password", "otp"}) || got.UserAgent != "Firefox/140" || got.Address != "198.51.100.1" {
		t.Errorf("the step-up: %+v, want its methods, device and address", got)
	}
	if got := find(ddbsession.EventRevoked); got.SessionID != otherID || got.Address != "198.51.100.2" || got.Methods != nil {
		t.Errorf("the revoke: %+v, want the revoked session and where it signed in from, no methods", got)
	}
	everyone := find(ddbsession.EventRevokedEveryone)
	if i := slices.IndexFunc(events, func(ev ddbsession.Event) bool { return ev.Kind == ddbsession.EventRevokedEveryone }); i == 0 || !events[i-1].Time.After(everyone.Time) {
		t.Errorf("RevokeEveryone at %v is not in its place: %v", everyone.Time, events)
	}

	// Bob has no history: not even the RevokeEveryone, which ended none of
	// his sessions.
	if got, _ := e.historyOf(bob); len(got) != 0 {
		t.Errorf("bob's history: %+v, want none", got)
	}
	// No history item holds a token, a digest of one or a password.
	secrets := map[string]string{"the password": password, "the wrong password": guess}
	for _, c := range []*http.Cookie{first, again, other} {
		for what, s := range secretForms(c.Value) {
			secrets[what] = s
		}
	}
	for _, it := range e.historyItems() {
		text := itemText(it)
		for what, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a history item holds %s: %s", what, text)
			}
		}
	}
}

// A page that History never returned is refused before any call.
func TestHistoryRefusesAPageItNeverReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.putUser("alice")
	for _, page := range []string{"x", "S#0000000000", "019a2b3c4d5e#zzzzzzzz", strings.Repeat("0", 12) + "#failed#"} {
		if _, _, err := e.m.History(context.Background(), alice, page); !errors.Is(err, ddbsession.ErrBadPage) {
			t.Errorf("History(%q): %v, want ErrBadPage", page, err)
		}
	}
}

// An event lives for Limits.HistoryRetention: History leaves it out once
// its TTL passed, before TTL deletes it (up to 48 hours late), and TTL's
// deletion, emulated here, changes nothing. The failed sign-ins of an hour
// live that long after the hour's end.
func TestHistoryExpiresByTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.HistoryRetention = 2 * time.Hour })
	alice := e.putUser("alice")
	e.login(alice) // 12:00:00.250
	if err := e.m.Login(newRecorder(), newRequest(), alice, func(User) error { return errWrongPassword }); err == nil {
		t.Fatal("a refused Login succeeded")
	}
	kinds := func() []ddbsession.EventKind {
		events, _ := e.historyOf(alice)
		var out []ddbsession.EventKind
		for _, ev := range events {
			out = append(out, ev.Kind)
		}
		return out
	}
	if got := kinds(); !slices.Equal(got, []ddbsession.EventKind{ddbsession.EventCreated, ddbsession.EventSignInFailed}) {
		t.Fatalf("history: %v, want the sign-in, then the failed one at the hour's start", got)
	}
	e.clock.Advance(2*time.Hour - time.Second)
	if got := kinds(); len(got) != 2 {
		t.Errorf("a second before the retention ends: %v, want both", got)
	}
	e.clock.Advance(time.Second) // the sign-in's TTL
	if got := kinds(); !slices.Equal(got, []ddbsession.EventKind{ddbsession.EventSignInFailed}) {
		t.Errorf("at the sign-in's TTL: %v, want the failed sign-ins alone, kept till their hour's end plus the retention", got)
	}
	e.clock.Advance(time.Hour)
	if got := kinds(); len(got) != 0 {
		t.Errorf("past every TTL: %v, want none", got)
	}
	// TTL deletes the items whose expiry passed, as DynamoDB would.
	now := e.clock.Now().Unix()
	items := e.historyItems()
	if len(items) != 2 {
		t.Fatalf("%d history items, want 2", len(items))
	}
	for _, it := range items {
		if expires := itemExpiry(t, it); expires.Unix() > now {
			t.Errorf("history item %s expires at %v, after now %v", itemText(it), expires, e.clock.Now())
		}
		e.deleteItem(map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]})
	}
	if got := kinds(); len(got) != 0 {
		t.Errorf("after TTL's deletion: %v, want none", got)
	}
}

// With Limits.HistoryRetention negative, nothing is written, and History
// says the history is off.
func TestHistoryOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.HistoryRetention = -1 })
	alice := e.putUser("alice")
	c := e.login(alice)
	if err := e.m.Logout(newRecorder(), newRequest(c)); err != nil {
		t.Fatal(err)
	}
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if items := e.historyItems(); len(items) != 0 {
		t.Errorf("history items with the history off: %v", itemsText(items))
	}
	if _, _, err := e.m.History(context.Background(), alice, ""); err == nil || !strings.Contains(err.Error(), "off") {
		t.Errorf("History with the history off: %v", err)
	}
}

// A sign-in is not made without its history event: a login whose event's
// write fails fails, and leaves no session.
func TestLoginFailsWithoutItsHistoryEvent(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	p.Fail = func(_ context.Context, op string, in any) error {
		if op == "PutItem" && attrText(in.(*dynamodb.PutItemInput).Item["kind"]) == "S:session-history" {
			return errors.New("history write failed")
		}
		return nil
	}
	w := httptest.NewRecorder()
	if err := e.m.Login(w, newRequest(), alice, nil); err == nil {
		t.Fatal("Login succeeded without its history event")
	}
	if len(e.itemsOf(kindSession, "")) != 0 || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("a login without its history event left a session: %v", itemsText(e.scanAll()))
	}
}

// A verify that says another step is needed (ErrSecondStep: a right
// password, a one-time code to come) counts no failed sign-in and records
// no device; a wrong password does count.
func TestSecondStepIsNoFailedSignIn(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	e := newEnv(t, withDevices(log))
	alice := e.putUser("alice")
	device := &http.Cookie{Name: deviceCookieName, Value: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	login := func(verify func(User) error) error {
		r := httptest.NewRequest("POST", "https://example.test/login", nil)
		r.AddCookie(device)
		return e.m.Login(httptest.NewRecorder(), r, alice, verify)
	}
	errCode := fmt.Errorf("a one-time code is needed: %w", ddbsession.ErrSecondStep)
	if err := login(func(User) error { return errCode }); err != errCode {
		t.Fatalf("Login: %v, want verify's error as it was", err)
	}
	if events, _ := e.historyOf(alice); len(events) != 0 {
		t.Errorf("history after a first step: %+v, want none", events)
	}
	if got := newDevices(log); len(got) != 0 {
		t.Errorf("a first step reported a new device: %+v", got)
	}
	if err := login(func(User) error { return errWrongPassword }); err != errWrongPassword {
		t.Fatalf("Login: %v, want the wrong password's error", err)
	}
	if events, _ := e.historyOf(alice); len(events) != 1 || events[0].Kind != ddbsession.EventSignInFailed || events[0].Count != 1 {
		t.Errorf("history after a wrong password: %+v, want one failed sign-in", events)
	}
}

// History reads no item that every instance shares per page: the last
// RevokeEveryone's time comes from the instance's copy of the global item,
// read anew only once it is older than RevokeEveryoneWithin.
func TestHistoryReadsNoSharedItemPerPage(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	var mono ddbtest.Mono
	ddbsession.SetMonotonicClock(e.m, mono.Now)
	alice := e.putUser("alice")
	e.login(alice)
	e.historyOf(alice)
	p.Take()
	for range 10 {
		e.historyOf(alice)
	}
	if got := p.Take(); !maps.Equal(got, map[string]int{"Query": 10}) {
		t.Errorf("10 pages of history made %v, want 10 Queries and nothing else", got)
	}
	mono.Advance(10 * time.Second) // the copy is stale: the next page reads it anew
	e.historyOf(alice)
	if got := p.Take(); got["Query"] != 1 || got["BatchGetItem"]+got["GetItem"] != 1 {
		t.Errorf("a page with a stale copy made %v, want a Query and a read of the shared items", got)
	}
}

// Where TTL runs late or not at all, a page does not come back empty while
// older events are left: the Query goes on past expired ones.
func TestHistorySkipsExpiredEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Limits.HistoryRetention = time.Hour })
	alice := e.putUser("alice")
	for range 100 {
		e.login(alice)
		e.clock.Advance(time.Second)
	}
	e.clock.Advance(2 * time.Hour) // every event expired, none deleted
	e.login(alice)
	if events, pages := e.historyOf(alice); len(events) != 1 || len(pages) > 2 {
		t.Errorf("%d events in pages %v, want the one live event, and at most an empty last page", len(events), pages)
	}
}

// A wrong password for a user who exists and a login of a name that is no
// user's make the same DynamoDB calls, so that the response time does not
// tell who has an account: the unknown name's is the failed sign-in's
// write, refused, which leaves no item, and reports no event and no
// error. With the history off, neither writes. BeginLogin alike.
func TestUnknownUserCostsAFailedSignIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		retention time.Duration
		updates   int
	}{
		{"history on", 0, 1},
		{"history off", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *ddbtest.Probe
			log := &eventLog{}
			e := newEnv(t, withProbe(&p), func(c *ddbsession.Config[User]) {
				c.OnEvent, c.Limits.HistoryRetention = log.record, tc.retention
			})
			alice := e.putUser("alice")
			nobody := ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"}
			wrong := func(User) error { return errWrongPassword }
			for _, sign := range []struct {
				name string
				in   func(ddbsession.UserKey) error
			}{
				{"Login", func(u ddbsession.UserKey) error { return e.m.Login(newRecorder(), newRequest(), u, wrong) }},
				{"BeginLogin", func(u ddbsession.UserKey) error { return e.m.BeginLogin(newRecorder(), newRequest(), u, wrong) }},
			} {
				if err := sign.in(alice); !errors.Is(err, errWrongPassword) { // the instance's first reads
					t.Fatalf("%s, a wrong password: %v", sign.name, err)
				}
				p.Take()
				if err := sign.in(alice); !errors.Is(err, errWrongPassword) {
					t.Fatalf("%s, a wrong password: %v", sign.name, err)
				}
				existing := p.Take()
				log.take()
				if err := sign.in(nobody); !errors.Is(err, ddbsession.ErrUserNotFound) {
					t.Fatalf("%s, a name that is no user's: %v", sign.name, err)
				}
				unknown := p.Take()
				if diff := cmp.Diff(existing, unknown); diff != "" || existing["UpdateItem"] != tc.updates {
					t.Errorf("%s: calls (-a wrong password +an unknown user):\n%s\nwant %d UpdateItem each", sign.name, diff, tc.updates)
				}
				if got := log.take(); len(got) != 0 {
					t.Errorf("%s of an unknown user reported %v", sign.name, got)
				}
			}
			for _, av := range e.scanWithHistory() {
				if strings.Contains(attrText(av["pk"]), "nobody") {
					t.Errorf("an unknown user's login left %s", itemsText([]map[string]types.AttributeValue{av}))
				}
			}
			if strings.Contains(e.logs.String(), "level=ERROR") {
				t.Errorf("logged:\n%s", e.logs)
			}
		})
	}
}
