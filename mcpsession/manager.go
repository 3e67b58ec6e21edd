package mcpsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// Config configures a [Manager]. Sessions.Client, Sessions.Table and Name
// have no default; [New] fills in the rest once.
type Config struct {
	// Sessions configures the ddbsession Manager that keeps the MCP
	// sessions, bearer sessions of the server's user item: Client, Table
	// and Layout as for any Manager on the table, and in Limits the
	// lifetimes MCP clients get (IdleTimeout, RefreshInterval,
	// AbsoluteLifetime; by default ddbsession's 24 hours, one hour and 30
	// days) and RevokeEveryoneWithin, which also bounds how long after
	// [Manager.RevokeAll] another instance serves the sessions it ended.
	// OnEvent, Logger and Now work as they do there. New turns
	// BearerTokens on, since the session ID is checked as a bearer
	// credential, and sets LoadUser, which serves the server's user from
	// this instance's copy (see Costs in the package documentation): an
	// app's own LoadUser is refused. MCP sessions never use cookies, and
	// their IDs never carry the server's key, so Cookie has no effect.
	// New turns Limits.HistoryRetention off: an initialize is no user's
	// sign-in. Limits.MaxSessions is refused: every MCP session is the server
	// user's, so a limit would let any initialize, which needs no
	// credential, end other clients' sessions (or, with
	// RefuseAtMaxSessions, refuse every client).
	Sessions ddbsession.Config[struct{}]

	// Name names the MCP server: in the default ServerKey, and in the
	// User-Agent its sessions are listed with ("<Name> (mcpsession);
	// <the client's User-Agent>"). 1 to 64 printable ASCII characters.
	Name string

	// ServerKey is the key of the user item that owns the server's
	// sessions, which the first initialize creates if it is missing
	// ([ddbsession.Manager.CreateUser]). Every instance of the server
	// uses the same; two servers on one table use two, and neither
	// accepts the other's session IDs. Default PK "MCPSERVER#<Name>",
	// SK "MCPSERVER" (no SK in a hash-only table).
	ServerKey ddbsession.UserKey
}

// Manager keeps an MCP server's sessions in DynamoDB, for every instance
// of the server to serve. It is safe for concurrent use. [New] makes one.
type Manager struct {
	sessions  *ddbsession.Manager[struct{}]
	server    ddbsession.UserKey
	userItem  map[string]string // the server's user item, for CreateUser
	userAgent string            // the start of the sessions' User-Agent
	logger    *slog.Logger
	// version is this instance's copy of the server's sessions version,
	// which the sessions' LoadUser returns; nil in the wiring that reads
	// the server's user item in every request instead (see options).
	version *serverVersion
	// unsafeTransport logs, once, that a transport uses the Manager as its
	// resolver without NewTransport's logger.
	unsafeTransport sync.Once
}

// New validates cfg once, fills in its defaults and returns a Manager. The
// error names the first invalid field. New makes no DynamoDB call.
func New(cfg Config) (*Manager, error) { return newManager(cfg, options{}) }

// options are what tests change of how New wires a Manager.
type options struct {
	// readServerPerRequest wires the Manager without the copy: no
	// LoadUser, session IDs that carry the server's key, and every request
	// reading the server's user item with its session, in one
	// BatchGetItem: the shared item that issue 28's partition-limit
	// simulation shows throttling, kept for tests to compare with.
	readServerPerRequest bool
	// mono is the monotonic clock that ages the copy (nanoseconds, never
	// 0); nil for the machine's.
	mono func() int64
}

func newManager(cfg Config, o options) (*Manager, error) {
	if err := checkName(cfg.Name); err != nil {
		return nil, err
	}
	layout, err := ddbitem.Resolve(cfg.Sessions.Layout)
	if err != nil {
		return nil, fmt.Errorf("mcpsession: Config.Sessions.Layout: %w", err)
	}
	key := cfg.ServerKey
	if key == (ddbsession.UserKey{}) {
		key.PK = "MCPSERVER#" + cfg.Name
		if !layout.HashOnly {
			key.SK = "MCPSERVER"
		}
	}
	switch {
	case key.PK == "":
		return nil, fmt.Errorf("mcpsession: Config.ServerKey %+v has no PK", key)
	case layout.HashOnly && key.SK != "":
		return nil, fmt.Errorf("mcpsession: Config.ServerKey %+v has an SK, but the table has no sort key (Layout.HashOnly)", key)
	case !layout.HashOnly && key.SK == "":
		return nil, fmt.Errorf("mcpsession: Config.ServerKey %+v has no SK, which the table's sort key needs", key)
	case cfg.Sessions.Limits.MaxSessions != 0:
		return nil, fmt.Errorf("mcpsession: Config.Sessions.Limits.MaxSessions %d: every MCP session is the server user's, so a limit would let any initialize, which needs no credential, end other clients' sessions (or, with RefuseAtMaxSessions, refuse every client): leave it 0, and rate-limit initialize", cfg.Sessions.Limits.MaxSessions)
	case cfg.Sessions.LoadUser != nil:
		return nil, errors.New("mcpsession: Config.Sessions.LoadUser is set: mcpsession loads the server's user itself")
	}
	userItem := map[string]string{layout.PartitionKey: key.PK, "mcpServer": cfg.Name}
	if !layout.HashOnly {
		userItem[layout.SortKey] = key.SK
	}

	m := &Manager{server: key, userItem: userItem, userAgent: cfg.Name + " (mcpsession)", logger: cfg.Sessions.Logger}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	cfg.Sessions.BearerTokens = true
	// Every initialize, which needs no credential, would write an event
	// into the server user's security history: none is kept.
	cfg.Sessions.Limits.HistoryRetention = -1
	if !o.readServerPerRequest {
		cfg.Sessions.LoadUser = m.loadServer
		cfg.Sessions.Cookie.HideUserKey = false // LoadUser's IDs never carry a key
	}
	if m.sessions, err = ddbsession.New(cfg.Sessions); err != nil {
		return nil, fmt.Errorf("mcpsession: Config.Sessions: %w", err)
	}
	if !o.readServerPerRequest {
		if m.version, err = newServerVersion(cfg.Sessions, key, o.mono); err != nil {
			return nil, fmt.Errorf("mcpsession: Config.Sessions: %w", err)
		}
	}
	return m, nil
}

// checkName refuses a Config.Name that is empty, long, or not printable
// ASCII.
func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("mcpsession: Config.Name %q: want 1 to 64 printable ASCII characters", name)
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c > 0x7e {
			return fmt.Errorf("mcpsession: Config.Name %q: want 1 to 64 printable ASCII characters", name)
		}
	}
	return nil
}

// Sessions returns the ddbsession Manager that keeps the MCP sessions, for
// what this package does not wrap: CreateTable at startup, which creates
// a missing table and checks an existing one, and Wait on shutdown, after
// http.Server.Shutdown, so that no refresh is cut off.
func (m *Manager) Sessions() *ddbsession.Manager[struct{}] { return m.sessions }

// List returns the server's live MCP sessions, newest first: their public
// IDs (never the Mcp-Session-Id, which is a credential), when each was
// created, refreshed and expires, and the client's User-Agent. It costs the
// queries of [ddbsession.Manager.List].
func (m *Manager) List(ctx context.Context) ([]ddbsession.Session, error) {
	list, err := m.sessions.List(ctx, m.server)
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		return nil, nil // no initialize yet
	}
	return list, err
}

// Revoke ends one MCP session by its public ID (Session.ID, from List or
// an event), on every instance: its next request gets 404, and the client
// starts a new session. It returns [ddbsession.ErrNoSession] for an ID that
// is not one of this server's live sessions.
func (m *Manager) Revoke(ctx context.Context, id string) error {
	if err := m.checkLayout(ctx); err != nil {
		return err
	}
	return m.sessions.Revoke(ctx, m.server, id)
}

// RevokeAll ends every MCP session of the server with one write and no
// scan ([ddbsession.Manager.RevokeAll] on the server's user item): on this
// instance at once, since it reads the version back into its copy, and on
// every other within Config.Sessions.Limits.RevokeEveryoneWithin (10
// seconds by default), once its copy is that old, or at once where an
// initialize reads the version anew. Sessions that initialize after it
// live; on an instance that has not seen it yet, they are refused until it
// has (their clients initialize again).
func (m *Manager) RevokeAll(ctx context.Context) error {
	if err := m.checkLayout(ctx); err != nil {
		return err
	}
	err := m.sessions.RevokeAll(context.WithValue(ctx, revokingAll{}, true), m.server)
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		return nil // no initialize yet, so no session to end
	}
	return err
}

// checkLayout checks, once, that the table records the sessions' Layout,
// ahead of a write that ddbsession makes without a read first: a Revoke or
// a RevokeAll of another layout's items reports success, and ends no
// session that the table's other instances serve. Every other use begins
// with a read of ddbsession's, which checks it.
func (m *Manager) checkLayout(ctx context.Context) error {
	if m.version == nil {
		return nil // the tests' wiring without the copy
	}
	return m.version.checkLayout(ctx)
}
