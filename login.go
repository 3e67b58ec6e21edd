package ddbsession

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Login signs user in on this browser. It rotates the session: every session
// the request carries is deleted first, so a token planted before sign-in
// (session fixation) dies with it, and a new session with a fresh token is
// created and sent in the cookie. The new session item is written with
// attribute_not_exists, so it can never overwrite another.
func (m *Manager[U]) Login(w http.ResponseWriter, r *http.Request, user UserKey) error {
	if user.PK == "" || (user.SK == "") != m.cfg.HashOnly {
		return fmt.Errorf("ddbsession: Login: user key %+v does not fit the table's key schema", user)
	}
	ctx, cancel := m.writeContext(r)
	defer cancel()
	if err := m.endRequestSessions(ctx, r); err != nil {
		return err
	}

	now := m.cfg.Now()
	created := time.UnixMilli(now.UnixMilli())
	expires := now.Add(min(m.cfg.IdleTimeout, m.cfg.AbsoluteLifetime))
	s := Session{
		ID:          newSessionID(),
		User:        user,
		CreatedAt:   created,
		RefreshedAt: created,
		ExpiresAt:   time.Unix(expires.Unix(), 0),
		UserAgent:   truncate(strings.ToValidUTF8(r.UserAgent(), "\uFFFD"), maxUserAgent),
	}
	token := newToken()
	if err := m.createSession(ctx, m.sessionPK(token), s); err != nil {
		return err
	}
	m.setCookie(w, token, now, s.ExpiresAt)
	return nil
}

// Logout ends every session the request carries and clears the cookie. The
// cookie is cleared even when the delete fails, and the error is returned so
// that the app can tell the user the sign-out did not complete.
func (m *Manager[U]) Logout(w http.ResponseWriter, r *http.Request) error {
	m.clearCookie(w)
	ctx, cancel := m.writeContext(r)
	defer cancel()
	return m.endRequestSessions(ctx, r)
}

// writeContext bounds Login's and Logout's writes by StoreTimeout but not by
// the client: a user who signs out and closes the tab at once must still be
// signed out.
func (m *Manager[U]) writeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.StoreTimeout)
}

func (m *Manager[U]) endRequestSessions(ctx context.Context, r *http.Request) error {
	var errs []error
	for _, token := range m.requestTokens(r) {
		if _, _, err := m.deleteSession(ctx, m.sessionPK(token)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newSessionID returns a public session ID: 128 random bits in lowercase hex.
// It is independent of the token, and its alphabet and length differ from a
// token's, so it can never be mistaken for one.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validSessionID reports whether id has the shape of a public session ID.
func validSessionID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
