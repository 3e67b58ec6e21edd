package ddbsession_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// BenchmarkAuthenticatedRequest compares, in one run against one engine, an
// authenticated request through RequireSession with the bare SDK calls that
// such a request needs, on both read paths: one BatchGetItem of session and
// user (the default, with the user key sealed in the cookie, and with
// v0.2.0's cookie, the key in the plain), and two GetItems in turn
// (HideUserKey). With -count, each round runs every path in turn. The peer
// benchmark in bench/ (scripts/bench) compares more, with a per-call delay;
// this one also isolates the middleware's own work, with the engine's
// answers replayed, which is where its allocations are counted.
func BenchmarkAuthenticatedRequest(b *testing.B) {
	e := newEnv(b, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	sessionKey := sessionItemKey(cookie.Value)
	userKey := userItemKey(alice)
	ctx := context.Background()
	batch := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		e.table: {Keys: []map[string]types.AttributeValue{sessionKey, userKey}, ConsistentRead: aws.Bool(true)},
	}}

	// Warm the engine (dynalite's JIT) so no path pays for it.
	for range 1000 {
		if _, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: userKey, ConsistentRead: aws.Bool(true)}); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("path=bare-sdk-batchgetitem", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := e.client.BatchGetItem(ctx, batch)
			if err != nil || len(out.Responses[e.table]) != 2 {
				b.Fatal("batch read", err)
			}
		}
	})
	b.Run("path=bare-sdk-getitems", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: sessionKey, ConsistentRead: aws.Bool(true)})
			if err != nil || s.Item == nil {
				b.Fatal("session read", err)
			}
			u, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: userKey, ConsistentRead: aws.Bool(true)})
			if err != nil || u.Item == nil {
				b.Fatal("user read", err)
			}
		}
	})

	for _, path := range []struct {
		name string
		hide bool
		c    *http.Cookie
	}{{"one-round-trip", false, cookie}, {"one-round-trip-plain-key", false, withUser(cookie, alice)}, {"two-reads", true, tokenOnly(cookie)}} {
		cfg := e.cfg
		cfg.Cookie.HideUserKey = path.hide
		c := path.c
		b.Run("path=require-session-"+path.name, func(b *testing.B) {
			m, err := ddbsession.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			serveLoop(b, m, c)
		})
		// The middleware's own work, apart from the engine: the same
		// request through a Manager whose reads replay the answers the
		// engine gave once.
		b.Run("path=own-work-"+path.name, func(b *testing.B) {
			cfg := cfg
			cfg.Client = replay(b, e.client, batch, sessionKey, userKey, e.table)
			m, err := ddbsession.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			serveLoop(b, m, c)
		})
	}
}

// serveLoop times authenticated requests through m's RequireSession.
func serveLoop(b *testing.B, m *ddbsession.Manager[User], c *http.Cookie) {
	b.ReportAllocs()
	h := m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := m.User(r.Context()); !ok {
			b.Fatal("no user")
		}
	}))
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(c)
	w := httptest.NewRecorder()
	for b.Loop() {
		clear(w.Header())
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// replay makes a probe of the engine answer reads with the engine's answers
// to the benchmark's one session and user, given once, so that a benchmark
// counts the middleware's own work.
func replay(b testing.TB, c *dynamodb.Client, batch *dynamodb.BatchGetItemInput, sessionKey, userKey map[string]types.AttributeValue, table string) *ddbtest.Probe {
	ctx := context.Background()
	sessionPK := sessionKey["pk"].(*types.AttributeValueMemberS).Value
	batchOut, err := c.BatchGetItem(ctx, batch)
	if err != nil {
		b.Fatal(err)
	}
	session, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: sessionKey, ConsistentRead: aws.Bool(true)})
	if err != nil {
		b.Fatal(err)
	}
	user, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: userKey, ConsistentRead: aws.Bool(true)})
	if err != nil {
		b.Fatal(err)
	}
	p := ddbtest.NewProbe(c)
	p.Answer = func(_ context.Context, op string, in any) (any, bool) {
		switch op {
		case "BatchGetItem":
			return batchOut, true
		case "GetItem":
			switch in.(*dynamodb.GetItemInput).Key["pk"].(*types.AttributeValueMemberS).Value {
			case sessionPK:
				return session, true
			case userKey["pk"].(*types.AttributeValueMemberS).Value:
				return user, true
			}
		}
		return nil, false
	}
	return p
}

// The middleware's own work on the one-round-trip path stays within 20
// allocations per authenticated request (16 today; 18 under -race), with
// the engine's answers replayed so that only the library's work counts. It
// counts allocations, not time, so it holds on any machine.
func TestOwnWorkAllocations(t *testing.T) {
	e := newEnv(t, nil) // not parallel: AllocsPerRun counts the whole process
	alice := e.putUser("alice")
	cookie := e.login(alice)
	sessionKey, userKey := sessionItemKey(cookie.Value), userItemKey(alice)
	batch := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		e.table: {Keys: []map[string]types.AttributeValue{sessionKey, userKey}, ConsistentRead: aws.Bool(true)},
	}}
	cfg := e.cfg
	cfg.Client = replay(t, e.client, batch, sessionKey, userKey, e.table)
	m, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var authenticated bool
	h := m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, authenticated = m.User(r.Context()) }))
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(cookie)
	w := httptest.NewRecorder()
	allocs := testing.AllocsPerRun(1000, func() {
		clear(w.Header())
		h.ServeHTTP(w, r)
	})
	if !authenticated {
		t.Fatal("the request was not authenticated")
	}
	t.Logf("%v allocations per authenticated request", allocs)
	if allocs > 20 {
		t.Errorf("%v allocations per authenticated request, want at most 20", allocs)
	}
}

// BenchmarkDPoPRequest sets a DPoP request (RFC 9449: the proof's parse,
// signature, nonce, replay cache) beside a plain bearer request of the same
// user, each through RequireSession, with the engine's answers replayed
// (own-work) and against the engine, in 3 rounds that alternate the two
// (round=1 bearer, dpop; round=2 ...), so that a machine's drift hits both.
// The client's signing of each proof, ahead, is not timed:
//
//	go test -run '^$' -bench BenchmarkDPoPRequest .
func BenchmarkDPoPRequest(b *testing.B) {
	e := newEnv(b, withDPoP)
	alice := e.putUser("alice")
	plain := e.bearerLogin(alice).Token
	client := newDPoPClient(e.clock)
	bound := client.login(b, e.m, alice)
	client.get(e.m, bound) // takes a nonce; the clock stands still, and so does it
	for round := 1; round <= 3; round++ {
		for _, engine := range []string{"own-work", "engine"} {
			for _, path := range []struct{ name, token string }{{"bearer", plain}, {"dpop", bound}} {
				b.Run(fmt.Sprintf("round=%d/engine=%s/path=%s", round, engine, path.name), func(b *testing.B) {
					cfg := e.cfg
					if engine == "own-work" {
						sessionKey, userKey := sessionItemKey(path.token), userItemKey(alice)
						batch := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
							e.table: {Keys: []map[string]types.AttributeValue{sessionKey, userKey}, ConsistentRead: aws.Bool(true)},
						}}
						cfg.Client = replay(b, e.client, batch, sessionKey, userKey, e.table)
					}
					m, err := ddbsession.New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					h := m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
					scheme := "Bearer "
					if path.name == "dpop" {
						scheme = "DPoP "
					}
					// The client's work, each proof signed ahead, untimed.
					requests := make([]*http.Request, b.N)
					for i := range requests {
						requests[i] = httptest.NewRequest("GET", dpopURL, nil)
						requests[i].Header.Set("Authorization", scheme+path.token)
						if path.name == "dpop" {
							requests[i].Header.Set("DPoP", client.proof("GET", dpopURL, path.token))
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for _, r := range requests {
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Code != http.StatusOK {
							b.Fatalf("status %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
						}
					}
				})
			}
		}
	}
}
