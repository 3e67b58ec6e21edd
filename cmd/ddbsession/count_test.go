package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
)

// count counts unexpired session items and their distinct users, over
// every segment of a parallel scan; a pending two-step login is not a
// session yet, and the sessions a RevokeAll ended are counted apart.
func TestCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob, carol, dave := f.user("alice"), f.user("bob"), f.user("carol"), f.user("dave")
	f.login(alice, firefox)
	f.login(alice, curl)
	f.login(bob, curl)
	f.login(dave, curl)
	f.login(dave, firefox)
	if err := f.app.RevokeAll(context.Background(), dave); err != nil {
		t.Fatal(err)
	}
	f.beginLogin(carol) // a pending login: no one is signed in yet
	f.beginLogin(alice)
	f.expiredSession(carol, time.Now().Add(-time.Hour), curl)
	f.expiredSession(alice, time.Now().Add(-time.Minute), curl)
	f.scsItem(time.Now().Add(time.Hour), false)
	all := int64(len(f.keys()))

	for _, segments := range []string{"1", "3"} {
		code, stdout, stderr := f.run("count", "-yes", "-json", "-segments", segments)
		wantCode(t, code, exitOK, stdout, stderr)
		var got countReport
		decode(t, stdout, &got)
		want := countReport{Table: f.table, LiveSessions: 3, RevokedSessions: 2, UsersWithSessions: 2, Scanned: all}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(countReport{}, "ReadUnits", "ElapsedSeconds", "AsOf")); diff != "" {
			t.Errorf("-segments %s: count -json (-want +got):\n%s", segments, diff)
		}
		if got.ReadUnits <= 0 || time.Since(got.AsOf) > time.Minute || stderr != "" {
			t.Errorf("read units %v, as of %v, stderr %q", got.ReadUnits, got.AsOf, stderr)
		}
	}
	code, stdout, stderr := f.run("count", "-yes")
	wantCode(t, code, exitOK, stdout, stderr)
	for _, want := range []string{"live sessions        3", "revoked sessions     2 (a revocation ended them", "users with sessions  2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("count does not say %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "count: ") || !strings.Contains(stderr, "items scanned") {
		t.Errorf("no progress line:\n%s", stderr)
	}
}

// count says what the scan costs before it starts, from DescribeTable's
// size, and asks; without a terminal it refuses unless -yes. dynalite
// keeps no item count or size (it says 0): the probe answers as
// DynamoDB does for a table of 2,000 items of 4 KB.
func TestCountAsksFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.login(f.user("alice"), curl)
	describeAs(f.probe, func(d *types.TableDescription) {
		d.ItemCount, d.TableSizeBytes = aws.Int64(2000), aws.Int64(2000*4096)
	})
	estimate := []string{"about 2,000 items, 7.8 MiB", "about 1,000 read units, half the 2,000 of strongly consistent reads", "at -max-rcu 100, about 10s"}

	code, stdout, stderr := f.run("count", "-max-rcu", "100")
	wantCode(t, code, exitDeclined, stdout, stderr)
	for _, want := range append(estimate, "pass -yes") {
		if !strings.Contains(stderr, want) {
			t.Errorf("without a terminal, stderr does not say %q:\n%s", want, stderr)
		}
	}
	f.terminal, f.stdin = true, "n\n"
	code, stdout, stderr = f.run("count", "-max-rcu", "100")
	wantCode(t, code, exitDeclined, stdout, stderr)
	if !strings.Contains(stderr, "Go on? [y/N]") || f.probe.Count("Scan") != 0 {
		t.Fatalf("declined: %d Scans; stderr:\n%s", f.probe.Count("Scan"), stderr)
	}
	f.stdin = "y\n"
	code, stdout, stderr = f.run("count", "-max-rcu", "100")
	wantCode(t, code, exitOK, stdout, stderr)
	if f.probe.Count("Scan") == 0 || !strings.Contains(stdout, "live sessions        1") || !strings.Contains(stderr, "\rcount [") {
		t.Errorf("accepted: %d Scans; stdout:\n%s\nstderr:\n%q", f.probe.Count("Scan"), stdout, stderr)
	}
}

// count leaves out the sessions that a revocation ended, reading what
// ended them in the same scan, and nothing else but the table's layout
// record: a RevokeAll (the user item's version; in MREC, the revocation
// item's), a RevokeEveryone (the global item), and in MREC an end record,
// which keeps a session ended that another Region's write brought back.
func TestCountLeavesOutRevoked(t *testing.T) {
	t.Parallel()
	for _, mrec := range []bool{false, true} {
		t.Run(map[bool]string{false: "one Region", true: "MREC"}[mrec], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(c *ddbsession.Config[testUser]) { c.Layout.MREC = mrec })
			args := []string{"count", "-yes", "-json", "-segments", "2"}
			if mrec {
				args = append(args, "-mrec")
			}
			runs := 0
			count := func(step string, live, revoked, users int64) {
				t.Helper()
				runs++
				code, stdout, stderr := f.run(args...)
				wantCode(t, code, exitOK, stdout, stderr)
				var got countReport
				decode(t, stdout, &got)
				if got.LiveSessions != live || got.RevokedSessions != revoked || got.UsersWithSessions != users || stderr != "" {
					t.Errorf("%s: %d live, %d revoked, %d users with sessions; want %d, %d, %d; stderr %q", step, got.LiveSessions, got.RevokedSessions, got.UsersWithSessions, live, revoked, users, stderr)
				}
			}
			ctx := context.Background()
			alice, bob := f.user("alice"), f.user("bob")
			kept, ended := f.login(alice, firefox), f.login(alice, curl)
			f.login(bob, curl)
			f.login(bob, firefox)
			count("signed in", 4, 0, 2)

			if err := f.app.RevokeAll(ctx, bob); err != nil {
				t.Fatal(err)
			}
			count("after bob's RevokeAll", 2, 2, 1)
			f.login(bob, curl)
			count("after bob signs in again", 3, 2, 2)

			if mrec {
				// alice's session ends, and another Region's refresh, which
				// had not seen the end, writes its item back whole.
				cred, _ := layout.ParseCredential(ended.Value)
				key := layout.SessionKey(layout.SessionPK(cred.Token))
				before := f.item(key)
				list, err := f.app.List(ctx, alice)
				if err != nil || len(list) != 2 {
					t.Fatalf("List: %v, %v", list, err)
				}
				if err := f.app.Revoke(ctx, alice, list[0].ID); err != nil { // the newest: ended's
					t.Fatal(err)
				}
				f.put(before)
				if f.valid(ended) || !f.valid(kept) {
					t.Fatalf("the session written back is valid %v, the other %v", f.valid(ended), f.valid(kept))
				}
				count("after a revoked session came back", 2, 3, 2)
			}

			if err := f.app.RevokeEveryone(ctx); err != nil {
				t.Fatal(err)
			}
			count("after RevokeEveryone", 0, 5, 0)
			f.login(alice, curl)
			count("after alice signs in again", 1, 5, 1)
			// Without -mrec, on an MREC app's table too, the same: the
			// layout is the table's.
			args = []string{"count", "-yes", "-json"}
			count("without -mrec", 1, 5, 1)
			// Besides its scan, a run reads the table's layout record.
			if n := f.probe.Count("GetItem"); n != runs {
				t.Errorf("%d runs of count made %d GetItem calls, want one each: the layout record", runs, n)
			}
			for _, op := range []string{"BatchGetItem", "Query"} {
				if n := f.probe.Count(op); n != 0 {
					t.Errorf("count made %d %s calls: it reads with its scan alone", n, op)
				}
			}
			if !mrec {
				// A revocation item, which only MREC writes, in a table
				// whose record says it is not: the record is suspect.
				f.update(layout.RevocationKey(alice.PK, alice.SK), layout.ChangeRevocation(time.Now()))
				code, stdout, stderr := f.run("count", "-yes", "-json")
				wantCode(t, code, exitOK, stdout, stderr)
				if !strings.Contains(stderr, "1 users' revocation items") || !strings.Contains(stderr, "its layout record says it is not MREC") {
					t.Errorf("count does not warn of a revocation item in a one-Region table:\n%s", stderr)
				}
			}
		})
	}
}

// count judges each session as the library does (decide.Judge), from what
// its scan read, in the layout the table records (no -mrec on an MREC
// app's table): a credential changed since the login, a user item made
// anew, a RevokeAll, a session of release v0.1.0's format that its user's
// version still holds, and one it does not. Its live sessions are exactly
// those a fresh instance of the app accepts.
func TestCountAgreesWithTheLibrary(t *testing.T) {
	t.Parallel()
	for _, mrec := range []bool{false, true} {
		t.Run(map[bool]string{false: "one Region", true: "MREC"}[mrec], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(c *ddbsession.Config[testUser]) { c.Layout.MREC = mrec })
			ctx := context.Background()
			l := layout
			l.MREC = mrec
			var cookies []*http.Cookie
			users := map[*http.Cookie]string{}
			login := func(u ddbsession.UserKey) {
				c := f.login(u, curl)
				cookies, users[c] = append(cookies, c), u.PK
			}
			alice, bob, carol, dave, erin := f.user("alice"), f.user("bob"), f.user("carol"), f.user("dave"), f.user("erin")
			login(alice)
			// bob's credential changes, as the app changes it with his
			// password.
			login(bob)
			f.set(l.Key(bob.PK, bob.SK), "SET credentialVersion = :v", map[string]types.AttributeValue{":v": item.Num(7)})
			// carol's user item is deleted and made anew.
			login(carol)
			f.delete(l.Key(carol.PK, carol.SK))
			f.user("carol")
			// dave logs out everywhere, and signs in again.
			login(dave)
			if err := f.app.RevokeAll(ctx, dave); err != nil {
				t.Fatal(err)
			}
			login(dave)
			// erin has two sessions of release v0.1.0's format: one that
			// copied her version as it is, one an older one.
			stamp, err := l.UserStamp(f.item(l.Key(erin.PK, erin.SK)), f.item(l.RevocationKey(erin.PK, erin.SK)))
			if err != nil {
				t.Fatal(err)
			}
			for _, gen := range []int64{stamp.Revocation, stamp.Revocation - 1} {
				c := f.legacySession(erin, gen)
				cookies, users[c] = append(cookies, c), erin.PK
			}

			var live, revoked int64
			withLive := map[string]bool{}
			for _, c := range cookies {
				if f.valid(c) {
					live++
					withLive[users[c]] = true
				} else {
					revoked++
				}
			}
			if live != 3 || revoked != 4 {
				t.Fatalf("the library accepts %d sessions and refuses %d; the test meant 3 and 4", live, revoked)
			}
			code, stdout, stderr := f.run("count", "-yes", "-json")
			wantCode(t, code, exitOK, stdout, stderr)
			var got countReport
			decode(t, stdout, &got)
			if got.LiveSessions != live || got.RevokedSessions != revoked || got.UsersWithSessions != int64(len(withLive)) || stderr != "" {
				t.Errorf("count: %d live, %d revoked, %d users with sessions; the library: %d, %d, %d; stderr %q",
					got.LiveSessions, got.RevokedSessions, got.UsersWithSessions, live, revoked, len(withLive), stderr)
			}
		})
	}
}
