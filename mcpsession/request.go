package mcpsession

import (
	"context"
	"net/http"

	"github.com/ddbsession/ddbsession"
)

// This file is what one HTTP request knows of its MCP session, which the
// handler finds out and the session ID manager and the hooks read. mcp-go
// calls both on the request's own goroutine, one after the other, so the
// request needs no lock.

// ctxKey is the request context's key for the request's *request.
type ctxKey struct{}

// request is one HTTP request's MCP session.
type request struct {
	// id is the request's Mcp-Session-Id header, "" for none.
	id string
	// header is the request's own header, which the handler gives mcp-go
	// back after the session check saw the ID as a bearer credential.
	header http.Header

	// found says that id is a live session of this server with its state
	// stored, which the session and state below are.
	found   bool
	session ddbsession.Session
	state   State

	// generated is the session ID that Generate issued in this request
	// (an initialize), and generateErr why it issued none. initialized
	// says that the initialize's hook ran, to store the session's state.
	generated   string
	generateErr error
	initialized bool
}

// requestOf returns the request that ctx is part of, or nil for a context
// that did not pass through [Manager.Handler] (another transport's, or
// none).
func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(ctxKey{}).(*request)
	return r
}
