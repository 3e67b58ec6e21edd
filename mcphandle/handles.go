package mcphandle

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// ErrNoHandle is the one answer to a handle that is not a live handle of
// the request's caller: another caller's, made up, malformed, expired,
// closed or revoked. Its text tells none of them apart; a tool returns it
// as its error, which the SDK sends as the tool's error result.
var ErrNoHandle = errors.New("no such handle: open a new one")

// errNoCaller is a request without an authenticated caller: the server is
// not behind auth.RequireBearerToken, or its verifier sets no UserID.
var errNoCaller = errors.New("mcphandle: the request has no authenticated caller (auth.RequireBearerToken in front, and a TokenVerifier that sets TokenInfo.UserID)")

// errUnavailable is a store failure while a handle was checked; the
// failure itself is logged by ddbsession.
var errUnavailable = errors.New("mcphandle: the handle store is unavailable; try again")

// Config configures a [Manager]. Sessions.Client and Sessions.Table have
// no default; [New] fills in the rest once.
type Config struct {
	// Sessions configures the ddbsession Manager that keeps the handles,
	// bearer sessions of their callers' user items: Client, Table and
	// Layout as for any Manager on the table (the app's own, where its
	// users are), and in Limits the handles' lifetimes: IdleTimeout is how
	// long an unused handle lives, RefreshInterval how often, at most, its
	// use moves its expiry forward (by default ddbsession's 24 hours and
	// IdleTimeout/24). OnEvent, Logger and Now work as they do there. New
	// turns BearerTokens on, the security history off (a handle is no
	// sign-in), and sets StoreUnavailable; it refuses
	// Limits.MaxSessions, which would count the caller's other sessions,
	// and end them to open handles.
	Sessions ddbsession.Config[struct{}]

	// Caller returns who a request's bearer token belongs to, as the SDK's
	// auth layer presents it. Default [DefaultCaller].
	Caller func(*auth.TokenInfo) (Caller, error)

	// CreateUsers makes Open create the user item of a caller who has none
	// ([ddbsession.Manager.CreateUser] of its key alone). Off, such a
	// caller's Open fails with [ddbsession.ErrUserNotFound]: the app makes
	// its users.
	CreateUsers bool
}

// A Caller is the authenticated principal a handle is bound to.
type Caller struct {
	// User is the caller's user item: RevokeAll of it ends every handle of
	// theirs, and List lists them.
	User ddbsession.UserKey
	// Client is the OAuth client the caller's token was issued to, if the
	// token says: a handle opens only for the client it was opened by.
	Client string
}

// DefaultCaller is the caller of the default layout's user item
// "USER#<subject>" / "PROFILE", the subject being the token's UserID, and
// its client the token's Extra["client_id"], if a string. A token without
// a UserID, or one over 256 bytes, has no caller. A hash-only table, whose
// user keys have no SK, needs a Config.Caller of its own.
func DefaultCaller(ti *auth.TokenInfo) (Caller, error) {
	if ti == nil || ti.UserID == "" || len(ti.UserID) > 256 {
		return Caller{}, errNoCaller
	}
	client, _ := ti.Extra["client_id"].(string)
	return Caller{User: ddbsession.UserKey{PK: "USER#" + ti.UserID, SK: "PROFILE"}, Client: client}, nil
}

// Manager keeps an MCP server's state handles in DynamoDB, for every
// instance of the server to serve, with state of the app's type T. It is
// safe for concurrent use. [New] makes one.
type Manager[T any] struct {
	sessions    *ddbsession.Manager[struct{}]
	layout      ddbsession.Layout
	caller      func(*auth.TokenInfo) (Caller, error)
	createUsers bool
	key         *handleKey
}

// New validates cfg once, fills in its defaults and returns a Manager. The
// error names the first invalid field. New makes no DynamoDB call.
func New[T any](cfg Config) (*Manager[T], error) {
	layout, err := ddbitem.Resolve(cfg.Sessions.Layout)
	if err != nil {
		return nil, fmt.Errorf("mcphandle: Config.Sessions.Layout: %w", err)
	}
	switch {
	case layout.HashOnly && cfg.Caller == nil:
		return nil, errors.New("mcphandle: Config.Caller is unset, and DefaultCaller's user keys have an SK, which a hash-only table (Layout.HashOnly) has not: give a Caller of your own")
	case cfg.Sessions.Limits.MaxSessions != 0:
		return nil, fmt.Errorf("mcphandle: Config.Sessions.Limits.MaxSessions %d: a handle is one of its caller's sessions, so a limit would count their other sessions and end them to open handles: leave it 0", cfg.Sessions.Limits.MaxSessions)
	}
	m := &Manager[T]{layout: layout, caller: cfg.Caller, createUsers: cfg.CreateUsers}
	if m.caller == nil {
		m.caller = DefaultCaller
	}
	cfg.Sessions.BearerTokens = true
	// A handle is no sign-in of its caller's: it writes nothing into
	// their security history.
	cfg.Sessions.Limits.HistoryRetention = -1
	cfg.Sessions.StoreUnavailable = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(callKey{}).(*call); ok {
			c.err = errUnavailable
		}
	})
	if m.sessions, err = ddbsession.New(cfg.Sessions); err != nil {
		return nil, fmt.Errorf("mcphandle: Config.Sessions: %w", err)
	}
	m.key = newHandleKey(cfg.Sessions.Client, cfg.Sessions.Table, layout)
	return m, nil
}

// Sessions returns the ddbsession Manager that keeps the handles, for
// what this package does not wrap: CreateTable at startup, Wait on
// shutdown (after http.Server.Shutdown, so that no refresh is cut off),
// and RevokeAll of a caller's user item, which ends their handles with
// their other sessions.
func (m *Manager[T]) Sessions() *ddbsession.Manager[struct{}] { return m.sessions }

// Open opens a handle for the request's caller, holding data and what the
// request says of its client, and returns it, for the tool to return to
// the model: 130 random bits, sealed (see the package documentation). It
// costs ddbsession's bearer login of the caller and the write of the
// state; every write is to the caller's own items (docs/mcp.md).
func (m *Manager[T]) Open(ctx context.Context, req *mcp.CallToolRequest, data T) (string, error) {
	c, err := m.callerOf(req)
	if err != nil {
		return "", err
	}
	state, err := encodeState(State[T]{ClientInfo: req.ClientInfo(), ProtocolVersion: req.ProtocolVersion(), LogLevel: logLevelOf(req), Data: data})
	if err != nil {
		return "", err
	}
	key, err := m.key.get(ctx, true)
	if err != nil {
		return "", err
	}
	r := newRequest(ctx, "")
	r.Header.Set("User-Agent", userAgent(req.ClientInfo()))
	token, _, err := m.sessions.LoginBearer(r, c.User, nil, method)
	if errors.Is(err, ddbsession.ErrUserNotFound) && m.createUsers {
		if err := m.sessions.CreateUser(ctx, m.userItem(c.User)); err != nil && !errors.Is(err, ddbsession.ErrUserExists) {
			return "", err
		}
		token, _, err = m.sessions.LoginBearer(r, c.User, nil, method)
	}
	if err != nil {
		return "", err
	}
	// LoginBearer's credential is the token, 26 characters, and then the
	// user's key (docs/item-format.md), which the handle leaves out: every
	// use names the caller's own.
	if len(token) < tokenLen {
		return "", fmt.Errorf("mcphandle: LoginBearer returned a credential of %d characters, shorter than a token", len(token))
	}
	token = token[:tokenLen]
	err = m.check(ctx, c, token, func(r *http.Request, _ State[T]) error {
		return m.sessions.UpdateData(r.Context(), func(json.RawMessage) (any, error) { return state, nil })
	}, false)
	if err != nil {
		// A session without its state serves no use: end it, or leave it
		// to its expiry if that fails too.
		_ = m.sessions.Logout(discard{}, newRequest(ctx, m.credential(token, c.User)))
		return "", err
	}
	return seal(key, token, c.id()), nil
}

// Get returns the state of handle, if it is a live handle of the
// request's caller, and [ErrNoHandle] if not. A use moves the handle's
// expiry forward, at most once per Limits.RefreshInterval, after the
// call. It costs one strongly consistent read of the caller's own items;
// another caller's handle and a made-up one cost none, and nothing a
// handle that is not the caller's live one costs is a write.
func (m *Manager[T]) Get(ctx context.Context, req *mcp.CallToolRequest, handle string) (State[T], error) {
	var got State[T]
	err := m.use(ctx, req, handle, func(_ *http.Request, s State[T]) error {
		got = s
		return nil
	})
	return got, err
}

// Update changes the state of handle, as Get finds it, with update, which
// gets the state as it stands and changes it in place, and returns the
// new state. A change costs Get's read, one conditional UpdateItem of the
// handle's item and ddbsession's read of the user item after it (which
// makes sure the handle was not ended meanwhile); no change, Get's read
// alone. Racing updates never lose each other's changes: the
// loser reads the state again and calls update again, so update must
// depend on its argument alone.
func (m *Manager[T]) Update(ctx context.Context, req *mcp.CallToolRequest, handle string, update func(*State[T]) error) (State[T], error) {
	var got State[T]
	err := m.use(ctx, req, handle, func(r *http.Request, _ State[T]) error {
		return m.sessions.UpdateData(r.Context(), func(data json.RawMessage) (any, error) {
			s, ok := decodeState[T](data)
			if !ok {
				return nil, ErrNoHandle
			}
			if err := update(&s); err != nil {
				return nil, err
			}
			got = s
			return encodeState(s)
		})
	})
	return got, err
}

// Close ends handle, if it is a live handle of the request's caller, on
// every instance: Get's read and the two DeleteItems of ddbsession's
// logout, both of the caller's own items.
func (m *Manager[T]) Close(ctx context.Context, req *mcp.CallToolRequest, handle string) error {
	return m.use(ctx, req, handle, func(r *http.Request, _ State[T]) error {
		return m.sessions.Logout(discard{}, r)
	})
}

// List returns the live handles of a caller, newest first, with their
// public IDs (never a handle), which [ddbsession.Manager.Revoke] ends one
// by one: the caller's sessions that are handles, from the queries of
// [ddbsession.Manager.List]. It leaves out the state, which List does not
// read.
func (m *Manager[T]) List(ctx context.Context, caller ddbsession.UserKey) ([]ddbsession.Session, error) {
	all, err := m.sessions.List(ctx, caller)
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		return nil, nil
	}
	var handles []ddbsession.Session
	for _, s := range all {
		if isHandle(s) {
			handles = append(handles, s)
		}
	}
	return handles, err
}

// use runs fn with the state of handle, if it is a live handle of the
// request's caller, and returns its error, or ErrNoHandle.
func (m *Manager[T]) use(ctx context.Context, req *mcp.CallToolRequest, handle string, fn func(*http.Request, State[T]) error) error {
	c, err := m.callerOf(req)
	if err != nil {
		return err
	}
	if len(handle) > maxHandle {
		return ErrNoHandle // before the key's first read, too
	}
	key, err := m.key.get(ctx, false)
	if errors.Is(err, errNoKey) {
		return ErrNoHandle // no handle was ever opened on the table
	}
	if err != nil {
		return err
	}
	token, ok := openHandle(key, handle, c.id())
	if !ok {
		return ErrNoHandle
	}
	return m.check(ctx, c, token, fn, true)
}

// check runs fn, through ddbsession's LoadSession, on the session of token
// if it is a live session of c's, and, with needState, holds a handle's
// state. The credential names c's user item, so that the session and the
// user are read in one BatchGetItem, and a session of another user is
// refused.
func (m *Manager[T]) check(ctx context.Context, c Caller, token string, fn func(*http.Request, State[T]) error, needState bool) error {
	cl := &call{err: ErrNoHandle}
	r := newRequest(context.WithValue(ctx, callKey{}, cl), m.credential(token, c.User))
	m.sessions.LoadSession(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		s, ok := m.sessions.Session(r.Context())
		if !ok || s.User != c.User || !isHandle(s) {
			return
		}
		state, ok := decodeState[T](s.Data)
		if needState && !ok {
			return
		}
		cl.err = fn(r, state)
		if errors.Is(cl.err, ddbsession.ErrNoSession) {
			cl.err = ErrNoHandle // it ended meanwhile
		}
	})).ServeHTTP(discard{}, r)
	return cl.err
}

// call is what a check's handlers report back.
type call struct{ err error }

type callKey struct{}

// callerOf returns the request's caller, from its TokenInfo.
func (m *Manager[T]) callerOf(req *mcp.CallToolRequest) (Caller, error) {
	var ti *auth.TokenInfo
	if req.Extra != nil {
		ti = req.Extra.TokenInfo
	}
	c, err := m.caller(ti)
	if err == nil && c.User.PK == "" {
		err = errNoCaller
	}
	return c, err
}

// id is c as the additional data a handle is sealed with: each part after
// its length, so that no two callers have one id.
func (c Caller) id() string {
	return fmt.Sprintf("%d:%s%d:%s%d:%s", len(c.User.PK), c.User.PK, len(c.User.SK), c.User.SK, len(c.Client), c.Client)
}

// credential is ddbsession's credential for token and the user's key in
// its plain form, which every Manager accepts (docs/item-format.md):
// "<token>.<b64(userPK)>.<b64(userSK)>", the SK left out in a hash-only
// table. It never leaves the process, so the user key needs no seal.
func (m *Manager[T]) credential(token string, user ddbsession.UserKey) string {
	enc := base64.RawURLEncoding
	s := token + "." + enc.EncodeToString([]byte(user.PK))
	if !m.layout.HashOnly {
		s += "." + enc.EncodeToString([]byte(user.SK))
	}
	return s
}

// userItem is the item CreateUsers makes: the key alone.
func (m *Manager[T]) userItem(user ddbsession.UserKey) map[string]string {
	item := map[string]string{m.layout.PartitionKey: user.PK}
	if !m.layout.HashOnly {
		item[m.layout.SortKey] = user.SK
	}
	return item
}

func isHandle(s ddbsession.Session) bool { return len(s.Methods) == 1 && s.Methods[0] == method }

// logLevelOf is the log level in a 2026-07-28 request's _meta, if any.
func logLevelOf(req *mcp.CallToolRequest) string {
	if req.Params == nil {
		return ""
	}
	//lint:ignore SA1019 the level is kept while clients send it, in the deprecation window
	level, _ := req.Params.GetMeta()[mcp.MetaKeyLogLevel].(string)
	return level
}

// userAgent is the User-Agent a handle is listed with.
func userAgent(client *mcp.Implementation) string {
	if client == nil {
		return "mcphandle"
	}
	return "mcphandle; " + client.Name + "/" + client.Version
}

// newRequest returns a request in ctx that carries credential, if not "",
// as a bearer credential, and nothing else.
func newRequest(ctx context.Context, credential string) *http.Request {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	if err != nil {
		panic(err) // unreachable: the method and URL are constants
	}
	if credential != "" {
		r.Header.Set("Authorization", "Bearer "+credential)
	}
	return r
}

// discard is a ResponseWriter for answers that nobody reads.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
