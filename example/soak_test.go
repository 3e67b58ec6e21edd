package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The soak: soakUsers users, each with soakDevices devices (browsers and a
// command-line client with a bearer token), sign up, log in, browse the
// guarded pages, let refreshes come due, revoke each other's sessions, log
// out and in again, against the example's own handlers, for SOAK (a Go
// duration; 30s by default, what CI can afford), while a fault front
// below the SDK (soak_front_test.go) throttles, fails, loses answers and
// hangs at random. The clients' model (soak_model_test.go) checks every
// answer as it comes; with the faults off at the end, the app must agree
// with it exactly. A long run, for the README's figures:
//
//	SOAK=10m scripts/with-dynalite bash -c 'cd example && go test -race -count=1 -run Soak -v -timeout 30m .'
//
// SOAK_SEED repeats a run's fault draws (the interleaving of the clients
// is the scheduler's).
const (
	soakUsers   = 8
	soakDevices = 3 // per user: two browsers, then a client with a bearer token
	// soakStoreTimeout is the app's StoreTimeout, shorter than
	// startApp's patient 15s so that the front's long hangs outlast it
	// in a CI run's time. A busy machine that takes longer for a call
	// makes a 503, which the model allows as it allows a fault's.
	soakStoreTimeout = 3 * time.Second
	// The app's clock runs soakClockSpeed times as fast as the wall
	// clock, so that a session's refresh (RefreshInterval, a minute) comes
	// due after a second of use, while its IdleTimeout is never reached:
	// no session of the model expires, however long the run.
	soakClockSpeed      = 60
	soakRefreshInterval = time.Minute
	soakIdleTimeout     = 7 * 24 * time.Hour
	soakDefaultDuration = 30 * time.Second
	// soakSettleBound bounds each wait for the app and the process to
	// settle: refresh writes, goroutines, heap.
	soakSettleBound = time.Minute
	// The slack of TestSoak's check of goroutines and heap; see there.
	soakGoroutineSlack = 0
	soakHeapSlack      = 2 << 20
	// soakRetries bounds the tries of a call that must succeed in the
	// end (a device's first sign-in, a check with faults off), which a
	// busy machine may answer 503 a few times.
	soakRetries    = 20
	soakRetryPause = 100 * time.Millisecond
	// soakCheckers ask for the sessions' Lists at the end, at once.
	soakCheckers = 8
)

// TestSoak runs the soak, and checks that the goroutines and the heap come
// back to where they were once the app is shut down and every connection
// closed. A warm-up run first, of one user's devices making each kind of
// request once, builds what the process builds once and keeps (the
// account page's User-Agent parser, the common-password set), so that the
// baseline holds it.
//
// The slack: no goroutine, since everything the soak starts, it stops
// (servers, the clients' connections, refresh writes); and 2 MiB of heap,
// for what the runtime and the libraries keep on their own between two
// measurements (sync.Pools, the HTTP stack's buffers). A leak of a few
// KiB per request, or of a record per session, exceeds it within the CI
// run; the long run's catches a twentieth of that.
func TestSoak(t *testing.T) {
	duration := soakDuration(t)
	seed := soakSeed(t)
	t.Logf("soak for %v, seed %d (SOAK_SEED=%d draws the same faults)", duration, seed, seed)
	if !t.Run("warm-up", func(t *testing.T) { runSoak(t, 1, 0, seed) }) {
		t.FailNow()
	}
	before := settledUsage()
	var figures string
	t.Run("run", func(t *testing.T) { figures = runSoak(t, soakUsers, duration, seed+1) })
	after, ok := usageBackTo(before)
	t.Logf("figures of the %v run:\n%s  goroutines %d before, %d after; heap %s before, %s after",
		duration, figures, before.goroutines, after.goroutines, mib(before.heap), mib(after.heap))
	if !ok {
		var dump strings.Builder
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Errorf("after the soak, %d goroutines and %s of heap, want at most %d and %s (before: %d, %s); goroutines:\n%s",
			after.goroutines, mib(after.heap), before.goroutines+soakGoroutineSlack, mib(before.heap+soakHeapSlack),
			before.goroutines, mib(before.heap), dump.String())
	}
}

// soakDuration is SOAK, or the default.
func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("SOAK")
	if s == "" {
		return soakDefaultDuration
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("SOAK=%q: want a positive Go duration, such as 10m", s)
	}
	if d*soakClockSpeed > soakIdleTimeout/2 {
		t.Fatalf("SOAK=%v: the app's clock would run %v, past half its IdleTimeout %v, and sessions would expire", d, d*soakClockSpeed, soakIdleTimeout)
	}
	return d
}

// soakSeed is SOAK_SEED, or a random one.
func soakSeed(t *testing.T) uint64 {
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

// soakClock is the app's clock: soakClockSpeed times as fast as the wall
// clock, from when it starts.
type soakClock struct{ start time.Time }

func (c soakClock) now() time.Time { return c.start.Add(time.Since(c.start) * soakClockSpeed) }

// runSoak runs one soak on a table, a front and an app of its own, checks
// everything at the end, shuts the app down and returns its figures. All
// it makes is unreachable once it returns but the figures' text.
func runSoak(t *testing.T, users int, duration time.Duration, seed uint64) string {
	front := startSoakFront(t, seed, soakStoreTimeout)
	watch := newSoakWatch()
	clock := soakClock{start: time.Now()}
	ta := startApp(t, front.dynamoClient(t), ddbtest.TableName(t, front.engineClient(t)), unlimited, func(cfg *appConfig) {
		cfg.StoreTimeout = soakStoreTimeout
		cfg.IdleTimeout = soakIdleTimeout
		cfg.RefreshInterval = soakRefreshInterval
		cfg.Now = clock.now
		cfg.Logger = slog.New(watch)
		cfg.OnEvent = watch.event
		cfg.HashQueue = 8 * users * soakDevices // no 503 for a full hashing queue
	})
	m := newSoakModel(t)
	var devices []*soakDevice
	for i := range users {
		u := m.addUser("soak"+strconv.Itoa(i), "password of soak "+rand.Text())
		for j := range soakDevices {
			name := "browser" + strconv.Itoa(j)
			bearer := j == soakDevices-1
			if bearer {
				name = "cli"
			}
			devices = append(devices, newSoakDevice(m, ta, u, name, bearer, seed+uint64(i*soakDevices+j)+1))
		}
	}

	front.setFaults(true)
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i, d := range devices {
		wg.Go(func() { d.run(deadline, i%soakDevices == 0) })
	}
	wg.Wait()
	front.setFaults(false)
	shutdown(t, ta) // the refresh writes still under way
	faulted := front.figures()

	ends := checkSoakEnd(t, m, ta, front, watch)
	shutdown(t, ta) // and those of the checks
	return fmt.Sprintf("  requests by kind: count, latency, answers by status\n%s  front: %v\n  events: %s\n  warnings and errors logged: %s\n  %s\n",
		m.figures(), faulted, watch.eventFigures(), watch.logFigures(), ends)
}

// shutdown waits for the app's refresh writes, as its shutdown does.
func shutdown(t *testing.T, ta *testApp) {
	ctx, cancel := context.WithTimeout(context.Background(), soakSettleBound)
	defer cancel()
	if err := ta.app.shutdown(ctx); err != nil {
		t.Errorf("refresh writes still running after %v: %v", soakSettleBound, err)
	}
}

// checkSoakEnd checks, with faults off, that the app agrees with the model:
//
//   - every session that nothing tried to end is valid: none was lost;
//   - every session whose end was acknowledged, or that was refused, is
//     not: none came back;
//   - a session whose end was answered 503 may be either, and asking
//     settles which;
//   - each user's List holds exactly the user's valid sessions, and a
//     fresh one's, but for the index items that a failed call may leave,
//     as the library says: a failed sign-in's (answered 503), whose undo
//     failed and was logged ("ddbsession: undo session index item"); and
//     an ended session's, whose delete failed and was logged
//     ("ddbsession: delete session index item", or a refresh's "refresh
//     session index item"), or some end of which was answered 503. An
//     ended session whose every end was acknowledged, with no failure
//     logged, must not be listed. A List entry names the sign-in that
//     made it by its User-Agent, so each entry is matched to a sign-in of
//     the model and its answer.
//
// It returns a summary.
func checkSoakEnd(t *testing.T, m *soakModel, ta *testApp, front *soakFront, watch *soakWatch) string {
	var all []*soakSession
	for _, u := range m.users {
		all = append(all, u.sessions...)
	}
	// Every session asks for its own List: valid or not, and if valid, its
	// ID.
	lists := make([][]sessionJSON, len(all))
	codes := make([]int, len(all))
	next := make(chan int)
	var wg sync.WaitGroup
	for range soakCheckers {
		wg.Go(func() {
			for i := range next {
				codes[i], lists[i] = soakAsk(t, ta, all[i].cred, all[i].cookie)
			}
		})
	}
	for i := range all {
		next <- i
	}
	close(next)
	wg.Wait()

	var live, ended, uncertain, uncertainValid, uncertainGone int
	for i, s := range all {
		endedSure := s.endedAt != 0 || s.refusedAt != 0
		if s.uncertain {
			uncertain++
		}
		switch codes[i] {
		case http.StatusOK:
			s.validAtEnd = true
			current := slices.IndexFunc(lists[i], func(e sessionJSON) bool { return e.Current })
			if current < 0 {
				m.fail("at the end, %s has no current entry in its List", s)
			} else if p := m.learnID(s, lists[i][current].ID); p != "" {
				m.fail("at the end, %s", p)
			}
			switch {
			case endedSure:
				m.fail("at the end, %s is valid, though %s", s, s.endHow())
			case s.ends == 0:
				live++
			default:
				uncertainValid++
			}
		case http.StatusUnauthorized:
			switch {
			case s.ends == 0:
				m.fail("at the end, %s is refused, though nothing tried to end it: a live session was lost", s)
			case endedSure:
				ended++
			default:
				uncertainGone++
			}
		default:
			m.fail("at the end, with faults off, %s gets %d", s, codes[i])
		}
	}

	var orphans, stale int
	for _, u := range m.users {
		o, st := checkSoakList(t, m, ta, front, watch, u)
		orphans += o
		stale += st
	}
	return fmt.Sprintf("sessions at the end: %d handed out; %d live and valid; %d ended (acknowledged, or refused since) and gone; "+
		"%d with an end answered 503, of which %d not settled otherwise: %d valid, %d gone; List entries left by failed calls: %d of failed sign-ins, %d of ended sessions",
		len(all), live, ended, uncertain, uncertainValid+uncertainGone, uncertainValid, uncertainGone, orphans, stale)
}

// checkSoakList checks u's List, as a fresh API login sees it, against
// the model (see checkSoakEnd). It returns the entries of failed sign-ins
// and of ended sessions that failed calls account for.
func checkSoakList(t *testing.T, m *soakModel, ta *testApp, front *soakFront, watch *soakWatch, u *soakUser) (orphans, stale int) {
	checker := newSoakDevice(m, ta, u, "checker", true, 0)
	for range soakRetries {
		if checker.login(nil); checker.sess != nil {
			break
		}
	}
	if checker.sess == nil {
		m.fail("at the end, with faults off, %s cannot log in", u.name)
		return 0, 0
	}
	code, list := soakAsk(t, ta, checker.sess.cred, false)
	if code != http.StatusOK {
		m.fail("at the end, %s's List: %d", u.name, code)
		return 0, 0
	}
	want := map[string]*soakSession{}
	for _, s := range u.sessions { // the checker's among them
		if s.validAtEnd || s == checker.sess {
			want[s.attempt.ua] = s
		}
	}
	for _, e := range list {
		a := m.attempts[e.UserAgent]
		switch {
		case a == nil || a.user != u:
			m.fail("at the end, %s's List shows %s (%q), which is none of the user's sign-ins", u.name, e.ID, e.UserAgent)
		case want[e.UserAgent] != nil:
			if s := want[e.UserAgent]; s.id != "" && s.id != e.ID {
				m.fail("at the end, %s's List shows %s as %s, which its own List shows as %s", u.name, s, e.ID, s.id)
			}
			delete(want, e.UserAgent)
		case a.session == nil && a.code == http.StatusServiceUnavailable && watch.undoFailed(e.ID):
			orphans++ // a failed sign-in's index item, whose undo failed
		case a.session == nil:
			m.fail("at the end, %s's List shows %s of a %s answered %d (%q), and no failed undo of its index item was logged",
				u.name, e.ID, a.kind, a.code, e.UserAgent)
		case watch.cleanupFailed(e.ID):
			stale++ // an ended session's index item, whose delete failed
		case a.session.uncertain:
			// An end answered 503 (a timeout, say) may have deleted the
			// session item and not its index item: the client was told
			// the end failed, and nothing was said to be done.
			stale++
		default:
			s := a.session
			m.fail("at the end, %s's List shows %s as %s, which is not valid (%s), and no failed delete of its index item was logged%s",
				u.name, s, e.ID, s.endHow(), lostDeleteNote(front, s))
		}
	}
	for _, s := range want {
		m.fail("at the end, %s's List misses %s, which is valid", u.name, s)
	}
	return orphans, stale
}

// endHow says what ended s, as far as the clients know.
func (s *soakSession) endHow() string {
	switch {
	case s.endedAt != 0:
		return "its end by " + s.endedBy + " was acknowledged at " + strconv.FormatInt(s.endedAt, 10)
	case s.refusedAt != 0:
		return "it was refused at " + strconv.FormatInt(s.refusedAt, 10)
	case s.uncertain:
		return "an end of it was answered 503"
	}
	return "nothing tried to end it"
}

// lostDeleteNote says whether the front lost the answer of a DeleteItem
// of s's session item: the SDK's retry then finds no item, and the
// library's delete reports the session as not found.
func lostDeleteNote(front *soakFront, s *soakSession) string {
	token, _, _ := strings.Cut(s.cred, ".")
	sum := sha256.Sum256([]byte(token))
	if front.lostDelete("SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:])) {
		return "; the front lost the answer of a DeleteItem of its session item, so the SDK's retry found it deleted already"
	}
	return ""
}

// soakAsk sends GET /api/sessions with cred, as a cookie or a bearer
// token, and returns the status and the List; a 503, with faults off, is
// a busy machine, and asked again.
func soakAsk(t *testing.T, ta *testApp, cred string, cookie bool) (int, []sessionJSON) {
	for range soakRetries {
		r, err := http.NewRequest("GET", ta.srv.URL+"/api/sessions", nil)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		r.Header.Set("User-Agent", "soak/final-check")
		if cookie {
			r.Header.Set("Cookie", cookieName+"="+cred)
		} else {
			r.Header.Set("Authorization", "Bearer "+cred)
		}
		res, err := ta.srv.Client().Do(r)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		var list []sessionJSON
		if res.StatusCode == http.StatusOK {
			err = json.NewDecoder(res.Body).Decode(&list)
		}
		res.Body.Close()
		switch {
		case err != nil:
			t.Errorf("GET /api/sessions: %v", err)
			return 0, nil
		case res.StatusCode != http.StatusServiceUnavailable:
			return res.StatusCode, list
		}
		time.Sleep(soakRetryPause)
	}
	return http.StatusServiceUnavailable, nil
}

// soakWatch is the app's logger and event hook: it counts error records
// by message (and operation), and keeps the session IDs of the failed
// clean-ups that the library says may leave an index item behind.
type soakWatch struct {
	mu      sync.Mutex
	logs    map[string]int
	events  map[ddbsession.EventKind]int
	undo    map[string]bool // IDs whose index item's undo failed after a failed Login
	cleanup map[string]bool // IDs whose index item's delete failed after the session's
}

func newSoakWatch() *soakWatch {
	return &soakWatch{logs: map[string]int{}, events: map[ddbsession.EventKind]int{}, undo: map[string]bool{}, cleanup: map[string]bool{}}
}

func (w *soakWatch) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (w *soakWatch) Handle(_ context.Context, r slog.Record) error {
	var sid, op string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "sid":
			sid = a.Value.String()
		case "op":
			op = a.Value.String()
		}
		return true
	})
	key := r.Message
	if op != "" {
		key += " (" + op + ")"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logs[key]++
	switch r.Message {
	case "ddbsession: undo session index item":
		w.undo[sid] = true
	case "ddbsession: delete session index item", "ddbsession: refresh session index item":
		w.cleanup[sid] = true
	}
	return nil
}

func (w *soakWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *soakWatch) WithGroup(string) slog.Handler      { return w }

func (w *soakWatch) event(_ context.Context, e ddbsession.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events[e.Kind]++
}

func (w *soakWatch) undoFailed(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.undo[id]
}

func (w *soakWatch) cleanupFailed(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cleanup[id]
}

func (w *soakWatch) eventFigures() string { return countsText(&w.mu, w.events) }
func (w *soakWatch) logFigures() string   { return countsText(&w.mu, w.logs) }

func countsText[K ~string](mu *sync.Mutex, counts map[K]int) string {
	mu.Lock()
	defer mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// soakUsage is what the process holds: goroutines, and live heap after a
// collection.
type soakUsage struct {
	goroutines int
	heap       uint64
}

func measureUsage() soakUsage {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return soakUsage{runtime.NumGoroutine(), ms.HeapAlloc}
}

// settledUsage measures once the goroutine count has held still for half
// a second (connections and servers close asynchronously), or after
// soakSettleBound.
func settledUsage() soakUsage {
	last, still := measureUsage(), 0
	for end := time.Now().Add(soakSettleBound); still < 5 && time.Now().Before(end); {
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

// usageBackTo waits, up to soakSettleBound, for the goroutines and the
// heap to come back within the slack of before.
func usageBackTo(before soakUsage) (soakUsage, bool) {
	for end := time.Now().Add(soakSettleBound); ; time.Sleep(250 * time.Millisecond) {
		u := measureUsage()
		if u.goroutines <= before.goroutines+soakGoroutineSlack && u.heap <= before.heap+soakHeapSlack {
			return u, true
		}
		if time.Now().After(end) {
			return u, false
		}
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
