package upgradetest_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// variants are the configurations the deploy runs in, each on tables of
// its own: the driver's flags, which both versions get.
var variants = []struct {
	name  string
	flags []string
	// endings are the ways of ending sessions that the variant tries.
	endings []ending
}{
	{"default", nil, []ending{logout, revoke, revokeAll, recreate}},
	{"MREC", []string{"-mrec"}, []ending{logout, revoke, revokeAll, recreate}},
	{"MaxSessions", []string{"-max-sessions=2"}, []ending{logout, revoke, revokeAll, sessionLimit}},
}

// TestRollingUpgradeFromV010 runs instances of the released v0.1.0 ("old",
// the commit CHANGELOG.md names) and of this checkout ("new") on one table,
// as a rolling deploy does, and checks that
//
//   - sessions made before the deploy stay signed in on both versions
//     during it, and on the new one after it;
//   - a session that either version refreshes (a request after
//     RefreshInterval rewrites its item) stays signed in on both, at the
//     expiry written;
//   - no ended session (Logout, Revoke, RevokeAll, RevokeEveryone, a
//     session limit's eviction, and the deletion of its user item, which
//     CreateUser then makes anew under the same key) is accepted by either
//     version, whichever version ended it and whichever made it.
//
// The old version may refuse sessions that the new one made, or fail to
// end them (answer an error); the test records what it did and logs it,
// and fails only if it accepts one that was ended. An ending that the old
// version says it did must hold on both versions.
func TestRollingUpgradeFromV010(t *testing.T) {
	bins := buildDrivers(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			t.Run("sessions", func(t *testing.T) {
				t.Parallel()
				testEndings(t, newDeploy(t, bins, v.flags), v.endings)
			})
			t.Run("revoke-everyone", func(t *testing.T) {
				t.Parallel()
				testRevokeEveryone(t, newDeploy(t, bins, v.flags))
			})
		})
	}
}

// testEndings ends sessions each way, on each version, of sessions made on
// each version, and after each asks both versions about every session.
func testEndings(t *testing.T, d *deploy, endings []ending) {
	var cases []*endingCase
	for _, e := range endings {
		for _, by := range []string{oldName, newName} {
			for _, made := range []string{oldName, newName} {
				cases = append(cases, &endingCase{ending: e, by: by, made: made,
					user: fmt.Sprintf("%s-by-%s-of-%s", e.name, by, made)})
			}
		}
	}

	t.Run("before the deploy", func(t *testing.T) {
		// The old version alone: its users, and their sessions.
		d.createUser(t, d.old, "untouched")
		d.login(t, d.old, "untouched", "made before the deploy")
		for _, c := range cases {
			d.createUser(t, d.old, c.user)
			if c.made == oldName {
				c.a = d.login(t, d.old, c.user, "a, made before the deploy")
				c.b = d.login(t, d.old, c.user, "b, made before the deploy")
			}
		}
		d.check(t, d.old)
	})
	d.startNew(t)
	t.Run("sessions made before the deploy", func(t *testing.T) {
		d.check(t, d.old, d.new)
	})
	t.Run("sessions made on new", func(t *testing.T) {
		for _, c := range cases {
			if c.made == newName {
				c.a = d.login(t, d.new, c.user, "a, made on new")
				c.b = d.login(t, d.new, c.user, "b, made on new")
			}
		}
		d.createUser(t, d.new, "signed-up-on-new")
		d.login(t, d.new, "signed-up-on-new", "made on new")
		if _, err := d.tryLogin(t, d.old, "signed-up-on-new", "made on old"); err != nil {
			d.note("old (%s) could not sign in a user that new created: %v", released, err)
		}
		d.check(t, d.old, d.new)
	})
	for _, c := range cases {
		t.Run(c.user, func(t *testing.T) {
			if c.a == nil {
				t.Skip("no sessions to end: making them failed")
			}
			by := d.instance(c.by)
			ended, err := c.ending.end(t, d, by, c)
			switch {
			case err != nil && c.by == oldName && c.made == newName:
				d.note("old (%s) could not end sessions made on new (%s): %v", released, c.ending.name, err)
				for _, s := range ended {
					s.unsure = true // it may have ended them half-way
				}
			case err != nil:
				t.Fatalf("%s on %s: %v", c.ending.name, by, err)
			default:
				for _, s := range ended {
					s.ended = c.ending.name + " on " + by.String()
				}
			}
			d.check(t, d.running()...)
			d.checkList(t, c.user)
		})
	}
	t.Run("refreshes", func(t *testing.T) {
		for _, by := range d.running() {
			d.refresh(t, by)
		}
	})
	t.Run("after the deploy", func(t *testing.T) {
		d.old.stop()
		d.check(t, d.new)
	})
	d.report(t)
}

// refreshAfter is how far the instances' clocks move for a request to
// refresh a session: past the default Limits.RefreshInterval (an hour),
// well within IdleTimeout (a day).
const refreshAfter = 2 * time.Hour

// refresh moves both instances' clocks on, so that a request refreshes its
// session, and sends by every live session: by must refresh each that it
// accepts, and both versions then read the expiry that by wrote. A
// refresh rewrites the session item, as a request of either version, on a
// session of either, does all day during a deploy.
func (d *deploy) refresh(t *testing.T, by *instance) {
	t.Helper()
	d.settle(t)
	for _, in := range d.running() {
		if err := in.post(t, "/advance", url.Values{"by": {refreshAfter.String()}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	refreshed := map[*session]int64{}
	for _, s := range d.live() {
		v := by.me(t, s.cookie)
		switch {
		case v.accepted() && !v.refreshed:
			t.Errorf("%s accepts %s %v on without refreshing it", by, s, refreshAfter)
		case v.accepted():
			refreshed[s] = v.expires
		case s.mustAccept(by):
			t.Errorf("%s refuses %s, which lives: %s", by, s, v)
		default:
			d.record(by, s, v)
		}
	}
	d.settle(t)
	for _, s := range d.live() {
		expires, ok := refreshed[s]
		if !ok {
			continue
		}
		for _, in := range d.running() {
			if v := in.me(t, s.cookie); v.accepted() && v.expires != expires {
				t.Errorf("%s reads the expiry of %s as %d, after %s refreshed it to %d", in, s, v.expires, by, expires)
			}
		}
	}
	d.check(t, d.running()...)
}

// settle waits until every running instance's refresh writes are done, so
// that the next requests see them.
func (d *deploy) settle(t *testing.T) {
	t.Helper()
	for _, in := range d.running() {
		if err := in.post(t, "/wait", nil, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// testRevokeEveryone ends everyone's sessions on one version, then on the
// other. RevokeEveryone reaches other instances only within
// Limits.RevokeEveryoneWithin; rather than wait that out, the test restarts
// both instances, whose new Managers read the global generation at once.
func testRevokeEveryone(t *testing.T, d *deploy) {
	t.Run("before the deploy", func(t *testing.T) {
		d.createUser(t, d.old, "alice")
		d.login(t, d.old, "alice", "made before the deploy")
		d.check(t, d.old)
	})
	d.startNew(t)
	t.Run("sessions made on both", func(t *testing.T) {
		d.createUser(t, d.new, "bob")
		d.login(t, d.new, "alice", "made on new")
		d.login(t, d.new, "bob", "made on new")
		d.check(t, d.old, d.new)
	})

	for _, name := range []string{oldName, newName} {
		t.Run("on-"+name, func(t *testing.T) {
			by := d.instance(name)
			live := d.live()
			if err := by.post(t, "/revoke-everyone", nil, ""); err != nil {
				t.Fatal(err)
			}
			for _, s := range live {
				s.ended = "RevokeEveryone on " + by.String()
			}
			// The instance that made the call applies it at once.
			d.check(t, by)
			for _, in := range d.running() {
				if err := in.post(t, "/restart", nil, ""); err != nil {
					t.Fatal(err)
				}
			}
			d.check(t, d.running()...)

			// Sessions made after it live.
			d.login(t, d.old, "alice", "made on old after RevokeEveryone on "+name)
			d.login(t, d.new, "bob", "made on new after RevokeEveryone on "+name)
			d.check(t, d.running()...)
		})
	}
	t.Run("after the deploy", func(t *testing.T) {
		d.old.stop()
		d.check(t, d.new)
	})
	d.report(t)
}

// An ending is a way of ending sessions: end ends some of c's sessions
// through by, and returns them, with the error that by answered with.
type ending struct {
	name string
	end  func(t *testing.T, d *deploy, by *instance, c *endingCase) ([]*session, error)
}

// An endingCase is an ending tried by one version (by) on sessions made
// by one version (made), two sessions of a user of its own: a, the older,
// and b.
type endingCase struct {
	ending   ending
	by, made string
	user     string
	a, b     *session
}

var (
	logout = ending{"logout", func(t *testing.T, d *deploy, by *instance, c *endingCase) ([]*session, error) {
		return []*session{c.a}, by.post(t, "/logout", nil, c.a.cookie)
	}}
	// revoke ends a by the ID that by's List shows.
	revoke = ending{"revoke", func(t *testing.T, d *deploy, by *instance, c *endingCase) ([]*session, error) {
		ids, err := by.list(t, c.user)
		if err != nil {
			return nil, fmt.Errorf("list: %v", err)
		}
		switch {
		case slices.Contains(ids, c.a.id):
		case c.by == oldName && c.made == newName:
			d.note("List on old (%s) does not show sessions made on new; Revoke by the ID all the same", released)
		default:
			t.Errorf("List on %s does not show %s, which lives: %q", by, c.a, ids)
		}
		return []*session{c.a}, by.post(t, "/revoke", url.Values{"name": {c.user}, "id": {c.a.id}}, "")
	}}
	revokeAll = ending{"revoke-all", func(t *testing.T, d *deploy, by *instance, c *endingCase) ([]*session, error) {
		return []*session{c.a, c.b}, by.post(t, "/revoke-all", url.Values{"name": {c.user}}, "")
	}}
	// recreate deletes the user item, as an app that closes an account
	// does, and by's CreateUser makes it anew under the same key: no
	// session of the account before is one of the account after.
	recreate = ending{"recreate", func(t *testing.T, d *deploy, by *instance, c *endingCase) ([]*session, error) {
		if err := by.post(t, "/delete-user", url.Values{"name": {c.user}}, ""); err != nil {
			return []*session{c.a, c.b}, err
		}
		d.createUser(t, by, c.user)
		return []*session{c.a, c.b}, nil
	}}
	// sessionLimit signs the user in once more, over Limits.MaxSessions (2),
	// which ends the oldest session. The old version may not count sessions
	// that the new one made, as it may not read them: whether it ended one is
	// recorded, not required.
	sessionLimit = ending{"session-limit", func(t *testing.T, d *deploy, by *instance, c *endingCase) ([]*session, error) {
		if _, err := d.tryLogin(t, by, c.user, "c, made on "+by.name+" over the limit"); err != nil {
			return []*session{c.a}, err
		}
		if c.by == oldName && c.made == newName && d.new.me(t, c.a.cookie).accepted() {
			d.note("old (%s)'s session limit does not count sessions made on new: a user holds one more than the limit", released)
			c.a.unsure = true
			return nil, nil
		}
		return []*session{c.a}, nil
	}}
)

const (
	oldName = "old"
	newName = "new"
)

// A deploy is one table with an instance of the old version and, from
// startNew on, one of the new version, and the sessions the test follows.
type deploy struct {
	bins       drivers
	table      string
	flags      []string
	old, new   *instance
	sessions   []*session
	usersOnNew map[string]bool // the users created on the new version
	reported   map[string]bool // the problems check has reported
	// seen holds the sessions of each kind by what a version answered
	// where it may answer either way, and notes says what else it did so.
	seen  map[string]map[string]map[*session]bool
	notes []string
}

// newDeploy makes a table, through a first instance of the old version,
// whose CreateTable creates it, as before any deploy.
func newDeploy(t *testing.T, bins drivers, flags []string) *deploy {
	t.Helper()
	d := &deploy{bins: bins, table: ddbtest.TableName(t, ddbtest.Client(t)), flags: flags,
		usersOnNew: map[string]bool{}, reported: map[string]bool{}, seen: map[string]map[string]map[*session]bool{}}
	d.old = start(t, oldName, bins.old, d.table, flags)
	return d
}

// startNew starts the new version beside the old one: its CreateTable
// checks the table that the old version made.
func (d *deploy) startNew(t *testing.T) {
	t.Helper()
	d.new = start(t, newName, d.bins.new, d.table, d.flags)
}

func (d *deploy) instance(name string) *instance {
	if name == oldName {
		return d.old
	}
	return d.new
}

// running returns the instances that have not been stopped.
func (d *deploy) running() []*instance {
	var in []*instance
	for _, i := range []*instance{d.old, d.new} {
		if i != nil && !i.stopped() {
			in = append(in, i)
		}
	}
	return in
}

func (in *instance) String() string {
	if in.name == oldName {
		return "old (" + released + ")"
	}
	return in.name
}

// A session is one browser's session, as the test follows it.
type session struct {
	label     string
	user      string
	madeOn    *instance
	userOnNew bool   // its user was created on the new version
	cookie    string // the Cookie header that the browser sends
	id        string // its public ID, as the instance that made it says
	ended     string // how it was ended; "" while it lives
	unsure    bool   // an ending that failed may have ended it: not checked
}

func (s *session) String() string { return fmt.Sprintf("%s's session %q (%s)", s.user, s.id, s.label) }

// mustAccept reports whether in must accept s while it lives. The new
// version accepts every session, but one that the old version made for a
// user the new one created; the old version, the sessions it made for its
// own users. Either may answer either way to the rest, and the test
// records how.
func (s *session) mustAccept(in *instance) bool {
	madeOnOld := s.madeOn.name == oldName
	if in.name == newName {
		return !madeOnOld || !s.userOnNew
	}
	return madeOnOld && !s.userOnNew
}

// live returns the sessions that have not been ended.
func (d *deploy) live() []*session {
	var live []*session
	for _, s := range d.sessions {
		if s.ended == "" && !s.unsure {
			live = append(live, s)
		}
	}
	return live
}

func (d *deploy) createUser(t *testing.T, on *instance, name string) {
	t.Helper()
	if err := on.post(t, "/users", url.Values{"name": {name}}, ""); err != nil {
		t.Fatal(err)
	}
	d.usersOnNew[name] = on.name == newName
}

// login signs user in on a fresh browser, on on, and follows the session.
func (d *deploy) login(t *testing.T, on *instance, user, label string) *session {
	t.Helper()
	s, err := d.tryLogin(t, on, user, label)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryLogin is login, returning the error of a login that failed.
func (d *deploy) tryLogin(t *testing.T, on *instance, user, label string) (*session, error) {
	t.Helper()
	status, body, cookie := on.call(t, http.MethodPost, "/login", url.Values{"name": {user}}, "")
	if status != http.StatusOK {
		return nil, fmt.Errorf("login of %s on %s: %d %s", user, on, status, body)
	}
	if cookie == "" {
		t.Fatalf("login of %s on %s set no cookie", user, on)
	}
	s := &session{label: label, user: user, madeOn: on, userOnNew: d.usersOnNew[user], cookie: cookie}
	if v := on.me(t, cookie); v.accepted() {
		s.id = v.id
	}
	d.sessions = append(d.sessions, s)
	return s, nil
}

// check asks each of instances about every session followed, and holds
// the answers to the rules: no ended session accepted, by either version
// (the new one answers 401); every live session accepted where
// mustAccept says, as its own user. Other answers are recorded.
//
// A problem fails the subtest that first finds it, and only that one: a
// session wrongly accepted stays so, and the ending that made it so is
// the one to look at.
func (d *deploy) check(t *testing.T, instances ...*instance) {
	t.Helper()
	for _, s := range d.sessions {
		if s.unsure {
			continue
		}
		for _, in := range instances {
			v := in.me(t, s.cookie)
			var problem string
			switch {
			case v.accepted() && (v.name != s.user || s.id != "" && v.id != s.id):
				problem = fmt.Sprintf("%s accepts %s as %s's session %q", in, s, v.name, v.id)
			case s.ended != "" && v.accepted():
				problem = fmt.Sprintf("%s accepts %s, which %s ended", in, s, s.ended)
			case s.ended != "" && in.name == newName && v.status != http.StatusUnauthorized:
				problem = fmt.Sprintf("%s refuses %s, which %s ended, with %s; want 401", in, s, s.ended, v)
			case s.ended != "":
			case !s.mustAccept(in):
				d.record(in, s, v)
			case !v.accepted():
				problem = fmt.Sprintf("%s refuses %s, which lives: %s", in, s, v)
			}
			if problem != "" && !d.reported[problem] {
				d.reported[problem] = true
				t.Error(problem)
			}
		}
	}
}

// checkList checks each running instance's List of user: no ended
// session listed, and each live one that the instance must accept listed.
func (d *deploy) checkList(t *testing.T, user string) {
	t.Helper()
	for _, in := range d.running() {
		ids, err := in.list(t, user)
		if err != nil {
			if in.name == newName {
				t.Errorf("List of %s on %s: %v", user, in, err)
			} else {
				d.note("List on old (%s) failed: %v", released, err)
			}
			continue
		}
		for _, s := range d.sessions {
			if s.user != user || s.unsure || s.id == "" {
				continue
			}
			listed := slices.Contains(ids, s.id)
			switch {
			case s.ended != "" && listed:
				t.Errorf("List on %s shows %s, which %s ended", in, s, s.ended)
			case s.ended == "" && s.mustAccept(in) && !listed:
				t.Errorf("List on %s does not show %s, which lives: %q", in, s, ids)
			}
		}
	}
}

// record keeps what in answered about s, where it may answer either way.
func (d *deploy) record(in *instance, s *session, v verdict) {
	what := fmt.Sprintf("%s on live sessions made on %s", in, s.madeOn.name)
	if s.userOnNew {
		what += " for users created on new"
	}
	answer := fmt.Sprintf("refused with %d", v.status)
	if v.accepted() {
		answer = "accepted"
	}
	if d.seen[what] == nil {
		d.seen[what] = map[string]map[*session]bool{}
	}
	if d.seen[what][answer] == nil {
		d.seen[what][answer] = map[*session]bool{}
	}
	d.seen[what][answer][s] = true
}

// note records, once, something the old version did that it may do.
func (d *deploy) note(format string, args ...any) {
	if n := fmt.Sprintf(format, args...); !slices.Contains(d.notes, n) {
		d.notes = append(d.notes, n)
	}
}

// report logs what was recorded: how many sessions got each answer (a
// session whose answer changed counts under each).
func (d *deploy) report(t *testing.T) {
	var lines []string
	for what, answers := range d.seen {
		var counts []string
		for answer, sessions := range answers {
			counts = append(counts, fmt.Sprintf("%d %s", len(sessions), answer))
		}
		slices.Sort(counts)
		lines = append(lines, what+": "+strings.Join(counts, ", "))
	}
	slices.Sort(lines)
	for _, l := range append(lines, d.notes...) {
		t.Log(l)
	}
}
