package mcpsession

import (
	"net/http"

	"github.com/mark3labs/mcp-go/server"
)

// This file is the transport's wiring, done once at start-up: the Manager
// as its session ID manager resolver, and a logger that shows no session
// ID.

// NewTransport returns mcp-go's streamable HTTP transport for mcpServer,
// wired to this Manager, for [Manager.Handler] to stand in front of:
//
//   - the Manager is its session ID manager resolver
//     (server.WithSessionIdManagerResolver; see
//     [Manager.ResolveSessionIdManager]);
//   - its logger is Config.Sessions.Logger (slog.Default() if nil) behind
//     [RedactSessionIDs]. mcp-go's own, slog.Default(), logs session IDs,
//     which are the sessions' bearer tokens: at Info when
//     server.WithSessionIdleTTL drops a session from this instance's
//     memory, and when the transport shuts down, or a sampling answer
//     comes in.
//
// opts are the transport's other options, such as
// server.WithSessionIdleTTL and
// server.WithStreamableHTTPProtocolVersions; the two above come after
// them, and so win over any session ID manager or logger among them.
func (m *Manager) NewTransport(mcpServer *server.MCPServer, opts ...server.StreamableHTTPOption) *server.StreamableHTTPServer {
	opts = append(opts[:len(opts):len(opts)],
		server.WithSessionIdManagerResolver(transportResolver{m}),
		server.WithStreamableHTTPLogger(RedactSessionIDs(m.logger)),
	)
	return server.NewStreamableHTTPServer(mcpServer, opts...)
}

// transportResolver is the Manager as the resolver of a transport that
// NewTransport built, which needs no warning.
type transportResolver struct{ m *Manager }

func (tr transportResolver) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	return tr.m.resolve(r)
}
