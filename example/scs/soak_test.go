package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The scs soak, a smaller one than the example's (example/soak_test.go),
// for scsstore, on the same harness (ddbtest.Soak): browsers put, read,
// renew and destroy their sessions through the app's handlers, on
// scsstore, for scsRounds rounds, while the fault front below the SDK
// throttles, fails, loses answers, delays and goes down for a while, on
// the harness's virtual clock; thieves replay tokens that were renewed or
// destroyed, and forged ones. Afterwards, with faults off: every session
// holds the message it was last given (or one of those whose put failed),
// no dead token works, scsstore's per-session records stay within their
// budget, the heap comes back to where it was, and no log line holds a
// token or its digest.
//
// The records (scsstore's record.go) are not exported, so their budget is
// checked through the heap, which, with the app still running, must not
// grow by more than the budget while the store sees three times the
// budget of session data (see checkRecordBudget).
const (
	scsBrowsers = 12
	scsRounds   = 8
	// scsActions is how many requests a browser makes in a round, and
	// scsRound how far the clock moves on between rounds: within the
	// app's IdleTimeout (20 minutes), so that no session of the model
	// expires.
	scsActions         = 8
	scsRound           = time.Minute
	scsMessageBytes    = 16 << 10
	scsRecordBudget    = 4 << 20 // scsstore's default Config.RecordBytes, which the app keeps
	scsBigMessageBytes = 128 << 10
	scsBudgetSessions  = 96 // of scsBigMessageBytes: three times the budget
	scsHeapSlack       = 3 << 20
	scsFinalRetries    = 20
	scsMaxReported     = 40
)

// scsFaults are the faults with their rates per attempt: 15% in all, and
// the outages. The app has no StoreTimeout (scs calls the store with the
// request's context, which has no deadline), so nothing is held past one.
var scsFaults = []ddbtest.FaultRate{
	{Fault: ddbtest.FaultThrottle, Rate: 0.02},
	{Fault: ddbtest.FaultCapacity, Rate: 0.02},
	{Fault: ddbtest.FaultInternal, Rate: 0.03},
	{Fault: ddbtest.FaultLost, Rate: 0.04},
	{Fault: ddbtest.FaultHang, Rate: 0.02},
	{Fault: ddbtest.FaultSlow, Rate: 0.02},
	{Fault: ddbtest.FaultOutage, Rate: 0.001},
}

// TestSoak runs the scs soak after a warm-up (one browser through every
// route, so that what the process builds once is in the baseline), and
// checks that the heap comes back within 3 MiB, for the caches of the
// runtime and the HTTP stack (see the example's TestSoak).
func TestSoak(t *testing.T) {
	// The app of each run is made outside the run's bubble: scs.New
	// starts its memory store's clean-up, a goroutine that never ends
	// (and that its StopCleanup cannot stop without a data race).
	var handler http.Handler
	before := func(s *ddbtest.SoakRun) {
		var err error
		handler, err = newApp(context.Background(), appConfig{Client: s.Client(), Table: s.Table(), Dev: true, IdleTimeout: 20 * time.Minute, Lifetime: 2 * time.Hour})
		if err != nil {
			s.T.Fatal(err)
		}
	}
	ddbtest.Soak(t, ddbtest.SoakConfig{Rounds: scsRounds, HeapSlack: scsHeapSlack, Faults: scsFaults, Before: before}, func(s *ddbtest.SoakRun) string {
		defer func() { handler = nil }() // unreachable once the run is over, for the heap's check
		return runSCSSoak(s, handler)
	})
}

// runSCSSoak runs browsers against the app's handler, checks the sessions
// and, but in the warm-up, the records' budget, and returns its figures.
func runSCSSoak(s *ddbtest.SoakRun, handler http.Handler) string {
	t := s.T
	web := s.App(handler, false)
	m := &scsModel{t: t, web: web, codes: map[string]map[int]int{}}
	browsers := scsBrowsers
	if s.Warmup {
		browsers = 1
	}
	var all []*scsBrowser
	for i := range browsers {
		all = append(all, m.browser("browser"+strconv.Itoa(i), s.Rand(uint64(i)+1)))
	}
	s.Play(len(all), func(i, round int) {
		if round == 0 {
			all[i].tour()
			return
		}
		for range scsActions {
			all[i].act()
		}
	}, func(int) { time.Sleep(scsRound) })

	// Every browser's session holds what the model says, and no dead
	// token works, now that nothing fails.
	for _, b := range all {
		b.check()
	}
	for _, token := range m.dead {
		if code, _ := m.replay(token); code != http.StatusNotFound {
			m.fail("at the end, a renewed or destroyed token gets %d, want 404", code)
		}
	}
	records := "not checked (warm-up)"
	if !s.Warmup {
		records = checkRecordBudget(m, s.Faults)
	}
	return fmt.Sprintf("  requests by kind and status: %s\n  dead tokens replayed: %d, forged: %d\n  records: %s\n",
		m.codesText(), m.replays.Load(), m.forged.Load(), records)
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
func checkRecordBudget(m *scsModel, front *ddbtest.Faults) string {
	baseline := liveHeap()
	big := func(tag string) string { return tag + "/" + strings.Repeat("r", scsBigMessageBytes) }
	for i := range scsBudgetSessions {
		b := m.browser("budget"+strconv.Itoa(i), mrand.New(mrand.NewPCG(uint64(i), 0x5c5)))
		b.put(big(b.name))
		before := front.Attempts("PutItem")
		b.get()
		if n := front.Attempts("PutItem") - before; n != 0 {
			m.fail("a read of a session just written wrote %d times, want 0: the store keeps no record of it", n)
		}
	}
	heap := liveHeap()
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
	web      *ddbtest.SoakApp
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
func (m *scsModel) replay(token string) (int, string) {
	r, _ := http.NewRequest("GET", m.web.URL+"/get", nil)
	r.AddCookie(&http.Cookie{Name: "session", Value: token})
	res, err := m.web.Client(false).Do(r)
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
	name   string
	client *http.Client
	rng    *mrand.Rand
	want   []string
	n      int
}

func (m *scsModel) browser(name string, rng *mrand.Rand) *scsBrowser {
	return &scsBrowser{m: m, name: name, rng: rng, want: []string{""}, client: m.web.Client(true)}
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
	for _, c := range b.client.Jar.Cookies(nil) {
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
		res, err = b.client.PostForm(b.m.web.URL+path, form)
	} else {
		res, err = b.client.Get(b.m.web.URL + path)
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
	code, body := b.m.replay(token)
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

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
