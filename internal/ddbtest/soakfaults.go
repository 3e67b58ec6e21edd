package ddbtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Faults is a soak's fault front: an http.RoundTripper below a real SDK
// client, so that the SDK's own retries and backoff meet every fault, as
// in production. While on, it treats each request attempt in one of the
// ways DynamoDB and the network fail (the [Fault]s), at the rates it was
// given, and forwards the rest to the engine. Whatever the client does, a
// request it forwards is forwarded whole and its answer read to the end
// (dynalite crashes on a request cut off halfway).
//
// The draws are deterministic: an attempt made for a request of a
// [SoakApp] client draws from the run's seed, the client, the request's
// number among that client's and the attempt's among that request's
// (refresh writes after the response included), so that the same seed
// gives the same request the same faults, whatever the machine's speed
// and whichever order the clients' requests reach the engine in. Attempts
// without a client's request behind them draw from one stream of the seed.
//
// On the bubble's virtual clock, the faults that hold an attempt "past the
// deadline" hold it until its context's deadline passes, which then
// passes at once: the call fails at its deadline, having reached the
// engine or not, exactly as it does against DynamoDB when the network
// stalls. An attempt whose context has no deadline cannot be held past
// one: it gets an InternalServerError instead, and counts as one.
type Faults struct {
	upstream *http.Transport // to the engine, a connection per call
	seed     uint64
	rates    []FaultRate

	mu        sync.Mutex
	on        bool
	inFlight  int
	idle      *sync.Cond // signalled when inFlight drops to 0
	rng       *mrand.Rand
	attempts  map[string]int // by operation
	faults    map[Fault]int
	keys      map[string]*keyAttempts // by operation and key
	downUntil time.Time               // the end of the outage under way
}

// Fault is what the front does to one request attempt.
type Fault string

const (
	FaultNone     Fault = "forwarded"
	FaultThrottle Fault = "ThrottlingException"
	FaultCapacity Fault = "ProvisionedThroughputExceededException"
	FaultInternal Fault = "InternalServerError"
	// FaultLost forwards the request, drops the engine's answer and
	// answers 500: the write is applied, and the SDK's retry meets it.
	FaultLost Fault = "answer lost"
	// FaultHang waits before forwarding, FaultSlow forwards and waits
	// before answering, for up to [HangMax] of virtual time: the attempt
	// takes its time, and others overtake it.
	FaultHang Fault = "hang"
	FaultSlow Fault = "slow answer"
	// FaultHangPastDeadline holds the attempt until its context's
	// deadline, never forwarding it; FaultSlowPastDeadline forwards it
	// first, so that its write is applied, and then holds it.
	FaultHangPastDeadline Fault = "hang past the deadline"
	FaultSlowPastDeadline Fault = "slow answer past the deadline"
	// FaultOutage answers 500 to this attempt and to every one for
	// [OutageTime] after it, longer than the SDK's retries last.
	FaultOutage Fault = "outage"
)

// HangMax bounds FaultHang's and FaultSlow's waits; OutageTime is how
// long a FaultOutage lasts. Virtual time, both.
const (
	HangMax    = 500 * time.Millisecond
	OutageTime = 500 * time.Millisecond
)

// FaultRate is a fault and its rate per request attempt.
type FaultRate struct {
	Fault Fault
	Rate  float64
}

// DefaultFaults are 15% of attempts in all: most requests succeed, and
// with the SDK's four attempts most calls do.
var DefaultFaults = []FaultRate{
	{FaultThrottle, 0.02},
	{FaultCapacity, 0.02},
	{FaultInternal, 0.03},
	{FaultLost, 0.04},
	{FaultHang, 0.015},
	{FaultSlow, 0.015},
	{FaultHangPastDeadline, 0.005},
	{FaultSlowPastDeadline, 0.005},
}

// DynamoDB's error answers (awsJson1_0): the type in the x-amzn-ErrorType
// header and in the body's __type, with a message.
var faultAnswers = map[Fault]struct {
	status      int
	errType     string
	description string
}{
	FaultThrottle: {400, "com.amazon.coral.availability#ThrottlingException", "Rate of requests exceeds the allowed throughput."},
	FaultCapacity: {400, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded."},
	FaultInternal: {500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error"},
	FaultLost:     {500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error"},
	FaultOutage:   {500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error"},
}

// keyAttempts counts the attempts of one operation on one item key, and
// how many of them reached the engine.
type keyAttempts struct {
	attempts, applied int
}

func newFaults(engine string, seed uint64, rates []FaultRate) *Faults {
	f := &Faults{
		upstream: &http.Transport{DisableKeepAlives: true, DisableCompression: true},
		seed:     seed,
		rates:    rates,
		rng:      mrand.New(mrand.NewPCG(seed, 0x5eed)),
		attempts: map[string]int{},
		faults:   map[Fault]int{},
		keys:     map[string]*keyAttempts{},
	}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// SetOn turns the faults on or off. Off, it waits for the attempts under
// way, held ones included, so that none strikes after.
func (f *Faults) SetOn(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
	for !on && f.inFlight > 0 {
		f.idle.Wait()
	}
}

// Attempts is how many attempts of op the front has seen.
func (f *Faults) Attempts(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[op]
}

// KeyAttempts is how many attempts of op on an item whose key holds
// keyPart (a sort key, say) the front has seen, and how many of them
// reached the engine: none means that every one was faulted before it got
// there (throttled, failed, or held past its deadline unsent).
func (f *Faults) KeyAttempts(op, keyPart string) (attempts, applied int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, n := range f.keys {
		if strings.HasPrefix(k, op+"\x00") && strings.Contains(k, keyPart) {
			attempts += n.attempts
			applied += n.applied
		}
	}
	return attempts, applied
}

// String sums the front up: attempts by operation, faults by kind.
func (f *Faults) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	total, faulted := 0, 0
	var ops, kinds []string
	for _, op := range slices.Sorted(maps.Keys(f.attempts)) {
		total += f.attempts[op]
		ops = append(ops, fmt.Sprintf("%s %d", op, f.attempts[op]))
	}
	for _, r := range f.rates {
		faulted += f.faults[r.Fault]
		kinds = append(kinds, fmt.Sprintf("%s %d", r.Fault, f.faults[r.Fault]))
	}
	if n := f.faults[FaultInternal]; n > 0 && !slices.ContainsFunc(f.rates, func(r FaultRate) bool { return r.Fault == FaultInternal }) {
		faulted += n
		kinds = append(kinds, fmt.Sprintf("%s %d (held past no deadline)", FaultInternal, n))
	}
	return fmt.Sprintf("%d attempts (%s); %d faulted (%.1f%%): %s",
		total, strings.Join(ops, ", "), faulted, 100*float64(faulted)/float64(max(total, 1)), strings.Join(kinds, ", "))
}

// draw picks the fault of one attempt, and the wait of a hang.
func (f *Faults) draw(ctx context.Context) (Fault, time.Duration) {
	var x, y float64
	if tag, ok := ctx.Value(soakTagKey{}).(*soakTag); ok {
		n := tag.attempts.Add(1)
		x = unitDraw(f.seed, uint64(tag.client), uint64(tag.request), uint64(n), 1)
		y = unitDraw(f.seed, uint64(tag.client), uint64(tag.request), uint64(n), 2)
	} else {
		x, y = f.rng.Float64(), f.rng.Float64() // f.mu is held
	}
	if !f.on {
		return FaultNone, 0
	}
	if time.Now().Before(f.downUntil) {
		return FaultOutage, 0
	}
	fault := FaultNone
	for _, r := range f.rates {
		if x < r.Rate {
			fault = r.Fault
			break
		}
		x -= r.Rate
	}
	if fault == FaultOutage {
		f.downUntil = time.Now().Add(OutageTime)
	}
	return fault, time.Duration(y * float64(HangMax))
}

// unitDraw is a number in [0, 1) that depends on seed and parts alone.
func unitDraw(seed uint64, parts ...uint64) float64 {
	x := seed
	for _, p := range parts {
		x = splitmix64(x ^ p)
	}
	return float64(x>>11) / (1 << 53)
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RoundTrip treats one request attempt of the SDK.
func (f *Faults) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	ctx := r.Context()
	f.mu.Lock()
	f.inFlight++
	f.attempts[op]++
	fault, wait := f.draw(ctx)
	_, hasDeadline := ctx.Deadline()
	if !hasDeadline && (fault == FaultHangPastDeadline || fault == FaultSlowPastDeadline) {
		fault = FaultInternal
	}
	f.faults[fault]++
	key := f.keyOf(op, body)
	f.mu.Unlock()
	defer f.done()

	applied := false
	forward := func() engineAnswer {
		applied = true
		return f.forward(r, body)
	}
	defer func() { f.noteKey(key, applied) }()
	switch fault {
	case FaultThrottle, FaultCapacity, FaultInternal, FaultOutage:
		return errorAnswer(r, fault), nil
	case FaultLost:
		forward()
		return errorAnswer(r, fault), nil
	case FaultHang:
		if !sleepUnlessDone(ctx, wait) {
			return nil, ctx.Err() // the client gave up: the request never reached the engine
		}
		return forward().response(r), nil
	case FaultSlow:
		a := forward()
		if !sleepUnlessDone(ctx, wait) {
			return nil, ctx.Err()
		}
		return a.response(r), nil
	case FaultHangPastDeadline:
		<-ctx.Done()
		return nil, ctx.Err()
	case FaultSlowPastDeadline:
		forward()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return forward().response(r), nil
}

func (f *Faults) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight--; f.inFlight == 0 {
		f.idle.Broadcast()
	}
}

// keyOf is the key by which an attempt of op on body's item is counted:
// op, and the string values of the request's Key, by attribute name; ""
// for a request without one. f.mu is held.
func (f *Faults) keyOf(op string, body []byte) string {
	var in struct {
		Key map[string]struct{ S string }
	}
	if json.Unmarshal(body, &in) != nil || len(in.Key) == 0 {
		return ""
	}
	key := op
	for _, name := range slices.Sorted(maps.Keys(in.Key)) {
		key += "\x00" + name + "=" + in.Key[name].S
	}
	return key
}

func (f *Faults) noteKey(key string, applied bool) {
	if key == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.keys[key]
	if k == nil {
		k = &keyAttempts{}
		f.keys[key] = k
	}
	k.attempts++
	if applied {
		k.applied++
	}
}

// engineAnswer is the engine's answer, read whole.
type engineAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a engineAnswer) response(r *http.Request) *http.Response {
	return &http.Response{
		Status: fmt.Sprintf("%d %s", a.status, http.StatusText(a.status)), StatusCode: a.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body)), ContentLength: int64(len(a.body)),
		Request: r,
	}
}

// forward sends the request to the engine and reads its answer whole,
// whether or not the client is still there.
func (f *Faults) forward(r *http.Request, body []byte) engineAnswer {
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, r.URL.String(), bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header = r.Header.Clone()
	res, err := f.upstream.RoundTrip(req)
	if err != nil {
		// The engine is down: the client sees a 502, and the soak's checks
		// with faults off fail.
		return engineAnswer{status: http.StatusBadGateway, header: http.Header{}, body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return engineAnswer{status: http.StatusBadGateway, header: http.Header{}, body: []byte(err.Error())}
	}
	h := res.Header.Clone()
	h.Del("Content-Length")
	return engineAnswer{status: res.StatusCode, header: h, body: b}
}

func errorAnswer(r *http.Request, fault Fault) *http.Response {
	e := faultAnswers[fault]
	body, _ := json.Marshal(map[string]string{"__type": e.errType, "message": e.description})
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("x-amzn-ErrorType", e.errType[strings.IndexByte(e.errType, '#')+1:])
	h.Set("x-amzn-RequestId", "soak")
	// DynamoDB sends the CRC32 of every answer's body, and the SDK checks
	// it, errors' too.
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	return engineAnswer{status: e.status, header: h, body: body}.response(r)
}

// sleepUnlessDone waits for d, and reports false if ctx ended first.
func sleepUnlessDone(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
