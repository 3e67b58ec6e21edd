package mcpsession

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// This file is the top of the request path: the check of a request's
// Mcp-Session-Id, before mcp-go's transport sees the request.

// Handler returns next, the server's streamable HTTP transport (built by
// [Manager.NewTransport]), behind the check of each request's
// Mcp-Session-Id:
//
//	mux.Handle("/mcp", sessions.Handler(sessions.NewTransport(mcpServer)))
//
// A request that carries an ID goes through [ddbsession.Manager.LoadSession],
// with the ID as its bearer credential: one strongly consistent GetItem of
// the session item, the server's version from this instance's copy (see
// Costs in the package documentation), and, once per
// Config.Sessions.Limits.RefreshInterval of the session's use, the refresh
// that moves its expiry forward, after the response. A malformed ID costs
// no call. The session is valid if it is live, the server's, and holds the
// state its initialize stored; mcp-go asks for the verdict through the
// session ID manager, and answers 404 to a POST without one. GET and
// DELETE, which mcp-go does not check, get 404 here for an ID that is not
// valid: 404 is the protocol's answer that tells the client to initialize
// again.
//
// A request without an ID gets 400 here, at no call, as the transport's
// specification asks of a server that requires a session (MCP 2025-11-25,
// Streamable HTTP, Session Management), but for a POST of initialize,
// which goes through to mcp-go to get its session. Requests of protocol
// version 2026-07-28 and later, which have no sessions, and methods the
// transport does not define go through unchecked, at no call.
//
// mcp-go sees the request with the headers it came with, its own
// Authorization and cookies included, which the check leaves alone. A store
// failure fails the request with Config.Sessions.StoreUnavailable (503 by
// default), whatever the method.
func (m *Manager) Handler(next http.Handler) http.Handler {
	checked := m.sessions.LoadSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := requestOf(r.Context())
		if s, ok := m.sessions.Session(r.Context()); ok && s.User == m.server {
			st.state, st.found = decodeState(s.Data)
			st.session = s
		}
		r = r.WithContext(r.Context())
		r.Header = st.header
		switch {
		case r.Method == http.MethodPost:
			next.ServeHTTP(w, r)
			m.checkWiring(r.Context(), st, w.Header()) // an initialize that carried an old ID
		case st.found:
			next.ServeHTTP(w, r)
		default:
			http.Error(w, "Session not found", http.StatusNotFound)
		}
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &request{id: r.Header.Get(server.HeaderKeySessionID), header: r.Header}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
		switch {
		case mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)),
			r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodDelete:
			next.ServeHTTP(w, r)
		case st.id != "":
			// The ID is the session's bearer token, and ddbsession reads
			// it there; the request's own credentials are not its to see.
			r = r.WithContext(r.Context())
			r.Header = http.Header{"Authorization": {"Bearer " + st.id}}
			checked.ServeHTTP(w, r)
		case r.Method == http.MethodPost:
			body, err := readBody(r)
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
			case err != nil:
				http.Error(w, "Bad Request: the request body could not be read", http.StatusBadRequest)
			case !needsNoSession(body):
				http.Error(w, missingIDAnswer, http.StatusBadRequest)
			default:
				next.ServeHTTP(w, r)
				m.checkWiring(r.Context(), st, w.Header())
			}
		default:
			http.Error(w, missingIDAnswer, http.StatusBadRequest)
		}
	})
}

// missingIDAnswer is the answer to a request without the Mcp-Session-Id it
// needs.
const missingIDAnswer = "Bad Request: Mcp-Session-Id header required"

// readBody reads r's body, and gives r a copy of it for mcp-go to read as
// it does (all of it: the app's http.MaxBytesReader bounds both).
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, err
}

// needsNoSession reports whether a POST's body is a message that goes
// without a session: an initialize, or a message of protocol version
// 2026-07-28 or later by its _meta, which mcp-go answers without sessions
// (and refuses if the header does not say so too). It reads the body as
// mcp-go does, with encoding/json into the same fields, so that the two
// agree on what a message is.
func needsNoSession(body []byte) bool {
	var message struct {
		Method mcp.MCPMethod `json:"method"`
	}
	if json.Unmarshal(body, &message) != nil {
		return false
	}
	var era struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	modern := json.Unmarshal(body, &era) == nil && mcp.IsModernProtocol(era.Params.Meta.ProtocolVersion())
	return message.Method == mcp.MethodInitialize || modern
}

// checkWiring logs an initialize that shows the server is not wired up as
// the package documentation says: mcp-go issued an ID of its own, or the
// hook that stores the new session's state never ran, because the
// initialize failed or the hooks are missing. Such a session is ended at
// once: without its state, no instance would serve it.
func (m *Manager) checkWiring(ctx context.Context, st *request, header http.Header) {
	issued := header.Get(server.HeaderKeySessionID)
	switch {
	case issued != "" && issued != st.generated:
		m.logger.ErrorContext(ctx, "mcpsession: mcp-go issued a session ID of its own; build the transport with Manager.NewTransport")
	case st.generated != "" && !st.initialized:
		m.logger.WarnContext(ctx, "mcpsession: an initialize ended without storing its session's state: it failed, or the MCP server lacks the Manager's hooks (Manager.AddHooks); the session is ended")
		m.end(ctx, st.generated)
	}
}
