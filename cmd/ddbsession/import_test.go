package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/gob"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
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
	if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(importJSON{}, "WriteUnits", "ElapsedSeconds")); diff != "" {
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

// avCompare lets cmp look into the SDK's attribute value types.
var avCompare = cmp.AllowUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{}, types.AttributeValueMemberB{})

// An import killed half-way with SIGKILL resumes where its state file says
// it stopped, and the two runs together import every session once:
// nothing doubled (no put finds its key taken), nothing lost. The command
// runs as a process of its own and is killed at a named point, once the
// state holds a batch that brings it past 5,000 sessions.
func TestImportResumesAfterKill(t *testing.T) {
	f := newFixture(t)
	old := newOldStore(t)
	const n = 10_000
	old.add("scs:session:", n, time.Now().Add(3*time.Hour))
	old.addMalformed("scs:session:", time.Now().Add(3*time.Hour))

	bin := filepath.Join(t.TempDir(), "ddbsession")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := filepath.Join(t.TempDir(), "import.state")
	cmd := exec.Command(bin, "import", "-redis", old.addr, "-table", f.table, "-state", state, "-max-wcu", "0", "-json")
	cmd.Env = append(os.Environ(), testStopEnv+"=5000")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), "stopped for a test") {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if !strings.Contains(said.String(), "stopped for a test") {
		t.Fatalf("the command ended before the point to kill it at:\n%s", said.String())
	}
	first := int64(len(inTable(t, f)))
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d sessions imported; the state file: %s", first, bytes.TrimSpace(b))
	if first < 5000-importBatch || first >= n {
		t.Fatalf("killed with %d sessions in the table, want about half of %d", first, n)
	}

	code, stdout, errOut := f.run("import", "-redis", old.addr, "-state", state, "-max-wcu", "0", "-json")
	wantCode(t, code, exitOK, stdout, errOut)
	var r importJSON
	decode(t, stdout, &r)
	if !r.Resumed || r.Imported != n-first || r.Skipped["exists"] != 0 {
		t.Errorf("the resumed run: %+v, want resumed, %d imported, none already there", r, n-first)
	}
	wantImported(t, f, old)

	code, stdout, errOut = f.run("import", "-redis", old.addr, "-state", state, "-max-wcu", "0")
	wantCode(t, code, exitOK, stdout, errOut)
	if !strings.Contains(stdout, "complete already") {
		t.Errorf("a third run does not say the import is complete:\n%s", stdout)
	}
}

// A session already in the table is never overwritten: one the app wrote
// since (live, with other data), and one the app destroyed (its
// tombstone), stay as they are, counted as "exists". An import run anew,
// without the state file, writes nothing.
func TestImportNeverOverwrites(t *testing.T) {
	f := newFixture(t)
	old := newOldStore(t)
	expires := time.Now().Add(time.Hour)
	old.add("scs:session:", 20, expires)
	l := item.SCSLayout{Layout: mustItems(t, f), Prefix: item.DefaultSCSPrefix}
	var live, destroyed string
	for token := range old.sessions {
		if live == "" {
			live = token
		} else if destroyed == "" {
			destroyed = token
		}
	}
	newer := l.Encode(l.PK(live), item.SCSSession{Data: []byte("written by scsstore since"), ExpiresAt: time.Unix(expires.Unix(), 0)})
	f.put(newer)
	tomb := l.Encode(l.PK(destroyed), item.SCSSession{ExpiresAt: time.Unix(expires.Unix(), 0)})
	tomb[item.AttrKind] = item.Str(item.KindSCSDestroyed)
	delete(tomb, item.AttrData)
	f.put(tomb)

	for i, want := range []importJSON{
		{Read: 20, Imported: 18, Skipped: map[string]int64{"expired": 0, "malformed": 0, "exists": 2}},
		{Read: 20, Imported: 0, Skipped: map[string]int64{"expired": 0, "malformed": 0, "exists": 20}},
	} {
		state := filepath.Join(t.TempDir(), "import.state")
		code, stdout, stderr := f.run("import", "-redis", old.addr, "-state", state, "-json")
		wantCode(t, code, exitOK, stdout, stderr)
		var r importJSON
		decode(t, stdout, &r)
		if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(importJSON{}, "Table", "Redis", "Prefix", "State", "WriteUnits", "ElapsedSeconds")); diff != "" {
			t.Errorf("run %d (-want +got):\n%s", i+1, diff)
		}
	}
	if diff := cmp.Diff(newer, f.item(l.Key(l.PK(live))), avCompare); diff != "" {
		t.Errorf("the session the app wrote since (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tomb, f.item(l.Key(l.PK(destroyed))), avCompare); diff != "" {
		t.Errorf("the destroyed session's tombstone (-want +got):\n%s", diff)
	}
}

// A state file of another import is refused, before anything is read or
// written: the import it records is named, and the way out.
func TestImportRefusesAnotherImportsState(t *testing.T) {
	f := &fixture{t: t, probe: ddbtest.NewProbe(nil), table: "app"} // a nil client: any call panics
	state := filepath.Join(t.TempDir(), "import.state")
	if err := saveImportState(state, importState{Redis: "redis://10.0.0.1:6379/0", Prefix: "scs:session:", Table: "app", Cursor: "42"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := f.run("import", "-redis", "127.0.0.1:6379", "-state", state)
	wantCode(t, code, exitUsage, stdout, stderr)
	if !strings.Contains(stderr, "redis://10.0.0.1:6379/0") || !strings.Contains(stderr, "remove it") {
		t.Errorf("stderr does not name the other import and the way out:\n%s", stderr)
	}
}
