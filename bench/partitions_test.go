package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/mcpsession"
)

// The partition-limit simulation of issue 28: web users and MCP clients
// at the scaled equivalent of 20,000 authenticated requests a second, with
// logins, refreshes, Lists and RevokeAlls among them, through
// ddbtest.Partitions, which holds every partition key to DynamoDB's 3,000
// read and 1,000 write units a second divided by loadScale, on a virtual
// clock. With mcpsession as it is, no call is throttled; with the wiring
// where every MCP request read the server's user item, it is.

// The load, in DynamoDB's units of time: per real second, before the
// scale. Divided by loadScale, it runs on one engine in a few seconds.
const (
	loadScale = 100 // every partition key: 30 read and 10 write units a second

	webRequests = 15_000 // authenticated requests a second, over the web users
	mcpRequests = 5_000  // and over the MCP clients
	logins      = 200    // a second, of web users
	lists       = 200
	revokeAlls  = 50

	webUsers   = 100
	mcpClients = 20

	loadSeconds = 3                      // of virtual time
	loadTick    = 100 * time.Millisecond // the clock moves by this between batches
)

// loadStart is the virtual clock's start.
var loadStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// mcpWiring is how the load's MCP clients are served.
type mcpWiring int

const (
	// mcpPerInstance is mcpsession itself: a request reads its session
	// item, and each instance its copy of the server's version.
	mcpPerInstance mcpWiring = iota
	// mcpSharedUserItem is the wiring before issue 28: bearer sessions of
	// one user item, which every request reads with its session, in one
	// BatchGetItem (ddbsession's default Config, every session under the
	// server's UserKey).
	mcpSharedUserItem
)

// loadResult is what one run of the load saw.
type loadResult struct {
	requests, web, mcp     int // authenticated requests served, of each kind
	failed                 int // authenticated requests answered 5xx
	logins, lists, revokes int
	usage                  ddbtest.Usage
	virtual, real          time.Duration
	oneMCP                 ddbtest.Usage // one MCP request, alone, after the run
	oneInitialize          ddbtest.Usage // and one initialize, with its notifications/initialized
}

// TestPartitionLoad: at the scaled 20,000 authenticated requests a second,
// with mcpsession's per-instance copy, no partition key is throttled.
func TestPartitionLoad(t *testing.T) {
	t.Parallel()
	res := runPartitionLoad(t, mcpPerInstance)
	if res.usage.Throttled != 0 || res.usage.Unprocessed != 0 {
		t.Errorf("%d calls throttled and %d keys left unprocessed, want none: by key %v", res.usage.Throttled, res.usage.Unprocessed, res.usage.ThrottledKeys)
	}
	if res.failed != 0 {
		t.Errorf("%d of %d authenticated requests failed", res.failed, res.requests)
	}
	server := res.usage.Keys[serverKeyName(t)]
	// Each MCP instance reads the server's user item once on its first
	// request, and again once per RevokeEveryoneWithin of the machine's
	// time: a few units, against 3 a request.
	if server.ReadUnits > 10 {
		t.Errorf("the server's user item was read for %v units in %d MCP requests, want its per-instance reads alone", server.ReadUnits, res.mcp)
	}
	if one := res.oneMCP; one.Calls["GetItem"] != 1 || len(one.Calls) != 1 || one.ReadUnits != 1 || one.WriteUnits != 0 {
		t.Errorf("an MCP request cost %v calls, %v read and %v write units; want 1 GetItem of its session, 1 read unit", one.Calls, one.ReadUnits, one.WriteUnits)
	}
	init := res.oneInitialize
	t.Logf("an initialize: %v calls, %v read and %v write units; the server's user item %+v", init.Calls, init.ReadUnits, init.WriteUnits, init.Keys[serverKeyName(t)])
	if reads := init.Keys[serverKeyName(t)].ReadUnits; reads > 1 {
		t.Errorf("an initialize read the server's user item for %v units, more than once", reads)
	}
}

// TestPartitionLoadSharedServerItem is the regression test of the wiring
// issue 28 replaced: every MCP request reads the server's user item, so
// the fleet's 5,000 requests a second meet that item's 3,000 read units,
// and requests fail.
func TestPartitionLoadSharedServerItem(t *testing.T) {
	t.Parallel()
	res := runPartitionLoad(t, mcpSharedUserItem)
	hot := serverKeyName(t)
	if res.usage.Throttled+res.usage.Unprocessed == 0 {
		t.Fatalf("no call throttled: the shared server user item held %v read units over %v", res.usage.Keys[hot].ReadUnits, res.virtual)
	}
	var elsewhere []string
	for key := range res.usage.ThrottledKeys {
		if key != hot && res.usage.ThrottledKeys[key] > 0 {
			elsewhere = append(elsewhere, key)
		}
	}
	if len(elsewhere) > 0 {
		t.Errorf("throttled beside the server's user item: %v", elsewhere)
	}
	if res.failed == 0 {
		t.Error("no MCP request failed: the throttle went unseen")
	}
	if one := res.oneMCP; one.Calls["BatchGetItem"] != 1 || len(one.Calls) != 1 || one.ReadUnits != 2 {
		t.Errorf("an MCP request cost %v calls and %v read units; want 1 BatchGetItem of its session and the server's user item, 2 read units", one.Calls, one.ReadUnits)
	}
}

// serverKeyName is the front's name of the server user item's partition
// key in the load's table.
func serverKeyName(t *testing.T) string {
	return loadTables[t.Name()] + " S:" + mcpServerKey.PK
}

var (
	loadTablesMu sync.Mutex
	loadTables   = map[string]string{}
)

// mcpServerKey is the MCP server's user item: mcpsession's default for a
// server named "notes", and the one user of the shared wiring.
var mcpServerKey = ddbsession.UserKey{PK: "MCPSERVER#notes", SK: "MCPSERVER"}

// loadUser is a web user of the load.
type loadUser struct {
	key    ddbsession.UserKey
	cookie *http.Cookie // nil once a RevokeAll ended it: the next request logs in
}

// mcpClient is an MCP client of the load: its session ID.
type mcpClient struct{ id string }

func runPartitionLoad(t *testing.T, wiring mcpWiring) loadResult {
	t.Helper()
	ctx := context.Background()
	engine := ddbtest.Client(t)
	table := ddbtest.TableName(t, engine)
	loadTablesMu.Lock()
	loadTables[t.Name()] = table
	loadTablesMu.Unlock()
	front := ddbtest.NewPartitions(engine, loadScale, loadStart)
	setup := engine // setting up goes around the front
	logger := slog.New(slog.DiscardHandler)
	limits := ddbsession.Limits{
		IdleTimeout:     time.Hour,
		RefreshInterval: 2 * time.Second, // of virtual time: refreshes within the run
		StoreTimeout:    time.Minute,     // a busy machine is no store fault
	}
	web := func(client ddbtest.Engine) *ddbsession.Manager[struct{}] {
		m, err := ddbsession.New(ddbsession.Config[struct{}]{Client: client, Table: table, Limits: limits, Now: front.Now, Logger: logger, WriteBeforeResponse: true})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	admin := web(setup)
	if err := admin.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	users := make([]*loadUser, webUsers)
	for i := range users {
		key := ddbsession.UserKey{PK: fmt.Sprintf("USER#%d", i), SK: "PROFILE"}
		if err := admin.CreateUser(ctx, map[string]string{"pk": key.PK, "sk": key.SK}); err != nil {
			t.Fatal(err)
		}
		users[i] = &loadUser{key: key, cookie: webLogin(t, admin, key)}
	}
	// Four web instances and two MCP instances, each a Manager of its own.
	webInstances := []*ddbsession.Manager[struct{}]{web(front), web(front), web(front), web(front)}
	var mcpHandlers []http.Handler
	clients := make([]*mcpClient, mcpClients)
	switch wiring {
	case mcpPerInstance:
		newMCP := func(client ddbtest.Engine) http.Handler {
			m, err := mcpsession.New(mcpsession.Config{
				Sessions: ddbsession.Config[struct{}]{Client: client, Table: table, Limits: limits, Now: front.Now, Logger: logger, WriteBeforeResponse: true},
				Name:     "notes",
			})
			if err != nil {
				t.Fatal(err)
			}
			hooks := &server.Hooks{}
			m.AddHooks(hooks)
			transport := m.NewTransport(server.NewMCPServer("notes", "1.0.0", server.WithHooks(hooks)),
				server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...))
			return m.Handler(transport)
		}
		initializer := newMCP(setup)
		for i := range clients {
			clients[i] = &mcpClient{id: mcpInitialize(t, initializer, i)}
		}
		mcpHandlers = []http.Handler{newMCP(front), newMCP(front)}
	case mcpSharedUserItem:
		shared := func(client ddbtest.Engine) *ddbsession.Manager[struct{}] {
			m, err := ddbsession.New(ddbsession.Config[struct{}]{Client: client, Table: table, Limits: limits, Now: front.Now, Logger: logger, BearerTokens: true, WriteBeforeResponse: true})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		issuer := shared(setup)
		if err := issuer.CreateUser(ctx, map[string]string{"pk": mcpServerKey.PK, "sk": mcpServerKey.SK, "mcpServer": "notes"}); err != nil {
			t.Fatal(err)
		}
		for i := range clients {
			token, _, err := issuer.LoginBearer(httptest.NewRequest("POST", "https://mcp.example.test/mcp", nil), mcpServerKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			clients[i] = &mcpClient{id: token}
		}
		for range 2 {
			m := shared(front)
			mcpHandlers = append(mcpHandlers, m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
			})))
		}
	}

	// The run: per tick, each kind's share of the scaled rates, at once.
	began := time.Now()
	rng := rand.New(rand.NewPCG(28, 28))
	perTick := func(perSecond int) float64 { return float64(perSecond) / loadScale * loadTick.Seconds() }
	var res loadResult
	var owed [5]float64 // fractions of an operation carried to the next tick
	take := func(i int, perSecond int) int {
		owed[i] += perTick(perSecond)
		n := int(owed[i])
		owed[i] -= float64(n)
		return n
	}
	var mu sync.Mutex
	userLocks := make([]sync.Mutex, len(users)) // a browser sends its requests in turn
	ticks := int(loadSeconds * time.Second / loadTick)
	for range ticks {
		var jobs []func()
		for range take(0, webRequests) {
			i := rng.IntN(len(users))
			inst := webInstances[rng.IntN(len(webInstances))]
			jobs = append(jobs, func() {
				userLocks[i].Lock()
				defer userLocks[i].Unlock()
				u := users[i]
				if u.cookie == nil { // revoked: the user signs in again
					u.cookie = webLogin(t, inst, u.key)
					mu.Lock()
					res.logins++
					mu.Unlock()
				}
				code := webRequest(inst, u.cookie)
				mu.Lock()
				defer mu.Unlock()
				res.requests++
				res.web++
				if code >= 500 {
					res.failed++
				} else if code != http.StatusOK {
					t.Errorf("web user %d: status %d", i, code)
				}
			})
		}
		for range take(1, mcpRequests) {
			c := clients[rng.IntN(len(clients))]
			h := mcpHandlers[rng.IntN(len(mcpHandlers))]
			jobs = append(jobs, func() {
				code := mcpPing(h, c.id, wiring)
				mu.Lock()
				defer mu.Unlock()
				res.requests++
				res.mcp++
				if code >= 500 {
					res.failed++
				} else if code != http.StatusOK {
					t.Errorf("MCP client: status %d", code)
				}
			})
		}
		for range take(2, logins) {
			i := rng.IntN(len(users))
			inst := webInstances[rng.IntN(len(webInstances))]
			jobs = append(jobs, func() {
				userLocks[i].Lock()
				defer userLocks[i].Unlock()
				users[i].cookie = webLogin(t, inst, users[i].key)
				mu.Lock()
				defer mu.Unlock()
				res.logins++
			})
		}
		for range take(3, lists) {
			u := users[rng.IntN(len(users))]
			inst := webInstances[rng.IntN(len(webInstances))]
			jobs = append(jobs, func() {
				if _, err := inst.List(ctx, u.key); err != nil {
					t.Errorf("List: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				res.lists++
			})
		}
		for range take(4, revokeAlls) {
			i := rng.IntN(len(users))
			inst := webInstances[rng.IntN(len(webInstances))]
			jobs = append(jobs, func() {
				userLocks[i].Lock()
				defer userLocks[i].Unlock()
				if err := inst.RevokeAll(ctx, users[i].key); err != nil {
					t.Errorf("RevokeAll: %v", err)
				}
				users[i].cookie = nil
				mu.Lock()
				defer mu.Unlock()
				res.revokes++
			})
		}
		runAll(jobs, 8)
		front.Advance(loadTick)
	}
	res.virtual = time.Duration(ticks) * loadTick
	res.usage = front.Take()
	res.real = time.Since(began)

	// One MCP request alone, a second later, on a session whose refresh
	// the request before it took care of.
	front.Advance(time.Second)
	mcpPing(mcpHandlers[0], clients[0].id, wiring)
	front.Take()
	if code := mcpPing(mcpHandlers[0], clients[0].id, wiring); code != http.StatusOK {
		t.Errorf("one MCP request: status %d", code)
	}
	res.oneMCP = front.Take()
	if wiring == mcpPerInstance {
		mcpInitialize(t, mcpHandlers[0], len(clients))
		res.oneInitialize = front.Take()
	}
	wantRequests := (webRequests + mcpRequests) / loadScale * loadSeconds
	if res.requests != wantRequests {
		t.Errorf("%d authenticated requests in %v of virtual time, want %d: the scaled %d a second", res.requests, res.virtual, wantRequests, webRequests+mcpRequests)
	}
	hottest, hot := "", ddbtest.KeyUsage{}
	for k, v := range res.usage.Keys {
		if v.ReadUnits > hot.ReadUnits {
			hottest, hot = k, v
		}
	}
	t.Logf("%d authenticated requests (%d web, %d MCP; %d failed), %d logins, %d Lists, %d RevokeAlls in %v of virtual time: "+
		"%.0f a second, the scaled %d; %v read and %v write units (%v index); %d calls throttled, %d keys unprocessed; "+
		"the hottest partition key %q read %.1f units a second of its %d; %v of real time",
		res.requests, res.web, res.mcp, res.failed, res.logins, res.lists, res.revokes, res.virtual,
		float64(res.requests)/res.virtual.Seconds(), (webRequests+mcpRequests)/loadScale,
		res.usage.ReadUnits, res.usage.WriteUnits, res.usage.IndexWriteUnits, res.usage.Throttled, res.usage.Unprocessed,
		hottest, hot.ReadUnits/res.virtual.Seconds(), ddbtest.PartitionReadUnits/loadScale, res.real.Round(time.Millisecond))
	return res
}

// runAll runs jobs, workers at a time, and waits for them.
func runAll(jobs []func(), workers int) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
				jobs[i]()
			}
		})
	}
	wg.Wait()
}

// webLogin signs key in through m and returns the session cookie.
func webLogin(t *testing.T, m *ddbsession.Manager[struct{}], key ddbsession.UserKey) *http.Cookie {
	t.Helper()
	w := httptest.NewRecorder()
	if err := m.Login(w, httptest.NewRequest("POST", "https://app.example.test/login", nil), key, nil); err != nil {
		t.Fatalf("Login: %v", err)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == "__Host-session" {
			return c
		}
	}
	t.Fatal("Login set no session cookie")
	return nil
}

// webRequest is one authenticated request with c, through m's
// RequireSession; its status.
func webRequest(m *ddbsession.Manager[struct{}], c *http.Cookie) int {
	r := httptest.NewRequest("GET", "https://app.example.test/", nil)
	r.AddCookie(c)
	w := httptest.NewRecorder()
	m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
	return w.Code
}

const mcpProtocol = "2025-06-18"

// mcpPost posts a JSON-RPC message to h, with session id if not "".
func mcpPost(h http.Handler, id, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "https://mcp.example.test/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		r.Header.Set(server.HeaderKeySessionID, id)
		r.Header.Set(mcp.HeaderProtocolVersion, mcpProtocol)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// mcpInitialize opens MCP client i's session through h and returns its ID.
func mcpInitialize(t *testing.T, h http.Handler, i int) string {
	t.Helper()
	w := mcpPost(h, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"client-%d","version":"1.0"}}}`, mcpProtocol, i))
	id := w.Header().Get(server.HeaderKeySessionID)
	if w.Code != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q, body %q", w.Code, id, w.Body)
	}
	if w := mcpPost(h, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); w.Code >= 300 {
		t.Fatalf("notifications/initialized: status %d, body %q", w.Code, w.Body)
	}
	return id
}

// mcpPing is one MCP request of the client with session id, through h;
// its status, 200 only for a JSON-RPC answer without an error.
func mcpPing(h http.Handler, id string, wiring mcpWiring) int {
	var w *httptest.ResponseRecorder
	if wiring == mcpSharedUserItem {
		r := httptest.NewRequest("POST", "https://mcp.example.test/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
		r.Header.Set("Authorization", "Bearer "+id)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
	} else {
		w = mcpPost(h, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	}
	if w.Code != http.StatusOK {
		return w.Code
	}
	var answer struct {
		Result json.RawMessage
		Error  *struct{ Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer.Error != nil || answer.Result == nil {
		return http.StatusBadGateway
	}
	return w.Code
}
