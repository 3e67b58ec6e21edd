package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// history prints what Manager.History returns, every page, in a table and
// in JSON; a user without history has none.
func TestHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	for range 30 { // more than a page of History
		f.login(alice, firefox, "password", "otp")
	}
	f.login(alice, curl)
	if err := f.app.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := f.run("history", "-json", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	var got historyJSON
	decode(t, stdout, &got)
	if len(got.Events) != 32 || got.User != (userJSON{PK: alice.PK, SK: alice.SK}) {
		t.Fatalf("history -json: %d events of %+v, want alice's 32", len(got.Events), got.User)
	}
	want := []historyEventJSON{
		{Time: got.Events[0].Time, Event: "revoked-all", Methods: []string{}},
		{Time: got.Events[1].Time, Event: "created", SessionID: got.Events[1].SessionID, Address: "192.0.2.1", UserAgent: curl, Methods: []string{}},
		{Time: got.Events[2].Time, Event: "created", SessionID: got.Events[2].SessionID, Address: "192.0.2.1", UserAgent: firefox, Methods: []string{"password", "otp"}},
	}
	if diff := cmp.Diff(want, got.Events[:3]); diff != "" {
		t.Errorf("history -json, the newest three (-want +got):\n%s", diff)
	}
	if !strings.Contains(stdout, `"methods": []`) || !slices.IsSortedFunc(got.Events, func(a, b historyEventJSON) int { return b.Time.Compare(a.Time) }) {
		t.Errorf("history -json: not newest first, or methods null:\n%s", stdout)
	}

	code, stdout, stderr = f.run("history", alice.PK, "-sk", alice.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if diff := cmp.Diff([]string{"TIME", "EVENT", "SESSION", "FROM", "DEVICE", "METHODS", "COUNT"}, strings.Fields(lines[0])); diff != "" || len(lines) != 33 {
		t.Fatalf("history: the table (-want +got header):\n%s\n%s", diff, stdout)
	}
	if f := strings.Fields(lines[1]); len(f) != 8 || f[2] != "revoked-all" || f[3] != "-" {
		t.Errorf("history: the newest row %q, want revoked-all with no session", lines[1])
	}
	if !strings.Contains(lines[3], "192.0.2.1") || !strings.Contains(lines[3], "password,otp") {
		t.Errorf("history: the third row %q, want its address and methods", lines[3])
	}

	code, stdout, stderr = f.run("history", bob.PK, "-sk", bob.SK)
	wantCode(t, code, exitOK, stdout, stderr)
	if stdout != "USER#bob -sk PROFILE has no history\n" {
		t.Errorf("history of bob: %q", stdout)
	}
}
