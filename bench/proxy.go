package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// proxy sits between every SDK client of the benchmark and the engine, on
// 127.0.0.1 in the same process. It holds each call for a fixed delay
// before forwarding it, so that a run on loopback shows what network
// latency does to each variant, and it counts what it forwards: it sees
// every call whatever the code under test does, so no variant can be
// counted more kindly than another.
//
// Capacity units come from the engine: the proxy adds
// ReturnConsumedCapacity TOTAL to each data call that does not ask for it
// already, and sums the ConsumedCapacity of the answer. A conditional write
// whose condition fails gets an error and no capacity in its answer, yet
// DynamoDB charges it, so the proxy counts it as one write unit, the least
// it can cost.
type proxy struct {
	url    string // where clients reach the proxy
	engine string // the engine's URL, without a trailing slash
	client *http.Client
	server *http.Server
	delay  atomic.Int64 // nanoseconds

	mu    sync.Mutex
	tally tally
}

// tally is what the proxy forwarded since it was last reset.
type tally struct {
	Calls             map[string]int // by operation, as in X-Amz-Target
	Writes            int
	RCU, WCU          float64
	FailedConditional int // conditional writes whose condition failed
}

func (t tally) calls() int {
	n := 0
	for _, c := range t.Calls {
		n += c
	}
	return n
}

// The data operations: reads cost read units, writes write units. Any other
// call (table management) is counted but costs no capacity units.
var (
	readOps  = map[string]bool{"GetItem": true, "BatchGetItem": true, "Query": true, "Scan": true, "TransactGetItems": true}
	writeOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true}
)

// startProxy listens on a free loopback port and forwards to engine.
func startProxy(engine string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{
		url:    "http://" + ln.Addr().String(),
		engine: strings.TrimSuffix(engine, "/"),
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true, // forward the engine's bytes as they are
		}},
		tally: tally{Calls: map[string]int{}},
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

// Close stops the proxy.
func (p *proxy) Close() error {
	p.client.CloseIdleConnections()
	return p.server.Close()
}

// setDelay sets the time each call is held before it is forwarded.
func (p *proxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

// take returns the tally since the last take, and starts a new one.
func (p *proxy) take() tally {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tally
	p.tally = tally{Calls: map[string]int{}}
	return t
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndexByte(op, '.')+1:]
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if readOps[op] || writeOps[op] {
		body = withConsumedCapacity(body)
	}
	if d := time.Duration(p.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.engine+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Header.Del("Content-Length")
	res, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.count(op, res.StatusCode, answer)
	for name, values := range res.Header {
		w.Header()[name] = values
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(answer)
}

// withConsumedCapacity returns a call's JSON body asking for the capacity
// it consumed, unless it asks already or is not JSON.
func withConsumedCapacity(body []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return body
	}
	if _, ok := fields["ReturnConsumedCapacity"]; ok {
		return body
	}
	fields["ReturnConsumedCapacity"] = json.RawMessage(`"TOTAL"`)
	b, err := json.Marshal(fields)
	if err != nil {
		return body
	}
	return b
}

// count adds one forwarded call and the capacity its answer reports.
func (p *proxy) count(op string, status int, answer []byte) {
	var units float64
	failedConditional := false
	if status == http.StatusOK {
		var out struct{ ConsumedCapacity json.RawMessage }
		if json.Unmarshal(answer, &out) == nil {
			units = capacityUnits(out.ConsumedCapacity)
		}
	} else if writeOps[op] && bytes.Contains(answer, []byte("ConditionalCheckFailedException")) {
		failedConditional = true
		units = 1
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.tally.Calls[op]++
	switch {
	case readOps[op]:
		p.tally.RCU += units
	case writeOps[op]:
		p.tally.Writes++
		p.tally.WCU += units
	}
	if failedConditional {
		p.tally.FailedConditional++
	}
}

// capacityUnits sums a ConsumedCapacity field: one object for single-item
// calls, a list (one per table) for batches.
func capacityUnits(raw json.RawMessage) float64 {
	type consumed struct{ CapacityUnits float64 }
	var one consumed
	if json.Unmarshal(raw, &one) == nil {
		return one.CapacityUnits
	}
	var list []consumed
	if json.Unmarshal(raw, &list) != nil {
		return 0
	}
	var sum float64
	for _, c := range list {
		sum += c.CapacityUnits
	}
	return sum
}
