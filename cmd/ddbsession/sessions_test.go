package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

const (
	firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0 with a long tail to be cut on a terminal"
	curl    = "curl/8.14.1"
)

// boundSession writes a device-bound session of user, as device binding
// leaves one, through the library's encoder: the list shows it bound.
func (f *fixture) boundSession(user ddbsession.UserKey) string {
	f.t.Helper()
	out, err := f.engine.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &f.table, Key: layout.Key(user.PK, user.SK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		f.t.Fatal(err)
	}
	version, err := layout.VersionOf(out.Item)
	if err != nil {
		f.t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	s := item.Session{
		ID: item.NewID(now), UserPK: user.PK, UserSK: user.SK, CreatedAt: now, RefreshedAt: now,
		ExpiresAt: time.Unix(now.Add(time.Hour).Unix(), 0), UserAgent: "Chrome/145", Stamp: item.Stamp{Revocation: version, User: version}, DeviceBound: true,
		AuthAt: now, Methods: []string{"passkey"},
		Binding: item.Binding{Key: `{"kty":"EC"}`, Cookies: [2]item.BoundCookie{{Digest: item.Digest("bound"), Expires: now.Add(10 * time.Minute)}}},
	}
	pk := layout.SessionPK(item.NewToken())
	f.put(layout.EncodeIndex(pk, s))
	f.put(layout.EncodeSession(pk, s))
	return s.ID
}

// sessions list shows what Manager.List returns, in a table and in JSON,
// how each session's user proved themselves included; an unknown user is
// not found, a user without sessions has none.
func TestSessionsList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	f.login(alice, firefox, "password", "otp")
	f.login(alice, curl) // a login that names no methods
	bound := f.boundSession(alice)
	f.expiredSession(alice, time.Now().Add(-time.Hour), "an expired one")

	list, err := f.app.List(context.Background(), alice)
	if err != nil || len(list) != 3 {
		t.Fatalf("the library's List: %d sessions, %v", len(list), err)
	}
	want := listJSON{User: userJSON{PK: alice.PK, SK: alice.SK}}
	for _, s := range list {
		want.Sessions = append(want.Sessions, sessionJSON{
			ID: s.ID, UserAgent: s.UserAgent, CreatedAt: s.CreatedAt.UTC(), RefreshedAt: s.RefreshedAt.UTC(),
			ExpiresAt: s.ExpiresAt.UTC(), Methods: append([]string{}, s.Methods...), DeviceBound: s.DeviceBound,
			Address: s.Address, LastAddress: s.LastAddress,
		})
	}
	if list[1].Address != "192.0.2.1" || list[1].LastAddress != "192.0.2.1" || list[0].Address != "" {
		t.Errorf("the library's List: addresses %+v, want httptest's for the logins and none for the bound session written by hand", list)
	}
	code, stdout, stderr := f.run("sessions", "list", "-json", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	var got listJSON
	decode(t, stdout, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sessions list -json (-want +got):\n%s", diff)
	}
	if got.Sessions[0].ID != bound || !got.Sessions[0].DeviceBound || got.Sessions[1].DeviceBound {
		t.Errorf("the bound session, newest, is not listed bound first: %+v", got.Sessions)
	}
	if diff := cmp.Diff([][]string{{"passkey"}, {}, {"password", "otp"}}, [][]string{got.Sessions[0].Methods, got.Sessions[1].Methods, got.Sessions[2].Methods}); diff != "" {
		t.Errorf("the sessions' methods, newest first (-want +got):\n%s", diff)
	}
	if !strings.Contains(stdout, `"methods": []`) {
		t.Errorf("a session without methods does not have \"methods\": []:\n%s", stdout)
	}

	for _, terminal := range []bool{false, true} {
		f.terminal = terminal
		code, stdout, stderr = f.run("sessions", "list", alice.PK, "-sk", alice.SK)
		wantCode(t, code, exitOK, stdout, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		header := strings.Fields(lines[0])
		if diff := cmp.Diff([]string{"ID", "DEVICE", "FROM", "LAST", "SEEN", "FROM", "CREATED", "LAST", "REFRESHED", "EXPIRES", "METHODS", "BOUND"}, header); diff != "" || len(lines) != 4 {
			t.Fatalf("terminal %v: the table:\n%s", terminal, stdout)
		}
		if !strings.HasPrefix(lines[1], bound) || !strings.HasSuffix(lines[1], "yes") || !strings.HasSuffix(lines[2], "no") {
			t.Errorf("terminal %v: rows:\n%s", terminal, stdout)
		}
		// Columns line up: every row's BOUND starts where the header's does.
		at := strings.Index(lines[0], "BOUND") // the header is ASCII
		for _, l := range lines[1:] {
			if r := []rune(l); len(r) < at || strings.TrimSpace(string(r[at:])) == "" || r[at-1] != ' ' {
				t.Errorf("terminal %v: row not aligned with the header:\n%s\n%s", terminal, lines[0], l)
			}
		}
		// METHODS, newest first: the bound session's, the login's without
		// any, the one with a password and a code.
		at = strings.Index(lines[0], "METHODS")
		var methods []string
		for _, l := range lines[1:] {
			if r := []rune(l); len(r) > at && r[at-1] == ' ' {
				methods = append(methods, strings.Fields(string(r[at:]))[0])
			}
		}
		if diff := cmp.Diff([]string{"passkey", "-", "password,otp"}, methods); diff != "" {
			t.Errorf("terminal %v: the METHODS column (-want +got):\n%s\n%s", terminal, diff, stdout)
		}
		if !strings.Contains(lines[2], "  192.0.2.1  192.0.2.1  ") || !strings.Contains(lines[1], "  -  ") {
			t.Errorf("terminal %v: the FROM and LAST SEEN FROM columns:\n%s", terminal, stdout)
		}
		// DEVICE names the browser and its system, not the raw User-Agent,
		// which -json gives.
		if !strings.Contains(lines[3], "  Firefox on Linux  ") || strings.Contains(stdout, "Gecko") {
			t.Errorf("terminal %v: the device column, want Firefox on Linux:\n%s", terminal, stdout)
		}
	}
	f.terminal = false

	code, stdout, stderr = f.run("sessions", "list", "-json", bob.PK, "-sk", bob.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	decode(t, stdout, &got)
	if diff := cmp.Diff(listJSON{User: userJSON{PK: bob.PK, SK: bob.SK}, Sessions: []sessionJSON{}}, got); diff != "" {
		t.Errorf("a user without sessions (-want +got):\n%s", diff)
	}
	code, stdout, stderr = f.run("sessions", "list", "USER#carol", "-sk", "PROFILE")
	wantCode(t, code, exitNotFound, stdout, stderr)
}

// sessions revoke ends one session, and only that one; an ID that is not
// the user's, or that is no session ID at all, is not found.
func TestSessionsRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	keep, end := f.login(alice, firefox), f.login(alice, curl)
	bobs := f.login(bob, curl)
	list, err := f.app.List(context.Background(), alice)
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v, %v", list, err)
	}
	id := list[0].ID // newest: end's
	code, stdout, stderr := f.run("sessions", "revoke", "-json", alice.PK, id, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	var got struct {
		User    userJSON `json:"user"`
		Revoked string   `json:"revoked"`
	}
	decode(t, stdout, &got)
	if got.Revoked != id || got.User != (userJSON{alice.PK, alice.SK}) {
		t.Errorf("sessions revoke -json: %+v", got)
	}
	if f.valid(end) || !f.valid(keep) || !f.valid(bobs) {
		t.Errorf("after revoking one: revoked valid %v, other valid %v, bob's valid %v", f.valid(end), f.valid(keep), f.valid(bobs))
	}
	code, stdout, stderr = f.run("sessions", "revoke", alice.PK, "-sk", alice.SK, id)
	wantCode(t, code, exitNotFound, stdout, stderr)
	bobsList, _ := f.app.List(context.Background(), bob)
	code, stdout, stderr = f.run("sessions", "revoke", alice.PK, "-sk", alice.SK, bobsList[0].ID)
	wantCode(t, code, exitNotFound, stdout, stderr)
	if !f.valid(bobs) {
		t.Error("bob's session ended by a revoke for alice")
	}
	// Revoke answers a malformed ID as an unknown one, before any read.
	code, stdout, stderr = f.run("sessions", "revoke", alice.PK, "-sk", alice.SK, "not-a-session-id")
	wantCode(t, code, exitNotFound, stdout, stderr)
}

// sessions revoke-all ends every session of one user; an unknown user is
// not found.
func TestSessionsRevokeAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	a1, a2, b := f.login(alice, firefox), f.login(alice, curl), f.login(bob, curl)
	code, stdout, stderr := f.run("sessions", "revoke-all", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	if f.valid(a1) || f.valid(a2) || !f.valid(b) {
		t.Errorf("after revoke-all: alice's valid %v %v, bob's valid %v", f.valid(a1), f.valid(a2), f.valid(b))
	}
	if again := f.login(alice, firefox); !f.valid(again) {
		t.Error("a login after revoke-all is refused")
	}
	code, stdout, stderr = f.run("sessions", "revoke-all", "-json", bob.PK, "-sk", bob.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	var got struct {
		User       userJSON `json:"user"`
		RevokedAll bool     `json:"revokedAll"`
	}
	decode(t, stdout, &got)
	if !got.RevokedAll || got.User.PK != bob.PK || f.valid(b) {
		t.Errorf("revoke-all -json %+v; bob's session valid %v", got, f.valid(b))
	}
	code, stdout, stderr = f.run("sessions", "revoke-all", "USER#carol", "-sk", "PROFILE")
	wantCode(t, code, exitNotFound, stdout, stderr)
}

// sessions revoke-everyone asks for the table's name, refuses without a
// terminal unless -yes, and then ends every session of every user.
func TestSessionsRevokeEveryone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	a, b := f.login(alice, firefox), f.login(bob, curl)

	code, stdout, stderr := f.run("sessions", "revoke-everyone")
	wantCode(t, code, exitDeclined, stdout, stderr)
	if !strings.Contains(stderr, "pass -yes") {
		t.Errorf("without a terminal, stderr does not say -yes:\n%s", stderr)
	}
	f.terminal, f.stdin = true, "yes\n"
	code, stdout, stderr = f.run("sessions", "revoke-everyone")
	wantCode(t, code, exitDeclined, stdout, stderr)
	if !strings.Contains(stderr, "Type the table's name") || !f.valid(a) || !f.valid(b) {
		t.Fatalf("declined, yet: valid %v %v; stderr:\n%s", f.valid(a), f.valid(b), stderr)
	}

	f.stdin = f.table + "\n"
	code, stdout, stderr = f.run("sessions", "revoke-everyone")
	wantCode(t, code, exitOK, stdout, stderr)
	for _, want := range []string{fmt.Sprintf("generation %d", f.generation()), "Config.Limits.RevokeEveryoneWithin (10s by default)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output does not say %q:\n%s", want, stdout)
		}
	}
	if f.valid(a) || f.valid(b) {
		t.Errorf("after revoke-everyone: valid %v %v", f.valid(a), f.valid(b))
	}
	// A login after it lives: here on an instance started after it. (The
	// app's instance running before it reads the generation within
	// Config.Limits.RevokeEveryoneWithin, and a login there meanwhile ends
	// with the others.)
	if again := f.loginOn(f.instance(), alice, firefox); !f.valid(again) {
		t.Error("a login after revoke-everyone is refused")
	}

	f.terminal, f.stdin = false, ""
	code, stdout, stderr = f.run("sessions", "revoke-everyone", "-yes", "-json")
	wantCode(t, code, exitOK, stdout, stderr)
	var got struct {
		Table         string `json:"table"`
		Generation    int64  `json:"generation"`
		AppliedWithin string `json:"appliedWithin"`
	}
	decode(t, stdout, &got)
	if got.Table != f.table || got.Generation != f.generation() || !strings.Contains(got.AppliedWithin, "10s") {
		t.Errorf("revoke-everyone -json: %+v, the table's generation %d", got, f.generation())
	}
}

// generation is the table's global revocation generation.
func (f *fixture) generation() int64 {
	f.t.Helper()
	gen, err := item.DecodeGlobal(f.item(layout.GlobalKey()))
	if err != nil || gen == 0 {
		f.t.Fatalf("the global item: generation %d, %v", gen, err)
	}
	return gen
}

// The sessions commands act in the layout the table records, without the
// layout flags: on an MREC app's table, revoke writes the end record that
// keeps a session ended against another Region's write, and revoke-all
// changes the revocation item, which MREC sessions are held to (a session
// of release v0.1.0's format to it alone). A layout flag that disagrees
// with the record is refused before any write, naming the flag, the
// table's value and the flag's (exit 5).
func TestSessionsActInTheRecordedLayout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *ddbsession.Config[testUser]) { c.Layout.MREC = true })
	ctx := context.Background()
	alice, bob := f.user("alice"), f.user("bob")
	a1, a2 := f.login(alice, firefox), f.login(alice, curl)
	version, err := item.DecodeRevocation(f.item(layout.RevocationKey(alice.PK, alice.SK)))
	if err != nil {
		t.Fatal(err)
	}
	old := f.legacySession(alice, version) // as v0.1.0 wrote it: the revocation item's version alone
	b := f.login(bob, curl)
	if !f.valid(old) {
		t.Fatal("alice's session of release v0.1.0's format is refused before any revocation")
	}

	// revoke, without -mrec: the session ends, with its end record.
	list, err := f.app.List(ctx, alice)
	if err != nil || len(list) != 3 || list[1].UserAgent != curl {
		t.Fatalf("List: %+v, %v", list, err)
	}
	cred, _ := layout.ParseCredential(a2.Value)
	written := f.item(layout.SessionKey(layout.SessionPK(cred.Token)))
	code, stdout, stderr := f.run("sessions", "revoke", alice.PK, "-sk", alice.SK, list[1].ID) // a2's
	wantCode(t, code, exitOK, stdout, stderr)
	if end := f.item(layout.EndKey(layout.SessionPK(cred.Token))); end == nil {
		t.Error("sessions revoke on an MREC table wrote no end record")
	}
	// Another Region's refresh, which had not seen the delete, writes the
	// session back whole: the end record keeps it ended.
	f.put(written)
	if f.valid(a2) || !f.valid(a1) {
		t.Errorf("after revoke and a write from another Region: the revoked session valid %v, the other %v", f.valid(a2), f.valid(a1))
	}

	// revoke-all, without -mrec: every session of alice ends, bob's not.
	code, stdout, stderr = f.run("sessions", "revoke-all", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	if f.valid(a1) || f.valid(old) || !f.valid(b) {
		t.Errorf("after revoke-all: alice's sessions valid %v and (v0.1.0's format) %v, bob's %v", f.valid(a1), f.valid(old), f.valid(b))
	}
	if again := f.login(alice, firefox); !f.valid(again) {
		t.Error("a login after revoke-all is refused")
	}

	// A flag that disagrees: refused, and nothing written.
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-mrec=false"}, "-mrec false, and the table records true"},
		{[]string{"-session-prefix", "S#", "-mrec"}, `-session-prefix "S#", and the table records "SESSION#"`},
		{[]string{"-credential-attribute", "passwordVersion"}, `-credential-attribute "passwordVersion", and the table records "credentialVersion"`},
	} {
		before := f.keys()
		for _, args := range [][]string{
			{"sessions", "revoke-all", bob.PK, "-sk", bob.SK},
			{"sessions", "revoke-everyone", "-yes"},
			{"sessions", "list", bob.PK, "-sk", bob.SK},
		} {
			code, stdout, stderr := f.run(append(args, tc.args...)...)
			wantCode(t, code, exitSchema, stdout, stderr)
			for _, want := range []string{tc.says, "Leave the layout flags out"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%v %v: stderr does not say %q:\n%s", args, tc.args, want, stderr)
				}
			}
		}
		if diff := cmp.Diff(before, f.keys()); diff != "" || !f.valid(b) {
			t.Errorf("%v: refused, yet the table changed (-before +after):\n%s\nbob's session valid %v", tc.args, diff, f.valid(b))
		}
	}
	// A flag that agrees is taken.
	code, stdout, stderr = f.run("sessions", "revoke-all", bob.PK, "-sk", bob.SK, "-mrec", "-session-prefix", "SESSION#")
	wantCode(t, code, exitOK, stdout, stderr)
	if f.valid(b) {
		t.Error("bob's session outlived revoke-all -mrec")
	}
}

// A global table in MREC whose layout record says otherwise (an app
// without Config.Layout.MREC wrote it) is one no command acts on: a
// revoke-all in that mode would write the user item, which another
// Region's write undoes. table check says how to fix it. The engine has no
// global tables: the probe describes the table as DynamoDB does.
func TestCommandsRefuseAnMRECTableRecordedWithoutMREC(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	describeAs(f.probe, func(d *types.TableDescription) {
		d.MultiRegionConsistency = types.MultiRegionConsistencyEventual
		d.Replicas = []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("eu-west-1")}}
	})
	alice := f.user("alice")
	c := f.login(alice, curl)
	before := f.keys()
	for _, args := range [][]string{
		{"sessions", "revoke-all", alice.PK, "-sk", alice.SK},
		{"sessions", "list", alice.PK, "-sk", alice.SK},
		{"sweep", "-max-wcu", "0", "-max-rcu", "0"},
	} {
		code, stdout, stderr := f.run(args...)
		wantCode(t, code, exitSchema, stdout, stderr)
		if !strings.Contains(stderr, "multi-Region eventual consistency (MREC)") || !strings.Contains(stderr, "ddbsession table check -table "+f.table) {
			t.Errorf("%v: stderr does not name MREC and table check:\n%s", args, stderr)
		}
	}
	if diff := cmp.Diff(before, f.keys()); diff != "" || !f.valid(c) {
		t.Errorf("the refused commands changed the table (-before +after):\n%s", diff)
	}
}

// A table that records no layout (release v0.1.0's): every command that
// acts on sessions refuses, says how to record it, and writes nothing, the
// layout record included; table check reports it, and table create
// records it, after which the commands act.
func TestCommandsRefuseATableWithoutLayout(t *testing.T) {
	t.Parallel()
	f := unrecordedFixture(t)
	f.probe = ddbtest.NewProbe(ddbtest.WithTTL(f.engine))
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	f.put(map[string]types.AttributeValue{"pk": item.Str(alice.PK), "sk": item.Str(alice.SK), "sessionsVersion": item.Num(item.NewVersion())})
	f.expiredSession(alice, time.Now().Add(-time.Hour), curl)
	user := []string{alice.PK, "-sk", alice.SK}
	before := f.keys()
	for _, args := range [][]string{
		append([]string{"sessions", "list"}, user...),
		append([]string{"sessions", "revoke", "019a2b3c4d5e8f0e1d2c3b4a59687766"}, user...),
		append([]string{"sessions", "revoke-all"}, user...),
		{"sessions", "revoke-everyone", "-yes"},
		{"sessions", "expiring", "-within", "1h"},
		{"sweep", "-max-wcu", "0", "-max-rcu", "0"},
		{"count", "-yes"},
		append([]string{"sessions", "revoke-all", "-mrec"}, user...),
	} {
		code, stdout, stderr := f.run(args...)
		wantCode(t, code, exitSchema, stdout, stderr)
		wantCreate := "ddbsession table create -table " + f.table
		if slices.Contains(args, "-mrec") {
			wantCreate += " -mrec"
		}
		if !strings.Contains(stderr, "records no layout") || !strings.Contains(stderr, wantCreate+"\n") {
			t.Errorf("%v: stderr does not say to record the layout with %q:\n%s", args, wantCreate, stderr)
		}
	}
	if diff := cmp.Diff(before, f.keys()); diff != "" {
		t.Errorf("the refused commands changed the table (-before +after):\n%s", diff)
	}

	code, stdout, stderr := f.run("table", "check", "-json")
	wantCode(t, code, exitTTL, stdout, stderr)
	var checked struct {
		Problems []problem
		Layout   any
	}
	if err := json.Unmarshal([]byte(stdout), &checked); err != nil || len(checked.Problems) != 2 || checked.Problems[1].Kind != "layout-missing" || checked.Layout != nil {
		t.Errorf("table check of a table without a layout record: %v\n%s", err, stdout)
	}
	code, stdout, stderr = f.run("table", "create", "-json")
	wantCode(t, code, exitOK, stdout, stderr)
	var created struct {
		Layout         map[string]any
		RecordedLayout *bool
	}
	if err := json.Unmarshal([]byte(stdout), &created); err != nil || created.RecordedLayout == nil || !*created.RecordedLayout || created.Layout["sessionPrefix"] != "SESSION#" {
		t.Errorf("table create on a table without a layout record: %v\n%s", err, stdout)
	}
	code, stdout, stderr = f.run(append([]string{"sessions", "revoke-all"}, user...)...)
	wantCode(t, code, exitOK, stdout, stderr)
}

// In a hash-only table, a USER needs no -sk and no -hash-only: the table's
// record says it has no sort key. -sk there is still refused, and so is
// sessions list, which needs the per-user index.
func TestHashOnlyTableNeedsNoFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *ddbsession.Config[testUser]) { c.Layout.HashOnly = true })
	alice := ddbsession.UserKey{PK: "USER#alice"}
	if err := f.app.CreateUser(context.Background(), testUser{PK: alice.PK, Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	a := f.login(alice, curl)
	code, stdout, stderr := f.run("sessions", "revoke-all", alice.PK)
	wantCode(t, code, exitOK, stdout, stderr)
	if f.valid(a) {
		t.Error("the session outlived revoke-all")
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"sessions", "revoke-all", alice.PK, "-sk", "PROFILE"}, "-sk is set"},
		{[]string{"sessions", "list", alice.PK}, "no per-user index"},
	} {
		code, stdout, stderr := f.run(tc.args...)
		wantCode(t, code, exitUsage, stdout, stderr)
		if !strings.Contains(stderr, tc.says) {
			t.Errorf("%v: stderr does not say %q:\n%s", tc.args, tc.says, stderr)
		}
	}
}
