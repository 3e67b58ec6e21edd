package main

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

var scsLayout = item.SCSLayout{Layout: layout, Prefix: item.DefaultSCSPrefix}

// set adds attributes to the item under key, as the app or a future
// release might.
func (f *fixture) set(key map[string]types.AttributeValue, update string, values map[string]types.AttributeValue) {
	f.t.Helper()
	_, err := f.engine.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &f.table, Key: key, UpdateExpression: &update, ExpressionAttributeValues: values,
	})
	if err != nil {
		f.t.Fatalf("UpdateItem: %v", err)
	}
}

// update applies w, an update of the library's, to the item under key.
func (f *fixture) update(key map[string]types.AttributeValue, w item.Writes) {
	f.t.Helper()
	_, err := f.engine.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &f.table, Key: key, UpdateExpression: &w.Update, ConditionExpression: &w.Condition,
		ExpressionAttributeNames: w.Names, ExpressionAttributeValues: w.Values,
	})
	if err != nil {
		f.t.Fatalf("UpdateItem: %v", err)
	}
}

// scsItem writes an scs session expiring at expires, or its tombstone.
func (f *fixture) scsItem(expires time.Time, tombstone bool) string {
	f.t.Helper()
	av := scsLayout.Encode(scsLayout.PK(item.NewToken()+item.NewToken()), item.SCSSession{Data: []byte("gob"), ExpiresAt: expires})
	if tombstone {
		av[item.AttrKind] = item.Str(item.KindSCSDestroyed)
		delete(av, item.AttrData)
	}
	f.put(av)
	return keyString(av)
}

// sweep deletes the expired items of the library's kinds and nothing
// else: not user items, a user's revocation or slots item, the global
// item, an item of a version it does not know, or one under another
// kind's key, whatever their TTL attribute says.
func TestSweepDeletesOnlyExpiredLibraryItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	f.clock = newSleeper(now)
	past := item.Num(now.Add(-time.Hour).Unix())
	alice, bob, carol := f.user("alice"), f.user("bob"), f.user("carol")
	f.login(alice, firefox)
	swept := f.expiredSession(alice, now.Add(-time.Hour), firefox)
	swept = append(swept, f.expiredSession(bob, now.Add(-48*time.Hour), curl)...)
	swept = append(swept, f.scsItem(now.Add(-time.Hour), false), f.scsItem(now.Add(-time.Hour), true))
	// An end record, as an MREC Revoke leaves one, that has outlived any
	// copy of its session.
	ended := layout.EncodeEnd(layout.SessionPK(item.NewToken()), item.NewID(now), now.Add(-time.Hour))
	f.put(ended)
	swept = append(swept, keyString(ended))
	// A session limit's void, past any write of its session.
	void := layout.EncodeVoid(layout.SessionPK(item.NewToken()), now.Add(-time.Hour))
	f.put(void)
	swept = append(swept, keyString(void))
	// Expired within -grace: left for the next sweep.
	f.expiredSession(bob, now.Add(-time.Minute), curl)
	f.scsItem(now.Add(time.Hour), false)
	f.scsItem(now.Add(time.Hour), true)
	f.put(layout.EncodeEnd(layout.SessionPK(item.NewToken()), item.NewID(now), now.Add(-time.Minute)))

	// Items that are not the sweep's, each with an expired TTL attribute.
	f.set(layout.Key(carol.PK, carol.SK), "SET expiresAt = :past", map[string]types.AttributeValue{":past": past})
	// carol's revocation item, as an MREC RevokeAll writes it (on an
	// MREC table, which this is not: the sweep leaves it all the same).
	f.update(layout.RevocationKey(carol.PK, carol.SK), layout.ChangeRevocation(time.Now()))
	revocation := f.item(layout.RevocationKey(carol.PK, carol.SK))
	if revocation[item.AttrKind].(*types.AttributeValueMemberS).Value != item.KindRevocation {
		t.Fatalf("carol's revocation item: %v", revocation)
	}
	f.set(layout.RevocationKey(carol.PK, carol.SK), "SET expiresAt = :past", map[string]types.AttributeValue{":past": past})
	// The slots item that a session limit counts sessions in.
	limited, err := ddbsession.New(ddbsession.Config[testUser]{Client: f.engine, Table: f.table, Limits: ddbsession.Limits{MaxSessions: 3}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	dave := f.user("dave")
	if err := limited.Login(httptest.NewRecorder(), httptest.NewRequest("POST", "https://app.test/login", nil), dave, nil); err != nil {
		t.Fatal(err)
	}
	daveSlots := f.item(layout.SlotsKey(dave.PK, dave.SK))
	if slots, err := layout.DecodeSlots(daveSlots); err != nil || len(slots.List) != 1 {
		t.Fatalf("the session limit's slots item: %v, %v", daveSlots, err)
	}
	f.set(layout.SlotsKey(dave.PK, dave.SK), "SET expiresAt = :past", map[string]types.AttributeValue{":past": past})
	if err := f.app.RevokeEveryone(context.Background()); err != nil { // writes the global item
		t.Fatal(err)
	}
	f.set(layout.GlobalKey(), "SET expiresAt = :past", map[string]types.AttributeValue{":past": past})
	// A format after FormatDPoP is none the decoder knows: a later
	// release's, which this one leaves alone.
	future := f.expiredSession(carol, now.Add(-time.Hour), "a release from the future")
	futureEnd := layout.EncodeEnd(layout.SessionPK(item.NewToken()), item.NewID(now), now.Add(-time.Hour))
	f.put(futureEnd)
	for _, k := range append(future, keyString(futureEnd)) {
		pk, sk, _ := strings.Cut(k, "|")
		f.set(layout.Key(pk, sk), "SET v = :v", map[string]types.AttributeValue{":v": item.Num(item.FormatDPoP + 1)})
	}
	app := map[string]types.AttributeValue{"pk": item.Str("ORDER#1"), "sk": item.Str("SESSION"), "kind": item.Str("session"), "expiresAt": past}
	f.put(app)
	misplaced := layout.EncodeSession("ORDER#2", item.Session{ID: item.NewID(now), UserPK: alice.PK, UserSK: alice.SK, CreatedAt: now, RefreshedAt: now, ExpiresAt: now.Add(-time.Hour)})
	f.put(misplaced)
	misplacedSCS := scsLayout.Encode("ORDER#3", item.SCSSession{Data: []byte("x"), ExpiresAt: now.Add(-time.Hour)})
	f.put(misplacedSCS)
	// An end record and a try's record under the app's keys, and a try's
	// record under a session's key that no try has.
	misplacedEnd := layout.EncodeEnd("ORDER#4", item.NewID(now), now.Add(-time.Hour))
	f.put(misplacedEnd)
	misplacedTry := layout.EncodeTry("ORDER#5", 1, now.Add(-time.Hour))
	f.put(misplacedTry)
	f.put(layout.EncodeVoid("ORDER#6", now.Add(-time.Hour)))
	oddTry := layout.EncodeTry(layout.SessionPK(item.NewToken()), 1, now.Add(-time.Hour))
	oddTry["sk"] = item.Str("TRY#one")
	f.put(oddTry)

	before := f.keys()
	code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	want := sweepReport{
		Table: f.table, ExpiredBefore: time.Unix(now.Add(-5*time.Minute).Unix()+1, 0).UTC(),
		Scanned: int64(len(before)), Expired: 8, Deleted: 8,
		DeletedByKind: map[string]int64{item.KindSession: 2, item.KindIndex: 2, item.KindEnded: 1, item.KindTry: 0, item.KindVoid: 1, item.KindHistory: 0, item.KindDevice: 0, item.KindSCS: 1, item.KindSCSDestroyed: 1},
		WriteUnits:    8,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(sweepReport{}, "ReadUnits")); diff != "" {
		t.Errorf("sweep -json (-want +got):\n%s", diff)
	}
	if got.ReadUnits <= 0 || stderr != "" {
		t.Errorf("read units %v; stderr with -json %q", got.ReadUnits, stderr)
	}
	wantLeft := slices.DeleteFunc(slices.Clone(before), func(k string) bool { return slices.Contains(swept, k) })
	if diff := cmp.Diff(wantLeft, f.keys()); diff != "" {
		t.Errorf("items left (-want +got):\n%s", diff)
	}

	code, stdout, stderr = f.run("sweep", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	if !strings.Contains(stdout, "deleted      0") || !strings.Contains(stdout, "scanned      "+thousands(int64(len(wantLeft)))) {
		t.Errorf("a second sweep:\n%s", stdout)
	}
}

// -dry-run counts and deletes nothing.
func TestSweepDryRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.expiredSession(f.user("alice"), time.Now().Add(-time.Hour), curl)
	before := f.keys()
	code, stdout, stderr := f.run("sweep", "-dry-run", "-json")
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	if !got.DryRun || got.Expired != 2 || got.Deleted != 0 || f.probe.Count("DeleteItem") != 0 {
		t.Errorf("dry run: %+v, %d DeleteItems", got, f.probe.Count("DeleteItem"))
	}
	if diff := cmp.Diff(before, f.keys()); diff != "" {
		t.Errorf("a dry run changed the table (-before +after):\n%s", diff)
	}
}

// -max-wcu paces the deletes on the write units DynamoDB reports for
// each: after a delete of n units, the next waits n/rate. An item over
// 1 KB reports 2, and its wait doubles. The units are the engine's where
// it reports them by size, as DynamoDB does (dynalite), and, on every
// engine, DynamoDB's bill from the items' sizes (recordUnits's bill),
// which is all there is where the engine reports a fixed figure (moto).
func TestSweepPacesWrites(t *testing.T) {
	t.Parallel()
	bills := []bool{true}
	if newFixture(t).billsBySize() {
		bills = append(bills, false)
	}
	for _, bill := range bills {
		t.Run(map[bool]string{false: "the engine's reports", true: "DynamoDB's bill"}[bill], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			units := recordUnits(f.probe, bill)
			now := time.Now()
			f.clock = newSleeper(now)
			alice := f.user("alice")
			for range 4 {
				f.expiredSession(alice, now.Add(-time.Hour), curl)
			}
			f.expiredSession(alice, now.Add(-time.Hour), strings.Repeat("x", 1500))
			const rate = 4
			code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "4", "-max-rcu", "0")
			wantCode(t, code, exitOK, stdout, stderr)
			var got sweepReport
			decode(t, stdout, &got)

			reported := units.deletes()
			if len(reported) != 10 || !slices.Contains(reported, 2) {
				t.Fatalf("the deletes reported %v write units, want 10 deletes and a 2 among them", reported)
			}
			var want []time.Duration
			var total float64
			for i, units := range reported {
				total += units
				if i < len(reported)-1 {
					want = append(want, time.Duration(units/rate*float64(time.Second)))
				}
			}
			if diff := cmp.Diff(want, f.clock.slept()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			elapsed := time.Duration(0)
			for _, d := range want {
				elapsed += d
			}
			if got.WriteUnits != total || got.ElapsedSeconds != seconds(elapsed) {
				t.Errorf("write units %v, want %v; elapsed %vs, want %v", got.WriteUnits, total, got.ElapsedSeconds, elapsed)
			}
			t.Logf("%v write units in %v of waits: %.2f units/s at -max-wcu %d", total, elapsed, (total-reported[len(reported)-1])/elapsed.Seconds(), rate)
		})
	}
}

// -max-rcu paces the scan on the read units each page reports, in pages
// of about a second's worth, or 64 KB.
func TestScanPacesReads(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"sweep", "-dry-run", "-max-wcu", "0"}, {"count", "-yes", "-segments", "1"}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			units := recordUnits(f.probe, false)
			now := time.Now()
			f.clock = newSleeper(now)
			alice := f.user("alice")
			for range 70 { // 141 items: pages of 64 KB are 64 items of a guessed 1 KB
				f.expiredSession(alice, now.Add(-time.Hour), curl)
			}
			const rate = 2
			code, stdout, stderr := f.run(append(args, "-json", "-max-rcu", "2")...)
			wantCode(t, code, exitOK, stdout, stderr)
			reported := units.scans()
			if len(reported) < 3 {
				t.Fatalf("%d Scan pages (%v), want several", len(reported), reported)
			}
			var want []time.Duration
			for _, units := range reported[:len(reported)-1] {
				want = append(want, time.Duration(units/rate*float64(time.Second)))
			}
			if diff := cmp.Diff(want, f.clock.slept()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

// A session that the app refreshes between the sweep's scan and its
// delete is kept: the delete's condition finds it no longer expired.
func TestSweepRacingRefresh(t *testing.T) {
	t.Parallel()
	t0 := time.Now().Truncate(time.Second)
	appClock := ddbtest.NewClock(t0)
	f := newFixture(t, func(c *ddbsession.Config[testUser]) {
		c.Limits.IdleTimeout = time.Hour
		c.Now = appClock.Now
	})
	alice := f.user("alice")
	cookie := f.login(alice, firefox)
	other := f.expiredSession(alice, t0.Add(-time.Hour), curl)
	cred, _ := layout.ParseCredential(cookie.Value)
	raced := layout.SessionPK(cred.Token)

	// The sweep runs after the session's expiry by its own clock; the
	// app's lags by two minutes, and refreshes the session meanwhile.
	f.clock = newSleeper(t0.Add(61 * time.Minute))
	var refreshed sync.Once
	f.probe.Before = func(_ context.Context, op string, in any) {
		if op != "DeleteItem" || in.(*dynamodb.DeleteItemInput).Key["pk"].(*types.AttributeValueMemberS).Value != raced {
			return
		}
		refreshed.Do(func() {
			appClock.Set(t0.Add(59 * time.Minute))
			r := httptest.NewRequest("GET", "https://app.test/", nil)
			r.AddCookie(cookie)
			w := httptest.NewRecorder()
			f.app.RequireSession(okHandler).ServeHTTP(w, r)
			if w.Code != 200 {
				t.Errorf("the app's request during the sweep: %d", w.Code)
			}
			if err := f.app.Wait(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	code, stdout, stderr := f.run("sweep", "-json", "-grace", "0", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	// The login's index item lives until the session's absolute
	// lifetime ends, a month on: it is not expired.
	if got.Expired != 3 || got.Kept != 1 || got.Deleted != 2 {
		t.Errorf("sweep: %d expired, %d kept, %d deleted; want 3, 1 (the refreshed session), 2", got.Expired, got.Kept, got.Deleted)
	}
	left := f.keys()
	for _, k := range other {
		if slices.Contains(left, k) {
			t.Errorf("the other expired item %s is still there", k)
		}
	}
	appClock.Set(t0.Add(61 * time.Minute))
	if _, _, err := f.app.Authenticate(context.Background(), cookie.Value); err != nil {
		t.Errorf("the refreshed session after the sweep, past its old expiry: %v", err)
	}
	list, err := f.app.List(context.Background(), alice)
	if err != nil || len(list) != 1 {
		t.Errorf("List after the sweep: %v, %v; want the refreshed session", list, err)
	}
}

// A pending two-step login's session item (version 3, with no index
// item), and the records of its tries, are the library's items, which TTL
// deletes: the sweep keeps them while the login is pending, and deletes
// them once it has expired.
func TestSweepDeletesExpiredPendingLogins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	alice, bob := f.user("alice"), f.user("bob")
	signedIn := f.login(alice, firefox)
	f.beginLogin(alice)
	bobs := f.beginLogin(bob)
	f.failSecondFactor(bobs)
	f.failSecondFactor(bobs)
	var pending, tries []string
	for _, tc := range []struct {
		filter string
		value  types.AttributeValue
		into   *[]string
	}{
		{"v = :v", item.Num(item.FormatPending), &pending},
		{"kind = :v", item.Str(item.KindTry), &tries},
	} {
		out, err := f.engine.Scan(context.Background(), &dynamodb.ScanInput{
			TableName: &f.table, FilterExpression: &tc.filter,
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": tc.value},
		})
		if err != nil || len(out.Items) != 2 {
			t.Fatalf("%s: %d items, %v; want 2", tc.filter, len(out.Items), err)
		}
		for _, av := range out.Items {
			*tc.into = append(*tc.into, keyString(av))
		}
	}
	before := f.keys()

	// Config.Limits.PendingLifetime is 5 minutes, and -grace 5 minutes: a
	// minute on they are pending still, 20 minutes on long expired. The
	// signed-in session lives a day.
	for _, tc := range []struct {
		after           time.Duration
		sessions, tries int64
		left            []string
	}{
		{time.Minute, 0, 0, before},
		{20 * time.Minute, 2, 2, slices.DeleteFunc(slices.Clone(before), func(k string) bool { return slices.Contains(pending, k) || slices.Contains(tries, k) })},
	} {
		f.clock = newSleeper(now.Add(tc.after))
		code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "0", "-max-rcu", "0")
		wantCode(t, code, exitOK, stdout, stderr)
		var got sweepReport
		decode(t, stdout, &got)
		byKind := map[string]int64{item.KindSession: tc.sessions, item.KindIndex: 0, item.KindEnded: 0, item.KindTry: tc.tries, item.KindVoid: 0, item.KindHistory: 0, item.KindDevice: 0, item.KindSCS: 0, item.KindSCSDestroyed: 0}
		deleted := tc.sessions + tc.tries
		if got.Expired != deleted || got.Deleted != deleted || got.Kept != 0 || !maps.Equal(got.DeletedByKind, byKind) {
			t.Errorf("sweep %v on: %+v; want %d pending session items and %d tries' records deleted", tc.after, got, tc.sessions, tc.tries)
		}
		if diff := cmp.Diff(tc.left, f.keys()); diff != "" {
			t.Errorf("sweep %v on: items left (-want +got):\n%s", tc.after, diff)
		}
	}
	if !f.valid(signedIn) {
		t.Error("the signed-in session did not survive the sweep")
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// The progress: a bar that redraws itself on a terminal, lines otherwise,
// nothing with -json; and a summary on stdout.
func TestSweepProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	f.clock = newSleeper(now)
	alice := f.user("alice")
	for range 6 {
		f.expiredSession(alice, now.Add(-time.Hour), curl)
	}
	f.terminal = true
	code, stdout, stderr := f.run("sweep", "-max-wcu", "2", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	if strings.Count(stderr, "\rsweep [") < 3 || !strings.Contains(stderr, "100%") || !strings.HasSuffix(strings.TrimRight(stderr, " \n"), "12 deleted") {
		t.Errorf("no progress bar on a terminal:\n%q", stderr)
	}
	// 14: the user item, 6 session and 6 index items, and the layout
	// record.
	for _, want := range []string{"scanned      14", "deleted      12 (sessions 6, index items 6, end records 0, login tries 0, voids 0, history items 0, devices 0, scs sessions 0, scs tombstones 0)", "write units  12", "elapsed      5.5s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the summary does not say %q:\n%s", want, stdout)
		}
	}

	f.terminal = false
	for range 20 {
		f.expiredSession(alice, now.Add(-time.Hour), curl)
	}
	code, stdout, stderr = f.run("sweep", "-max-wcu", "2", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	if strings.Contains(stderr, "\r") || strings.Count(stderr, "items scanned") < 2 {
		t.Errorf("no progress lines without a terminal:\n%s", stderr)
	}
}

// The pace a real clock keeps: -max-wcu 100 on the engine.
func TestSweepRateOnTheRealClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user("alice")
	const sessions = 100
	for range sessions {
		f.expiredSession(alice, time.Now().Add(-time.Hour), curl)
	}
	began := time.Now()
	code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "100")
	elapsed := time.Since(began)
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	if got.Deleted != 2*sessions {
		t.Fatalf("deleted %d, want %d", got.Deleted, 2*sessions)
	}
	if min := time.Duration((got.WriteUnits - 1) / 100 * float64(time.Second)); elapsed < min {
		t.Errorf("%v write units in %v: faster than -max-wcu 100 allows (%v)", got.WriteUnits, elapsed, min)
	}
	t.Logf("deleted %d items (%v write units) in %v: %.1f units/s at -max-wcu 100", got.Deleted, got.WriteUnits, elapsed.Round(time.Millisecond), got.WriteUnits/elapsed.Seconds())
}

// The sweep deletes the expired sessions of every format the library
// reads: release v0.1.0's (1 to 3) and this one's (4 to 6), plain,
// device-bound and pending, with their index items; and never the table's
// layout record, whatever its TTL attribute says.
func TestSweepDeletesEveryFormat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	f.clock = newSleeper(now)
	alice := f.user("alice")
	var swept []string
	for _, legacy := range []bool{true, false} {
		for _, kind := range []string{"plain", "bound", "pending"} {
			created := now.Add(-25 * time.Hour).Truncate(time.Millisecond)
			s := item.Session{
				ID: item.NewID(created), UserPK: alice.PK, UserSK: alice.SK, CreatedAt: created, RefreshedAt: created, AuthAt: created,
				ExpiresAt: time.Unix(now.Add(-time.Hour).Unix(), 0), Legacy: legacy, DeviceBound: kind == "bound", Pending: kind == "pending",
			}
			pk := layout.SessionPK(item.NewToken())
			session := layout.EncodeSession(pk, s)
			f.put(session)
			swept = append(swept, keyString(session))
			if kind != "pending" { // a pending login has no index item
				index := layout.EncodeIndex(pk, s)
				f.put(index)
				swept = append(swept, keyString(index))
			}
		}
	}
	f.set(layout.LayoutKey(), "SET expiresAt = :past", map[string]types.AttributeValue{":past": item.Num(now.Add(-time.Hour).Unix())})
	before := f.keys()
	code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	if got.Deleted != int64(len(swept)) || got.DeletedByKind[item.KindSession] != 6 || got.DeletedByKind[item.KindIndex] != 4 {
		t.Errorf("sweep: %+v; want the 6 session items and 4 index items", got)
	}
	wantLeft := slices.DeleteFunc(slices.Clone(before), func(k string) bool { return slices.Contains(swept, k) })
	if diff := cmp.Diff(wantLeft, f.keys()); diff != "" {
		t.Errorf("items left (-want +got):\n%s", diff)
	}
	if recorded, err := item.DecodeLayout(f.item(layout.LayoutKey())); err != nil || recorded != layout {
		t.Errorf("after the sweep, the layout record: %+v, %v", recorded, err)
	}
}

// The sweep takes the layout from the table: without a layout flag, it
// finds the expired sessions of a table whose apps keep them under
// another prefix and their expiry in another attribute.
func TestSweepTakesTheRecordedLayout(t *testing.T) {
	t.Parallel()
	other := ddbsession.Layout{SessionPrefix: "S#", UserSessionsPrefix: "US#", TTLAttribute: "validUntil"}
	f := newFixture(t, func(c *ddbsession.Config[testUser]) { c.Layout = other })
	l, err := item.Layout(other).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.clock = newSleeper(now)
	user := f.user("alice")
	created := now.Add(-25 * time.Hour).Truncate(time.Millisecond)
	s := item.Session{ID: item.NewID(created), UserPK: user.PK, UserSK: user.SK, CreatedAt: created, RefreshedAt: created, AuthAt: created, ExpiresAt: time.Unix(now.Add(-time.Hour).Unix(), 0)}
	pk := l.SessionPK(item.NewToken())
	f.put(l.EncodeSession(pk, s))
	f.put(l.EncodeIndex(pk, s))
	code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	if got.Deleted != 2 || f.item(l.SessionKey(pk)) != nil {
		t.Errorf("sweep without layout flags on a table of another layout: %+v; want its session and index item deleted", got)
	}
}

// A user's security history and remembered devices expire with TTL too,
// which an MRSC table has not: the sweep deletes the expired events, the
// expired hour's count of failed sign-ins and the expired device records
// that the library wrote, and keeps the live ones, those expired within
// -grace, and items of those kinds that are not the library's.
func TestSweepDeletesExpiredHistoryAndDevices(t *testing.T) {
	t.Parallel()
	now := time.Now()
	appClock := ddbtest.NewClock(now.Add(-72 * time.Hour))
	f := newFixture(t, func(c *ddbsession.Config[testUser]) {
		c.Now = appClock.Now
		c.Limits.HistoryRetention = 24 * time.Hour
		c.Cookie.RememberDevices = true
	})
	f.clock = newSleeper(now)
	alice, bob := f.user("alice"), f.user("bob")
	wrongPassword := func(user ddbsession.UserKey) {
		t.Helper()
		r := httptest.NewRequest("POST", "https://app.test/login", nil)
		err := f.app.Login(httptest.NewRecorder(), r, user, func(testUser) error { return errors.New("wrong password") })
		if err == nil || err.Error() != "wrong password" {
			t.Fatalf("a wrong password's Login: %v", err)
		}
	}
	historyKeys := func() []string {
		t.Helper()
		var keys []string
		for _, k := range f.keys() {
			if _, sk, _ := strings.Cut(k, "|"); strings.HasPrefix(sk, item.HistorySort) {
				keys = append(keys, k)
			}
		}
		return keys
	}
	// Three days ago, with a day's retention: alice's failed sign-in, in
	// its hour's item, and her RevokeAll's event.
	wrongPassword(alice)
	if err := f.app.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	swept := historyKeys()
	if len(swept) != 2 {
		t.Fatalf("alice's history: %v; want her failed sign-ins' hour and her RevokeAll", swept)
	}
	// A device whose record outlived its 400 days, and one that did
	// within -grace.
	oldDevice := layout.EncodeDevice(alice.PK, alice.SK, item.Digest(item.NewToken()), now.Add(-401*24*time.Hour), now.Add(-24*time.Hour))
	f.put(oldDevice)
	swept = append(swept, keyString(oldDevice))
	f.put(layout.EncodeDevice(alice.PK, alice.SK, item.Digest(item.NewToken()), now.Add(-400*24*time.Hour), now.Add(-time.Minute)))
	// Now: bob's sign-in from a new device (its event, its device record,
	// its session) and his failed one, all live.
	appClock.Set(now)
	f.login(bob, firefox)
	wrongPassword(bob)
	// Expired, of those kinds, but not the library's: under the app's
	// key, of a later format version, or under another kind's key.
	past := now.Add(-24 * time.Hour)
	foreign := layout.EncodeHistory(alice.PK, alice.SK, item.HistoryEntry{Event: "created", At: past, Expires: past})
	foreign["pk"] = item.Str("ORDER#1")
	f.put(foreign)
	future := layout.EncodeHistory(alice.PK, alice.SK, item.HistoryEntry{Event: "created", At: past, Expires: past})
	future[item.AttrVersion] = item.Num(item.StateFormat + 1)
	f.put(future)
	misplacedDevice := layout.EncodeDevice(alice.PK, alice.SK, item.Digest(item.NewToken()), past, past)
	misplacedDevice["sk"] = item.Str(item.HistorySort + "device")
	f.put(misplacedDevice)

	before := f.keys()
	code, stdout, stderr := f.run("sweep", "-json", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	var got sweepReport
	decode(t, stdout, &got)
	byKind := map[string]int64{item.KindSession: 0, item.KindIndex: 0, item.KindEnded: 0, item.KindTry: 0, item.KindVoid: 0,
		item.KindHistory: 2, item.KindDevice: 1, item.KindSCS: 0, item.KindSCSDestroyed: 0}
	if diff := cmp.Diff(byKind, got.DeletedByKind); diff != "" || got.Expired != 3 || got.Deleted != 3 || got.Kept != 0 {
		t.Errorf("sweep: %+v; want alice's 2 history items and 1 device deleted (-want +got by kind):\n%s", got, diff)
	}
	wantLeft := slices.DeleteFunc(slices.Clone(before), func(k string) bool { return slices.Contains(swept, k) })
	if diff := cmp.Diff(wantLeft, f.keys()); diff != "" {
		t.Errorf("items left (-want +got):\n%s", diff)
	}
	events, _, err := f.app.History(context.Background(), bob, "")
	if err != nil || len(events) != 2 {
		t.Errorf("bob's history after the sweep: %v, %v; want his sign-in and his failed one", events, err)
	}

	code, stdout, stderr = f.run("sweep", "-max-wcu", "0", "-max-rcu", "0")
	wantCode(t, code, exitOK, stdout, stderr)
	if !strings.Contains(stdout, "deleted      0 (sessions 0, index items 0, end records 0, login tries 0, voids 0, history items 0, devices 0,") {
		t.Errorf("a second sweep:\n%s", stdout)
	}
}
