package mcpsession_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The tests' server's key, as New defaults it.
var serverKey = ddbsession.UserKey{PK: "MCPSERVER#notes", SK: "MCPSERVER"}

// sessionPK is the partition key of the session item of Mcp-Session-Id id.
func sessionPK(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// serverReadPKs are the partition keys of a read of the server's version:
// ddbitem.RevocationKeys of the server's user.
func serverReadPKs(t *testing.T, layout ddbsession.Layout) []string {
	t.Helper()
	keys, err := ddbitem.RevocationKeys(layout, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, k := range keys {
		pks = append(pks, k["pk"].(*types.AttributeValueMemberS).Value)
	}
	return pks
}

// newClock returns a monotonic clock for an instance's copy of the
// server's version, at 1.
func newClock() *atomic.Int64 {
	var c atomic.Int64
	c.Store(1)
	return &c
}

// An MCP request reads its session item alone (on MREC with the session's
// end record, in one BatchGetItem): never the server's user item, which
// every MCP session shares, while the instance's copy of the server's
// version is younger than RevokeEveryoneWithin. Then one read of the
// server's items renews the copy. The wiring before the copy read the
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
			clock := newClock()
			in := e.startWith(wiring{mono: clock.Load})
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
					want["BatchGetItem"]++
					wantReads = append(wantReads, serverReadPKs(t, tc.layout))
				}
				in.calls.counts()
				in.calls.takeReads()
				in.calls.takeUnits()
				if code, body := post(t, in, id, callEcho); code != http.StatusOK {
					t.Fatalf("tools/call: status %d %q", code, body)
				}
				if units := in.calls.takeUnits(); bySize && !tc.layout.MREC && !withCopy && units != 1 {
					t.Errorf("a request consumed %v read units, want 1", units)
				}
				if diff := cmp.Diff(want, in.calls.counts()); diff != "" {
					t.Errorf("DynamoDB calls (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantReads, in.calls.takeReads()); diff != "" {
					t.Errorf("the partition keys of each read (-want +got):\n%s", diff)
				}
			}
			for range 5 {
				request(false)
			}
			clock.Add(int64(within) - 1)
			request(false)
			clock.Add(1)
			request(true)
			request(false)

			// The wiring before: one BatchGetItem of the session and the
			// server's user item (on MREC with the server's revocation item
			// and the session's end record), in every request.
			old := e.startWith(wiring{readServerPerRequest: true})
			oldID := initializeRaw(t, old)
			for range 3 {
				old.calls.counts()
				old.calls.takeReads()
				old.calls.takeUnits()
				if code, body := post(t, old, oldID, callEcho); code != http.StatusOK {
					t.Fatalf("tools/call, the wiring before: status %d %q", code, body)
				}
				if units := old.calls.takeUnits(); bySize && !tc.layout.MREC && units != 2 {
					t.Errorf("the wiring before: a request consumed %v read units, want 2", units)
				}
				if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, old.calls.counts()); diff != "" {
					t.Errorf("the wiring before: DynamoDB calls (-want +got):\n%s", diff)
				}
				reads := old.calls.takeReads()
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
// the server's version once: the others wait for that read.
func TestStaleCopyIsReadOnce(t *testing.T) {
	t.Parallel()
	const requests = 8
	e := newEnv(t)
	clock := newClock()
	in := e.startWith(wiring{mono: clock.Load})
	id := initializeRaw(t, in)
	clock.Add(int64(within))

	// The copy's read waits until every request has read its session, and
	// so found the copy stale, or is waiting for that read.
	var sessionReads sync.WaitGroup
	sessionReads.Add(requests)
	var first atomic.Bool
	in.calls.pausing(func(op string) {
		switch {
		case op == "GetItem":
			sessionReads.Done()
		case op == "BatchGetItem" && first.CompareAndSwap(false, true):
			sessionReads.Wait()
		}
	})
	in.calls.counts()
	var wg sync.WaitGroup
	codes := make([]int, requests)
	for i := range requests {
		wg.Go(func() { codes[i], _ = post(t, in, id, callEcho) })
	}
	wg.Wait()
	in.calls.pausing(nil)
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, code)
		}
	}
	if diff := cmp.Diff(map[string]int{"GetItem": requests, "BatchGetItem": 1}, in.calls.counts()); diff != "" {
		t.Errorf("DynamoDB calls of %d requests that find the copy stale (-want +got):\n%s", requests, diff)
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
	clockX, clockY := newClock(), newClock()
	x, y := e.startWith(wiring{mono: clockX.Load}), e.startWith(wiring{mono: clockY.Load})
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
	x.calls.counts()
	if code := status(x, before); code != http.StatusNotFound {
		t.Errorf("on instance X, right after its RevokeAll: status %d, want 404", code)
	}
	if diff := cmp.Diff(map[string]int{"GetItem": 1}, x.calls.counts()); diff != "" {
		t.Errorf("instance X refused from its copy, raised by RevokeAll; DynamoDB calls (-want +got):\n%s", diff)
	}
	if code := status(e.start(), before); code != http.StatusNotFound {
		t.Errorf("on an instance whose copy was never read: status %d, want 404", code)
	}
	after := initializeRaw(t, x)
	inWindow := initializeRaw(t, y) // Y has not seen the RevokeAll
	if code := status(y, before); code != http.StatusOK {
		t.Errorf("on instance Y, its copy younger than RevokeEveryoneWithin: status %d, want 200 (the window)", code)
	}

	clockY.Add(int64(within))
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
