package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// BenchmarkGuardedRequest measures a guarded request's latency through the
// function: one between refreshes (a read), one due for its refresh with
// the write before the response (Lambda's freeze-safe mode), and the same
// with the write after it (as off Lambda; the benchmark waits for it
// between requests, outside the timer). The difference of the last two is
// what the freeze-safe mode costs the request that refreshes, once per
// REFRESH_INTERVAL per session: docs/lambda.md.
func BenchmarkGuardedRequest(b *testing.B) {
	for _, bc := range []struct {
		name          string
		onLambda, due bool
	}{
		{"between-refreshes", true, false},
		{"refresh-before-response", true, true},
		{"refresh-after-response", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := benchFunction(b, bc.onLambda)
			c := newClient()
			r := c.post(f, "/signup", map[string][]string{"username": {"alice"}, "password": {"correct horse"}})
			if r.status != http.StatusSeeOther {
				b.Fatalf("sign-up: %d", r.status)
			}
			b.ResetTimer()
			for b.Loop() {
				if bc.due {
					b.StopTimer()
					f.clock.Advance(11 * time.Minute)
					b.StartTimer()
				}
				if r := c.get(f, "/api/me"); r.status != http.StatusOK {
					b.Fatalf("GET /api/me: %d", r.status)
				}
				if !bc.onLambda {
					b.StopTimer()
					f.app.sessions.Wait(context.Background())
					b.StartTimer()
				}
			}
		})
	}
}

// benchFunction is newFunction for a benchmark, on Lambda or not.
func benchFunction(b *testing.B, onLambda bool) *function {
	b.Helper()
	if !onLambda {
		// New reads it once: the Manager made now writes after the response.
		os.Unsetenv("AWS_LAMBDA_FUNCTION_NAME")
		defer os.Setenv("AWS_LAMBDA_FUNCTION_NAME", "ddbsession-example-test")
	}
	name, ttl := deployTemplate(b, "")
	f := &function{t: b, table: name, admin: ttl.Client, clock: ddbtest.NewClock(start)}
	a, err := newApp(context.Background(), appConfig{Client: ttl, Settings: testSettings(name), Now: f.clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	f.app, f.handle = a, functionHandler(a)
	return f
}
