package ddbsession_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
)

// loginLoad is the outcome of one loginLoadRun.
type loginLoad struct {
	logins  int
	elapsed time.Duration // the logins alone
	lost    int           // logins that failed or whose session did not hold up
}

// loginLoadRun signs in logins sessions from workers goroutines at once,
// spread evenly over users users named prefix-<i>, then checks that nothing
// was lost: every Login succeeded with a cookie of its own, every cookie
// authenticates as its own user through RequireSession, and List shows
// each user exactly the sessions made for them. It reports what went wrong
// through tb.Errorf, at most a few of each kind, and counts it as lost.
func loginLoadRun(tb testing.TB, e *env, prefix string, logins, workers, users int) loginLoad {
	tb.Helper()
	keys := make([]ddbsession.UserKey, users)
	for i := range keys {
		keys[i] = e.putUser(fmt.Sprintf("%s-%d", prefix, i))
	}
	var (
		mu      sync.Mutex
		lost    int
		reports = map[string]int{}
	)
	fail := func(kind, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lost++
		if reports[kind]++; reports[kind] <= 3 {
			tb.Errorf(kind+": "+format, args...)
		}
	}
	parallel := func(fn func(i int)) {
		jobs := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range jobs {
					fn(i)
				}
			})
		}
		for i := range logins {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
	}

	cookies := make([]*http.Cookie, logins)
	began := time.Now()
	parallel(func(i int) {
		w := httptest.NewRecorder()
		if err := e.m.Login(w, newRequest(), keys[i%users], nil); err != nil {
			fail("Login failed", "login %d: %v", i, err)
			return
		}
		for _, c := range w.Result().Cookies() {
			if c.Name == cookieName && c.Value != "" {
				cookies[i] = c
			}
		}
		if cookies[i] == nil {
			fail("no cookie", "login %d set no session cookie", i)
		}
	})
	load := loginLoad{logins: logins, elapsed: time.Since(began)}

	seen := map[string]bool{}
	for i, c := range cookies {
		if c != nil && seen[c.Value] {
			fail("cookie issued twice", "login %d got a cookie issued before", i)
			cookies[i] = nil
		} else if c != nil {
			seen[c.Value] = true
		}
	}

	ids := make([]string, logins) // each session's ID, from its own request
	h := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := e.m.Session(r.Context())
		u, _ := e.m.User(r.Context())
		fmt.Fprintf(w, "%s %s", s.ID, u.Name)
	}))
	parallel(func(i int) {
		if cookies[i] == nil {
			return
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, newRequest(cookies[i]))
		var id, name string
		fmt.Sscan(w.Body.String(), &id, &name)
		if w.Code != http.StatusOK || name != fmt.Sprintf("%s-%d", prefix, i%users) {
			fail("cookie does not authenticate", "login %d: status %d, body %q", i, w.Code, w.Body)
			return
		}
		ids[i] = id
	})
	if err := e.m.Wait(context.Background()); err != nil {
		tb.Errorf("refresh writes pending: %v", err)
	}

	for u, key := range keys {
		list, err := e.m.List(context.Background(), key)
		if err != nil {
			fail("List failed", "List(%s): %v", key.PK, err)
			continue
		}
		var want []string
		for i := u; i < logins; i += users {
			if ids[i] != "" {
				want = append(want, ids[i])
			}
		}
		got := listIDs(list)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			fail("List is wrong", "List(%s) has %d sessions, want the %d made for the user", key.PK, len(got), len(want))
		}
	}
	load.lost = lost
	return load
}

// TestLoginLoad: 2,000 logins from 32 goroutines at once, against the
// engine, lose nothing. Every cookie authenticates as its own user, and
// every user's List counts exactly their sessions.
func TestLoginLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	load := loginLoadRun(t, e, "load", 2000, 32, 40)
	t.Logf("%d logins from 32 goroutines in %v, %d lost", load.logins, load.elapsed.Round(time.Millisecond), load.lost)
}

// BenchmarkLoginLoad is TestLoginLoad at 10,000 logins, for the README's
// figures; CI does not run it. Each iteration signs in users of its own,
// 10,000 logins from 32 goroutines, and reports the logins' time, the
// rate, and how many were lost (0, or the benchmark fails):
//
//	scripts/with-dynalite go test -run '^$' -bench '^BenchmarkLoginLoad$' -benchtime 3x .
func BenchmarkLoginLoad(b *testing.B) {
	const logins, workers, users = 10_000, 32, 100
	e := newEnv(b)
	var runs int
	var total time.Duration
	var lost int
	for b.Loop() {
		load := loginLoadRun(b, e, fmt.Sprintf("bench%d", runs), logins, workers, users)
		runs++
		total += load.elapsed
		lost += load.lost
	}
	b.ReportMetric(total.Seconds()/float64(runs), "s-for-10k-logins")
	b.ReportMetric(float64(logins*runs)/total.Seconds(), "logins/s")
	b.ReportMetric(float64(lost), "lost")
}
