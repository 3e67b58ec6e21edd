package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file signs users up, in and out: CreateUser, Login, LoginBearer and
// Logout, and what they share.

// CreateUser writes a new user item: v is the app's own value (a struct or
// a map, encoded with attributevalue.MarshalMap, holding the table's key
// attributes), and CreateUser adds the sessions-valid-after cutoff at the
// current time, so that no session created before this user existed, such as
// one of a deleted user with the same key, is valid for it. It returns
// [ErrUserExists], and writes nothing, if an item with that key exists.
//
// An app that writes user items itself must do the same: set
// [Layout.ValidAfterAttribute] to the creation time in epoch milliseconds,
// and, with [Config.MREC], call [Manager.RevokeAll] after creating one whose
// key a deleted user had, so that the user's state item moves on too.
func (m *Manager[U]) CreateUser(ctx context.Context, v any) error {
	av, err := attributevalue.MarshalMap(v)
	if err != nil {
		return fmt.Errorf("ddbsession: CreateUser: encode %T: %w", v, err)
	}
	for _, key := range []string{m.store.PartitionKey, m.store.SortKey} {
		if _, ok := av[key].(*types.AttributeValueMemberS); key != "" && !ok {
			return fmt.Errorf("ddbsession: CreateUser: %T has no String attribute %q, the table's key", v, key)
		}
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	now := m.now().UnixMilli()
	created, err := m.store.createUser(ctx, av, now)
	if err == nil && created && m.users.mrec {
		// A state item outlives a user item deleted before this one, with
		// a cutoff its sessions copied: move it on, past them.
		key := UserKey{PK: av[m.store.PartitionKey].(*types.AttributeValueMemberS).Value}
		if sk, ok := av[m.store.SortKey].(*types.AttributeValueMemberS); ok {
			key.SK = sk.Value
		}
		err = m.store.raiseStateCutoff(ctx, key.PK, key.SK, now)
	}
	switch {
	case err != nil:
		return fmt.Errorf("ddbsession: CreateUser: %w", err)
	case !created:
		return ErrUserExists
	}
	return nil
}

// Login signs user in on this browser after verify accepts the user as
// read, in the same call, from the user item: verify checks the password
// (or other credential) against it and returns an error, which Login
// returns, to refuse. A flow whose credential is not in the user item (a
// single sign-on callback, a magic link) passes nil. Login returns
// [ErrUserNotFound], writing nothing, for a user without an item. It
// rotates the session: every session the request carries is deleted first,
// so a token planted before sign-in (session fixation) dies with it, and a
// new session with a fresh token is created and sent in the cookie. The
// new session item is written with attribute_not_exists, so it can never
// overwrite another. If deleting a carried session fails, Login stops there
// and writes nothing.
//
// A login with verify is race-free against a credential change that
// writes the new credential and then calls [Manager.RevokeAll]: the session
// copies the revocation version read with the credential, so a login that
// read the old credential copied the old version and dies with the others,
// and a login that read after the change saw the new credential, and the
// raised version, and lives; whatever the instances' clocks say (see
// "Revocation" in the package documentation). A login whose app checked
// the credential in a read of its own cannot promise that, since Login
// cannot know what the app read.
//
// With a custom [Config.LoadUser], the loader must return the credential in
// U and read it, with the cutoff, in one strongly consistent read.
//
// verify runs within the call's StoreTimeout, between the read and the
// writes: a slow password hash fits, a wait for one does not. An app that
// bounds its hashing work takes its slot before calling Login.
func (m *Manager[U]) Login(w http.ResponseWriter, r *http.Request, user UserKey, verify func(U) error) error {
	var u U
	return m.signInBrowser(w, r, user, &u, m.verifier(&u, verify))
}

// verifier is verify bound to the user that the sign-in reads into u; nil
// for a nil verify.
func (m *Manager[U]) verifier(u *U, verify func(U) error) func() error {
	if verify == nil {
		return nil
	}
	return func() error { return verify(*u) }
}

// signInBrowser is Login's: a session in a cookie, offered
// for device binding if configured.
func (c *core) signInBrowser(w http.ResponseWriter, r *http.Request, user UserKey, out any, verify func() error) error {
	token, s, now, err := c.signIn(r, user, out, verify, true)
	if err != nil {
		return err
	}
	c.cookies.set(w, token, s, now)
	if c.binding.Enabled {
		c.binding.offer(w, s)
	}
	return nil
}

// LoginBearer signs user in for a client without cookies (a CLI, a mobile
// app, a script) and returns the session's credential instead of setting a
// cookie, with the session's expiry: the client sends the credential in
// each request's Authorization header as "Bearer <token>", and a request
// that moves the expiry forward says so in the Session-Expires response
// header (RFC 3339). The session is like any other: hashed at rest,
// expiring and refreshed, listed with the request's User-Agent, revocable,
// and ended by RevokeAll. verify, if not nil, is [Manager.Login]'s. It
// returns [ErrUserNotFound] for a user without an item. RequireSession
// accepts the token when [Config.BearerTokens] is set.
//
// Bearer requests need no cross-origin protection: a browser never adds an
// Authorization header to a request on its own, as it adds cookies, so
// another site cannot make a browser send one. Cookie requests do need it
// (SameSite=Lax, and http.CrossOriginProtection for state changes).
func (m *Manager[U]) LoginBearer(r *http.Request, user UserKey, verify func(U) error) (token string, expires time.Time, err error) {
	var u U
	token, s, _, err := m.signIn(r, user, &u, m.verifier(&u, verify), false)
	if err != nil {
		return "", time.Time{}, err
	}
	return m.cookies.value(token, s), s.ExpiresAt, nil
}

// signIn reads the user into out, has verify, if not nil, check it, ends
// the sessions the request carries in cookies if asked, and creates a new
// session. It returns the new token, the session and the time it took as
// now.
func (c *core) signIn(r *http.Request, user UserKey, out any, verify func() error, endCarried bool) (string, item.Session, time.Time, error) {
	var none item.Session
	if user.PK == "" || (user.SK == "") != c.store.HashOnly {
		return "", none, time.Time{}, fmt.Errorf("ddbsession: Login: user key %+v does not fit the table's key schema", user)
	}
	// Not cut short by the client: a half-done rotation helps no one.
	ctx, cancel := c.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	now, began := c.now(), mono()
	rev, err := c.users.load(ctx, user, out, true)
	if errors.Is(err, ErrUserNotFound) {
		return "", none, now, err
	}
	if err != nil {
		return "", none, now, fmt.Errorf("ddbsession: Login: load user: %w", err)
	}
	if verify != nil {
		if err := verify(); err != nil {
			return "", none, now, err
		}
	}
	if endCarried {
		if err := c.endRequestSessions(ctx, r, EventRotated); err != nil {
			return "", none, now, err
		}
	}
	// The session copies the revocation version read with the credential:
	// a RevokeAll after that read, on any instance and whatever its clock,
	// ends it. Its creation time comes after the cutoff too, for releases
	// that date sessions by it (see revoked).
	created := max(now.UnixMilli(), rev.Cutoff+1)
	s := c.life.newSession(user, userAgent(r), time.UnixMilli(created))
	s.Gen, s.HasGen = rev.Cutoff, true
	c.everyone.seen(rev.global, began)
	s.GlobalGen = c.everyone.gen.Load() // read with the user: a RevokeEveryone before this login ends no session of it
	s.BrowserOnly = endCarried && c.keepSignedIn != nil && !c.keepSignedIn(r)
	if endCarried && c.binding.Enabled {
		// The challenge of the offer to bind, which the Login response
		// makes, goes in with the session: it costs no write of its own.
		s.Challenge = challengeFor(now, registrationChallengeLifetime)
	}
	token := item.NewToken()
	if err := c.store.createSession(ctx, c.store.SessionPK(token), s); err != nil {
		return "", none, now, err
	}
	c.events.emit(ctx, Event{Kind: EventCreated, SessionID: s.ID, User: user})
	return token, s, now, nil
}

// Logout ends every session the request carries, in cookies or (with
// [Config.BearerTokens]) as a bearer token: it deletes them from the table,
// so their tokens are dead on every instance, and clears the cookie.
// The cookie is cleared even when a delete fails, and the error is returned
// so that the app can tell the user the sign-out did not complete. A client
// that hangs up at once is still signed out. With [Config.ClearSiteData] the
// response also asks the browser to clear what that names.
func (m *Manager[U]) Logout(w http.ResponseWriter, r *http.Request) error {
	m.cookies.clear(w)
	if m.clearSiteData != "" {
		w.Header().Set("Clear-Site-Data", m.clearSiteData)
	}
	if len(r.CookiesNamed(m.binding.CookieName)) > 0 {
		m.binding.writeCookie(w, "", -1)
	}
	ctx, cancel := m.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	return m.endRequestSessions(ctx, r, EventEnded)
}

// endRequestSessions deletes the sessions the request carries, and reports
// each as kind.
func (c *core) endRequestSessions(ctx context.Context, r *http.Request, kind EventKind) error {
	var errs []error
	for _, token := range c.cookies.tokens(r) {
		s, found, err := c.store.deleteSession(ctx, c.store.SessionPK(token))
		if err == nil && found {
			err = c.recordEnd(ctx, s)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if found {
			c.events.emit(ctx, Event{Kind: kind, SessionID: s.ID, User: userOf(s)})
		}
	}
	return errors.Join(errs...)
}

// recordEnd, in MREC mode, notes in the user's state item that session s,
// deleted, stays ended: a refresh of it in another Region that had not seen
// the delete yet writes the item back, whole, and would win. The note lasts
// as long as such a copy could live: an idle timeout from now, at most the
// absolute lifetime, and a minute more for the replication.
func (c *core) recordEnd(ctx context.Context, s item.Session) error {
	if !c.users.mrec {
		return nil
	}
	now := c.now()
	until := now.Add(c.life.idle)
	if limit := s.CreatedAt.Add(c.life.absolute); limit.Before(until) {
		until = limit
	}
	if err := c.store.recordEnd(ctx, s, until.Add(time.Minute).Unix(), now); err != nil {
		return fmt.Errorf("ddbsession: %w", err)
	}
	return nil
}

// userAgent returns the request's User-Agent as stored, which the client
// controls: valid UTF-8 without control or format characters (bidi
// overrides, zero-width characters), so that a stolen session cannot
// disguise itself in the device list, and at most item.MaxUserAgent bytes.
func userAgent(r *http.Request) string {
	s := strings.ToValidUTF8(r.UserAgent(), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return -1
		}
		return r
	}, s)
	n := item.MaxUserAgent
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n-- // do not split a UTF-8 sequence
	}
	return s[:n]
}
