package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The scs soak, a smaller one than the example's (example/soak_test.go),
// for scsstore: browsers put, read, renew and destroy their sessions
// through the app's handlers, on scsstore, for SOAK (default 10s), while
// a fault front below the SDK throttles, fails, loses answers and hangs at
// random; thieves replay tokens that were renewed or destroyed, and forged
// ones. Afterwards, with faults off: every session holds the message it
// was last given (or one of those whose put failed), no dead token works,
// scsstore's per-session records stay within their budget, and goroutines
// and heap come back to where they were.
//
// The records (scsstore's record.go) are not exported, so their budget is
// checked through the heap, which, with the app still running, must not
// grow by more than the budget while the store sees three times the
// budget of session data (see checkRecordBudget).
const (
	scsBrowsers          = 12
	scsDefaultDuration   = 10 * time.Second
	scsMessageBytes      = 16 << 10
	scsRecordBudget      = 4 << 20 // scsstore's default Config.RecordBytes, which the app keeps
	scsBigMessageBytes   = 128 << 10
	scsBudgetSessions    = 96 // of scsBigMessageBytes: three times the budget
	scsHeapSlack         = 3 << 20
	scsGoroutineSlack    = 0
	scsSettleBound       = time.Minute
	scsFinalRetries      = 20
	scsMaxReported       = 40
	scsHangMax           = 500 * time.Millisecond
	scsRequestTimeBounds = 2 * time.Minute
)

// TestSoak runs the scs soak after a warm-up (one browser through every
// route, so that what the process builds once is in the baseline), and
// checks that goroutines and heap come back within the slack: no
// goroutine (but scs's memstore cleanups, see scsUsage), and 3 MiB of heap
// for the caches of the runtime and the HTTP stack (see the example's
// TestSoak).
func TestSoak(t *testing.T) {
	duration := scsSoakDuration(t)
	seed := scsSoakSeed(t)
	t.Logf("scs soak for %v, seed %d (SOAK_SEED=%d draws the same faults)", duration, seed, seed)
	// The app logs its store errors with the default logger: counted
	// here, not printed. No parallel test runs meanwhile.
	logs := &scsLogCounter{counts: map[string]int{}}
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(logs))
	if !t.Run("warm-up", func(t *testing.T) { runSCSSoak(t, 1, 0, seed, false) }) {
		t.FailNow()
	}
	before := scsSettledUsage()
	var figures string
	t.Run("run", func(t *testing.T) { figures = runSCSSoak(t, scsBrowsers, duration, seed+1, true) })
	after, ok := scsUsageBackTo(before)
	t.Logf("figures of the %v run:\n%s  store errors logged: %s\n  goroutines %d before, %d after (and scs memstore cleanups, one per app: %d before, %d after); heap %s before, %s after",
		duration, figures, logs.String(), before.goroutines, after.goroutines, before.memstore, after.memstore, mib(before.heap), mib(after.heap))
	if !ok {
		var dump strings.Builder
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Errorf("after the soak, %d goroutines and %s of heap, want at most %d and %s; goroutines:\n%s",
			after.goroutines, mib(after.heap), before.goroutines+scsGoroutineSlack, mib(before.heap+scsHeapSlack), dump.String())
	}
}

func scsSoakDuration(t *testing.T) time.Duration {
	s := os.Getenv("SOAK")
	if s == "" {
		return scsDefaultDuration
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("SOAK=%q: want a positive Go duration, such as 10m", s)
	}
	return d
}

func scsSoakSeed(t *testing.T) uint64 {
	if s := os.Getenv("SOAK_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: want an unsigned integer", s)
		}
		return seed
	}
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// runSCSSoak runs browsers against an app of its own for duration, checks
// the sessions and, with budget, the records' budget, and returns its
// figures.
func runSCSSoak(t *testing.T, browsers int, duration time.Duration, seed uint64, budget bool) string {
	front := startSCSFront(t, seed)
	table := ddbtest.TableName(t, front.engineClient(t))
	handler, err := newApp(context.Background(), appConfig{Client: front.dynamoClient(t), Table: table, Dev: true, IdleTimeout: 20 * time.Minute, Lifetime: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(handler)
	// scs writes its status line again after its ErrorFunc answered a
	// failed commit; the server's complaint about it is noise here.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	m := &scsModel{t: t, codes: map[string]map[int]int{}}
	var all []*scsBrowser
	for i := range browsers {
		all = append(all, m.browser(srv, "browser"+strconv.Itoa(i), seed+uint64(i)+1))
	}

	front.setFaults(true)
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for _, b := range all {
		wg.Go(func() {
			b.tour()
			for time.Now().Before(deadline) {
				b.act()
			}
		})
	}
	wg.Wait()
	front.setFaults(false)
	faulted := front.figures()

	// Every browser's session holds what the model says, and no dead
	// token works, now that nothing fails.
	for _, b := range all {
		b.check()
	}
	for _, token := range m.dead {
		if code, _ := m.replay(srv, token); code != http.StatusNotFound {
			m.fail("at the end, a renewed or destroyed token gets %d, want 404", code)
		}
	}
	records := "not checked (warm-up)"
	if budget {
		records = checkRecordBudget(t, m, srv, front)
	}
	return fmt.Sprintf("  requests by kind and status: %s\n  front: %s\n  dead tokens replayed: %d, forged: %d\n  records: %s\n",
		m.codesText(), faulted, m.replays.Load(), m.forged.Load(), records)
}

// checkRecordBudget checks, with faults off, that the records are at
// work, and within their budget. At work: a read of a session just
// written commits nothing, since the store knows what the table holds (a
// store without records, or with a budget too small for one session,
// writes). Within the budget: after scsBudgetSessions sessions of
// scsBigMessageBytes, three times the budget, each written and read,
// the heap, with the app still running, has grown by no more than the
// budget and the slack. It is measured just before, not before the run:
// what the clients' model keeps of the run (every dead token) grows with
// its length, and is no record of the store's.
//
// Eviction itself cannot be seen from outside: every request that commits
// a session has found it first, in the same request, and Find records what
// it read, so a commit finds its record unless other requests evicted it
// in between. Checking the bytes the records hold exactly would need
// scsstore to say, say in a Stats method; its internal test
// (record_internal_test.go) checks the bound.
func checkRecordBudget(t *testing.T, m *scsModel, srv *httptest.Server, front *scsFront) string {
	baseline := measureUsage().heap
	big := func(tag string) string { return tag + "/" + strings.Repeat("r", scsBigMessageBytes) }
	for i := range scsBudgetSessions {
		b := m.browser(srv, "budget"+strconv.Itoa(i), uint64(i))
		b.put(big(b.name))
		before := front.attempts("PutItem")
		b.get()
		if n := front.attempts("PutItem") - before; n != 0 {
			m.fail("a read of a session just written wrote %d times, want 0: the store keeps no record of it", n)
		}
	}
	heap := measureUsage().heap
	grown := int64(heap) - int64(baseline)
	if grown > scsRecordBudget+scsHeapSlack {
		m.fail("with the app running, the heap is %s over the baseline, more than the records' budget %s and the slack %s, after %d KiB of session data",
			mib(uint64(grown)), mib(scsRecordBudget), mib(scsHeapSlack), scsBudgetSessions*scsBigMessageBytes>>10)
	}
	return fmt.Sprintf("with the app running, the heap is %s over the baseline after %d sessions of %d KiB (%s); budget %s",
		mib(uint64(max(grown, 0))), scsBudgetSessions, scsBigMessageBytes>>10, mib(scsBudgetSessions*scsBigMessageBytes), mib(scsRecordBudget))
}

// scsModel is what the browsers know, and how the app answered them.
type scsModel struct {
	t        *testing.T
	mu       sync.Mutex
	dead     []string // tokens renewed or destroyed, acknowledged
	codes    map[string]map[int]int
	failures int
	replays  atomic.Int64
	forged   atomic.Int64
}

func (m *scsModel) fail(format string, args ...any) {
	m.mu.Lock()
	m.failures++
	n := m.failures
	m.mu.Unlock()
	if n <= scsMaxReported {
		m.t.Errorf("scs soak: "+format, args...)
	}
}

func (m *scsModel) record(kind string, code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.codes[kind] == nil {
		m.codes[kind] = map[int]int{}
	}
	m.codes[kind][code]++
}

func (m *scsModel) codesText() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(m.codes)) {
		c, _ := json.Marshal(m.codes[kind])
		parts = append(parts, kind+" "+string(c))
	}
	return strings.Join(parts, ", ")
}

func (m *scsModel) died(token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = append(m.dead, token)
}

func (m *scsModel) someDead(pick func(int) int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.dead) == 0 {
		return ""
	}
	return m.dead[pick(len(m.dead))]
}

// replay sends GET /get with token alone, as a thief with a copied cookie
// would.
func (m *scsModel) replay(srv *httptest.Server, token string) (int, string) {
	r, _ := http.NewRequest("GET", srv.URL+"/get", nil)
	r.AddCookie(&http.Cookie{Name: "session", Value: token})
	res, err := srv.Client().Do(r)
	if err != nil {
		m.fail("replay: %v", err)
		return 0, ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// scsBrowser is one browser: its cookie jar holds its session, and want
// what GET /get may answer, "" standing for 404: one message, or several
// once a write's outcome is unknown, until a read settles it.
type scsBrowser struct {
	m      *scsModel
	srv    *httptest.Server
	name   string
	client *http.Client
	rng    *mrand.Rand
	want   []string
	n      int
}

func (m *scsModel) browser(srv *httptest.Server, name string, seed uint64) *scsBrowser {
	jar, _ := cookiejar.New(nil)
	return &scsBrowser{m: m, srv: srv, name: name, rng: mrand.New(mrand.NewPCG(seed, 0x5c5)), want: []string{""},
		client: &http.Client{Jar: jar, Timeout: scsRequestTimeBounds}}
}

func (b *scsBrowser) act() {
	switch x := b.rng.IntN(100); {
	case x < 30:
		b.put(b.message())
	case x < 75:
		b.get()
	case x < 83:
		b.renew()
	case x < 90:
		b.destroy()
	default:
		b.thief()
	}
}

// tour goes through every route once.
func (b *scsBrowser) tour() {
	b.put(b.message())
	b.get()
	b.renew()
	b.get()
	b.thief()
	b.destroy()
}

func (b *scsBrowser) message() string {
	b.n++
	tag := b.name + "/" + strconv.Itoa(b.n) + "/"
	return tag + strings.Repeat("m", scsMessageBytes-len(tag))
}

func (b *scsBrowser) token() string {
	u, _ := url.Parse(b.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "session" {
			return c.Value
		}
	}
	return ""
}

func (b *scsBrowser) send(kind, method, path string, form url.Values) (int, string) {
	var res *http.Response
	var err error
	if method == "POST" {
		res, err = b.client.PostForm(b.srv.URL+path, form)
	} else {
		res, err = b.client.Get(b.srv.URL + path)
	}
	if err != nil {
		b.m.fail("%s %s from %s: %v", method, path, b.name, err)
		return 0, ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	b.m.record(kind, res.StatusCode)
	return res.StatusCode, string(body)
}

func (b *scsBrowser) put(msg string) {
	switch code, body := b.send("put", "POST", "/put", url.Values{"msg": {msg}}); code {
	case http.StatusNoContent:
		b.want = []string{msg}
	case http.StatusInternalServerError:
		b.want = append(b.want, msg) // written, or not
	default:
		b.m.fail("put from %s: %d %.200s", b.name, code, body)
	}
}

func (b *scsBrowser) get() {
	switch code, body := b.send("get", "GET", "/get", nil); code {
	case http.StatusOK:
		if !slices.Contains(b.want, body) {
			b.m.fail("get from %s: %.60q..., want one of %s", b.name, body, short(b.want))
		}
		b.want = []string{body}
	case http.StatusNotFound:
		if !slices.Contains(b.want, "") {
			b.m.fail("get from %s: 404, want one of %s: the session or its data was lost", b.name, short(b.want))
		}
		b.want = []string{""}
	case http.StatusInternalServerError:
	default:
		b.m.fail("get from %s: %d %.200s", b.name, code, body)
	}
}

func (b *scsBrowser) renew() {
	old := b.token()
	switch code, body := b.send("renew", "POST", "/renew", nil); code {
	case http.StatusNoContent:
		if old != "" {
			b.m.died(old)
		}
		if old != "" && b.token() == old {
			b.m.fail("renew from %s: 204 with the same token", b.name)
		}
	case http.StatusInternalServerError:
		// The old token may be deleted and the new one not written.
		b.want = append(b.want, "")
	default:
		b.m.fail("renew from %s: %d %.200s", b.name, code, body)
	}
}

func (b *scsBrowser) destroy() {
	old := b.token()
	switch code, body := b.send("destroy", "POST", "/destroy", nil); code {
	case http.StatusNoContent:
		if old != "" {
			b.m.died(old)
		}
		b.want = []string{""}
	case http.StatusInternalServerError:
		b.want = append(b.want, "")
	default:
		b.m.fail("destroy from %s: %d %.200s", b.name, code, body)
	}
}

// thief replays a dead token, or a forged one: neither may read anything.
func (b *scsBrowser) thief() {
	token := b.m.someDead(b.rng.IntN)
	if token == "" || b.rng.IntN(4) == 0 {
		raw := make([]byte, 32)
		rand.Read(raw)
		token = base64.RawURLEncoding.EncodeToString(raw)
		b.m.forged.Add(1)
	} else {
		b.m.replays.Add(1)
	}
	code, body := b.m.replay(b.srv, token)
	b.m.record("thief", code)
	if code != http.StatusNotFound && code != http.StatusInternalServerError {
		b.m.fail("a dead or forged token: %d %.60q, want 404", code, body)
	}
}

// check reads the browser's session with faults off: it holds what the
// model says.
func (b *scsBrowser) check() {
	for range scsFinalRetries {
		if b.get(); len(b.want) == 1 {
			return
		}
	}
	b.m.fail("at the end, %s's session still answers 500 with faults off", b.name)
}

func short(want []string) string {
	var s []string
	for _, w := range want {
		s = append(s, strconv.Quote(w[:min(len(w), 24)]))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// scsFront is the scs soak's fault front, as the example's soakFront
// (example/soak_front_test.go) but smaller: an HTTP reverse proxy between
// the app's SDK client and the engine that throttles, answers 500, loses
// the answers of applied writes, and delays requests before or after
// forwarding them. The app has no StoreTimeout (scs calls the store with
// the request's context), so its hangs are short ones. What it forwards,
// it forwards whole, whatever the client does: dynalite crashes on a
// request cut off halfway.
type scsFront struct {
	srv      *httptest.Server
	engine   string
	upstream *http.Transport
	client   *http.Transport

	mu        sync.Mutex
	rng       *mrand.Rand
	on        bool
	inFlight  int
	idle      *sync.Cond
	counts    map[string]int // attempts by operation
	faults    map[string]int
	downUntil time.Time // the end of the outage under way
}

// scsFaults are the faults with their rates per attempt: 15% in all, and
// the outages.
var scsFaults = []struct {
	name   string
	rate   float64
	status int
	errTyp string
}{
	{"ThrottlingException", 0.02, 400, "com.amazon.coral.availability#ThrottlingException"},
	{"ProvisionedThroughputExceededException", 0.02, 400, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"},
	{"InternalServerError", 0.03, 500, "com.amazonaws.dynamodb.v20120810#InternalServerError"},
	{"answer lost", 0.04, 500, "com.amazonaws.dynamodb.v20120810#InternalServerError"},
	{"hang", 0.02, 0, ""},
	{"slow answer", 0.02, 0, ""},
	// An outage: this and every attempt for scsOutage after it get 500,
	// longer than the SDK's retries last. The app has no StoreTimeout, so
	// nothing else makes a call fail in the end.
	{"outage", 0.001, 500, "com.amazonaws.dynamodb.v20120810#InternalServerError"},
}

// scsOutage is how long an outage lasts.
const scsOutage = 500 * time.Millisecond

func startSCSFront(t testing.TB, seed uint64) *scsFront {
	t.Helper()
	engine := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if err := ddbtest.CheckEndpoint(engine); err != nil {
		t.Fatal(err)
	}
	f := &scsFront{
		engine:   strings.TrimSuffix(engine, "/"),
		upstream: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		client:   &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		rng:      mrand.New(mrand.NewPCG(seed, seed^0x5eed)),
		counts:   map[string]int{},
		faults:   map[string]int{},
	}
	f.idle = sync.NewCond(&f.mu)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		f.srv.Close()
		f.upstream.CloseIdleConnections()
	})
	return f
}

// dynamoClient is a real SDK client for the front, with the SDK's default
// retryer; engineClient one for the engine itself. Both use the front's
// transports, closed with it.
func (f *scsFront) dynamoClient(t testing.TB) *dynamodb.Client {
	opts := ddbtest.Client(t).Options()
	opts.BaseEndpoint = &f.srv.URL
	opts.HTTPClient = &http.Client{Transport: f.client}
	return dynamodb.New(opts)
}

func (f *scsFront) engineClient(t testing.TB) *dynamodb.Client {
	opts := ddbtest.Client(t).Options()
	opts.HTTPClient = &http.Client{Transport: f.upstream}
	return dynamodb.New(opts)
}

// setFaults turns faults on or off; off, it waits for the requests under
// way.
func (f *scsFront) setFaults(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
	for !on && f.inFlight > 0 {
		f.idle.Wait()
	}
}

func (f *scsFront) attempts(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

func (f *scsFront) figures() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	total, faulted := 0, 0
	for _, n := range f.counts {
		total += n
	}
	var parts []string
	for _, k := range scsFaults {
		faulted += f.faults[k.name]
		parts = append(parts, fmt.Sprintf("%s %d", k.name, f.faults[k.name]))
	}
	c, _ := json.Marshal(f.counts)
	return fmt.Sprintf("%d attempts %s, %d faulted (%.1f%%): %s", total, c, faulted, 100*float64(faulted)/float64(max(total, 1)), strings.Join(parts, ", "))
}

func (f *scsFront) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.inFlight++
	f.counts[strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")]++
	fault := -1
	if f.on && time.Now().Before(f.downUntil) {
		fault = len(scsFaults) - 1
		f.faults["outage"]++
	} else if f.on {
		x := f.rng.Float64()
		for i, k := range scsFaults {
			if x < k.rate {
				fault = i
				f.faults[k.name]++
				break
			}
			x -= k.rate
		}
		if fault == len(scsFaults)-1 {
			f.downUntil = time.Now().Add(scsOutage)
		}
	}
	wait := time.Duration(f.rng.Int64N(int64(scsHangMax)))
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.inFlight--; f.inFlight == 0 {
			f.idle.Broadcast()
		}
		f.mu.Unlock()
	}()
	if fault < 0 {
		f.relay(w, r, body)
		return
	}
	switch k := scsFaults[fault]; k.name {
	case "hang":
		if scsSleep(r.Context(), wait) {
			f.relay(w, r, body)
		}
	case "slow answer":
		status, header, answer := f.forward(r, body)
		if scsSleep(r.Context(), wait) {
			write(w, status, header, answer)
		}
	default:
		if k.name == "answer lost" {
			f.forward(r, body)
		}
		e, _ := json.Marshal(map[string]string{"__type": k.errTyp, "message": k.name})
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-ErrorType", k.errTyp[strings.IndexByte(k.errTyp, '#')+1:])
		w.WriteHeader(k.status)
		w.Write(e)
	}
}

func (f *scsFront) relay(w http.ResponseWriter, r *http.Request, body []byte) {
	status, header, answer := f.forward(r, body)
	write(w, status, header, answer)
}

// forward sends the request to the engine, whether or not the client is
// still there, and reads the answer whole.
func (f *scsFront) forward(r *http.Request, body []byte) (int, http.Header, []byte) {
	req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, f.engine+r.URL.RequestURI(), bytes.NewReader(body))
	for name, values := range r.Header {
		if name != "Connection" && name != "Content-Length" && name != "Transfer-Encoding" {
			req.Header[name] = values
		}
	}
	res, err := f.upstream.RoundTrip(req)
	if err != nil {
		return http.StatusBadGateway, http.Header{}, []byte(err.Error())
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	if err != nil {
		return http.StatusBadGateway, http.Header{}, []byte(err.Error())
	}
	return res.StatusCode, res.Header, answer
}

func write(w http.ResponseWriter, status int, header http.Header, body []byte) {
	for name, values := range header {
		if name != "Connection" && name != "Content-Length" && name != "Transfer-Encoding" {
			w.Header()[name] = values
		}
	}
	w.WriteHeader(status)
	w.Write(body)
}

func scsSleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// scsLogCounter counts the default logger's records by message.
type scsLogCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (l *scsLogCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *scsLogCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[r.Message]++
	return nil
}
func (l *scsLogCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *scsLogCounter) WithGroup(string) slog.Handler      { return l }
func (l *scsLogCounter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, _ := json.Marshal(l.counts)
	return string(c)
}

// scsUsage is what the process holds: goroutines, and live heap after a
// collection. memstore counts apart the goroutines of scs's memstore
// cleanup: scs.New starts one for its default store, which the app
// replaces with scsstore but never stops (memstore's StopCleanup), so
// every newApp leaves one behind, however little it serves. The soak looks
// for leaks that grow with the load; that one is said in the figures.
type scsUsage struct {
	goroutines, memstore int
	heap                 uint64
}

func measureUsage() scsUsage {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	u := scsUsage{heap: ms.HeapAlloc}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "memstore.(*MemStore).startCleanup") {
			u.memstore++
		} else {
			u.goroutines++
		}
	}
	return u
}

func scsSettledUsage() scsUsage {
	last, still := measureUsage(), 0
	for end := time.Now().Add(scsSettleBound); still < 5 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		u := measureUsage()
		if u.goroutines == last.goroutines {
			still++
		} else {
			still = 0
		}
		last = u
	}
	return last
}

func scsUsageBackTo(before scsUsage) (scsUsage, bool) {
	for end := time.Now().Add(scsSettleBound); ; time.Sleep(250 * time.Millisecond) {
		u := measureUsage()
		if u.goroutines <= before.goroutines+scsGoroutineSlack && u.heap <= before.heap+scsHeapSlack {
			return u, true
		}
		if time.Now().After(end) {
			return u, false
		}
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
