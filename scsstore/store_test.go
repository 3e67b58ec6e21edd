package scsstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession/scsstore"
)

// An scs token as scs makes them.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashedPK(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "SCS#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Data put through one SessionManager is read through a second one, with a
// Store of its own, on the same table: two instances of an app.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, _ := newStore(t, client, table)
	store2, _ := newStore(t, client, table)
	one, two := newInstance(t, store1, 0), newInstance(t, store2, 0)
	b := newBrowser(t)

	b.expect(one, "GET", "/get", nil, http.StatusNotFound, "")
	b.expect(one, "POST", "/put", msg("hello"), http.StatusNoContent, "")
	b.expect(two, "GET", "/get", nil, http.StatusOK, "hello")
	b.expect(two, "POST", "/put", msg("changed on two"), http.StatusNoContent, "")
	b.expect(one, "GET", "/get", nil, http.StatusOK, "changed on two")
	// Another browser has a session of its own.
	newBrowser(t).expect(two, "GET", "/get", nil, http.StatusNotFound, "")
}

// RenewToken, as on login and logout, kills the old token on every
// instance and keeps the data under the new one.
func TestRenewToken(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, _ := newStore(t, client, table)
	store2, _ := newStore(t, client, table)
	one, two := newInstance(t, store1, time.Hour), newInstance(t, store2, time.Hour)
	b := newBrowser(t)

	b.expect(one, "POST", "/put", msg("kept"), http.StatusNoContent, "")
	b.expect(two, "GET", "/get", nil, http.StatusOK, "kept") // instance two now has a record of it
	old := b.token(one)
	b.expect(one, "POST", "/renew", nil, http.StatusNoContent, "")
	renewed := b.token(one)
	if renewed == old || renewed == "" {
		t.Fatalf("RenewToken left the token %q (was %q)", renewed, old)
	}
	b.expect(two, "GET", "/get", nil, http.StatusOK, "kept")

	thief := newBrowser(t)
	thief.setToken(two, old)
	thief.expect(two, "GET", "/get", nil, http.StatusNotFound, "")
	thief.expect(one, "GET", "/get", nil, http.StatusNotFound, "")
	if found := findRaw(t, client, table, old); found != "scs-destroyed" {
		t.Errorf("old token's item is %q, want a tombstone, scs-destroyed", found)
	}
}

// Destroy deletes the session on every instance; the browser starts over.
func TestDestroy(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, _ := newStore(t, client, table)
	store2, _ := newStore(t, client, table)
	one, two := newInstance(t, store1, time.Hour), newInstance(t, store2, time.Hour)
	b := newBrowser(t)

	b.expect(one, "POST", "/put", msg("bye"), http.StatusNoContent, "")
	b.expect(two, "GET", "/get", nil, http.StatusOK, "bye")
	old := b.token(one)
	b.expect(two, "POST", "/destroy", nil, http.StatusNoContent, "")
	if b.token(one) != "" {
		t.Errorf("the cookie survived Destroy")
	}
	b.expect(one, "GET", "/get", nil, http.StatusNotFound, "")
	thief := newBrowser(t)
	thief.setToken(one, old)
	thief.expect(one, "GET", "/get", nil, http.StatusNotFound, "")
}

// findRaw returns the kind of the item behind token, or "" if there is
// none.
func findRaw(t *testing.T, client *dynamodb.Client, table, token string) string {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": avS(hashedPK(token)), "sk": avS("SCS")},
	})
	if err != nil {
		t.Fatal(err)
	}
	kind, _ := out.Item["kind"].(*types.AttributeValueMemberS)
	if kind == nil {
		return ""
	}
	return kind.Value
}

// An item whose expiry has passed is not found, though TTL has not removed
// it yet.
func TestExpiredItemNotFound(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	now := time.Now()
	store, _ := newStore(t, client, table)
	later, _ := newStore(t, client, table, func(c *scsstore.Config) {
		c.Now = func() time.Time { return now.Add(time.Hour) }
	})
	token := newToken()
	if err := store.Commit(token, []byte("data"), now.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, found, err := store.Find(token); !found || err != nil {
		t.Fatalf("Find before the expiry: found %v, err %v", found, err)
	}
	b, found, err := later.Find(token)
	if found || err != nil || b != nil {
		t.Errorf("Find after the expiry: %q, found %v, err %v; want not found, nil error", b, found, err)
	}
	if kind := findRaw(t, client, table, token); kind != "scs-session" {
		t.Fatalf("the expired item is not in the table (kind %q); the test proves nothing", kind)
	}

	// Through scs: an expired session is a new, empty one.
	in := newInstance(t, later, 0)
	br := newBrowser(t)
	br.setToken(in, token)
	br.expect(in, "GET", "/get", nil, http.StatusNotFound, "")
}

// The table never holds a token: not as a key, not in any attribute.
func TestNoRawTokenAtRest(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, _ := newStore(t, client, table)
	in := newInstance(t, store, time.Hour)
	b := newBrowser(t)
	b.expect(in, "POST", "/put", msg("secret"), http.StatusNoContent, "")
	first := b.token(in)
	b.expect(in, "POST", "/renew", nil, http.StatusNoContent, "")
	second := b.token(in)

	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	pks := map[string]bool{}
	scsItems := 0 // the others are the table's layout record, which CreateTable writes
	for _, it := range out.Items {
		for name, av := range it {
			var text string
			switch v := av.(type) {
			case *types.AttributeValueMemberS:
				text = v.Value
			case *types.AttributeValueMemberB:
				text = string(v.Value)
			}
			for _, token := range []string{first, second} {
				if strings.Contains(text, token) {
					t.Errorf("attribute %q holds a raw token", name)
				}
			}
		}
		pk := it["pk"].(*types.AttributeValueMemberS).Value
		pks[pk] = true
		if strings.HasPrefix(pk, "SCS#") {
			scsItems++
		}
	}
	if scsItems != 2 {
		t.Errorf("%d scs items, want 2 (a tombstone and a session)", scsItems)
	}
	if !pks[hashedPK(first)] || !pks[hashedPK(second)] {
		t.Errorf("partition keys %v, want SCS# and the tokens' SHA-256", pks)
	}
}

// With IdleTimeout set, scs commits every request; the store writes only
// when the data changed or the expiry moved by MinCommitInterval. Each Find
// is one GetItem.
func TestIdleTimeoutWrites(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, count1 := newStore(t, client, table)
	store2, count2 := newStore(t, client, table)
	one, two := newInstance(t, store1, 20*time.Minute), newInstance(t, store2, 20*time.Minute)
	b := newBrowser(t)

	b.expect(one, "POST", "/put", msg("m"), http.StatusNoContent, "")
	b.expect(one, "POST", "/put2", nil, http.StatusNoContent, "")
	if c := countsOf(count1); c.puts != 2 {
		t.Fatalf("two requests that change the data: %d PutItems, want 2", c.puts)
	}
	before1, before2 := countsOf(count1), countsOf(count2)
	for range 5 {
		b.expect(one, "GET", "/get", nil, http.StatusOK, "m")
		b.expect(two, "GET", "/get", nil, http.StatusOK, "m")
	}
	for i, c := range []struct{ before, after counts }{{before1, countsOf(count1)}, {before2, countsOf(count2)}} {
		if writes := c.after.puts - c.before.puts + c.after.updates - c.before.updates; writes != 0 {
			t.Errorf("instance %d: 5 GETs within the interval made %d writes, want 0", i+1, writes)
		}
		if gets := c.after.gets - c.before.gets; gets != 5 {
			t.Errorf("instance %d: 5 GETs made %d GetItems, want 5", i+1, gets)
		}
	}

	// A change within the interval is written at once, and seen by the
	// other instance.
	b.expect(two, "POST", "/put", msg("new"), http.StatusNoContent, "")
	if c := countsOf(count2); c.puts != before2.puts+1 {
		t.Errorf("a change within the interval: %d PutItems, want 1", c.puts-before2.puts)
	}
	b.expect(one, "GET", "/get", nil, http.StatusOK, "new")
}

// Once the stored expiry is MinCommitInterval behind the one scs asks for,
// the next request writes it, and the ones after it do not.
func TestIdleTimeoutWritesOncePerInterval(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, count := newStore(t, client, table, func(c *scsstore.Config) { c.MinCommitInterval = 5 * time.Minute })
	in := newInstance(t, store, 20*time.Minute)
	b := newBrowser(t)
	b.expect(in, "POST", "/put", msg("m"), http.StatusNoContent, "")

	// Age the item as if written six minutes ago, without sleeping: its
	// expiry moves six minutes back.
	token := b.token(in)
	key := map[string]types.AttributeValue{"pk": avS(hashedPK(token)), "sk": avS("SCS")}
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	expires := number(t, out.Item, "expiresAt")
	aged := expires - 6*60
	out.Item["expiresAt"] = avN(aged)
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: out.Item}); err != nil {
		t.Fatal(err)
	}

	before := countsOf(count)
	for range 3 {
		b.expect(in, "GET", "/get", nil, http.StatusOK, "m")
	}
	if c := countsOf(count); c.puts-before.puts != 1 {
		t.Errorf("3 GETs, the first due: %d PutItems, want 1", c.puts-before.puts)
	}
	out, err = client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if now := number(t, out.Item, "expiresAt"); now < aged+6*60 {
		t.Errorf("expiresAt %d after the write, want at least %d", now, aged+6*60)
	}
}

// A token of any other shape costs no DynamoDB call and is not found; a
// Delete of it is a no-op.
func TestMalformedTokens(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, count := newStore(t, client, table)
	good := newToken()
	for name, token := range map[string]string{
		"empty":     "",
		"short":     good[:42],
		"long":      good + "A",
		"padding":   good[:42] + "=",
		"std b64":   strings.Repeat("/", 43),
		"injection": `x" OR "1"="1`,
		"huge":      strings.Repeat("A", 1<<16),
	} {
		b, found, err := store.Find(token)
		if b != nil || found || err != nil {
			t.Errorf("%s: Find = %q, %v, %v; want nil, false, nil", name, b, found, err)
		}
		if err := store.Delete(token); err != nil {
			t.Errorf("%s: Delete: %v", name, err)
		}
	}
	if c := countsOf(count); c != (counts{}) {
		t.Errorf("calls for malformed tokens: %+v, want none", c)
	}
}

// Delete of a session that does not exist is a no-op: nil, and no item.
func TestDeleteMissing(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, _ := newStore(t, client, table)
	token := newToken()
	if err := store.Delete(token); err != nil {
		t.Fatalf("Delete of a missing session: %v", err)
	}
	if kind := findRaw(t, client, table, token); kind != "" {
		t.Errorf("Delete of a missing session left an item of kind %q", kind)
	}
	// And twice is as good as once.
	if err := store.Commit(token, []byte("x"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := store.Delete(token); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
}

// Store failures reach scs's ErrorFunc and the request fails with a 500:
// the handler never runs without its session, and nothing is let through.
func TestStoreErrorsReachErrorFunc(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, count := newStore(t, client, table)
	in := newInstance(t, store, 0)
	b := newBrowser(t)
	b.expect(in, "POST", "/put", msg("m"), http.StatusNoContent, "")

	for _, tc := range []struct {
		name              string
		get, put, update  error
		method, path, msg string
	}{
		{name: "find", get: errOutage, method: "GET", path: "/get"},
		{name: "commit", put: errOutage, method: "POST", path: "/put", msg: "lost"},
		{name: "delete on renew", update: errOutage, method: "POST", path: "/renew"},
		{name: "delete on destroy", update: errOutage, method: "POST", path: "/destroy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failOps(count, tc.get, tc.put, tc.update)
			status, body := b.do(in, tc.method, tc.path, msg(tc.msg))
			count.Fail = nil
			if status != http.StatusInternalServerError {
				t.Errorf("%s %s with DynamoDB failing: %d %q, want 500", tc.method, tc.path, status, body)
			}
			select {
			case err := <-in.errs:
				if !errors.Is(err, errOutage) {
					t.Errorf("ErrorFunc got %v, want the store's error", err)
				}
				if strings.Contains(err.Error(), b.token(in)) {
					t.Errorf("the error shows the token: %v", err)
				}
			default:
				if tc.update == nil { // RenewToken and Destroy errors go to the handler
					t.Errorf("ErrorFunc was not called")
				}
			}
			// The session is intact once DynamoDB is back.
			b.expect(in, "GET", "/get", nil, http.StatusOK, "m")
		})
	}
}

// A request that loaded the session before another request deleted it
// (logout on another tab, on another instance) cannot write it back when it
// commits: the old token stays dead.
func TestCommitAfterDeleteIsDropped(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, _ := newStore(t, client, table)
	store2, _ := newStore(t, client, table)
	one, two := newInstance(t, store1, time.Hour), newInstance(t, store2, time.Hour)
	b := newBrowser(t)
	b.expect(one, "POST", "/put", msg("m"), http.StatusNoContent, "")
	old := b.token(one)

	loaded, proceed := make(chan struct{}), make(chan struct{})
	one.hold = func() { close(loaded); <-proceed }
	done := make(chan struct{})
	tab := newBrowser(t)
	tab.setToken(one, old)
	go func() {
		defer close(done)
		// Loaded before the logout, changed and committed after it.
		tab.do(one, "POST", "/put", msg("late"))
	}()
	<-loaded
	b.expect(two, "POST", "/destroy", nil, http.StatusNoContent, "")
	close(proceed)
	<-done
	one.hold = nil

	if kind := findRaw(t, client, table, old); kind != "scs-destroyed" {
		t.Errorf("after the late commit the old token's item is %q, want scs-destroyed", kind)
	}
	thief := newBrowser(t)
	thief.setToken(two, old)
	thief.expect(two, "GET", "/get", nil, http.StatusNotFound, "")

	// The same through the Store alone, with a changed session.
	token := newToken()
	if err := store1.Commit(token, []byte("v1"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store1.Find(token); err != nil {
		t.Fatal(err)
	}
	if err := store2.Delete(token); err != nil {
		t.Fatal(err)
	}
	if err := store1.Commit(token, []byte("v2"), time.Now().Add(time.Hour)); err != nil {
		t.Errorf("Commit after Delete: %v, want nil (dropped)", err)
	}
	if _, found, _ := store1.Find(token); found {
		t.Errorf("Commit after Delete brought the session back")
	}
}

// A skipped commit keeps another instance's newer change: instance one
// read the session, instance two changed it, and one's unchanged request
// commits after that.
func TestSkipKeepsOtherInstancesChange(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, count1 := newStore(t, client, table)
	store2, _ := newStore(t, client, table)
	one, two := newInstance(t, store1, time.Hour), newInstance(t, store2, time.Hour)
	b := newBrowser(t)
	b.expect(one, "POST", "/put", msg("first"), http.StatusNoContent, "")

	loaded, proceed := make(chan struct{}), make(chan struct{})
	one.hold = func() { close(loaded); <-proceed }
	done := make(chan string)
	go func() {
		_, body := b.do(one, "GET", "/get", nil)
		done <- body
	}()
	<-loaded
	b.expect(two, "POST", "/put", msg("second"), http.StatusNoContent, "")
	before := countsOf(count1)
	close(proceed)
	if body := <-done; body != "first" {
		t.Errorf("the paused GET read %q, want first", body)
	}
	one.hold = nil
	if c := countsOf(count1); c.puts != before.puts {
		t.Errorf("the unchanged request wrote (%d PutItems)", c.puts-before.puts)
	}
	b.expect(one, "GET", "/get", nil, http.StatusOK, "second")
}

// Two Finds of one session on one instance overlap and read different
// states (another instance wrote in between, and the older answer arrives
// last). The record must not keep the older state, or a request that
// changes the data back to it would be skipped and its change lost.
func TestOverlappingFindsForgetTheRecord(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store1, count1 := newStore(t, client, table)
	store2, _ := newStore(t, client, table)
	token := newToken()
	expiry := time.Now().Add(time.Hour)
	if err := store2.Commit(token, []byte("old"), expiry); err != nil {
		t.Fatal(err)
	}

	// The first Find has its answer ("old") but is held before returning.
	answered, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	count1.After = func(_ context.Context, op string, _, _ any, _ error) error {
		if op == "GetItem" && held.CompareAndSwap(false, true) {
			close(answered)
			<-release
		}
		return nil
	}
	first := make(chan string)
	go func() {
		b, _, _ := store1.Find(token)
		first <- string(b)
	}()
	<-answered
	if err := store2.Commit(token, []byte("new"), expiry); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := store1.Find(token); string(b) != "new" {
		t.Fatalf("second Find read %q, want new", b)
	}
	close(release)
	if b := <-first; b != "old" {
		t.Fatalf("first Find read %q, want old", b)
	}

	// A request that read "new" changes the data back to "old".
	before := countsOf(count1)
	if err := store1.Commit(token, []byte("old"), expiry); err != nil {
		t.Fatal(err)
	}
	if c := countsOf(count1); c.puts != before.puts+1 {
		t.Errorf("a change back to an older state was skipped")
	}
	if b, _, _ := store2.Find(token); string(b) != "old" {
		t.Errorf("the table holds %q, want old", b)
	}
}

// The item is the one the package documentation describes, and an item
// written by hand in that form is found.
func TestItemAsDocumented(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, _ := newStore(t, client, table)
	token := newToken()
	expiry := time.Unix(time.Now().Add(time.Hour).Unix(), 900_000_000)
	if err := store.Commit(token, []byte("gob bytes"), expiry); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": avS(hashedPK(token)), "sk": avS("SCS")}
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]types.AttributeValue{
		"pk":        avS(hashedPK(token)),
		"sk":        avS("SCS"),
		"v":         &types.AttributeValueMemberN{Value: "1"},
		"kind":      avS("scs-session"),
		"data":      &types.AttributeValueMemberB{Value: []byte("gob bytes")},
		"expiresAt": avN(expiry.Unix()), // rounded down
	}
	avCompare := cmp.AllowUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{}, types.AttributeValueMemberB{})
	if diff := cmp.Diff(want, out.Item, avCompare); diff != "" {
		t.Errorf("stored item (-documented +got):\n%s", diff)
	}

	other := newToken()
	want["pk"] = avS(hashedPK(other))
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: want}); err != nil {
		t.Fatal(err)
	}
	if b, found, err := store.Find(other); string(b) != "gob bytes" || !found || err != nil {
		t.Errorf("Find of a hand-written item: %q, %v, %v", b, found, err)
	}
	// Malformed items are not found, without an error.
	want["v"] = avN(2)
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: want}); err != nil {
		t.Fatal(err)
	}
	if b, found, err := store.Find(other); b != nil || found || err != nil {
		t.Errorf("Find of an item of format 2: %q, %v, %v; want not found", b, found, err)
	}
}

// A hash-only table works the same, and its items have no sort key.
func TestHashOnlyTable(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, true)
	store, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout.HashOnly = true })
	one, two := newInstance(t, store, time.Hour), newInstance(t, store, time.Hour)
	b := newBrowser(t)
	b.expect(one, "POST", "/put", msg("hash only"), http.StatusNoContent, "")
	b.expect(two, "GET", "/get", nil, http.StatusOK, "hash only")
	b.expect(two, "POST", "/renew", nil, http.StatusNoContent, "")
	b.expect(one, "GET", "/get", nil, http.StatusOK, "hash only")
	b.expect(one, "POST", "/destroy", nil, http.StatusNoContent, "")
	b.expect(two, "GET", "/get", nil, http.StatusNotFound, "")
}

// scs.IterableStore needs raw tokens, which the table does not hold; the
// Store does not pretend otherwise.
func TestNotIterable(t *testing.T) {
	var store any = &scsstore.Store{}
	if _, ok := store.(scs.IterableStore); ok {
		t.Errorf("Store implements scs.IterableStore")
	}
	if _, ok := store.(scs.IterableCtxStore); ok {
		t.Errorf("Store implements scs.IterableCtxStore")
	}
	if _, ok := store.(scs.CtxStore); !ok {
		t.Errorf("Store does not implement scs.CtxStore")
	}
}
