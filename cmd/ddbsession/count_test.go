package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// count counts unexpired session items and their distinct users, over
// every segment of a parallel scan; a pending two-step login is not a
// session yet.
func TestCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob, carol := f.user("alice"), f.user("bob"), f.user("carol")
	f.login(alice, firefox)
	f.login(alice, curl)
	f.login(bob, curl)
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
		want := countReport{Table: f.table, LiveSessions: 3, UsersWithSessions: 2, Scanned: all}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(countReport{}, "ReadUnits", "ElapsedSeconds", "AsOf")); diff != "" {
			t.Errorf("-segments %s: count -json (-want +got):\n%s", segments, diff)
		}
		if got.ReadUnits <= 0 || time.Since(got.AsOf) > time.Minute || stderr != "" {
			t.Errorf("read units %v, as of %v, stderr %q", got.ReadUnits, got.AsOf, stderr)
		}
	}
	code, stdout, stderr := f.run("count", "-yes")
	wantCode(t, code, exitOK, stdout, stderr)
	for _, want := range []string{"live sessions        3", "users with sessions  2"} {
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
	f.probe.describe = func(d *types.TableDescription) {
		d.ItemCount, d.TableSizeBytes = aws.Int64(2000), aws.Int64(2000*4096)
	}
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
	if !strings.Contains(stderr, "Go on? [y/N]") || f.probe.callsOf("Scan") != 0 {
		t.Fatalf("declined: %d Scans; stderr:\n%s", f.probe.callsOf("Scan"), stderr)
	}
	f.stdin = "y\n"
	code, stdout, stderr = f.run("count", "-max-rcu", "100")
	wantCode(t, code, exitOK, stdout, stderr)
	if f.probe.callsOf("Scan") == 0 || !strings.Contains(stdout, "live sessions        1") || !strings.Contains(stderr, "\rcount [") {
		t.Errorf("accepted: %d Scans; stdout:\n%s\nstderr:\n%q", f.probe.callsOf("Scan"), stdout, stderr)
	}
}
