package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/gob"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/redistest"
)

// cart is a type of the app's that a session holds: the import reads past
// it without knowing it (it is registered for the encoding only).
type cart struct {
	Items []string
	Total int
}

func init() { gob.RegisterName("shop.cart", cart{}) }

// scsData encodes a session as scs's GobCodec does.
func scsData(t testing.TB, deadline time.Time, values map[string]any) []byte {
	t.Helper()
	aux := struct {
		Deadline time.Time
		Values   map[string]any
	}{deadline, values}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&aux); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func scsTokenForTest() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// oldStore is a Redis server holding sessions as scs's redisstore writes
// them: SET of the encoded data, and PEXPIREAT of the expiry.
type oldStore struct {
	t    testing.TB
	addr string
	conn *redisConn
	// sessions are the ones written, by token: what the table must hold
	// after an import.
	sessions map[string]scsSession
}

func newOldStore(t testing.TB) *oldStore {
	t.Helper()
	addr := redistest.Start(t)
	conn, err := dialRedis(context.Background(), redisTarget{addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &oldStore{t: t, addr: addr, conn: conn, sessions: map[string]scsSession{}}
}

// do runs commands at once and fails on any error reply.
func (s *oldStore) do(cmds ...[]string) {
	s.t.Helper()
	replies, err := s.conn.pipeline(cmds)
	if err != nil {
		s.t.Fatal(err)
	}
	for i, r := range replies {
		if e, ok := r.(redisError); ok {
			s.t.Fatalf("%s: %v", cmds[i][0], e)
		}
	}
}

// add writes n sessions that expire at expires, under prefix, with a cart
// and a user each, as redisstore's Commit does.
func (s *oldStore) add(prefix string, n int, expires time.Time) {
	s.t.Helper()
	var cmds [][]string
	for i := range n {
		token := scsTokenForTest()
		data := scsData(s.t, expires, map[string]any{"user": fmt.Sprintf("user%d", i), "cart": cart{[]string{"tea"}, i}})
		s.sessions[token] = scsSession{token: token, data: data, expires: expires.Unix()}
		cmds = append(cmds, []string{"SET", prefix + token, string(data)}, []string{"PEXPIREAT", prefix + token, strconv.FormatInt(expires.UnixMilli(), 10)})
		if len(cmds) >= 2000 {
			s.do(cmds...)
			cmds = nil
		}
	}
	if len(cmds) > 0 {
		s.do(cmds...)
	}
}

// addMalformed writes one key of each kind that is no scs session, and
// returns how many.
func (s *oldStore) addMalformed(prefix string, expires time.Time) int {
	s.t.Helper()
	at := strconv.FormatInt(expires.UnixMilli(), 10)
	good := string(scsData(s.t, expires, nil))
	notToken, asHash, notGob, noExpiry := prefix+"not-a-token", prefix+scsTokenForTest(), prefix+scsTokenForTest(), prefix+scsTokenForTest()
	s.do(
		[]string{"SET", notToken, good}, []string{"PEXPIREAT", notToken, at},
		[]string{"HSET", asHash, "data", good}, []string{"PEXPIREAT", asHash, at},
		[]string{"SET", notGob, `{"user":"json is another codec"}`}, []string{"PEXPIREAT", notGob, at},
		[]string{"SET", noExpiry, good},
	)
	return 4
}

// inTable reads every scs session item of the table, by partition key.
func inTable(t testing.TB, f *fixture) map[string]item.SCSSession {
	t.Helper()
	l := item.SCSLayout{Layout: mustItems(t, f), Prefix: item.DefaultSCSPrefix}
	got := map[string]item.SCSSession{}
	p := dynamodb.NewScanPaginator(f.engine, &dynamodb.ScanInput{TableName: &f.table})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, av := range out.Items {
			s, err := l.Decode(av)
			if err == item.ErrOtherKind {
				continue
			}
			if err != nil {
				t.Fatalf("an scs item the import wrote does not decode: %v", err)
			}
			got[av[l.PartitionKey].(*types.AttributeValueMemberS).Value] = s
		}
	}
	return got
}

func mustItems(t testing.TB, f *fixture) item.Layout {
	l, err := item.Layout(f.layout).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// wantImported fails unless the table holds exactly the old store's
// sessions, as scsstore stores them: under the token's digest, with the
// data as scs encoded it and the expiry in whole seconds.
func wantImported(t testing.TB, f *fixture, old *oldStore) {
	t.Helper()
	l := item.SCSLayout{Layout: mustItems(t, f), Prefix: item.DefaultSCSPrefix}
	want := map[string]item.SCSSession{}
	for token, s := range old.sessions {
		want[l.PK(token)] = item.SCSSession{Data: s.data, ExpiresAt: time.Unix(s.expires, 0)}
	}
	got := inTable(t, f)
	if len(got) != len(want) {
		t.Errorf("the table holds %d scs sessions, want %d", len(got), len(want))
	}
	diffs := 0
	for pk, w := range want {
		if g, ok := got[pk]; !ok || !bytes.Equal(g.Data, w.Data) || !g.ExpiresAt.Equal(w.ExpiresAt) {
			diffs++
		}
	}
	if diffs > 0 {
		t.Errorf("%d of %d sessions are missing from the table or differ", diffs, len(want))
	}
}

type importJSON struct {
	Table, Redis, Prefix, State string
	Resumed, AlreadyDone        bool
	Read, Imported              int64
	Skipped                     map[string]int64
	WriteUnits                  float64
	ElapsedSeconds              float64
}

// 10,000 sessions of scs's redisstore are imported at the pace -max-wcu
// sets, measured on the command's clock: every one lands in the table as
// scsstore keeps it, the malformed and the expired are counted and left
// out, and a second run is a no-op.
func TestImport(t *testing.T) {
	f := newFixture(t)
	old := newOldStore(t)
	// The command's clock runs an hour ahead of Redis's: sessions that
	// Redis still keeps but that expire before it are expired.
	now := time.Now()
	f.clock = newSleeper(now.Add(time.Hour))
	const n = 10_000
	old.add("scs:session:", n, now.Add(3*time.Hour))
	expired := &oldStore{t: t, conn: old.conn, sessions: map[string]scsSession{}}
	expired.add("scs:session:", 5, now.Add(30*time.Minute))
	malformed := old.addMalformed("scs:session:", now.Add(3*time.Hour))
	// Another prefix: not read.
	other := &oldStore{t: t, conn: old.conn, sessions: map[string]scsSession{}}
	other.add("other:app:", 7, now.Add(3*time.Hour))

	const rate = 1000
	state := filepath.Join(t.TempDir(), "import.state")
	code, stdout, stderr := f.run("import", "-redis", old.addr, "-max-wcu", strconv.Itoa(rate), "-state", state, "-json")
	wantCode(t, code, exitOK, stdout, stderr)
	var r importJSON
	decode(t, stdout, &r)
	want := importJSON{
		Table: f.table, Redis: "redis://" + old.addr + "/0", Prefix: "scs:session:", State: state,
		Read: n + 5 + int64(malformed), Imported: n,
		Skipped: map[string]int64{"expired": 5, "malformed": int64(malformed), "exists": 0},
	}
	if diff := cmp.Diff(want, r, cmpIgnore("WriteUnits", "ElapsedSeconds")); diff != "" {
		t.Errorf("the report (-want +got):\n%s", diff)
	}
	wantImported(t, f, old)

	// The pace: the units DynamoDB reported over the time the command's
	// clock measured. The first put starts at once and the last
	// reservations are not waited out, so it is a little above the rate.
	measured := r.WriteUnits / r.ElapsedSeconds
	t.Logf("imported %d sessions: %v write units in %.3f s of the command's clock: %.1f units/s at -max-wcu %d",
		n, r.WriteUnits, r.ElapsedSeconds, measured, rate)
	if r.WriteUnits < n || measured < rate*0.99 || measured > rate*1.01 {
		t.Errorf("paced at %.1f units/s for %v units, want %d units/s ±1%% for at least %d", measured, r.WriteUnits, rate, n)
	}

	// Again: the state says it is done.
	code, stdout, stderr = f.run("import", "-redis", old.addr, "-state", state, "-json")
	wantCode(t, code, exitOK, stdout, stderr)
	r = importJSON{}
	decode(t, stdout, &r)
	if !r.AlreadyDone || r.Read != 0 || r.Imported != 0 {
		t.Errorf("a second run: %+v, want a no-op", r)
	}
	wantImported(t, f, old)
}

func cmpIgnore(fields ...string) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		for _, name := range fields {
			if p.Last().String() == "."+name {
				return true
			}
		}
		return false
	}, cmp.Ignore())
}
