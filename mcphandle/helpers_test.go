package mcphandle_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/mcphandle"
)

func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }

const (
	idle    = time.Hour
	refresh = 10 * time.Minute
)

// env is one table, with one clock, that instances of a server share
// through a counting client.
type env struct {
	t      testing.TB
	client *dynamodb.Client
	table  string
	clock  *ddbtest.Clock
	calls  *ddbtest.Probe
	// written are the partition keys of the writes since the last take.
	mu      sync.Mutex
	written []string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	client := ddbsessiontest.Client(t)
	e := &env{t: t, client: client, table: ddbsessiontest.TableName(t, client), clock: ddbtest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))}
	e.calls = ddbtest.NewProbe(client)
	e.calls.Before = func(_ context.Context, _ string, in any) {
		var item map[string]types.AttributeValue
		switch in := in.(type) {
		case *dynamodb.PutItemInput:
			item = in.Item
		case *dynamodb.UpdateItemInput:
			item = in.Key
		case *dynamodb.DeleteItemInput:
			item = in.Key
		default:
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.written = append(e.written, item["pk"].(*types.AttributeValueMemberS).Value)
	}
	m := e.manager()
	if err := m.Sessions().CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.take()
	return e
}

// manager is an instance of the server.
func (e *env) manager() *mcphandle.Manager[int] {
	e.t.Helper()
	m, err := mcphandle.New[int](mcphandle.Config{
		Sessions: ddbsession.Config[struct{}]{
			Client: e.calls, Table: e.table, Now: e.clock.Now,
			Limits: ddbsession.Limits{IdleTimeout: idle, RefreshInterval: refresh},
			Logger: slog.New(slog.DiscardHandler), // dynalite has no TTL; CreateTable's warning is expected
		},
		CreateUsers: true,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := m.Sessions().Wait(context.Background()); err != nil {
			e.t.Error(err)
		}
	})
	return m
}

// take returns the calls and the written partition keys since the last
// take, once the managers' refreshes are done.
func (e *env) take(ms ...*mcphandle.Manager[int]) (map[string]int, []string) {
	e.t.Helper()
	for _, m := range ms {
		if err := m.Sessions().Wait(context.Background()); err != nil {
			e.t.Fatal(err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	written := e.written
	e.written = nil
	return e.calls.Take(), written
}

// request is a tools/call of subject's, through client, as the SDK hands
// it to a tool behind auth.RequireBearerToken; "" for no caller.
func request(subject, client string) *mcp.CallToolRequest {
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "tool", Meta: mcp.Meta{
		mcp.MetaKeyProtocolVersion:         "2026-07-28",
		mcp.MetaKeyClientInfo:              map[string]any{"name": "test-client", "version": "1.0"},
		"io.modelcontextprotocol/logLevel": "warning", // mcp.MetaKeyLogLevel, deprecated
	}}, Extra: &mcp.RequestExtra{}}
	if subject != "" {
		req.Extra.TokenInfo = &auth.TokenInfo{UserID: subject, Extra: map[string]any{"client_id": client}}
	}
	return req
}

func open(t testing.TB, m *mcphandle.Manager[int], req *mcp.CallToolRequest, data int) string {
	t.Helper()
	h, err := m.Open(context.Background(), req, data)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return h
}

func httpRequest() (*http.Request, error) {
	return http.NewRequest(http.MethodPost, "/", nil)
}
