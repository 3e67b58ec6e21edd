package ddbtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
)

// This file is the soak harness that the example's soak and the scs
// example's share: a run of an app's own handlers by many clients at once,
// in rounds, while a fault front below the SDK (soakfaults.go) fails,
// throttles, loses answers and holds calls past their deadline, with every
// log line of the process captured and searched for the secrets the run
// handed out.
//
// A soak runs in a synctest bubble, on its virtual clock: time moves only
// when every goroutine of the run waits on another one or on a timer, never
// while one works or waits for the engine. A call held "past its deadline"
// is held until its context's deadline passes, and a StoreTimeout passes
// only then: however slow or busy the machine, no call that the front does
// not hold runs out of time, and no test waits for a real window. The
// app's clock is that virtual clock ([SoakRun.Now]), moved on between
// rounds by the soak itself (time.Sleep), so that refreshes come due and
// recent authentications grow old in rounds, not in seconds of wall time.
//
// Inside the bubble nothing may listen or keep a connection open, which
// would stop the clock: the clients reach the app's handler in process
// ([SoakRun.App]), and the SDK's clients ([SoakRun.Client],
// [SoakRun.EngineClient]) reach the engine on connections that close after
// each call.

// SoakConfig is what a soak asks of [Soak].
type SoakConfig struct {
	// Rounds is how many rounds the run plays, unless SOAK_ROUNDS says
	// otherwise; the warm-up plays one.
	Rounds int
	// HeapSlack is how much the live heap may exceed, once the run is over
	// and everything it made is unreachable, what it was after the
	// warm-up: what the runtime and the libraries keep on their own
	// between two measurements.
	HeapSlack uint64
	// Faults are the faults and their rates per request attempt; nil for
	// [DefaultFaults].
	Faults []FaultRate
	// Before, if set, runs before each run (the warm-up too), outside its
	// bubble, with s.T the run's test: for what must be made outside, such
	// as an app that starts a goroutine that never ends (a bubble waits
	// for every goroutine of its own). s.Now is not yet the run's clock.
	Before func(s *SoakRun)
}

// Soak runs a soak: run once as a warm-up, with one round (what the
// process builds once and keeps, the warm-up builds, so that the baseline
// of the heap holds it), then with cfg.Rounds (or SOAK_ROUNDS), each in a
// synctest bubble of its own. run plays its rounds with [SoakRun.Play]
// and returns its figures, which Soak logs. Then it checks, with what run
// left unreachable:
//
//   - the log: every line the process logged during the two runs (the
//     handlers that run gives its app, slog's default logger and so the log
//     package, the SDK's loggers, and os.Stderr) holds none of the secrets
//     the runs registered ([SoakRun.Secrets]: every credential the clients
//     sent or were sent, and its digests): 0 hits, asserted;
//   - the heap: back within cfg.HeapSlack of the baseline.
//
// A goroutine of the run that never ends fails the run: synctest waits
// for every goroutine of its bubble. SOAK_SEED repeats a run's seed: the
// same fault for the same request of the same client (see [Faults]).
// Soak changes process-wide state (slog's default, os.Stderr): the test
// that calls it must not be parallel.
func Soak(t *testing.T, cfg SoakConfig, run func(s *SoakRun) string) {
	rounds := soakRounds(t, cfg.Rounds)
	seed := soakSeed(t)
	t.Logf("soak of %d rounds, seed %d (SOAK_SEED=%d draws the same faults)", rounds, seed, seed)
	logs := captureLogs(t)
	secrets := &Secrets{values: map[string]string{}}
	start := time.Now()
	play := func(t *testing.T, rounds int, seed uint64, warmup bool) string {
		s := newSoakRun(t, cfg, rounds, seed, warmup, logs, secrets)
		if cfg.Before != nil {
			cfg.Before(s)
		}
		var figures string
		synctest.Test(t, func(t *testing.T) {
			s.T, s.offset = t, time.Until(start)
			figures = run(s)
			figures += "  front: " + s.Faults.String() + "\n"
		})
		return figures
	}
	if !t.Run("warm-up", func(t *testing.T) { play(t, 1, seed, true) }) {
		t.FailNow()
	}
	before := liveHeap()
	var figures string
	t.Run("run", func(t *testing.T) { figures = play(t, rounds, seed+1, false) })

	lines, text := logs.stop()
	hits := secrets.Find(text)
	text = ""
	for i, h := range hits {
		if i == 20 {
			t.Errorf("... and %d more", len(hits)-i)
			break
		}
		t.Errorf("the log holds %s: %s", h.What, h.Line)
	}
	searched := secrets.Len()
	secrets.values = nil // what the runs made, unreachable but for the figures
	after := liveHeap()
	t.Logf("figures of the %d rounds:\n%s  log: %d lines captured (app at debug level, slog's default and the log package, the SDK, stderr), "+
		"searched for %d secrets (credentials and their digests): %d hits\n  heap %s after the warm-up, %s after the run",
		rounds, figures, lines, searched, len(hits), mib(before), mib(after))
	if after > before+cfg.HeapSlack {
		t.Errorf("after the soak, %s of heap, want at most %s (%s after the warm-up, and %s of slack)",
			mib(after), mib(before+cfg.HeapSlack), mib(before), mib(cfg.HeapSlack))
	}
}

// soakRounds is SOAK_ROUNDS, or def.
func soakRounds(t *testing.T, def int) int {
	s := os.Getenv("SOAK_ROUNDS")
	if s == "" {
		return max(def, 1)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("SOAK_ROUNDS=%q: want a positive number of rounds", s)
	}
	return n
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

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// SoakRun is one run of a soak, inside its bubble.
type SoakRun struct {
	T      *testing.T // the bubble's (in Before, the run's)
	Seed   uint64
	Rounds int
	// Warmup says that this is the warm-up: one round, which need only
	// make each kind of request once.
	Warmup bool
	// Faults is the fault front of Client's calls, off but while Play
	// plays a round.
	Faults *Faults
	// Secrets are the secrets the log must not hold. The clients of App
	// register every credential they send and are sent in a cookie; a
	// soak adds the others (a bearer token in a JSON answer).
	Secrets *Secrets

	logs     *soakLogs
	endpoint string
	offset   time.Duration // from the bubble's clock to the date the soak began
	clients  atomic.Int64  // App clients made so far, numbering them
}

func newSoakRun(t *testing.T, cfg SoakConfig, rounds int, seed uint64, warmup bool, logs *soakLogs, secrets *Secrets) *SoakRun {
	endpoint := os.Getenv(endpointEnv)
	if err := CheckEndpoint(endpoint); err != nil {
		t.Fatal(err)
	}
	rates := cfg.Faults
	if rates == nil {
		rates = DefaultFaults
	}
	s := &SoakRun{
		T: t, Seed: seed, Rounds: rounds, Warmup: warmup, Secrets: secrets,
		logs: logs, endpoint: endpoint,
	}
	s.Faults = newFaults(endpoint, seed, rates)
	return s
}

// Now is the app's clock: the bubble's virtual one, from the date and time
// the soak began.
func (s *SoakRun) Now() time.Time { return time.Now().Add(s.offset) }

// Logger is a logger for the app, at debug level, into the captured log.
func (s *SoakRun) Logger() *slog.Logger { return slog.New(s.LogHandler()) }

// LogHandler is Logger's handler, for a soak that watches the app's
// records on their way (a handler of its own that passes them on).
func (s *SoakRun) LogHandler() slog.Handler { return s.logs.handler }

// Client is a client of the test engine through the fault front, for the
// app: DynamoDB's four attempts with backoff (soakBackoff), and the SDK's
// log into the captured log.
func (s *SoakRun) Client() *dynamodb.Client { return s.client(s.Faults) }

// EngineClient is a client of the test engine itself, with no faults: for
// the table, and for checks that read what the app wrote.
func (s *SoakRun) EngineClient() *dynamodb.Client { return s.client(s.Faults.upstream) }

func (s *SoakRun) client(rt http.RoundTripper) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String(s.endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(dummyAccessKeyID, dummySecretAccessKey, ""),
		HTTPClient:   &http.Client{Transport: rt},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 4 // DynamoDB's client's default
			o.Backoff = soakBackoff{}
			o.RateLimiter = ratelimit.None
		}),
		Logger: logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			s.logs.printf("aws-sdk %s: "+format, append([]any{c}, v...)...)
		}),
	})
}

// soakBackoff is the SDK's exponential backoff for DynamoDB (25 ms, or
// 1 s after a throttle, doubling with each retry, at most 20 s), at the
// middle of its jitter rather than at a random point of it, so that a
// call's time, on the virtual clock, depends on its faults alone. (The
// client's quota of retries goes too, for the same reason: it is shared
// by every call of the client, in whichever order they come.)
type soakBackoff struct{}

func (soakBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	base := 25 * time.Millisecond
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		base = time.Second
	}
	return min(base<<max(attempt-1, 0), 20*time.Second) / 2, nil
}

// Table is a table name of the run's own, which is deleted when it ends.
func (s *SoakRun) Table() string { return TableName(s.T, s.EngineClient()) }

// Rand is the random stream of one of the run's clients: the same for
// the same seed and stream.
func (s *SoakRun) Rand(stream uint64) *mrand.Rand { return mrand.New(mrand.NewPCG(s.Seed, stream)) }

// Play plays the run's rounds: in each, the faults are on and act runs
// once for each of devices at once, each device on a goroutine of its
// own; once every act has returned, the faults are turned off (the
// attempts under way finish first) and between runs, for the checks that
// need every client idle and the app to answer without faults, and to
// move the clock on (time.Sleep).
func (s *SoakRun) Play(devices int, act func(device, round int), between func(round int)) {
	for round := range s.Rounds {
		s.Faults.SetOn(true)
		var wg sync.WaitGroup
		for d := range devices {
			wg.Go(func() { act(d, round) })
		}
		wg.Wait()
		s.Faults.SetOn(false)
		if between != nil {
			between(round)
		}
	}
}

// SoakApp is an app's handler, which the run's clients call in process.
type SoakApp struct {
	URL string // the base URL of its requests: https://app.soak, or http:// if not secure
	run *SoakRun
	h   http.Handler
}

// App serves h to the run's clients, over "HTTPS" if secure: its requests
// then carry a TLS connection state, as a TLS server's do.
func (s *SoakRun) App(h http.Handler, secure bool) *SoakApp {
	u := "http://app.soak"
	if secure {
		u = "https://app.soak"
	}
	return &SoakApp{URL: u, run: s, h: h}
}

// Client returns a new client of the app: a browser with a cookie jar of
// its own if jar, a command-line client otherwise. It follows no
// redirects, so that the soak sees each answer. Each client has a client
// address of its own, and its requests carry a tag that the fault front
// draws their faults from (see [Faults]): its number, in the order the
// clients were made, which is the same from run to run for clients made
// in turn (not by goroutines at once).
func (a *SoakApp) Client(jar bool) *http.Client {
	n := int(a.run.clients.Add(1))
	c := &http.Client{
		Transport: &soakTransport{app: a, client: n,
			remote: fmt.Sprintf("198.51.100.%d:%d", 1+n%254, 1024+n)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if jar {
		c.Jar = &soakJar{}
	}
	return c
}

// soakTransport serves a client's requests with the app's handler, in
// process.
type soakTransport struct {
	app      *SoakApp
	client   int
	remote   string
	requests atomic.Int64
}

// soakTag is what the fault front knows of a request to the app: whose
// and which, and how many store attempts it has made so far.
type soakTag struct {
	client   int
	request  int64
	attempts atomic.Int64
}

type soakTagKey struct{}

func (t *soakTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	secrets := t.app.run.Secrets
	for _, c := range req.Cookies() {
		secrets.Add("a credential sent in the "+c.Name+" cookie", c.Value)
	}
	if token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
		secrets.Add("a bearer credential sent", token)
	}
	tag := &soakTag{client: t.client, request: t.requests.Add(1)}
	sr := req.Clone(context.WithValue(req.Context(), soakTagKey{}, tag))
	sr.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	sr.RequestURI = req.URL.RequestURI()
	sr.Host = req.URL.Host
	sr.RemoteAddr = t.remote
	sr.Proto, sr.ProtoMajor, sr.ProtoMinor = "HTTP/1.1", 1, 1
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	if req.URL.Scheme == "https" {
		sr.TLS = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, ServerName: req.URL.Hostname()}
	}
	rec := httptest.NewRecorder()
	t.app.h.ServeHTTP(rec, sr)
	res := rec.Result()
	res.Request = req
	for _, c := range res.Cookies() {
		if c.Value != "" {
			secrets.Add("a credential set in the "+c.Name+" cookie", c.Value)
		}
	}
	return res, nil
}

// soakJar is a cookie jar for one host, the app's, with what a browser
// does that matters here: a cookie with a value replaces the one of its
// name, one that is expired or empty removes it. (net/http/cookiejar
// would do, but for its clock: it reads the real time, or rather the
// bubble's, which the app's clock runs ahead of.)
type soakJar struct {
	mu      sync.Mutex
	cookies map[string]*http.Cookie
}

func (j *soakJar) SetCookies(_ *url.URL, cookies []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cookies == nil {
		j.cookies = map[string]*http.Cookie{}
	}
	for _, c := range cookies {
		if c.Value == "" || c.MaxAge < 0 {
			delete(j.cookies, c.Name)
			continue
		}
		j.cookies[c.Name] = &http.Cookie{Name: c.Name, Value: c.Value}
	}
}

func (j *soakJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*http.Cookie
	for _, c := range j.cookies {
		out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return out
}

// Secrets are strings that no log line may hold: credentials, with their
// SHA-256 digests in the encodings a table key or a log might give them.
type Secrets struct {
	mu     sync.Mutex
	values map[string]string // the secret, and what it is
}

// minSecret is the shortest string that counts as a secret: shorter ones
// (a cookie's user key, a padding) would be found by chance.
const minSecret = 16

// Add registers value, which is what says: the whole of it, its first part
// before a "." (a ddbsession credential's token), and their SHA-256
// digests, base64url, base64 and hex.
func (s *Secrets) Add(what, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]string{}
	}
	parts := []string{value}
	if i := strings.IndexAny(value, ".~"); i > 0 { // a credential: its token, then a user key
		parts = append(parts, value[:i])
	}
	for _, p := range parts {
		if len(p) < minSecret {
			continue
		}
		s.values[p] = what
		sum := sha256.Sum256([]byte(p))
		s.values[base64.RawURLEncoding.EncodeToString(sum[:])] = "the base64url SHA-256 of " + what
		s.values[base64.RawStdEncoding.EncodeToString(sum[:])] = "the base64 SHA-256 of " + what
		s.values[hex.EncodeToString(sum[:])] = "the hex SHA-256 of " + what
	}
}

// Len is how many strings Find looks for.
func (s *Secrets) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values)
}

// SecretHit is a secret found in a text, and the line it is on.
type SecretHit struct {
	What, Line string
}

// Find returns every place in text that holds one of the secrets, at any
// offset: a secret inside a longer word, a key, a quoted string counts.
func (s *Secrets) Find(text string) []SecretHit {
	s.mu.Lock()
	defer s.mu.Unlock()
	byPrefix := map[string][]string{}
	for v := range s.values {
		byPrefix[v[:minSecret]] = append(byPrefix[v[:minSecret]], v)
	}
	var hits []SecretHit
	seen := map[SecretHit]bool{} // a credential and its token, found on one line, are one hit
	for i := 0; i+minSecret <= len(text); i++ {
		for _, v := range byPrefix[text[i:i+minSecret]] {
			if strings.HasPrefix(text[i:], v) {
				start := strings.LastIndexByte(text[:i], '\n') + 1
				end := strings.IndexByte(text[i:], '\n')
				if end < 0 {
					end = len(text) - i
				}
				if h := (SecretHit{What: s.values[v], Line: text[start : i+end]}); !seen[h] {
					seen[h] = true
					hits = append(hits, h)
				}
			}
		}
	}
	return hits
}

// soakLogs is the captured log of a soak: everything the process logs
// while it runs, as text, a record a line.
type soakLogs struct {
	handler slog.Handler // slog's text, at debug level, into buf

	mu    sync.Mutex
	buf   bytes.Buffer
	lines int

	restore func()
	copied  chan struct{} // closed once stderr's copy has ended
}

func (l *soakLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines += bytes.Count(p, []byte{'\n'})
	return l.buf.Write(p)
}

func (l *soakLogs) printf(format string, v ...any) {
	fmt.Fprintf(l, strings.TrimSuffix(format, "\n")+"\n", v...)
}

// captureLogs starts capturing: slog's default logger (and with it the log
// package's) and os.Stderr write into the capture until stop, or until t
// ends.
func captureLogs(t *testing.T) *soakLogs {
	l := &soakLogs{copied: make(chan struct{})}
	l.handler = slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})
	oldDefault, oldOutput, oldFlags, oldStderr := slog.Default(), log.Writer(), log.Flags(), os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// Outside any bubble: a read of a pipe would hold the clock still.
	go func() {
		defer close(l.copied)
		io.Copy(prefixWriter{l, "stderr: "}, r)
		r.Close()
	}()
	slog.SetDefault(slog.New(l.handler))
	os.Stderr = w
	var once sync.Once
	l.restore = func() {
		once.Do(func() {
			os.Stderr = oldStderr
			slog.SetDefault(oldDefault)
			log.SetOutput(oldOutput) // which SetDefault of a handler of ours changed
			log.SetFlags(oldFlags)
			w.Close()
			<-l.copied
		})
	}
	t.Cleanup(l.restore)
	return l
}

// stop ends the capture and returns it.
func (l *soakLogs) stop() (lines int, text string) {
	l.restore()
	l.mu.Lock()
	defer l.mu.Unlock()
	text = l.buf.String()
	l.buf = bytes.Buffer{}
	return l.lines, text
}

// prefixWriter writes each line it is given into the log with a prefix.
type prefixWriter struct {
	l      *soakLogs
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			p.l.Write([]byte(p.prefix + line))
		}
	}
	return len(b), nil
}
