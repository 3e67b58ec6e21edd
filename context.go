package ddbsession

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds what the middleware puts in a request's context, and
// the typed accessors that read it back.

// ctxKey keys the request state by its Manager, so that an app with two
// Managers (users and admins, say) never reads one's user through the other.
type ctxKey[U any] struct{ m *Manager[U] }

// requestState is what the middleware puts in the request context.
type requestState[U any] struct {
	sessionState
	user U
}

// sessionState is the request's session, and what UpdateData, Logout and
// Login need of it.
type sessionState struct {
	session Session
	stored  item.Session // the session item as read; zero from NewContext
	dataRev int64        // the data's revision: as read, then as UpdateData wrote it
	apart   bool         // the data lives in its data item (Data reads it)
	loaded  json.RawMessage
}

// setData records data as the session's, at revision rev, apart or not.
func (st *sessionState) setData(data json.RawMessage, rev int64, apart bool) {
	st.dataRev, st.apart, st.loaded, st.session.Data = rev, apart, nil, data
	if apart {
		st.loaded, st.session.Data = data, nil
	}
}

// stored is the session item that RequireSession or LoadSession read in
// r, or the zero item.
func (m *Manager[U]) stored(r *http.Request) item.Session {
	if st, _ := r.Context().Value(ctxKey[U]{m}).(*requestState[U]); st != nil {
		return st.stored
	}
	return item.Session{}
}

// User returns the signed-in user, decoded from its item, that
// [Manager.RequireSession] or [Manager.LoadSession] put in ctx;
// [Session.User] is the item's key.
func (m *Manager[U]) User(ctx context.Context) (U, bool) {
	st, _ := ctx.Value(ctxKey[U]{m}).(*requestState[U])
	if st == nil {
		var zero U
		return zero, false
	}
	return st.user, true
}

// Session returns the session that [Manager.RequireSession] or
// [Manager.LoadSession] put in ctx.
func (m *Manager[U]) Session(ctx context.Context) (Session, bool) {
	st, _ := ctx.Value(ctxKey[U]{m}).(*requestState[U])
	if st == nil {
		return Session{}, false
	}
	return st.session, true
}

// NewContext returns ctx carrying s and u as [Manager.RequireSession]
// puts them there, for handler unit tests, which then need no DynamoDB:
//
//	r = r.WithContext(sessions.NewContext(r.Context(), ddbsession.Session{ID: "test"}, User{Name: "alice"}))
//	handler.ServeHTTP(w, r)
func (m *Manager[U]) NewContext(ctx context.Context, s Session, u U) context.Context {
	return context.WithValue(ctx, ctxKey[U]{m}, &requestState[U]{sessionState: sessionState{session: s}, user: u})
}
