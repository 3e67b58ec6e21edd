package mcpsession_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/ddbsession/ddbsession/mcpsession"
)

// An initialize whose state cannot be stored ends its session, which no
// instance could serve: the client's next message (its initialized
// notification) gets 404, and the client can initialize again.
func TestStateStoreFailureEndsSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	initializeRaw(t, one) // the server's user item exists
	one.calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateItem" {
			return errOutage
		}
		return nil
	}
	c, _ := mcpClient(t, &balancer{target: one})
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "tester", Version: "2.0"}
	if _, err := c.Initialize(context.Background(), req); !errors.Is(err, transport.ErrSessionTerminated) {
		t.Errorf("initialize whose state was not stored: %v, want transport.ErrSessionTerminated", err)
	}
	one.calls.Fail = nil
	if logs := one.logs.String(); !strings.Contains(logs, "store a new session's state") {
		t.Errorf("log:\n%s\nwant the failed store", logs)
	}
	list, err := one.sessions.List(context.Background())
	if err != nil || len(list) != 1 {
		t.Errorf("List = %v, %v; want the first session alone", list, err)
	}
	c2, _ := mcpClient(t, &balancer{target: two})
	initialize(t, c2)
	if _, err := callTool(c2, "echo", map[string]any{"text": "hi"}); err != nil {
		t.Errorf("a new session after the failure: %v", err)
	}
}

// A level that cannot be stored holds on the instance that set it, and is
// logged; the other instance keeps the stored one.
func TestSetLevelStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	lb := &balancer{target: one}
	c, _ := mcpClient(t, lb)
	initialize(t, c)
	one.calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateItem" {
			return errOutage
		}
		return nil
	}
	//lint:ignore SA1019 logging/setLevel is part of the protocol versions that have sessions.
	if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
		t.Fatalf("setLevel: %v", err)
	}
	one.calls.Fail = nil
	if got := callWhoami(t, c).LogLevel; got != mcp.LoggingLevelWarning {
		t.Errorf("log level on instance 1: %q, want warning", got)
	}
	lb.to(two)
	if got := callWhoami(t, c).LogLevel; got != mcp.LoggingLevelError {
		t.Errorf("log level on instance 2: %q, want mcp-go's default, error, as stored", got)
	}
	if logs := one.logs.String(); !strings.Contains(logs, "holds on this instance only") {
		t.Errorf("log:\n%s\nwant the failed store", logs)
	}
}

// The hooks act on requests through Handler only: the same MCP server
// serves an in-process client as before, with no DynamoDB call.
func TestHooksLeaveOtherTransportsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	calls := newProbe(e.client)
	sessions, err := mcpsession.New(e.config(calls))
	if err != nil {
		t.Fatal(err)
	}
	hooks := &server.Hooks{}
	sessions.AddHooks(hooks)
	c, err := client.NewInProcessClient(newMCPServer(hooks))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	if got := callWhoami(t, c); got.Client.Name != "tester" {
		t.Errorf("whoami in process: %+v", got)
	}
	//lint:ignore SA1019 logging/setLevel is part of the protocol versions that have sessions.
	if err := c.SetLevel(context.Background(), mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatalf("setLevel in process: %v", err)
	}
	if got := calls.Take(); len(got) != 0 {
		t.Errorf("DynamoDB calls %v, want none", got)
	}
}

// A setLevel whose write races a DELETE on another instance writes nothing
// into the ended session: the write is conditional on the session being
// there, and the session stays ended.
func TestSetLevelRacingDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.start(), e.start()
	id := initializeRaw(t, one)
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	two.calls.Before = func(_ context.Context, op string, _ any) {
		if op == "UpdateItem" {
			once.Do(func() {
				close(paused)
				<-resume
			})
		}
	}
	done := make(chan int)
	go func() {
		code, _ := send(t, two, http.MethodPost, id, setLevelInfo)
		done <- code
	}()
	<-paused // instance 2 has checked the session, and is about to store the level
	if code, _ := send(t, one, http.MethodDelete, id, ""); code != http.StatusOK {
		t.Errorf("DELETE on instance 1: status %d", code)
	}
	close(resume)
	if code := <-done; code != http.StatusOK {
		t.Errorf("setLevel on instance 2: status %d, want 200 (its check came first)", code)
	}
	if logs := two.logs.String(); !strings.Contains(logs, "holds on this instance only") {
		t.Errorf("instance 2's log:\n%s\nwant the level's failed store", logs)
	}
	// Of every item, only the server's user item is left: no session
	// item, whole or a fragment of the level's write.
	if items := e.items(); len(items) != 1 || items[0]["mcpServer"] == nil {
		t.Errorf("items after the race: %v, want the server's user item alone", items)
	}
	if code, _ := post(t, two, id, callEcho); code != http.StatusNotFound {
		t.Errorf("the ended session on instance 2: status %d, want 404", code)
	}
}
