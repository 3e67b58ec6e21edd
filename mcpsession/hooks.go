package mcpsession

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// This file is the MCP server's hooks: storing what initialize settled,
// giving it back to the session mcp-go makes for each request, and keeping
// the log level.

// AddHooks adds the Manager's hooks to h, which the MCP server must be
// built with (server.WithHooks(h)); hooks of the app's own may come before
// or after. They act only on requests that came through [Manager.Handler],
// so a server that also serves stdio or in-process clients keeps them.
//
//   - After initialize, the new session's state (see [State]) is stored in
//     its data, before the response goes out: one strongly consistent read
//     of the new session and one conditional UpdateItem. If that fails, or
//     the state does not fit, the session is ended, and the client's next
//     message (mcp-go's client: the initialized notification, so that
//     Initialize fails) gets 404. An initialize whose session ID could not
//     be issued fails with a JSON-RPC error.
//   - Before every request (not notifications), and when a GET opens a
//     stream, the state the check read with the session goes into the
//     ClientSession that mcp-go made for the request, at no call: the
//     client info, capabilities and protocol version where this instance
//     has none (on every instance but the one that served initialize), and
//     the log level whenever it differs. So server.ClientSessionFromContext
//     and server.RequestProtocolVersion answer on every instance as on that
//     one.
//   - After logging/setLevel, the new level is stored: one conditional
//     UpdateItem, none if it is the level stored already.
func (m *Manager) AddHooks(h *server.Hooks) {
	h.AddOnRequestInitialization(m.beforeRequest)
	h.AddOnRegisterSession(m.registered)
	h.AddAfterInitialize(m.afterInitialize)
	h.AddAfterSetLevel(m.afterSetLevel)
}

// errNoSessionIssued fails an initialize whose Generate failed.
var errNoSessionIssued = errors.New("the session store is unavailable, try again")

func (m *Manager) beforeRequest(ctx context.Context, _ any, _ any) error {
	st := requestOf(ctx)
	switch {
	case st == nil:
	case st.generateErr != nil:
		return errNoSessionIssued
	case st.found:
		restore(server.ClientSessionFromContext(ctx), st.state)
	}
	return nil
}

func (m *Manager) registered(ctx context.Context, cs server.ClientSession) {
	if st := requestOf(ctx); st != nil && st.found && cs.SessionID() == st.id {
		restore(cs, st.state)
	}
}

func (m *Manager) afterInitialize(ctx context.Context, _ any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
	st := requestOf(ctx)
	if st == nil || st.generated == "" {
		return
	}
	st.initialized = true
	s := State{
		ProtocolVersion:    res.ProtocolVersion,
		ClientInfo:         req.Params.ClientInfo,
		ClientCapabilities: req.Params.Capabilities,
	}
	if err := m.storeState(ctx, st.generated, s); err != nil {
		m.logger.ErrorContext(ctx, "mcpsession: store a new session's state; the session is ended, and the client must initialize again", "err", err)
		m.end(ctx, st.generated)
	}
}

func (m *Manager) afterSetLevel(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
	st := requestOf(ctx)
	if st == nil || !st.found {
		return
	}
	err := m.sessions.UpdateData(ctx, func(data json.RawMessage) (any, error) {
		s, ok := decodeState(data)
		if !ok {
			return nil, errNoState
		}
		s.LogLevel = req.Params.Level
		return encodeState(s)
	})
	if err != nil {
		m.logger.WarnContext(ctx, "mcpsession: store the session's log level; it holds on this instance only", "sid", st.session.ID, "err", err)
	}
}

// restore gives cs, the session mcp-go made for a request, the state that
// this instance may not know.
func restore(cs server.ClientSession, s State) {
	if c, ok := cs.(server.SessionWithClientInfo); ok && c.GetClientInfo().Name == "" {
		c.SetClientInfo(s.ClientInfo)
		c.SetClientCapabilities(s.ClientCapabilities)
	}
	if v, ok := cs.(protocolVersionSetter); ok && v.ProtocolVersion() == "" {
		v.SetProtocolVersion(s.ProtocolVersion)
	}
	if l, ok := cs.(server.SessionWithLogging); ok && s.LogLevel != "" && l.GetLogLevel() != s.LogLevel {
		l.SetLogLevel(s.LogLevel)
	}
}

// protocolVersionSetter is the part of mcp-go's streamable HTTP sessions
// that its initialize handler sets the negotiated version through.
type protocolVersionSetter interface {
	server.SessionWithProtocolVersion
	SetProtocolVersion(string)
}
