package main

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// perRequest is what one authenticated request of a variant costs, as the
// proxy counts it.
type perRequest struct {
	Calls              map[string]float64
	Writes, RCU, WCU   float64
	CookiesSent        float64
	CookiesSentBetween [2]float64 // instead of CookiesSent, when it varies
}

// expected holds, for every variant, what its requests must cost. A variant
// without an entry fails the test: add its expected calls here.
var expected = map[string]perRequest{
	"ddbsession, one round trip": {
		Calls: map[string]float64{"BatchGetItem": 1}, RCU: 2,
	},
	"ddbsession, one round trip, refresh due on every request": {
		Calls: map[string]float64{"BatchGetItem": 1, "UpdateItem": 1}, Writes: 1, RCU: 2, WCU: 1, CookiesSent: 1,
	},
	"ddbsession, one round trip, refresh due on 1 in 10": {
		// Checked apart: a tenth of the requests, give or take.
		CookiesSentBetween: [2]float64{0.05, 0.15},
	},
	"ddbsession, one round trip, v0.2.0's cookie (user key in the plain)": {
		Calls: map[string]float64{"BatchGetItem": 1}, RCU: 2,
	},
	"ddbsession, two reads (HideUserKey)": {
		Calls: map[string]float64{"GetItem": 2}, RCU: 2,
	},
	"scs v2.9.0, plain DynamoDB store, IdleTimeout": {
		Calls: map[string]float64{"GetItem": 2, "PutItem": 1}, Writes: 1, RCU: 2, WCU: 1, CookiesSent: 1,
	},
	"scs v2.9.0, this project's scsstore, IdleTimeout": {
		// scsstore skips a commit that moves the expiry by less than its
		// MinCommitInterval, a minute, longer than this test runs; scs
		// re-sends the cookie all the same.
		Calls: map[string]float64{"GetItem": 2}, RCU: 2, CookiesSent: 1,
	},
	"floor: 2 GetItems in turn (bare SDK)": {
		Calls: map[string]float64{"GetItem": 2}, RCU: 2,
	},
	"floor: 1 BatchGetItem (bare SDK)": {
		Calls: map[string]float64{"BatchGetItem": 1}, RCU: 2,
	},
}

// TestEveryVariant runs the whole benchmark at a tiny size, so that every
// variant serves signed-in requests through the proxy at two delays and
// two concurrencies, and checks what each request cost. The global item's
// read, once per RevokeEveryoneWithin per instance, is the instance's
// cost (docs/capacity.md), not the request's: at the default 10 s it
// landed inside the measured requests of a run that a busy machine had
// slowed past 10 s, so here the copy outlives the run.
func TestEveryVariant(t *testing.T) {
	opts := options{
		delays:               []time.Duration{0, time.Millisecond},
		concurrency:          []int{1, 3},
		rounds:               2,
		requests:             12,
		sessions:             16,
		allocRounds:          1,
		revokeEveryoneWithin: time.Hour,
	}
	res, err := run(t.Context(), os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), opts, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	ignoreUnits := unitsUncomparable(t)
	if len(res.variants) != len(variants) {
		t.Fatalf("%d variants measured, want %d", len(res.variants), len(variants))
	}
	for _, v := range res.variants {
		t.Run(v.name, func(t *testing.T) {
			want, ok := expected[v.name]
			if !ok {
				t.Fatalf("no expected calls for variant %q: add them to expected", v.name)
			}
			got := costPerRequest(&v)
			if want.CookiesSentBetween != [2]float64{} {
				// Every refresh is 1 UpdateItem, of the session item alone;
				// the rest is the one round trip.
				if lo, hi := want.CookiesSentBetween[0], want.CookiesSentBetween[1]; got.CookiesSent < lo || got.CookiesSent > hi {
					t.Errorf("%.3f requests of every one sent a cookie, want between %.2f and %.2f", got.CookiesSent, lo, hi)
				}
				want = perRequest{
					Calls:  map[string]float64{"BatchGetItem": 1, "UpdateItem": got.CookiesSent},
					Writes: got.CookiesSent, RCU: 2, WCU: got.CookiesSent, CookiesSent: got.CookiesSent,
				}
			}
			if diff := cmp.Diff(want, got, ignoreUnits); diff != "" {
				t.Errorf("per request (-want +got):\n%s", diff)
			}
			for at := range v.samples {
				if n := len(v.samples[at]); n != opts.rounds*opts.requests {
					t.Errorf("%v, concurrency %d: %d requests timed, want %d", at.delay, at.concurrency, n, opts.rounds*opts.requests)
				}
			}
			if len(v.allocs) != 1 || v.allocs[0] <= 0 || len(v.ownAllocs) != 1 {
				t.Errorf("allocations %v, own %v: want one positive count each", v.allocs, v.ownAllocs)
			}
		})
	}

	var report strings.Builder
	if err := writeReport(&report, res, thisMachine("test engine")); err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		if !strings.Contains(report.String(), "| "+v.name) {
			t.Errorf("the report has no row for %q:\n%s", v.name, report.String())
		}
	}
	for _, heading := range []string{"#### Cost per 1,000", "#### Latency, no delay added", "#### Latency, 1ms added", "#### Checks"} {
		if !strings.Contains(report.String(), heading) {
			t.Errorf("the report has no %q:\n%s", heading, report.String())
		}
	}
}

// costPerRequest is a variant's tally over all its rounds, per request.
func costPerRequest(v *variantResult) perRequest {
	var got perRequest
	got.Calls = map[string]float64{}
	requests := 0
	for _, r := range v.rounds {
		requests += r.requests
		for op, n := range r.tally.Calls {
			got.Calls[op] += float64(n)
		}
		got.Writes += float64(r.tally.Writes)
		got.RCU += r.tally.RCU
		got.WCU += r.tally.WCU
		got.CookiesSent += float64(r.cookies)
	}
	for op := range got.Calls {
		got.Calls[op] /= float64(requests)
	}
	got.Writes /= float64(requests)
	got.RCU /= float64(requests)
	got.WCU /= float64(requests)
	got.CookiesSent /= float64(requests)
	return got
}

// The proxy holds each call for its delay, counts it by operation, and
// counts a conditional write that fails as one write unit.
func TestProxy(t *testing.T) {
	t.Parallel()
	p, err := startProxy(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := t.Context()
	direct := ddbtest.Client(t)
	table := ddbtest.TableName(t, direct)
	if _, err := direct.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(tablePK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(tablePK), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, direct, table)

	const delay = 30 * time.Millisecond
	p.setDelay(delay)
	c := newClient(p.url)
	item := map[string]types.AttributeValue{tablePK: &types.AttributeValueMemberS{Value: "a"}}
	start := time.Now()
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("a call through the proxy took %v, want at least its delay %v", took, delay)
	}
	p.setDelay(0)
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &table, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		t.Fatalf("conditional PutItem on an existing item: %v, want ConditionalCheckFailedException", err)
	}
	if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: item, ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	want := tally{Calls: map[string]int{"PutItem": 2, "GetItem": 1}, Writes: 2, RCU: 1, WCU: 2, FailedConditional: 1}
	if diff := cmp.Diff(want, p.take(), unitsUncomparable(t)); diff != "" {
		t.Errorf("tally (-want +got):\n%s", diff)
	}
}

// The 1-in-k variant refreshes a k-th of its sessions on every pass round
// them, after the allocation count as before it: the replayed rounds of that
// count refresh nothing in the table, and must not leave sessions behind
// their schedule to refresh in a run with the ones due after them.
func TestRefreshSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct := ddbtest.Client(t)
	e := &env{client: direct, table: ddbtest.TableName(t, direct), logger: slog.New(slog.DiscardHandler)}
	m, err := ddbsession.New(ddbsession.Config[User]{Client: direct, Table: e.table})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	const sessions, every = 40, 10
	build, err := signInDDBSession(ddbsessionSetup{refreshEvery: every})(ctx, e, sessions)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := countAllAllocs(ctx, build, direct, options{sessions: sessions, allocRounds: 3}); err != nil {
		t.Fatal(err)
	}
	target, err := build(direct)
	if err != nil {
		t.Fatal(err)
	}
	w := newRecorder()
	for pass := range every + 1 {
		var refreshed []int
		for i := range sessions {
			w.reset()
			if err := target.serve(ctx, i, w); err != nil {
				t.Fatal(err)
			}
			if w.setCookie() {
				refreshed = append(refreshed, i)
			}
		}
		if err := target.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if len(refreshed) != sessions/every {
			t.Errorf("pass %d: sessions %v refreshed, want %d of the %d", pass, refreshed, sessions/every, sessions)
		}
	}
}

// testWriter sends the benchmark's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// unitsUncomparable returns the cmp option that leaves the capacity units
// out of a comparison on an engine that does not report them as DynamoDB
// bills them (ddbtest.ProbeReports: moto reports a fixed figure per
// operation, whatever the item), and none on one that does (dynalite,
// DynamoDB). The proxy sums what the engine reports; the calls are
// compared on every engine.
func unitsUncomparable(t *testing.T) cmp.Option {
	t.Helper()
	if ddbtest.ProbeReports(t, ddbtest.Client(t)).BySize {
		return cmp.Options{}
	}
	t.Log("this engine does not report capacity by item size: the units are not compared, the calls are")
	return cmp.Options{cmpopts.IgnoreFields(perRequest{}, "RCU", "WCU"), cmpopts.IgnoreFields(tally{}, "RCU", "WCU")}
}
