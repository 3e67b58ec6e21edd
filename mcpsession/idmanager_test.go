package mcpsession_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/ddbsession/ddbsession/mcpsession"
)

// Session IDs are bearer tokens of the server's user: 26 base32 characters,
// without the server's key, which no request needs (it reads the session
// item alone), whether or not HideUserKey is set; every initialize gets a
// new one.
func TestGenerateIssuesBearerTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		hide   bool
		suffix string
	}{
		{"default", false, ""},
		{"HideUserKey", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			in := e.startWith(wiring{config: func(c *mcpsession.Config) { c.Sessions.Cookie.HideUserKey = tc.hide }})
			seen := map[string]bool{}
			for range 3 {
				id := initializeRaw(t, in)
				token, ok := strings.CutSuffix(id, tc.suffix)
				if !ok || len(token) != 26 || strings.Trim(token, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
					t.Errorf("session ID %q: want 26 base32 characters then %q", id, tc.suffix)
				}
				if seen[id] {
					t.Errorf("session ID %q issued twice", id)
				}
				seen[id] = true
				if code, body := post(t, in, id, callEcho); code != http.StatusOK {
					t.Errorf("tools/call with the new ID: status %d %q", code, body)
				}
			}
			list, err := in.sessions.List(context.Background())
			if err != nil || len(list) != 3 {
				t.Fatalf("List = %v, %v; want 3 sessions", list, err)
			}
			for _, s := range list {
				if !strings.HasPrefix(s.UserAgent, "notes (mcpsession); Go-http-client/") || !slices.Equal(s.Methods, []string{"mcp"}) {
					t.Errorf("listed session: User-Agent %q, methods %q; want the server's name and the client's agent, and [mcp]", s.UserAgent, s.Methods)
				}
			}
		})
	}
}

// An initialize whose session cannot be written fails with a JSON-RPC
// error and no session ID, and the next one, once the store is back, works.
func TestGenerateFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	initializeRaw(t, in) // the server's user item exists
	in.calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "PutItem" {
			return errOutage
		}
		return nil
	}
	c, trans := mcpClient(t, &balancer{target: in})
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "tester", Version: "2.0"}
	if _, err := c.Initialize(context.Background(), req); err == nil || !strings.Contains(err.Error(), "session store is unavailable") {
		t.Errorf("initialize during an outage: %v, want the store's unavailability", err)
	}
	if id := trans.GetSessionId(); id != "" {
		t.Errorf("initialize during an outage issued session ID %q", id)
	}
	if logs := in.logs.String(); !strings.Contains(logs, "issue a session at initialize") || strings.Contains(logs, "ERROR msg=\"mcpsession: mcp-go") {
		t.Errorf("log:\n%s\nwant the failed issue, and nothing about mcp-go's own IDs", logs)
	}
	in.calls.Fail = nil
	c2, _ := mcpClient(t, &balancer{target: in})
	initialize(t, c2)
	if _, err := callTool(c2, "echo", map[string]any{"text": "hi"}); err != nil {
		t.Errorf("after the outage: %v", err)
	}
}

// A DELETE that cannot delete answers 500, and the session lives on.
func TestTerminateFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.start()
	id := initializeRaw(t, in)
	in.calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "DeleteItem" {
			return errOutage
		}
		return nil
	}
	code, body := send(t, in, http.MethodDelete, id, "")
	if code != http.StatusInternalServerError || strings.Contains(body, id[:26]) || !strings.Contains(body, "unavailable") {
		t.Errorf("DELETE during an outage: status %d %q; want 500, saying the store is unavailable, without the ID", code, body)
	}
	in.calls.Fail = nil
	if code, body := post(t, in, id, callEcho); code != http.StatusOK {
		t.Errorf("after the failed DELETE: status %d %q, want the session alive", code, body)
	}
	if logs := in.logs.String(); strings.Contains(logs, id[:26]) {
		t.Errorf("the log holds the session ID:\n%s", logs)
	}
}

// mcp-go terminates every session it holds when its transport shuts down,
// through a session ID manager of no request: that changes nothing in the
// table, and the other instance serves the sessions on.
func TestShutdownLeavesSessionsToOtherInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	lb := &balancer{target: one}
	c, _ := mcpClient(t, lb)
	initialize(t, c)
	one.calls.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := one.transport.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := one.calls.Take(); len(calls) != 0 {
		t.Errorf("Shutdown made DynamoDB calls %v, want none", calls)
	}
	lb.to(two)
	if got := callWhoami(t, c); got.Client.Name != "tester" {
		t.Errorf("whoami on instance 2 after instance 1's shutdown: %+v", got)
	}
}

// A GET opens the session's stream on any instance, and the session mcp-go
// registers for it has the client's state there too.
func TestStreamOnAnotherInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	id := initializeRaw(t, one)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, two.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Mcp-Session-Id", id)
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	// Registration happens before the stream's headers go out.
	got := two.registeredClients()
	cancel()
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("GET on instance 2: status %d, %q; want 200 and a stream", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if diff := cmp.Diff([]string{"raw"}, got); diff != "" {
		t.Errorf("client of the session registered on instance 2 (-want +got):\n%s", diff)
	}
}

// A server wired up wrongly says so at once, in its log, and serves no
// session it cannot share.
func TestMiswiringIsLogged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		w    wiring
		log  string
	}{
		{"no resolver", wiring{noResolver: true}, "mcp-go issued a session ID of its own"},
		{"no hooks", wiring{noHooks: true}, "lacks the Manager's hooks"},
		{"no handler", wiring{noHandler: true}, "did not pass through Manager.Handler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			in := e.startWith(tc.w)
			r, err := http.NewRequest(http.MethodPost, in.url, strings.NewReader(initializeV))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if logs := in.logs.String(); !strings.Contains(logs, tc.log) {
				t.Errorf("log after initialize:\n%s\nwant %q", logs, tc.log)
			}
			if id := res.Header.Get("Mcp-Session-Id"); id != "" && !tc.w.noResolver {
				if code, body := post(t, in, id, callEcho); code != http.StatusNotFound {
					t.Errorf("tools/call with the session: status %d %q, want 404", code, body)
				}
			}
			list, err := in.sessions.List(context.Background())
			if err != nil || len(list) != 0 {
				t.Errorf("List = %v, %v; want no session left", list, err)
			}
		})
	}
}
