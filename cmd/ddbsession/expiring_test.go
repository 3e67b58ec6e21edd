package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
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
	itemtable "github.com/ddbsession/ddbsession/internal/table"
)

// start is when the expiring tests' app begins: Nov 30, 12:00:00.25 UTC.
var start = time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)

// expiringFixture is a table with the expiry index "expiry", and an app on
// it whose clock starts at start and whose sessions idle out after idle.
func expiringFixture(t *testing.T, idle time.Duration) (*fixture, *ddbtest.Clock) {
	t.Helper()
	clock := ddbtest.NewClock(start)
	f := newFixture(t, func(c *ddbsession.Config[testUser]) {
		c.Layout.ExpiryIndex = "expiry"
		c.Limits.IdleTimeout = idle
		c.Now = clock.Now
	})
	return f, clock
}

// expiring runs sessions expiring on the expiry index with args and
// returns its JSON.
func (f *fixture) expiring(args ...string) expiringJSON {
	f.t.Helper()
	code, stdout, stderr := f.run(append([]string{"sessions", "expiring", "-json", "-expiry-index", "expiry"}, args...)...)
	wantCode(f.t, code, exitOK, stdout, stderr)
	var got expiringJSON
	decode(f.t, stdout, &got)
	return got
}

// seeEmbedded lets cmp compare the sessionJSON that expiringSessionJSON
// embeds.
var seeEmbedded = cmp.AllowUnexported(expiringSessionJSON{})

// window is the flags of the window [from, to].
func window(from, to time.Time) []string {
	return []string{"-from", from.Format(time.RFC3339Nano), "-to", to.Format(time.RFC3339Nano)}
}

// listed is what sessions expiring shows of the app's session s.
func listed(s ddbsession.Session) expiringSessionJSON {
	return expiringSessionJSON{
		User: userJSON{PK: s.User.PK, SK: s.User.SK},
		sessionJSON: sessionJSON{
			ID: s.ID, UserAgent: s.UserAgent, CreatedAt: s.CreatedAt.UTC(), RefreshedAt: s.RefreshedAt.UTC(),
			ExpiresAt: s.ExpiresAt.UTC(), Methods: append([]string{}, s.Methods...), DeviceBound: s.DeviceBound,
		},
	}
}

// sessionsOf is the users' sessions, as the app's List reads them, oldest
// first.
func (f *fixture) sessionsOf(users ...ddbsession.UserKey) []ddbsession.Session {
	f.t.Helper()
	var all []ddbsession.Session
	for _, u := range users {
		list, err := f.app.List(context.Background(), u)
		if err != nil {
			f.t.Fatal(err)
		}
		all = append(all, list...)
	}
	slices.SortFunc(all, func(a, b ddbsession.Session) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return all
}

// The window's sessions, soonest first: its bounds included, across hours,
// expiries rounded as they are stored, and a window of -within from now.
func TestExpiringWindow(t *testing.T) {
	t.Parallel()
	f, clock := expiringFixture(t, 24*time.Hour) // a 24-hour window: 200 Queries
	alice, bob := f.user("alice"), f.user("bob")
	// Expiries, a day after each login: 12:00, 12:20, 12:40, 13:10, 13:40
	// UTC on Dec 1, all still live.
	base := time.Unix(start.Add(24*time.Hour).Unix(), 0)
	offsets := []time.Duration{0, 20 * time.Minute, 40 * time.Minute, 70 * time.Minute, 100 * time.Minute}
	for i, offset := range offsets {
		clock.Set(start.Add(offset))
		user := alice
		if i%2 == 1 {
			user = bob
		}
		f.login(user, curl, "password")
	}
	sessions := f.sessionsOf(alice, bob)
	if len(sessions) != len(offsets) {
		t.Fatalf("test setup: %d sessions, want %d", len(sessions), len(offsets))
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
			want := expiringJSON{Table: f.table, From: tc.from.UTC(), To: tc.to.UTC(), Sessions: []expiringSessionJSON{}}
			for _, i := range tc.want {
				want.Sessions = append(want.Sessions, listed(sessions[i]))
			}
			if diff := cmp.Diff(want, f.expiring(window(tc.from, tc.to)...), seeEmbedded); diff != "" {
				t.Errorf("sessions expiring %v to %v (-want +got):\n%s", tc.from, tc.to, diff)
			}
		})
	}

	t.Run("within", func(t *testing.T) {
		now := base.Add(10 * time.Minute)
		f.clock = newSleeper(now)
		got := f.expiring("-within", "35m")
		want := expiringJSON{Table: f.table, From: now, To: now.Add(35 * time.Minute), Sessions: []expiringSessionJSON{listed(sessions[1]), listed(sessions[2])}}
		if diff := cmp.Diff(want, got, seeEmbedded); diff != "" {
			t.Errorf("sessions expiring -within 35m at %v (-want +got):\n%s", now, diff)
		}
		// -from and -within: the window from -from on.
		got = f.expiring("-from", base.Add(65*time.Minute).Format(time.RFC3339), "-within", "1h")
		if diff := cmp.Diff([]expiringSessionJSON{listed(sessions[3]), listed(sessions[4])}, got.Sessions, seeEmbedded); diff != "" {
			t.Errorf("sessions expiring -from -within (-want +got):\n%s", diff)
		}
		f.clock = nil
	})

	t.Run("a table", func(t *testing.T) {
		code, stdout, stderr := f.run(append([]string{"sessions", "expiring", "-expiry-index", "expiry"}, window(base, base.Add(30*time.Minute))...)...)
		wantCode(t, code, exitOK, stdout, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if diff := cmp.Diff([]string{"EXPIRES", "ID", "USER", "DEVICE", "LAST", "REFRESHED"}, strings.Fields(lines[0])); diff != "" || len(lines) != 3 {
			t.Fatalf("the table:\n%s", stdout)
		}
		for i, l := range lines[1:] {
			s := sessions[i]
			if want := []string{showTime(s.ExpiresAt), s.ID, s.User.PK, "-sk", s.User.SK, curl, showTime(s.RefreshedAt)}; strings.Join(strings.Fields(l), " ") != strings.Join(want, " ") {
				t.Errorf("row %d: %q, want %q", i, l, want)
			}
		}
		code, stdout, stderr = f.run(append([]string{"sessions", "expiring", "-expiry-index", "expiry"}, window(base.Add(5*time.Hour), base.Add(6*time.Hour))...)...)
		wantCode(t, code, exitOK, stdout, stderr)
		if !strings.HasPrefix(stdout, "no session expires between") {
			t.Errorf("an empty window:\n%s", stdout)
		}
	})
}

var expiryBucketFormat = regexp.MustCompile(`^(\d{10})#(\d+)$`)

// bucketParts splits a session item's expiryBucket into its hour and shard,
// and fails unless it has the documented format.
func bucketParts(t *testing.T, av map[string]types.AttributeValue) (hour string, shard int) {
	t.Helper()
	b, _ := av[item.AttrExpiryBucket].(*types.AttributeValueMemberS)
	var m []string
	if b != nil {
		m = expiryBucketFormat.FindStringSubmatch(b.Value)
	}
	if m == nil {
		t.Fatalf("expiryBucket %v is not <yyyymmddhh>#<shard>", av[item.AttrExpiryBucket])
	}
	shard, _ = strconv.Atoi(m[2])
	return m[1], shard
}

// sessionItems are the table's session items.
func (f *fixture) sessionItems() []map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.engine.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: &f.table, ConsistentRead: aws.Bool(true), FilterExpression: aws.String("kind = :session"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":session": item.Str(item.KindSession)},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.Items
}

// One hour's sessions spread over the index's shards, and the listing
// reads every shard.
func TestExpiringSpreadsOverShards(t *testing.T) {
	t.Parallel()
	f, _ := expiringFixture(t, time.Hour) // every session expires at 13:00:00 UTC
	alice := f.user("alice")
	const n = 20
	for range n {
		f.login(alice, curl)
	}
	ids := map[string]bool{}
	for _, s := range f.sessionsOf(alice) {
		ids[s.ID] = true
	}
	shards := map[int]int{}
	items := f.sessionItems()
	for _, av := range items {
		hour, shard := bucketParts(t, av)
		if hour != "2026113013" || shard >= 8 {
			t.Errorf("expiryBucket hour %s, shard %d; want 2026113013, below the default 8 shards", hour, shard)
		}
		shards[shard]++
	}
	if len(items) != n || len(shards) < 2 {
		t.Fatalf("%d session items on shards %v, want %d spread over several", len(items), shards, n)
	}

	expiry := time.Unix(start.Add(time.Hour).Unix(), 0)
	got := map[string]bool{}
	for _, s := range f.expiring(window(expiry, expiry)...).Sessions {
		got[s.ID] = true
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("sessions expiring over all shards (-want +got):\n%s", diff)
	}
}

// A refresh moves a session to its new expiry, on the same shard: the
// listing finds it there, and no more at the old one.
func TestExpiringFollowsRefresh(t *testing.T) {
	t.Parallel()
	f, clock := expiringFixture(t, time.Hour) // RefreshInterval 2.5m
	alice := f.user("alice")
	clock.Set(start.Add(50 * time.Minute)) // 12:50:00.25
	cookie := f.login(alice, curl)
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, time.UTC) }
	before := window(at(13, 45), at(13, 55))
	after := window(at(14, 5), at(14, 15))
	s := f.sessionsOf(alice)[0] // expires 13:50:00
	oldHour, oldShard := bucketParts(t, f.sessionItems()[0])
	if oldHour != "2026113013" || !s.ExpiresAt.Equal(at(13, 50)) {
		t.Fatalf("before the refresh: expiryBucket hour %s, expiry %v; want 2026113013, 13:50", oldHour, s.ExpiresAt)
	}
	if diff := cmp.Diff([]expiringSessionJSON{listed(s)}, f.expiring(before...).Sessions, seeEmbedded); diff != "" {
		t.Fatalf("sessions expiring before the refresh (-want +got):\n%s", diff)
	}

	clock.Set(start.Add(70 * time.Minute)) // 13:10:00.25
	r := httptest.NewRequest("GET", "https://app.test/", nil)
	r.AddCookie(cookie)
	w := httptest.NewRecorder()
	f.app.RequireSession(okHandler).ServeHTTP(w, r)
	if err := f.app.Wait(context.Background()); err != nil || w.Code != 200 {
		t.Fatalf("refreshing request: %d, %v", w.Code, err)
	}
	s = f.sessionsOf(alice)[0]
	if !s.ExpiresAt.Equal(at(14, 10)) {
		t.Fatalf("after the refresh: expiry %v, want 14:10", s.ExpiresAt)
	}
	if got := f.expiring(before...).Sessions; len(got) != 0 {
		t.Errorf("sessions expiring around the old expiry after the refresh: %+v, want none", got)
	}
	if diff := cmp.Diff([]expiringSessionJSON{listed(s)}, f.expiring(after...).Sessions, seeEmbedded); diff != "" {
		t.Errorf("sessions expiring around the new expiry (-want +got):\n%s", diff)
	}
	newHour, newShard := bucketParts(t, f.sessionItems()[0])
	if newHour != "2026113014" || newShard != oldShard {
		t.Errorf("after the refresh: expiryBucket hour %s, shard %d; want 2026113014 and the shard before, %d", newHour, newShard, oldShard)
	}
}

// The expiry index is the one the table's layout records: without
// -expiry-index the command reads it; on a table whose layout has none it
// says so, and -expiry-index there disagrees with the record; on a table
// whose record names an index the table lacks, it says so once, and which
// command says what to do. Each is a table that does not fit: exit 5.
func TestExpiringWithoutIndex(t *testing.T) {
	t.Parallel()
	withIndex, _ := expiringFixture(t, time.Hour)
	withIndex.login(withIndex.user("alice"), curl)
	code, stdout, stderr := withIndex.run(append([]string{"sessions", "expiring", "-json"}, window(start, start.Add(2*time.Hour))...)...)
	wantCode(t, code, exitOK, stdout, stderr)
	var got expiringJSON
	decode(t, stdout, &got)
	if len(got.Sessions) != 1 {
		t.Errorf("without -expiry-index, on a table that records one: %d sessions, want 1", len(got.Sessions))
	}

	f := newFixture(t) // a table without the index, whose layout has none
	f.login(f.user("alice"), curl)
	code, stdout, stderr = f.run("sessions", "expiring", "-within", "1h")
	wantCode(t, code, exitSchema, stdout, stderr)
	if !strings.Contains(stderr, "records a layout without one") || !strings.Contains(stderr, "ddbsession table check") {
		t.Errorf("stderr does not say the layout has no expiry index:\n%s", stderr)
	}
	code, stdout, stderr = f.run("sessions", "expiring", "-within", "1h", "-expiry-index", "expiry")
	wantCode(t, code, exitSchema, stdout, stderr)
	if !strings.Contains(stderr, `-expiry-index "expiry", and the table records ""`) {
		t.Errorf("stderr does not name the flag that disagrees with the record:\n%s", stderr)
	}

	// A record that names an index the table lacks.
	l := layout
	l.ExpiryIndex = "expiry"
	f.put(l.EncodeLayout())
	code, stdout, stderr = f.run("sessions", "expiring", "-within", "1h")
	wantCode(t, code, exitSchema, stdout, stderr)
	if !strings.Contains(stderr, `has no expiry index "expiry"`) || !strings.Contains(stderr, "ddbsession table check") {
		t.Errorf("stderr does not say the index is missing:\n%s", stderr)
	}
	if n := strings.Count(stderr, "query the expiry index"); n != 1 {
		t.Errorf("stderr gives the failed query %d times, want once:\n%s", n, stderr)
	}

	// The same where the engine answers ResourceNotFoundException for the
	// missing index, as DynamoDB may.
	f.probe.Fail = func(_ context.Context, op string, in any) error {
		if op == "Query" && in.(*dynamodb.QueryInput).IndexName != nil {
			return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
		}
		return nil
	}
	code, stdout, stderr = f.run("sessions", "expiring", "-within", "1h", "-expiry-index", "expiry")
	wantCode(t, code, exitSchema, stdout, stderr)
	if !strings.Contains(stderr, `has no expiry index "expiry"`) || strings.Contains(stderr, "does not exist") {
		t.Errorf("a ResourceNotFoundException of the index: stderr does not say the index is missing:\n%s", stderr)
	}
}

// A window may span 24 hours at most, and must be ordered; the flags name
// one window.
func TestExpiringRejectsBadWindows(t *testing.T) {
	t.Parallel()
	f, _ := expiringFixture(t, time.Hour)
	f.login(f.user("alice"), curl) // expires 13:00:00
	from := start
	for _, tc := range []struct {
		name   string
		args   []string
		wantOK bool
		says   string
	}{
		{"exactly 24 hours", window(from, from.Add(24*time.Hour)), true, ""},
		{"24 hours and a second", window(from, from.Add(24*time.Hour+time.Second)), false, "at most 24h"},
		{"25 hours", window(from, from.Add(25*time.Hour)), false, "at most 24h"},
		{"a week", window(from, from.Add(7*24*time.Hour)), false, "at most 24h"},
		{"to before from", window(from, from.Add(-time.Second)), false, "must be ordered"},
		{"-within 25h", []string{"-within", "25h"}, false, "at most 24h"},
		{"-within and -to", append(window(from, from.Add(time.Hour)), "-within", "1h"), false, "give one"},
		{"no window", nil, false, "give -within DURATION"},
		{"-within negative", []string{"-within", "-1h"}, false, "must be positive"},
		{"-from no time", []string{"-from", "noon", "-within", "1h"}, false, "not an RFC 3339 time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := f.run(append([]string{"sessions", "expiring", "-json", "-expiry-index", "expiry"}, tc.args...)...)
			if tc.wantOK {
				wantCode(t, code, exitOK, stdout, stderr)
				var got expiringJSON
				decode(t, stdout, &got)
				if len(got.Sessions) != 1 {
					t.Errorf("%d sessions, want the one", len(got.Sessions))
				}
				return
			}
			wantCode(t, code, exitUsage, stdout, stderr)
			if stdout != "" || !strings.Contains(stderr, tc.says) || strings.Contains(stderr, "-expiry-index NAME") {
				t.Errorf("stdout %q; stderr does not say %q:\n%s", stdout, tc.says, stderr)
			}
		})
	}
}

// An expiry index made before v0.2.0 projects neither userGen nor credGen,
// which sessions of format 4 carry: sessions expiring lists them all the
// same, since it lists expiries and judges no session.
func TestExpiringOnAnIndexOfV010(t *testing.T) {
	t.Parallel()
	engine := ddbtest.Client(t)
	table := ddbtest.TableName(t, engine)
	layout := item.Default
	layout.ExpiryIndex = "expiry"
	in := itemtable.Input(table, layout)
	in.GlobalSecondaryIndexes[0].Projection.NonKeyAttributes = slices.DeleteFunc(
		slices.Clone(in.GlobalSecondaryIndexes[0].Projection.NonKeyAttributes),
		func(a string) bool { return a == item.AttrUserGen || a == item.AttrCredGen })
	if _, err := engine.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, engine, table)
	clock := ddbtest.NewClock(start)
	cfg := ddbsession.Config[testUser]{Client: engine, Table: table, Layout: ddbsession.Layout{ExpiryIndex: "expiry"}, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	app, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, engine: engine, table: table, app: app, layout: cfg.Layout, probe: ddbtest.NewProbe(engine)}
	alice := f.user("alice")
	f.login(alice, curl, "password")
	got := f.expiring(window(start.Add(23*time.Hour), start.Add(25*time.Hour))...)
	if len(got.Sessions) != 1 {
		t.Errorf("sessions expiring on an index without userGen and credGen listed %d sessions, want 1: %+v", len(got.Sessions), got)
	}
}
