package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/mcphandle"
	"github.com/ddbsession/ddbsession/mcpsession"
)

// appConfig is what the flags set, and what the tests set besides.
type appConfig struct {
	Client      ddbsession.Client // with CreateTable's table methods, as a *dynamodb.Client has them
	Table       string
	IdleTimeout time.Duration
	Now         func() time.Time // nil: time.Now
	// MemoryIdle is how long an idle session stays in this instance's
	// memory (mcp-go's WithSessionIdleTTL); 0 for IdleTimeout.
	MemoryIdle time.Duration
	// HandleIdle is how long an unused handle of 2026-07-28 lives.
	HandleIdle time.Duration
	// Tokens are the static bearer tokens of 2026-07-28, each to its
	// subject.
	Tokens map[string]string
	// Logger logs, handles redacted; nil for slog.Default().
	Logger *slog.Logger
}

// app is one instance of the MCP server.
type app struct {
	handler   http.Handler
	sessions  *mcpsession.Manager
	handles   *mcphandle.Manager[int64]
	transport *server.StreamableHTTPServer
	logger    *slog.Logger
}

// newApp creates the table if it is missing, checks it if it is there, and
// returns an instance of the MCP server. Any number of instances may share
// the table.
func newApp(ctx context.Context, cfg appConfig) (*app, error) {
	logger := mcphandle.Redact(cfg.Logger)
	if logger == nil {
		logger = mcphandle.Redact(slog.Default())
	}
	if cfg.HandleIdle == 0 {
		cfg.HandleIdle = time.Hour
	}
	handles, err := mcphandle.New[int64](handleConfig(cfg, logger))
	if err != nil {
		return nil, err
	}
	sessions, err := mcpsession.New(mcpsession.Config{
		Sessions: ddbsession.Config[struct{}]{
			Client: cfg.Client,
			Table:  cfg.Table,
			Limits: ddbsession.Limits{IdleTimeout: cfg.IdleTimeout},
			Logger: logger,
			Now:    cfg.Now,
		},
		Name: "example",
	})
	if err != nil {
		return nil, err
	}
	if err := sessions.Sessions().CreateTable(ctx); err != nil {
		return nil, err
	}

	// The three pieces of mcpsession's wiring: its hooks on the MCP
	// server, the transport that NewTransport builds (the Manager as its
	// session ID manager resolver, and a logger that shows no session ID,
	// which mcp-go's own would), and its Handler in front of the
	// transport.
	hooks := &server.Hooks{}
	sessions.AddHooks(hooks)
	mcpServer := server.NewMCPServer("example", "1.0.0",
		server.WithHooks(hooks),
		server.WithToolCapabilities(false),
		server.WithLogging(),
	)
	mcpServer.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Answers with its text."),
		mcp.WithString("text", mcp.Required()),
	), echo)
	mcpServer.AddTool(mcp.NewTool("session",
		mcp.WithDescription("What this MCP session holds, on whichever instance serves it."),
	), sessionTool(sessions))
	memoryIdle := cfg.IdleTimeout
	if cfg.MemoryIdle != 0 {
		memoryIdle = cfg.MemoryIdle
	}
	transport := sessions.NewTransport(mcpServer,
		// Drops this instance's memory of sessions idle here; the table
		// keeps them for the other instances.
		server.WithSessionIdleTTL(memoryIdle),
		// Only the protocol versions that have sessions: a client of
		// 2026-07-28 negotiates down.
		server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
	)
	mux := http.NewServeMux()
	// One path for both revisions: 2026-07-28 on the official SDK with
	// handles, 2025-11-25 and before on mcp-go with mcpsession's sessions.
	mux.Handle("/mcp", byRevision(newCurrent(handles, cfg.Tokens, logger), sessions.Handler(transport)))
	return &app{handler: mux, sessions: sessions, handles: handles, transport: transport, logger: logger}, nil
}

func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// sessionInfo is the session tool's answer.
type sessionInfo struct {
	Client    string           `json:"client"`
	Version   string           `json:"clientVersion"`
	Protocol  string           `json:"protocolVersion"`
	LogLevel  mcp.LoggingLevel `json:"logLevel"`
	ID        string           `json:"id"` // the public ID, never the Mcp-Session-Id
	ExpiresAt time.Time        `json:"expiresAt"`
}

// sessionTool answers with what the session holds: mcp-go's own view of
// it, which mcpsession gives every instance, and ddbsession's.
func sessionTool(sessions *mcpsession.Manager) server.ToolHandlerFunc {
	return func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var info sessionInfo
		cs := server.ClientSessionFromContext(ctx)
		if c, ok := cs.(server.SessionWithClientInfo); ok {
			info.Client, info.Version = c.GetClientInfo().Name, c.GetClientInfo().Version
		}
		if l, ok := cs.(server.SessionWithLogging); ok {
			info.LogLevel = l.GetLogLevel()
		}
		info.Protocol = server.RequestProtocolVersion(ctx)
		if s, ok := sessions.Sessions().Session(ctx); ok {
			info.ID, info.ExpiresAt = s.ID, s.ExpiresAt.UTC()
		}
		b, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		return mcp.NewToolResultText(string(b)), nil
	}
}
