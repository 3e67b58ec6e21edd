package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
)

func TestExpiringWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withExpiryIndex(c)
		c.IdleTimeout = 24 * time.Hour // a 24-hour window: 192 Queries
	})
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	// Expiries, a day after each login: 12:00, 12:20, 12:40, 13:10, 13:40
	// UTC on Dec 1, all still live when Expiring runs.
	base := time.Unix(start.Add(24*time.Hour).Unix(), 0)
	offsets := []time.Duration{0, 20 * time.Minute, 40 * time.Minute, 70 * time.Minute, 100 * time.Minute}
	var sessions []ddbsession.Session
	for i, offset := range offsets {
		e.clock.Advance(offset - e.clock.Now().Sub(start))
		user := alice
		if i%2 == 1 {
			user = bob
		}
		c := e.login(user)
		sessions = append(sessions, loggedIn(e.sessionFor(c).ID, user, e.clock.Now(), 24*time.Hour))
	}
	for i, s := range sessions {
		if want := base.Add(offsets[i]); !s.ExpiresAt.Equal(want) {
			t.Fatalf("test setup: session %d expires %v, want %v", i, s.ExpiresAt, want)
		}
	}

	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []int
	}{
		{"inside one hour", base.Add(10 * time.Minute), base.Add(45 * time.Minute), []int{1, 2}},
		{"across an hour boundary", base.Add(30 * time.Minute), base.Add(80 * time.Minute), []int{2, 3}},
		{"bounds are inclusive", base.Add(20 * time.Minute), base.Add(70 * time.Minute), []int{1, 2, 3}},
		{"one second", base.Add(40 * time.Minute), base.Add(40 * time.Minute), []int{2}},
		{"to with a fraction after an expiry", base.Add(-time.Hour), base.Add(20*time.Minute + 500*time.Millisecond), []int{0, 1}},
		{"from a fraction after an expiry", base.Add(20*time.Minute + 500*time.Millisecond), base.Add(50 * time.Minute), []int{2}},
		{"before them all", base.Add(-2 * time.Hour), base.Add(-time.Second), nil},
		{"after them all", base.Add(100*time.Minute + time.Second), base.Add(5 * time.Hour), nil},
		{"24 hours", base.Add(-12 * time.Hour), base.Add(12 * time.Hour), []int{0, 1, 2, 3, 4}},
		{"from in another time zone", base.Add(10 * time.Minute).In(time.FixedZone("UTC-5:30", -(5*3600 + 1800))), base.Add(2 * time.Hour), []int{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []ddbsession.Session
			for _, i := range tc.want {
				want = append(want, sessions[i])
			}
			if diff := cmp.Diff(want, e.mustExpiring(tc.from, tc.to), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Expiring(%v, %v) (-want +got):\n%s", tc.from, tc.to, diff)
			}
		})
	}
}

func TestExpiringSpreadsOverShards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExpiryIndex) // IdleTimeout 1h: every session expires at 13:00:00 UTC
	alice := e.putUser("alice")
	const n = 20
	ids := map[string]bool{}
	for range n {
		ids[e.sessionFor(e.login(alice)).ID] = true
	}
	shards := map[int]int{}
	sessions := 0
	for _, item := range e.scanAll() {
		if attrText(item["kind"]) != "S:"+kindSession {
			if _, ok := item["expiryBucket"]; ok {
				t.Errorf("a non-session item carries expiryBucket: %v", item)
			}
			continue
		}
		sessions++
		hour, shard := bucketParts(t, item)
		if want := itemExpiry(t, item).UTC().Format("2006010215"); hour != want || hour != "2026113013" {
			t.Errorf("expiryBucket hour %s, want %s (the UTC hour of the expiry, 2026113013)", hour, want)
		}
		if shard >= 8 {
			t.Errorf("shard %d, want below the default 8 shards", shard)
		}
		shards[shard]++
	}
	if sessions != n {
		t.Fatalf("%d session items, want %d", sessions, n)
	}
	if len(shards) < 2 {
		t.Errorf("%d sessions of one hour all landed on shards %v, want them spread", n, shards)
	}

	expiry := time.Unix(start.Add(time.Hour).Unix(), 0)
	got := map[string]bool{}
	for _, s := range e.mustExpiring(expiry, expiry) {
		got[s.ID] = true
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("Expiring over all shards (-want +got):\n%s", diff)
	}
}

func TestExpiringFollowsRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExpiryIndex) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	e.clock.Advance(50 * time.Minute) // 12:50:00.25
	c := e.login(alice)
	s := loggedIn(e.sessionFor(c).ID, alice, e.clock.Now(), time.Hour) // expires 13:50:00
	oldHour, oldShard := bucketParts(t, e.itemOf(kindSession, s.ID))
	if oldHour != "2026113013" {
		t.Fatalf("expiryBucket hour before refresh = %s, want 2026113013", oldHour)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, time.UTC) }
	before := [2]time.Time{at(13, 45), at(13, 55)}
	after := [2]time.Time{at(14, 5), at(14, 15)}
	if diff := cmp.Diff([]ddbsession.Session{s}, e.mustExpiring(before[0], before[1])); diff != "" {
		t.Fatalf("Expiring before the refresh (-want +got):\n%s", diff)
	}

	e.clock.Advance(20 * time.Minute) // 13:10:00.25
	if w := e.get(e.m.RequireSession(whoami(e.m)), c); w.Code != http.StatusOK || w.Header().Get("Set-Cookie") == "" {
		t.Fatalf("refreshing request: status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	s.RefreshedAt = time.UnixMilli(e.clock.Now().UnixMilli())
	s.ExpiresAt = at(14, 10)

	if got := e.mustExpiring(before[0], before[1]); len(got) != 0 {
		t.Errorf("Expiring around the old expiry after the refresh = %+v, want none", got)
	}
	if diff := cmp.Diff([]ddbsession.Session{s}, e.mustExpiring(after[0], after[1])); diff != "" {
		t.Errorf("Expiring around the new expiry (-want +got):\n%s", diff)
	}
	item := e.itemOf(kindSession, s.ID)
	newHour, newShard := bucketParts(t, item)
	if newHour != "2026113014" || !itemExpiry(t, item).Equal(s.ExpiresAt) {
		t.Errorf("after refresh: expiryBucket hour %s, expiresAt %v; want 2026113014 and %v", newHour, itemExpiry(t, item), s.ExpiresAt)
	}
	if newShard != oldShard {
		t.Errorf("refresh moved the session from shard %d to %d; the shard should stay with the session", oldShard, newShard)
	}
}

func TestExpiringWithoutIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	c := e.login(alice)
	if got, err := e.m.Expiring(context.Background(), start, start.Add(2*time.Hour)); !errors.Is(err, ddbsession.ErrNoExpiryIndex) {
		t.Errorf("Expiring without ExpiryIndex = %v, %v; want ErrNoExpiryIndex", got, err)
	}
	e.clock.Advance(11 * time.Minute)
	if w := e.get(e.m.RequireSession(whoami(e.m)), c); w.Code != http.StatusOK || w.Header().Get("Set-Cookie") == "" {
		t.Fatalf("refreshing request: status %d, Set-Cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	// Neither Login nor the refresh pays for the index it does not have.
	for _, item := range e.scanAll() {
		if b, ok := item["expiryBucket"]; ok {
			t.Errorf("item %v carries expiryBucket %v without ExpiryIndex", item["pk"], b)
		}
	}
	out, err := e.client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &e.table})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Table.GlobalSecondaryIndexes); n != 0 {
		t.Errorf("CreateTable without ExpiryIndex made %d global secondary indexes", n)
	}
}

func TestExpiringRejectsBadWindows(t *testing.T) {
	t.Parallel()
	// The widest good window is 24 hours, 200 Queries: see TestExpiringWindow.
	e := newEnv(t, withExpiryIndex)
	alice := e.putUser("alice")
	e.login(alice) // expires 13:00:00
	from := start
	for _, tc := range []struct {
		name   string
		to     time.Time
		wantOK bool
	}{
		{"exactly 24 hours", from.Add(24 * time.Hour), true},
		{"24 hours and a second", from.Add(24*time.Hour + time.Second), false},
		{"25 hours", from.Add(25 * time.Hour), false},
		{"a week", from.Add(7 * 24 * time.Hour), false},
		{"to before from", from.Add(-time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.m.Expiring(context.Background(), from, tc.to)
			switch {
			case tc.wantOK && (err != nil || len(got) != 1):
				t.Errorf("Expiring(%v, %v) = %d sessions, %v; want the one session", from, tc.to, len(got), err)
			case !tc.wantOK && err == nil:
				t.Errorf("Expiring(%v, %v) = %d sessions, no error; want an error", from, tc.to, len(got))
			case !tc.wantOK && errors.Is(err, ddbsession.ErrNoExpiryIndex):
				t.Errorf("Expiring(%v, %v) = %v, want a window error", from, tc.to, err)
			}
			if !tc.wantOK && got != nil {
				t.Errorf("Expiring with an error returned sessions too: %v", got)
			}
		})
	}
}
