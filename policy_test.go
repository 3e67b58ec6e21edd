package ddbsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

// policyDoc documents the least-privilege policy of each feature set: the
// one place it is written, which these tests read and hold the library to.
const policyDoc = "docs/lambda.md"

// policyRun is the run of one feature set's tests under its documented
// policy: each Manager it makes reaches the engine through a front that
// refuses every other action, as IAM does.
type policyRun struct {
	t       *testing.T
	actions []string
	fronts  []*ddbtest.Front
	// pause, if set, runs once, on the first call it matches of the Managers
	// the run restricts, before the call reaches the engine: a race staged
	// at a named point, whose other side runs to the end there.
	pause struct {
		sync.Mutex
		match func(ddbtest.FrontCall) bool
		other func()
	}
}

// pauseAt makes the run's next call that match takes wait, before it
// reaches the engine, until other has run.
func (p *policyRun) pauseAt(match func(ddbtest.FrontCall) bool, other func()) {
	p.pause.Lock()
	defer p.pause.Unlock()
	p.pause.match, p.pause.other = match, other
}

// hold is the fronts' hold: the pause, once.
func (p *policyRun) hold(_ context.Context, c ddbtest.FrontCall) bool {
	p.pause.Lock()
	other := p.pause.other
	if other == nil || !p.pause.match(c) {
		p.pause.Unlock()
		return true
	}
	p.pause.match, p.pause.other = nil, nil
	p.pause.Unlock()
	other()
	return true
}

// updateOf matches an UpdateItem of the item whose sort key is sk.
func updateOf(sk string) func(ddbtest.FrontCall) bool {
	return func(c ddbtest.FrontCall) bool {
		var in struct {
			Key struct{ SK struct{ S string } }
		}
		return c.Action == "dynamodb:UpdateItem" && json.Unmarshal(c.Body, &in) == nil && in.Key.SK.S == sk
	}
}

// putOf matches a PutItem of an item of kind.
func putOf(kind string) func(ddbtest.FrontCall) bool {
	return func(c ddbtest.FrontCall) bool {
		var in struct {
			Item struct{ Kind struct{ S string } }
		}
		return c.Action == "dynamodb:PutItem" && json.Unmarshal(c.Body, &in) == nil && in.Item.Kind.S == kind
	}
}

// env returns a Manager restricted to the run's policy, on a table of its
// own, and an unrestricted env on the same table for what other parts of
// an app do (writing users, signing in). The unrestricted Manager made the
// table as a template deploys it: the layout's keys, TTL on (emulated where
// the engine lacks TTL). mutate adjusts both Configs.
func (p *policyRun) env(mutate ...func(*ddbsession.Config[User])) (restricted, admin *env) {
	p.t.Helper()
	var ttl *ddbtest.TTLClient
	admin = newEnv(p.t, append(slices.Clone(mutate), func(c *ddbsession.Config[User]) {
		ttl = ddbtest.WithTTL(c.Client.(*dynamodb.Client))
		c.Client = ttl
	})...)
	front := ddbtest.NewFront(p.t, ddbtest.Policy{Actions: p.actions, Resources: []string{ddbtest.TableARN(admin.table)}},
		ddbtest.FrontTTL(ttl), ddbtest.FrontHold(p.hold))
	p.fronts = append(p.fronts, front)
	cfg := admin.cfg
	cfg.Client = front.Client()
	m, err := ddbsession.New(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	e := *admin
	e.cfg, e.m = cfg, m
	return &e, admin
}

// policyFeatures are the feature sets of docs/lambda.md's policy table, each
// with the tests that use it. Each set's policy is the whole of what an app
// that uses that feature alone needs; an app's policy is the union of its
// features'.
var policyFeatures = []struct {
	set string
	run func(p *policyRun)
}{
	{"startup", func(p *policyRun) {
		// CreateTable on the deployed table checks it, and reads the global
		// revocation generation; it changes nothing, TTL being on.
		for _, layout := range []func(*ddbsession.Config[User]){nil, withExpiryIndex, func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true }} {
			e, _ := p.env(layout)
			if err := e.m.CreateTable(context.Background()); err != nil {
				p.t.Errorf("CreateTable on the deployed table: %v", err)
			}
		}
	}},
	{"requests", func(p *policyRun) {
		t := p.t
		// A cookie with the user's key, refreshed once due.
		e, admin := p.env()
		alice := admin.putUser("alice")
		c := admin.login(alice)
		if got := e.status(c); got != http.StatusOK {
			t.Errorf("a request with the session: %d", got)
		}
		before := admin.sessionFor(c).ExpiresAt
		e.clock.Advance(11 * time.Minute)
		if w := e.get(e.m.RequireSession(whoami(e.m)), c); w.Code != http.StatusOK || sessionCookie(t, w.Result(), cookieName) == nil {
			t.Errorf("a request due for its refresh: %d, cookie %v", w.Code, w.Header().Values("Set-Cookie"))
		}
		if after := admin.sessionFor(c).ExpiresAt; !after.After(before) {
			t.Errorf("refresh: expiry %v, was %v", after, before)
		}
		if w := e.get(e.m.LoadSession(whoami(e.m))); w.Code != http.StatusOK || w.Body.String() != "anonymous\n" {
			t.Errorf("LoadSession, anonymous: %d %q", w.Code, w.Body)
		}
		if _, u, err := e.m.Authenticate(context.Background(), c.Value); err != nil || u.Name != "alice" {
			t.Errorf("Authenticate: %v %v", u, err)
		}
		if got := e.status(&http.Cookie{Name: cookieName, Value: strings.Repeat("A", 26)}); got != http.StatusUnauthorized {
			t.Errorf("an unknown token: %d", got)
		}
		// A cookie without the user's key reads the session, then the user.
		e, admin = p.env(func(c *ddbsession.Config[User]) { c.Cookie.HideUserKey = true })
		c = admin.login(admin.putUser("bob"))
		e.clock.Advance(11 * time.Minute)
		if got := e.status(c); got != http.StatusOK {
			t.Errorf("HideUserKey: %d", got)
		}
		// A bearer token.
		e, admin = p.env(func(c *ddbsession.Config[User]) { c.BearerTokens = true })
		token, _, err := admin.m.LoginBearer(newRequest(), admin.putUser("carol"), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "https://example.test/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		e.m.RequireSession(whoami(e.m)).ServeHTTP(w, r)
		e.settle()
		if w.Code != http.StatusOK {
			t.Errorf("bearer: %d", w.Code)
		}
	}},
	{"sign-in", func(p *policyRun) {
		t := p.t
		e, admin := p.env(withBearer)
		ctx := context.Background()
		dave := ddbsession.UserKey{PK: "USER#dave", SK: "PROFILE"}
		if err := e.m.CreateUser(ctx, User{PK: dave.PK, SK: dave.SK, Name: "dave"}); err != nil {
			t.Fatal(err)
		}
		if err := e.m.CreateUser(ctx, User{PK: dave.PK, SK: dave.SK, Name: "dave"}); !errors.Is(err, ddbsession.ErrUserExists) {
			t.Errorf("CreateUser again: %v", err)
		}
		first := e.login(dave)
		second := e.login(dave, first) // rotates: the first ends
		if admin.status(first) != http.StatusUnauthorized || admin.status(second) != http.StatusOK {
			t.Error("the login did not rotate the session")
		}
		if _, _, err := e.m.LoginBearer(newRequest(), dave, nil); err != nil {
			t.Errorf("LoginBearer: %v", err)
		}
		// A refused verify counts a failed sign-in in the history.
		wrong := errors.New("wrong password")
		if err := e.m.Login(newRecorder(), newRequest(), dave, func(User) error { return wrong }); err != wrong {
			t.Errorf("Login with a wrong password: %v", err)
		}
		if err := e.m.Login(newRecorder(), newRequest(), ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"}, nil); !errors.Is(err, ddbsession.ErrUserNotFound) {
			t.Errorf("Login of no one: %v", err)
		}
		if err := e.m.Logout(newRecorder(), newRequest(second)); err != nil {
			t.Errorf("Logout: %v", err)
		}
		if admin.status(second) != http.StatusUnauthorized {
			t.Error("Logout left the session")
		}
	}},
	{"session-limit", func(p *policyRun) {
		t := p.t
		e, admin := p.env(func(c *ddbsession.Config[User]) { c.Limits.MaxSessions = 1 })
		alice := admin.putUser("alice")
		oldest := e.login(alice)
		newest := e.login(alice) // takes the only slot: the oldest ends
		if admin.status(oldest) != http.StatusUnauthorized || admin.status(newest) != http.StatusOK {
			t.Error("a login at the limit did not end the oldest session")
		}
		// Two logins racing for the slot: the one whose write of the slots
		// item meets the other's reads the item again, and takes the slot
		// from the other's session.
		var racer *http.Cookie
		p.pauseAt(updateOf("SLOTS"), func() { racer = e.login(alice) })
		last := e.login(alice, newest)
		if admin.status(racer) != http.StatusUnauthorized || admin.status(last) != http.StatusOK {
			t.Error("of two racing logins at the limit, the later did not end the other's session")
		}
		if list := admin.mustList(alice); len(list) != 1 {
			t.Errorf("%d sessions live, want 1", len(list))
		}
		// A login that took the slot and has yet to write its session, and
		// a racing login that finds the slot without it: the racer takes
		// the slot and voids the session's key, so the first login's write
		// fails, and its session is as good as evicted.
		p.pauseAt(putOf(item.KindSession), func() { racer = e.login(alice) })
		first := e.login(alice)
		if admin.status(first) != http.StatusUnauthorized || admin.status(racer) != http.StatusOK {
			t.Error("of a login on its way and a racing one that took its slot, the first's session lives")
		}
		if list := admin.mustList(alice); len(list) != 1 {
			t.Errorf("after a login on its way: %d sessions live, want 1", len(list))
		}
		// The same, but the first login's session is written after the
		// racer read the slots and before its void: the racer ends it.
		reached, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		p.pauseAt(putOf(item.KindSession), func() {
			p.pauseAt(putOf(item.KindVoid), func() { close(reached); <-release })
			go func() { defer close(done); racer = e.login(alice) }()
			select {
			case <-reached:
			case <-done: // it wrote no void
			}
		})
		first = e.login(alice)
		p.pauseAt(nil, nil)
		close(release)
		<-done
		if admin.status(first) != http.StatusUnauthorized || admin.status(racer) != http.StatusOK {
			t.Error("a session written before its void lives beside the login that took its slot")
		}
		if list := admin.mustList(alice); len(list) != 1 {
			t.Errorf("after a session written before its void: %d sessions live, want 1", len(list))
		}
	}},
	{"two-step", func(p *policyRun) {
		t := p.t
		e, admin := p.env()
		alice := admin.putUser("alice")
		pending := e.beginLogin(alice)
		if _, err := e.completeLogin("000000", pending); !errors.Is(err, errWrongCode) {
			t.Errorf("a wrong code: %v", err)
		}
		res, err := e.completeLogin("123456", pending)
		if err != nil {
			t.Fatalf("the right code: %v", err)
		}
		if c := sessionCookie(t, res, cookieName); c == nil || admin.status(c) != http.StatusOK {
			t.Errorf("CompleteLogin's session: %v", c)
		}
		// A pending login that the browser abandons with a log-out.
		abandoned := e.beginLogin(alice)
		if err := e.m.Logout(newRecorder(), newRequest(abandoned)); err != nil {
			t.Errorf("Logout of a pending login: %v", err)
		}
		if _, err := e.completeLogin("123456", abandoned); !errors.Is(err, ddbsession.ErrNoSession) {
			t.Errorf("completing a logged-out pending login: %v", err)
		}
	}},
	{"sessions", func(p *policyRun) {
		t := p.t
		e, admin := p.env()
		alice := admin.putUser("alice")
		gone, kept := admin.login(alice), admin.login(alice)
		if list := e.mustList(alice); len(list) != 2 {
			t.Fatalf("List: %d sessions, want 2", len(list))
		}
		// A session item that TTL deleted, past any login on its way:
		// List drops its index item.
		e.deleteItem(sessionItemKey(gone.Value))
		e.clock.Advance(2*time.Minute + e.cfg.Limits.StoreTimeout)
		list := e.mustList(alice)
		if len(list) != 1 || len(e.itemsOf(kindIndex, "")) != 1 {
			t.Fatalf("List after a TTL deletion: %d sessions, %d index items; want 1, 1", len(list), len(e.itemsOf(kindIndex, "")))
		}
		if err := e.m.Revoke(context.Background(), alice, list[0].ID); err != nil {
			t.Errorf("Revoke: %v", err)
		}
		if admin.status(kept) != http.StatusUnauthorized {
			t.Error("Revoke left the session")
		}
		if err := e.m.Revoke(context.Background(), alice, list[0].ID); !errors.Is(err, ddbsession.ErrNoSession) {
			t.Errorf("Revoke again: %v", err)
		}
	}},
	{"revoke-all", func(p *policyRun) {
		t := p.t
		e, admin := p.env()
		alice := admin.putUser("alice")
		c := admin.login(alice)
		if err := e.m.RevokeAll(context.Background(), alice); err != nil {
			t.Fatal(err)
		}
		if admin.status(c) != http.StatusUnauthorized {
			t.Error("RevokeAll left the session")
		}
		if err := e.m.RevokeAll(context.Background(), ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"}); !errors.Is(err, ddbsession.ErrUserNotFound) {
			t.Errorf("RevokeAll of no one: %v", err)
		}
	}},
	{"history", func(p *policyRun) {
		t := p.t
		e, admin := p.env()
		alice := admin.putUser("alice")
		admin.login(alice)
		if events, _, err := e.m.History(context.Background(), alice, ""); err != nil || len(events) != 1 {
			t.Errorf("History: %v, %v; want the sign-in", events, err)
		}
	}},
	{"revoke-everyone", func(p *policyRun) {
		t := p.t
		e, admin := p.env()
		c := admin.login(admin.putUser("alice"))
		if err := e.m.RevokeEveryone(context.Background()); err != nil {
			t.Fatal(err)
		}
		// An instance that starts now reads the new generation.
		if _, _, err := primed(t, admin.cfg).Authenticate(context.Background(), c.Value); !errors.Is(err, ddbsession.ErrNoSession) {
			t.Errorf("a session made before RevokeEveryone: %v", err)
		}
	}},
	{"data", func(p *policyRun) {
		t := p.t
		e, admin := p.env()
		c := admin.login(admin.putUser("alice"))
		add := func(ctx context.Context, n int) error {
			return e.m.UpdateData(ctx, func(old json.RawMessage) (any, error) {
				var v []int
				if old != nil {
					if err := json.Unmarshal(old, &v); err != nil {
						return nil, err
					}
				}
				return append(v, n), nil
			})
		}
		// Two requests of one session at once: the second's write meets
		// the first's, reads the session again and adds to it.
		e.inRequest(c, func(first context.Context) {
			e.inRequest(c, func(second context.Context) {
				if err := add(second, 2); err != nil {
					t.Error(err)
				}
			})
			if err := add(first, 1); err != nil {
				t.Error(err)
			}
		})
		e.inRequest(c, func(ctx context.Context) {
			s, _ := e.m.Session(ctx)
			if string(s.Data) != "[2,1]" {
				t.Errorf("data %s, want [2,1]", s.Data)
			}
		})
	}},
	{"device-binding", func(p *policyRun) {
		t := p.t
		e, admin := p.env(withDeviceBinding(10 * time.Minute))
		b, offer := admin.loginOffered(dbsctest.NewES256(), admin.putUser("alice"))
		b.e = e // the restricted Manager serves the binding and the requests
		b.register(offer)
		if got := b.status(); got != http.StatusOK {
			t.Errorf("a bound request: %d", got)
		}
		e.clock.Advance(11 * time.Minute)
		if got := b.status(); got != http.StatusUnauthorized {
			t.Errorf("past the bound cookie's life: %d", got)
		}
		b.refresh()
		if got := b.status(); got != http.StatusOK {
			t.Errorf("after the bound cookie's refresh: %d", got)
		}
		// Two refreshes with one challenge (two tabs): the one whose write
		// meets the other's finds its own write did not land, and answers
		// with the challenge the other left open, which the browser signs.
		e.clock.Advance(11 * time.Minute)
		tab := *b
		p.pauseAt(func(c ddbtest.FrontCall) bool { return c.Action == "dynamodb:UpdateItem" }, tab.refresh)
		b.refresh()
		if b.status() != http.StatusOK || tab.status() != http.StatusOK {
			t.Errorf("after two racing refreshes: %d and %d", b.status(), tab.status())
		}
	}},
}

// TestDocumentedPolicies runs each feature set's tests under the policy
// that docs/lambda.md documents for it: a call it makes that the policy
// lacks is refused, as on AWS, and fails the test; an action in the policy
// that none of its tests makes fails it too. So the documented policies
// are exactly what the library uses.
func TestDocumentedPolicies(t *testing.T) {
	t.Parallel()
	sets, err := ddbtest.DocumentedPolicies(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, f := range policyFeatures {
		tested[f.set] = true
		if _, ok := sets[f.set]; !ok {
			t.Errorf("feature set %q has tests, and %s no policy for it", f.set, policyDoc)
		}
	}
	for set := range sets {
		if !tested[set] {
			t.Errorf("%s documents a policy for feature set %q, which no test runs under", policyDoc, set)
		}
	}
	for _, f := range policyFeatures {
		actions, ok := sets[f.set]
		if !ok {
			continue
		}
		t.Run(f.set, func(t *testing.T) {
			t.Parallel()
			p := &policyRun{t: t, actions: actions}
			f.run(p)
			used := map[string]bool{}
			for _, front := range p.fronts {
				for _, a := range front.Used() {
					used[a] = true
				}
				for _, c := range front.Refused() {
					t.Errorf("%s on %s: the feature calls it, and its documented policy lacks it", c.Action, strings.Join(c.Resources, ", "))
				}
			}
			for _, a := range actions {
				if !used[a] {
					t.Errorf("%s is in the documented policy of %q, and none of its tests calls it", a, f.set)
				}
			}
		})
	}
}
