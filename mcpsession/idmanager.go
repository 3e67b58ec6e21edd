package mcpsession

import (
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/server"
)

// This file is mcp-go's session ID manager: issuing IDs at initialize,
// and the verdict on and the end of the ID that Handler checked.

// ResolveSessionIdManager returns the session ID manager for one request,
// and makes Manager a server.SessionIdManagerResolver, which
// [Manager.NewTransport] makes the transport's. The manager it returns
// (mcp-go's server.SessionIdManager) works on what [Manager.Handler] found
// out about the request, and makes no call but these:
//
//   - Generate, at initialize, signs the server's user in with
//     [ddbsession.Manager.LoginBearer] on a request of its own, and returns
//     the bearer token as the new Mcp-Session-Id: 130 random bits (26
//     base32 characters). The table holds only its SHA-256.
//     It issues none ("") for a store failure, and the hook then fails the
//     initialize.
//   - Validate makes no call: it reports the verdict of Handler's check.
//   - Terminate, for DELETE, ends the checked session with
//     [ddbsession.Manager.Logout] (two DeleteItems), on every instance.
//
// mcp-go also resolves a manager without a request (nil r): to terminate
// every session when the transport shuts down (Shutdown, CloseSessions),
// and those idle on this instance (WithSessionIdleTTL). That manager
// changes nothing in the table, so that the other instances serve those
// sessions on; mcp-go drops only this instance's memory of them.
//
// A transport given the Manager with server.WithSessionIdManagerResolver
// rather than built by NewTransport keeps mcp-go's own logger, which logs
// session IDs; the Manager says so in its log, once.
func (m *Manager) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	m.unsafeTransport.Do(func() {
		m.logger.Error("mcpsession: the transport has the Manager as its session ID manager resolver, but was not built by Manager.NewTransport: mcp-go's own logger logs session IDs, which are bearer tokens; build the transport with Manager.NewTransport")
	})
	return m.resolve(r)
}

// resolve returns the session ID manager for r, or for no request.
func (m *Manager) resolve(r *http.Request) server.SessionIdManager {
	if r == nil {
		return detached{}
	}
	return &idManager{m: m, r: r, st: requestOf(r.Context())}
}

// Validate's errors, which mcp-go answers with 404 and does not show.
var (
	errUnknownSession    = errors.New("mcpsession: no such session")
	errNotThroughHandler = errors.New("mcpsession: the request did not pass through Manager.Handler")
)

// errTerminate is Terminate's error, which mcp-go shows the client.
var errTerminate = errors.New("the session store is unavailable, try again")

// idManager is the session ID manager of one request.
type idManager struct {
	m  *Manager
	r  *http.Request
	st *request // nil for a request that bypassed Handler
}

var _ server.SessionIdManager = (*idManager)(nil)

// Generate issues a session ID at initialize; see ResolveSessionIdManager.
func (im *idManager) Generate() string {
	if im.st == nil {
		im.m.logger.ErrorContext(im.r.Context(), errNotThroughHandler.Error()+"; no session issued")
		return ""
	}
	if im.r.Method != http.MethodPost {
		return "" // mcp-go's ID for a GET without one; Handler refuses those
	}
	token, err := im.m.login(im.r.Context(), im.r.UserAgent())
	if err != nil {
		im.m.logger.ErrorContext(im.r.Context(), "mcpsession: issue a session at initialize", "err", err)
		im.st.generateErr = err
		return ""
	}
	im.st.generated = token
	return token
}

// Validate reports whether id is the live session that Handler checked.
func (im *idManager) Validate(id string) (isTerminated bool, err error) {
	switch {
	case im.st == nil:
		im.m.logger.ErrorContext(im.r.Context(), errNotThroughHandler.Error()+"; every session is refused")
		return false, errNotThroughHandler
	case !im.st.found || id != im.st.id:
		return false, errUnknownSession
	}
	return false, nil
}

// Terminate ends the session that Handler checked, for DELETE; an ID that
// is not a valid session has nothing to end (Handler answered 404 to it).
func (im *idManager) Terminate(id string) (isNotAllowed bool, err error) {
	if im.st == nil || !im.st.found || id != im.st.id {
		return false, nil
	}
	if err := im.m.logout(im.r.Context(), id); err != nil {
		im.m.logger.ErrorContext(im.r.Context(), "mcpsession: terminate a session", "sid", im.st.session.ID, "err", err)
		return false, errTerminate
	}
	return false, nil
}

// detached is the session ID manager of no request: see
// ResolveSessionIdManager.
type detached struct{}

func (detached) Generate() string                                { return "" }
func (detached) Validate(string) (isTerminated bool, err error)  { return false, errUnknownSession }
func (detached) Terminate(string) (isNotAllowed bool, err error) { return false, nil }
