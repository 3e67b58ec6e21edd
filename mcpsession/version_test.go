package mcpsession_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The tests' server's key, as New defaults it.
var serverKey = ddbsession.UserKey{PK: "MCPSERVER#notes", SK: "MCPSERVER"}

// sessionPK is the partition key of the session item of Mcp-Session-Id id.
func sessionPK(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// serverReadPKs are the partition keys of a read of the server's version
// after the instance's first: the server's user item and, on MREC, its
// revocation item (docs/item-format.md), without the global item, which
// the sessions' Manager keeps its own copy of.
func serverReadPKs(layout ddbsession.Layout) []string {
	pks := []string{serverKey.PK}
	if layout.MREC {
		pks = append(pks, "USERSESSIONS#15#MCPSERVER#notesMCPSERVER")
	}
	return pks
}

// An MCP request reads its session item alone (on MREC with the session's
// end record, in one BatchGetItem): never the server's user item, which
// every MCP session shares, while the instance's copy of the server's
// version is younger than RevokeEveryoneWithin. Then one read of the
// server's items renews the copy (a GetItem of the user item; on MREC a
// BatchGetItem of it and its revocation item), which leaves out the
// global item: the sessions' Manager keeps its own copy of that, and reads
// it once per RevokeEveryoneWithin. The wiring before the copy read the
// server's user item in every request, with the session. On the plain
// table, where every item read is there, the engine reports 1 read unit a
// request, and 2 for the wiring before.
func TestRequestReadsItsSessionAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		layout ddbsession.Layout
	}{
		{"plain", ddbsession.Layout{}},
		{"MREC", ddbsession.Layout{MREC: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, tc.layout)
			bySize := ddbtest.ProbeReports(t, ddbtest.Client(t)).BySize // moto reports 0.5 for any GetItem
			if !bySize {
				t.Log("this engine does not report capacity by item size: the calls are compared, the units not")
			}
			clock := new(ddbtest.Mono)
			in := e.startWith(wiring{mono: clock.Now})
			id := initializeRaw(t, in)
			session := []string{sessionPK(id)}
			op := "GetItem"
			if tc.layout.MREC {
				session, op = []string{sessionPK(id), sessionPK(id)}, "BatchGetItem" // the session and its end record
			}
			// request sends a tools/call, and checks its calls: the session's
			// read, and the copy's too if withCopy.
			request := func(withCopy bool) {
				t.Helper()
				want, wantReads := map[string]int{op: 1}, [][]string{session}
				if withCopy {
					want[op]++
					wantReads = append(wantReads, serverReadPKs(tc.layout))
				}
				in.calls.Reset()
				takeReads(in.calls)
				if code, body := post(t, in, id, callEcho); code != http.StatusOK {
					t.Fatalf("tools/call: status %d %q", code, body)
				}
				reads, units := takeReads(in.calls)
				if bySize && !tc.layout.MREC && !withCopy && units != 1 {
					t.Errorf("a request consumed %v read units, want 1", units)
				}
				if diff := cmp.Diff(want, in.calls.Take()); diff != "" {
					t.Errorf("DynamoDB calls (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantReads, reads); diff != "" {
					t.Errorf("the partition keys of each read (-want +got):\n%s", diff)
				}
			}
			for range 5 {
				request(false)
			}
			clock.Advance(within - 1)
			request(false)
			clock.Advance(1)
			request(true)
			request(false)

			// The wiring before: one BatchGetItem of the session and the
			// server's user item (on MREC with the server's revocation item
			// and the session's end record), in every request.
			old := e.startWith(wiring{readServerPerRequest: true})
			oldID := initializeRaw(t, old)
			for range 3 {
				old.calls.Reset()
				takeReads(old.calls)
				if code, body := post(t, old, oldID, callEcho); code != http.StatusOK {
					t.Fatalf("tools/call, the wiring before: status %d %q", code, body)
				}
				reads, units := takeReads(old.calls)
				if bySize && !tc.layout.MREC && units != 2 {
					t.Errorf("the wiring before: a request consumed %v read units, want 2", units)
				}
				if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, old.calls.Take()); diff != "" {
					t.Errorf("the wiring before: DynamoDB calls (-want +got):\n%s", diff)
				}
				if len(reads) != 1 || !contains(reads[0], serverKey.PK) {
					t.Errorf("the wiring before: reads %q, want one with the server's user item %q", reads, serverKey.PK)
				}
			}
		})
	}
}

func contains(pks []string, pk string) bool {
	for _, p := range pks {
		if p == pk {
			return true
		}
	}
	return false
}

// However many requests find the copy stale at once, the instance reads
// the server's version once: the others wait for that read. It reads the
// global item in none of them: the sessions' Manager keeps its own copy of
// that, fresh here, and the copy's Reader read it at initialize.
func TestStaleCopyIsReadOnce(t *testing.T) {
	t.Parallel()
	const requests = 32
	e := newEnv(t)
	clock := new(ddbtest.Mono)
	in := e.startWith(wiring{mono: clock.Now})
	id := initializeRaw(t, in)
	clock.Advance(within)

	// The copy's read waits until every request has read its session, and
	// so found the copy stale, or is waiting for that read.
	var sessionReads sync.WaitGroup
	sessionReads.Add(requests)
	var first atomic.Bool
	in.calls.Before = func(_ context.Context, _ string, in any) {
		reads, _ := ddbtest.ReadPKs(in)
		switch {
		case contains(reads, sessionPK(id)):
			sessionReads.Done()
		case contains(reads, serverKey.PK) && first.CompareAndSwap(false, true):
			sessionReads.Wait()
		}
	}
	in.calls.Reset()
	takeReads(in.calls)
	var wg sync.WaitGroup
	codes := make([]int, requests)
	for i := range requests {
		wg.Go(func() { codes[i], _ = post(t, in, id, callEcho) })
	}
	wg.Wait()
	in.calls.Before = nil
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, code)
		}
	}
	// On the plain table each read is of one item: a GetItem.
	if diff := cmp.Diff(map[string]int{"GetItem": requests + 1}, in.calls.Take()); diff != "" {
		t.Errorf("DynamoDB calls of %d requests that find the copy stale (-want +got):\n%s", requests, diff)
	}
	reads := map[string]int{}
	taken, _ := takeReads(in.calls)
	for _, pks := range taken {
		for _, pk := range pks {
			reads[pk]++
		}
	}
	if diff := cmp.Diff(map[string]int{sessionPK(id): requests, serverKey.PK: 1}, reads); diff != "" {
		t.Errorf("the items read, by partition key (-want +got):\n%s", diff)
	}
}

// The copy's reads leave the table's global item to the sessions'
// Manager, which keeps its own copy of it: an instance reads that item,
// which every request of the fleet depends on, once per
// RevokeEveryoneWithin, not once more for each read of the copy. Here the
// Manager's copy stays fresh (it ages on the machine's clock, and
// RevokeEveryoneWithin is an hour), while the copy of the server's version
// goes stale again and again: each time, one read of the server's user
// item, and none of the global item.
func TestCopyLeavesTheGlobalItemToTheManager(t *testing.T) {
	t.Parallel()
	const globalPK = "SESSION#GLOBAL" // docs/item-format.md
	for _, tc := range []struct {
		name   string
		layout ddbsession.Layout
	}{
		{"plain", ddbsession.Layout{}},
		{"MREC", ddbsession.Layout{MREC: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, tc.layout)
			clock := new(ddbtest.Mono)
			in := e.startWith(wiring{mono: clock.Now})
			id := initializeRaw(t, in)
			takeReads(in.calls)
			const stale = 5
			for range stale {
				clock.Advance(within)
				for range 3 {
					if code, body := post(t, in, id, callEcho); code != http.StatusOK {
						t.Fatalf("tools/call: status %d %q", code, body)
					}
				}
			}
			reads := map[string]int{}
			taken, _ := takeReads(in.calls)
			for _, pks := range taken {
				for _, pk := range pks {
					reads[pk]++
				}
			}
			if reads[serverKey.PK] != stale || reads[globalPK] != 0 {
				t.Errorf("over %d reads of the copy, the server's user item was read %d times and the global item %d times; want %d and 0",
					stale, reads[serverKey.PK], reads[globalPK], stale)
			}
		})
	}
}

// A server's user item deleted and made anew (by the next initialize, with
// CreateUser) serves none of the sessions of the one before it, on every
// instance, and on MREC too, where the server's revocation item outlives
// the user item and CreateUser leaves it as it is: the copy's version
// changes with the user item's sessions version as well as with the
// revocation item's.
func TestServerUserMadeAnewServesNoOldSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		layout ddbsession.Layout
	}{
		{"plain", ddbsession.Layout{}},
		{"MREC", ddbsession.Layout{MREC: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, tc.layout)
			clock := new(ddbtest.Mono)
			x := e.startWith(wiring{mono: clock.Now})
			initializeRaw(t, x)
			// A RevokeAll gives the server a revocation item on MREC,
			// which the deletion of its user item leaves behind.
			if err := x.sessions.RevokeAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			old := initializeRaw(t, x)

			_, err := e.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
				TableName: &e.table,
				Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: serverKey.PK}, "sk": &types.AttributeValueMemberS{Value: serverKey.SK}},
			})
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(within) // X reads its copy again
			if code, _ := post(t, x, old, callEcho); code != http.StatusNotFound {
				t.Errorf("once the server's user item is gone, on instance X: status %d, want 404", code)
			}
			renewed := initializeRaw(t, x) // makes the server's user item anew
			for _, in := range []struct {
				name string
				*instance
			}{{"X", x}, {"Y, started since", e.start()}} {
				if code, _ := post(t, in.instance, old, callEcho); code != http.StatusNotFound {
					t.Errorf("a session of the user item before, on instance %s: status %d, want 404", in.name, code)
				}
				if code, body := post(t, in.instance, renewed, callEcho); code != http.StatusOK {
					t.Errorf("a session of the user item made anew, on instance %s: status %d %q, want 200", in.name, code, body)
				}
			}
		})
	}
}

// A server's user item without a sessions version (written by hand, not
// by the first initialize's CreateUser) serves no session: nothing tells
// it from an item made anew under its key. The copy's version is then 0,
// which ddbsession refuses: initialize fails, and the log names the item,
// the attribute and the fix; once the item is deleted, an initialize makes
// it anew, on an instance whose copy has read the deletion.
func TestServerUserWithoutVersionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: serverKey.PK}, "sk": &types.AttributeValueMemberS{Value: serverKey.SK}}
	unversioned := map[string]types.AttributeValue{"mcpServer": &types.AttributeValueMemberS{Value: "notes"}}
	for k, v := range key {
		unversioned[k] = v
	}
	if _, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.table, Item: unversioned}); err != nil {
		t.Fatal(err)
	}
	clock := new(ddbtest.Mono)
	in := e.startWith(wiring{mono: clock.Now})
	if code, body := post(t, in, "", initializeV); !strings.Contains(body, `"error"`) {
		t.Errorf("initialize with a server's user item without a sessions version: status %d %q, want an error", code, body)
	}
	want := `has no sessionsVersion (Layout.VersionAttribute), a Number that every user item needs`
	if logs := in.logs.String(); !strings.Contains(logs, want) || !strings.Contains(logs, "delete it, and an initialize makes it anew") {
		t.Errorf("the log:\n%s\nwant the initialize's error, with %q and the fix", logs, want)
	}

	if _, err := e.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.table, Key: key}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(within)
	if code, body := post(t, in, initializeRaw(t, in), callEcho); code != http.StatusOK {
		t.Errorf("a session initialized once the item is deleted: status %d %q, want 200", code, body)
	}
}

// RevokeAll on one instance refuses that instance's sessions at once, and
// another instance's once that instance's copy of the server's version is
// RevokeEveryoneWithin old; an instance whose copy was never read refuses
// at once. A session initialized after it lives on every instance that has
// seen it; one initialized, in the window, on an instance that had not yet
// seen it ends once that instance sees it.
func TestRevokeAllAcrossInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clockX, clockY := new(ddbtest.Mono), new(ddbtest.Mono)
	x, y := e.startWith(wiring{mono: clockX.Now}), e.startWith(wiring{mono: clockY.Now})
	status := func(in *instance, id string) int {
		t.Helper()
		code, _ := post(t, in, id, callEcho)
		return code
	}
	before := initializeRaw(t, x)
	if code := status(y, before); code != http.StatusOK { // y reads the version into its copy
		t.Fatalf("before RevokeAll, on instance Y: status %d", code)
	}

	if err := x.sessions.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	x.calls.Reset()
	if code := status(x, before); code != http.StatusNotFound {
		t.Errorf("on instance X, right after its RevokeAll: status %d, want 404", code)
	}
	if diff := cmp.Diff(map[string]int{"GetItem": 1}, x.calls.Take()); diff != "" {
		t.Errorf("instance X refused from its copy, renewed by RevokeAll; DynamoDB calls (-want +got):\n%s", diff)
	}
	if code := status(e.start(), before); code != http.StatusNotFound {
		t.Errorf("on an instance whose copy was never read: status %d, want 404", code)
	}
	after := initializeRaw(t, x)
	inWindow := initializeRaw(t, y) // Y has not seen the RevokeAll
	if code := status(y, before); code != http.StatusOK {
		t.Errorf("on instance Y, its copy younger than RevokeEveryoneWithin: status %d, want 200 (the window)", code)
	}

	clockY.Advance(within)
	for _, tc := range []struct {
		name string
		id   string
		want int
	}{
		{"before RevokeAll", before, http.StatusNotFound},
		{"initialized on X after RevokeAll", after, http.StatusOK},
		{"initialized on Y before Y saw RevokeAll", inWindow, http.StatusNotFound},
	} {
		for name, in := range map[string]*instance{"X": x, "Y": y} {
			if code := status(in, tc.id); code != tc.want {
				t.Errorf("%s, once Y's copy is stale, on instance %s: status %d, want %d", tc.name, name, code, tc.want)
			}
		}
	}
	if code := status(y, initializeRaw(t, y)); code != http.StatusOK {
		t.Errorf("initialized on Y after it saw RevokeAll: status %d, want 200", code)
	}
}
