package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// options size a run.
type options struct {
	delays      []time.Duration // held per DynamoDB call by the proxy
	concurrency []int           // requests in flight at once
	rounds      int             // alternating rounds per delay and concurrency
	requests    int             // requests per variant per round
	sessions    int             // signed-in users per variant, requests go round them
	allocRounds int             // rounds of the allocation count
	// revokeEveryoneWithin is ddbsession's Limits.RevokeEveryoneWithin (0:
	// its default, 10 s). Each Manager reads the global item in a
	// request's BatchGetItem once per that time: 1 read unit of the
	// instance's, not of the request's.
	revokeEveryoneWithin time.Duration
}

// result is what a run measured.
type result struct {
	opts     options
	variants []variantResult
}

type variantResult struct {
	name          string
	role          role
	splitByCookie bool
	rounds        []roundTally // every latency round, all delays and concurrencies
	// samples are the requests of all rounds, by delay and concurrency.
	samples map[setting][]sample
	// allocs and ownAllocs are allocations per request, one per allocation
	// round: with the engine, and with its answers replayed.
	allocs, ownAllocs []float64
}

// setting is one cell of the latency table.
type setting struct {
	delay       time.Duration
	concurrency int
}

// sample is one request: how long it took, and whether its response sent
// a cookie.
type sample struct {
	latency time.Duration
	cookie  bool
}

// roundTally is what the proxy saw in one round, and how many responses
// sent a cookie.
type roundTally struct {
	requests int
	cookies  int
	tally    tally
}

// run signs in each variant's users against the engine at endpoint, counts
// allocations, then times alternating rounds through a delay proxy.
// Progress goes to logw.
func run(ctx context.Context, endpoint string, opts options, logw io.Writer) (*result, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(logw, format+"\n", args...) }
	p, err := startProxy(endpoint)
	if err != nil {
		return nil, err
	}
	defer p.Close()

	direct := newClient(endpoint)
	e := &env{
		client:               direct,
		table:                "bench-" + strings.ToLower(rand.Text()[:8]),
		logger:               slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError})),
		revokeEveryoneWithin: opts.revokeEveryoneWithin,
	}
	m, err := ddbsession.New(ddbsession.Config[User]{Client: direct, Table: e.table, Logger: e.logger})
	if err != nil {
		return nil, err
	}
	if err := m.CreateTable(ctx); err != nil {
		return nil, err
	}
	defer func() {
		_, _ = direct.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: &e.table})
	}()

	res := &result{opts: opts}
	builders := make([]builder, len(variants))
	for i, v := range variants {
		logf("signing in %d users: %s", opts.sessions, v.name)
		if builders[i], err = v.signIn(ctx, e, opts.sessions); err != nil {
			return nil, fmt.Errorf("%s: sign in: %w", v.name, err)
		}
		res.variants = append(res.variants, variantResult{name: v.name, role: v.role, splitByCookie: v.splitByCookie, samples: map[setting][]sample{}})
	}

	// Allocations come first, against the engine directly: the proxy runs
	// in this process and would count its own. They also warm the engine.
	logf("counting allocations: %d rounds", opts.allocRounds)
	for i, v := range variants {
		r := &res.variants[i]
		if r.allocs, r.ownAllocs, err = countAllAllocs(ctx, builders[i], direct, opts); err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
	}

	// One target per variant serves every latency round, so that state
	// such as ddbsession's refresh marks lives as it would in a server.
	proxied := newClient(p.url)
	targets := make([]*target, len(variants))
	for i := range variants {
		if targets[i], err = builders[i](proxied); err != nil {
			return nil, err
		}
	}
	next := make([]atomic.Int64, len(variants)) // each variant's next session
	for _, delay := range opts.delays {
		p.setDelay(delay)
		for _, conc := range opts.concurrency {
			logf("timing: %v per call, concurrency %d, %d rounds", delay, conc, opts.rounds)
			at := setting{delay, conc}
			// A warm-up round opens the connections this concurrency needs.
			for i := range variants {
				if _, _, err := serveRound(ctx, targets[i], &next[i], max(2*conc, opts.requests/10), conc); err != nil {
					return nil, fmt.Errorf("%s: warm-up: %w", variants[i].name, err)
				}
			}
			for range opts.rounds {
				for i, v := range variants {
					p.take()
					samples, cookies, err := serveRound(ctx, targets[i], &next[i], opts.requests, conc)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", v.name, err)
					}
					r := &res.variants[i]
					r.samples[at] = append(r.samples[at], samples...)
					r.rounds = append(r.rounds, roundTally{requests: opts.requests, cookies: cookies, tally: p.take()})
				}
			}
		}
	}
	return res, nil
}

// serveRound serves n requests through t, conc at a time, on the sessions
// that follow next, and waits for the work they left running. It returns
// each request's sample and how many responses sent a cookie.
func serveRound(ctx context.Context, t *target, next *atomic.Int64, n, conc int) ([]sample, int, error) {
	samples := make([]sample, n)
	var issued, cookies atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			w := newRecorder()
			for {
				k := issued.Add(1) - 1
				if k >= int64(n) || ctx.Err() != nil {
					return
				}
				session := int(next.Add(1) - 1)
				w.reset()
				start := time.Now()
				err := t.serve(ctx, session, w)
				samples[k] = sample{latency: time.Since(start), cookie: w.setCookie()}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				if samples[k].cookie {
					cookies.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if err := t.wait(ctx); firstErr == nil {
		firstErr = err
	}
	return samples, int(cookies.Load()), firstErr
}

// countAllocs returns, per allocation round, the heap allocations per
// request of targets built on c, serving one request per session at a time.
// Each round builds a fresh target, warms it on the first half of the
// sessions and counts the second half, each session once: a fresh
// ddbsession Manager has no refresh in mind yet, so a replayed session due
// for a refresh is refreshed.
func countAllocs(ctx context.Context, build builder, c ddbsession.Client, opts options) ([]float64, error) {
	half := opts.sessions / 2
	if half < 1 {
		return nil, fmt.Errorf("%d sessions: need at least 2 to count allocations", opts.sessions)
	}
	var perRequest []float64
	for range opts.allocRounds {
		t, err := build(c)
		if err != nil {
			return nil, err
		}
		w := newRecorder()
		serve := func(from, to int) error {
			for i := from; i < to; i++ {
				w.reset()
				if err := t.serve(ctx, i, w); err != nil {
					return err
				}
			}
			return t.wait(ctx)
		}
		if err := serve(0, half); err != nil {
			return nil, err
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := serve(half, 2*half); err != nil {
			return nil, err
		}
		runtime.ReadMemStats(&after)
		perRequest = append(perRequest, float64(after.Mallocs-before.Mallocs)/float64(half))
	}
	return perRequest, nil
}

// countAllAllocs returns the allocations per request of targets built on
// direct, and of targets built on a replay of its answers, one per
// allocation round.
func countAllAllocs(ctx context.Context, build builder, direct ddbsession.Client, opts options) (allocs, own []float64, err error) {
	if allocs, err = countAllocs(ctx, build, direct, opts); err != nil {
		return nil, nil, fmt.Errorf("allocations: %w", err)
	}
	rep := newReplay(direct)
	if err := record(ctx, build, rep, opts.sessions); err != nil {
		return nil, nil, fmt.Errorf("record answers: %w", err)
	}
	rep.startReplaying()
	if own, err = countAllocs(ctx, build, rep, opts); err != nil {
		return nil, nil, fmt.Errorf("own allocations: %w", err)
	}
	return allocs, own, nil
}

// record serves one request per session through rep while it records.
func record(ctx context.Context, build builder, rep *replay, sessions int) error {
	t, err := build(rep)
	if err != nil {
		return err
	}
	w := newRecorder()
	for i := range sessions {
		w.reset()
		if err := t.serve(ctx, i, w); err != nil {
			return err
		}
	}
	return t.wait(ctx)
}

// median of xs, which it sorts.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// percentile returns the q-th quantile (0 < q <= 1) of ds by nearest rank;
// it sorts ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}
