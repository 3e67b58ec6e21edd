package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// soakFront is the soak's fault front: an HTTP reverse proxy between a real
// SDK client and the test engine, so that the SDK's own retries and
// backoff meet every fault, as in production. While faults are on it
// treats each request attempt, at random from a logged seed, in one of the
// ways DynamoDB and the network fail (soakFaultKinds), and forwards the
// rest. The root module's TestFaultMatrix front does the same at the TCP
// level, one fault per case; this one mixes them, at rates at which most
// requests succeed.
//
// Whatever the client does, a request the front forwards is forwarded
// whole and its answer read to the end: the SDK drops a request when the
// app's StoreTimeout ends, and dynalite crashes when a request is cut off
// halfway, so the front must not pass that on.
type soakFront struct {
	srv      *httptest.Server
	engine   string          // the engine's base URL
	upstream *http.Transport // to the engine
	client   *http.Transport // the app's SDK client's, to the front
	// hang and longHang bound the short and the long hangs: a short one
	// ends well within the app's StoreTimeout, a long one after it.
	hang, longHang [2]time.Duration

	mu       sync.Mutex
	rng      *rand.Rand
	on       bool
	inFlight int
	idle     *sync.Cond // signalled when inFlight drops to 0
	attempts map[string]int
	faults   map[soakFault]int
	// lost holds the session item keys of DeleteItems whose answer the
	// front lost, to say what a stale List entry came from.
	lost map[string]bool
}

// soakFault is what the front does to one request attempt.
type soakFault string

const (
	faultNone     soakFault = "forwarded"
	faultThrottle soakFault = "ThrottlingException"
	faultCapacity soakFault = "ProvisionedThroughputExceededException"
	faultInternal soakFault = "InternalServerError"
	// faultLost forwards the request, drops the engine's answer and
	// answers 500: the write is applied, and the SDK's retry meets it.
	faultLost soakFault = "answer lost"
	// faultHang waits before forwarding; faultSlow forwards, then waits
	// before answering. Either way a client that gives up first (its
	// StoreTimeout) gets nothing, but a slow answer's write is applied.
	faultHang     soakFault = "hang"
	faultSlow     soakFault = "slow answer"
	faultLongHang soakFault = "hang past StoreTimeout"
	faultLongSlow soakFault = "slow answer past StoreTimeout"
)

// soakFaultKinds are the faults with their rates per request attempt,
// 15% in all: most requests succeed, and with the SDK's four attempts
// most calls do.
var soakFaultKinds = []struct {
	fault soakFault
	rate  float64
}{
	{faultThrottle, 0.02},
	{faultCapacity, 0.02},
	{faultInternal, 0.03},
	{faultLost, 0.04},
	{faultHang, 0.015},
	{faultSlow, 0.015},
	{faultLongHang, 0.005},
	{faultLongSlow, 0.005},
}

// DynamoDB's error answers (awsJson1_0): the type in the x-amzn-ErrorType
// header and in the body's __type, with a message.
var soakErrorAnswers = map[soakFault]struct {
	status      int
	errType     string
	description string
}{
	faultThrottle: {400, "com.amazon.coral.availability#ThrottlingException", "Rate of requests exceeds the allowed throughput."},
	faultCapacity: {400, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded."},
	faultInternal: {500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error"},
	faultLost:     {500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error"},
}

// startSoakFront starts a front for the engine that ddbtest.Main found,
// with faults off, on a free loopback port. storeTimeout is the app's: the
// long hangs outlast it. It stops when t ends.
func startSoakFront(t testing.TB, seed uint64, storeTimeout time.Duration) *soakFront {
	t.Helper()
	engine := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if err := ddbtest.CheckEndpoint(engine); err != nil {
		t.Fatal(err)
	}
	f := &soakFront{
		engine: strings.TrimSuffix(engine, "/"),
		// No compression: the engine's CRC32 header is of the bytes it
		// sends, which the front passes on as they are.
		upstream: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		client:   &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		hang:     [2]time.Duration{10 * time.Millisecond, storeTimeout / 3},
		longHang: [2]time.Duration{storeTimeout + 100*time.Millisecond, storeTimeout + 600*time.Millisecond},
		rng:      rand.New(rand.NewPCG(seed, seed^0x5eed)),
		attempts: map[string]int{},
		faults:   map[soakFault]int{},
		lost:     map[string]bool{},
	}
	f.idle = sync.NewCond(&f.mu)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.close)
	return f
}

// dynamoClient is a real SDK client for the front: the test engine's
// client's options (dummy credentials, region, the SDK's default retryer:
// four attempts, with backoff), with the front as its endpoint and a
// transport of the front's, which close shuts.
func (f *soakFront) dynamoClient(t testing.TB) *dynamodb.Client {
	opts := ddbtest.Client(t).Options()
	opts.BaseEndpoint = &f.srv.URL
	opts.HTTPClient = &http.Client{Transport: f.client}
	return dynamodb.New(opts)
}

// engineClient is the test engine's client, on the front's own transport
// to it, whose connections close with the front: ddbtest.Client's would
// outlive the test by the engine's keep-alive timeout, and TestSoak counts
// goroutines.
func (f *soakFront) engineClient(t testing.TB) *dynamodb.Client {
	opts := ddbtest.Client(t).Options()
	opts.HTTPClient = &http.Client{Transport: f.upstream}
	return dynamodb.New(opts)
}

// setFaults turns the faults on or off. Off, it waits for the requests
// under way, hangs included, so that none strikes after.
func (f *soakFront) setFaults(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
	for !on && f.inFlight > 0 {
		f.idle.Wait()
	}
}

// close stops the front and closes every connection it kept, its client's
// to it and its own to the engine, so that none outlives the test.
func (f *soakFront) close() {
	f.client.CloseIdleConnections()
	f.srv.Close()
	f.upstream.CloseIdleConnections()
}

// pick chooses the fault for one attempt of op, and counts it.
func (f *soakFront) pick(op string) (soakFault, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight++
	f.attempts[op]++
	fault, wait := faultNone, time.Duration(0)
	if f.on {
		x := f.rng.Float64()
		for _, k := range soakFaultKinds {
			if x < k.rate {
				fault = k.fault
				break
			}
			x -= k.rate
		}
	}
	between := func(b [2]time.Duration) time.Duration { return b[0] + time.Duration(f.rng.Int64N(int64(b[1]-b[0]))) }
	switch fault {
	case faultHang, faultSlow:
		wait = between(f.hang)
	case faultLongHang, faultLongSlow:
		wait = between(f.longHang)
	}
	f.faults[fault]++
	return fault, wait
}

func (f *soakFront) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight--; f.inFlight == 0 {
		f.idle.Broadcast()
	}
}

func (f *soakFront) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	fault, wait := f.pick(op)
	defer f.done()
	switch fault {
	case faultThrottle, faultCapacity, faultInternal:
		writeDynamoError(w, fault)
	case faultLost:
		f.forward(r, body)
		if op == "DeleteItem" {
			f.noteLost(body)
		}
		writeDynamoError(w, fault)
	case faultHang, faultLongHang:
		if !sleepUnlessGone(r.Context(), wait) {
			return // the client gave up: the request never reached the engine
		}
		f.answer(w, f.forward(r, body))
	case faultSlow, faultLongSlow:
		res := f.forward(r, body)
		if sleepUnlessGone(r.Context(), wait) {
			f.answer(w, res)
		}
	default:
		f.answer(w, f.forward(r, body))
	}
}

// engineAnswer is the engine's answer, read whole.
type engineAnswer struct {
	status int
	header http.Header
	body   []byte
}

// forward sends the request to the engine and reads its answer whole,
// whether or not the client is still there (see soakFront).
func (f *soakFront) forward(r *http.Request, body []byte) engineAnswer {
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, f.engine+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	for name, values := range r.Header {
		switch name {
		case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length":
		default:
			req.Header[name] = values
		}
	}
	res, err := f.upstream.RoundTrip(req)
	if err != nil {
		// The engine is down: the client sees a 500, and the soak's
		// checks at the end, with faults off, fail.
		return engineAnswer{status: http.StatusBadGateway, header: http.Header{}, body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return engineAnswer{status: http.StatusBadGateway, header: http.Header{}, body: []byte(err.Error())}
	}
	return engineAnswer{status: res.StatusCode, header: res.Header, body: b}
}

func (f *soakFront) answer(w http.ResponseWriter, a engineAnswer) {
	for name, values := range a.header {
		switch name {
		case "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length":
		default:
			w.Header()[name] = values
		}
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}

func writeDynamoError(w http.ResponseWriter, fault soakFault) {
	e := soakErrorAnswers[fault]
	body, _ := json.Marshal(map[string]string{"__type": e.errType, "message": e.description})
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("x-amzn-ErrorType", e.errType[strings.IndexByte(e.errType, '#')+1:])
	h.Set("x-amzn-RequestId", "soak")
	w.WriteHeader(e.status)
	w.Write(body)
}

// sleepUnlessGone waits for d, and reports false if the client hung up
// first.
func sleepUnlessGone(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// noteLost records the session item key of a DeleteItem whose answer was
// lost.
func (f *soakFront) noteLost(body []byte) {
	var in struct {
		Key struct {
			PK struct{ S string } `json:"pk"`
		}
	}
	if json.Unmarshal(body, &in) != nil || !strings.HasPrefix(in.Key.PK.S, "SESSION#") {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost[in.Key.PK.S] = true
}

// lostDelete reports whether a DeleteItem of the session item under pk
// lost its answer.
func (f *soakFront) lostDelete(pk string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost[pk]
}

// frontFigures are what the front saw: attempts by operation, faults by
// kind.
type frontFigures struct {
	attempts map[string]int
	faults   map[soakFault]int
}

func (f *soakFront) figures() frontFigures {
	f.mu.Lock()
	defer f.mu.Unlock()
	return frontFigures{attempts: maps.Clone(f.attempts), faults: maps.Clone(f.faults)}
}

func (ff frontFigures) String() string {
	total, faulted := 0, 0
	var ops, kinds []string
	for _, op := range slices.Sorted(maps.Keys(ff.attempts)) {
		total += ff.attempts[op]
		ops = append(ops, fmt.Sprintf("%s %d", op, ff.attempts[op]))
	}
	for _, k := range soakFaultKinds {
		faulted += ff.faults[k.fault]
		kinds = append(kinds, fmt.Sprintf("%s %d", k.fault, ff.faults[k.fault]))
	}
	return fmt.Sprintf("%d attempts (%s); %d faulted (%.1f%%): %s",
		total, strings.Join(ops, ", "), faulted, 100*float64(faulted)/float64(max(total, 1)), strings.Join(kinds, ", "))
}
