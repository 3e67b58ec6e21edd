package mcpsession

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ddbsession/ddbsession"
)

// This file is every call into ddbsession that needs a request of its own:
// mcp-go hands the session ID manager and the hooks no response to write,
// and the client's request carries headers (its own Authorization, say)
// that are not ddbsession's to read.

// login starts a session of the server's user and returns its bearer
// token, the new Mcp-Session-Id. The server's user item is created on the
// first login that misses it, and read into this instance's copy of its
// version.
func (m *Manager) login(ctx context.Context, clientAgent string) (string, error) {
	r := m.newRequest(ctx, "")
	agent := m.userAgent
	if clientAgent != "" {
		agent += "; " + clientAgent
	}
	r.Header.Set("User-Agent", agent)
	token, _, err := m.sessions.LoginBearer(r, m.server, nil, "mcp")
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		if err := m.sessions.CreateUser(ctx, m.userItem); err != nil && !errors.Is(err, ddbsession.ErrUserExists) {
			return "", err
		}
		if m.version != nil {
			if _, err := m.version.readAgain(ctx); err != nil {
				return "", err
			}
		}
		token, _, err = m.sessions.LoginBearer(r, m.server, nil, "mcp")
	}
	if err != nil && m.version != nil {
		// ddbsession refuses the version 0 of a server's user item without
		// a sessions version; say which item, and how to put it right.
		if v := m.version.latest.Load(); v != nil && v.unusable != nil {
			err = fmt.Errorf("mcpsession: %w: it was not made by the first initialize's CreateUser; "+
				"delete it, and an initialize makes it anew within Limits.RevokeEveryoneWithin (%w)", v.unusable, err)
		}
	}
	return token, err
}

// logout ends the session of token.
func (m *Manager) logout(ctx context.Context, token string) error {
	return m.sessions.Logout(discard{}, m.newRequest(ctx, token))
}

// end ends the session of token, which no instance will serve. A failure
// is logged, and leaves the session to its expiry.
func (m *Manager) end(ctx context.Context, token string) {
	if err := m.logout(ctx, token); err != nil {
		m.logger.WarnContext(ctx, "mcpsession: end a session that no instance will serve; it expires in time", "err", err)
	}
}

// storeState writes s as the data of the session of token, which a login
// issued a moment ago: a strongly consistent read of it, which the write is
// conditional on, and the write.
func (m *Manager) storeState(ctx context.Context, token string, s State) error {
	data, err := encodeState(s)
	if err != nil {
		return err
	}
	err = errors.New("mcpsession: the new session could not be read back")
	m.sessions.RequireSession(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		err = m.sessions.UpdateData(r.Context(), func(json.RawMessage) (any, error) { return data, nil })
	})).ServeHTTP(discard{}, m.newRequest(ctx, token))
	return err
}

// newRequest returns a request in ctx that carries token, if not "", as a
// bearer credential, and nothing else.
func (m *Manager) newRequest(ctx context.Context, token string) *http.Request {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	if err != nil {
		panic(err) // unreachable: the method and URL are constants
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// discard is a ResponseWriter for answers that nobody reads.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
