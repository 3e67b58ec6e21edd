package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file signs users in with two factors, in two requests: BeginLogin
// checks the first and leaves a pending session, which only CompleteLogin,
// from the same browser and within minutes, turns into a signed-in one.

// maxAttempts bounds the second-factor checks of one pending login: a
// six-digit code guessed five times in a row has one chance in 200,000.
const maxAttempts = 5

// BeginLogin is the first step of a two-step login: verify checks the first
// factor, as [Manager.Login]'s does, and methods name it. It signs no one
// in: it writes a pending session, for [Limits.PendingLifetime], whose token
// goes in a cookie of its own for [Manager.CompleteLogin]. The sessions the
// request carries stay until then, so a second step left undone signs no
// one out. It costs Login's read and one write.
func (m *Manager[U]) BeginLogin(w http.ResponseWriter, r *http.Request, user UserKey, verify func(U) error, methods ...string) error {
	var u U
	return wrap("begin login", m.beginLogin(w, r, signIn{user: user, out: &u, verify: verifier(&u, verify), methods: methods}))
}

func (c *core) beginLogin(w http.ResponseWriter, r *http.Request, in signIn) error {
	if err := c.checkSignIn(in.user, in.methods); err != nil {
		return err
	}
	ctx, cancel := c.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	now := c.now()
	f, err := c.prove(ctx, in, false, now)
	if err != nil {
		c.recordRefusal(ctx, in.user, in.verify != nil, r, now, err)
		return err
	}
	if err := c.endPending(ctx, w, r); err != nil {
		return err
	}
	s := c.life.newSession(in.user, r, now)
	s.Pending, s.Methods = true, in.methods
	s.ExpiresAt = time.Unix(now.Add(c.life.pending).Unix(), 0)
	s.Stamp = f.Stamp
	s.BrowserOnly = c.keepSignedIn != nil && !c.keepSignedIn(r)
	token := item.NewToken()
	if err := c.store.createPending(ctx, c.store.SessionPK(token), s); err != nil {
		return err
	}
	c.cookies.setPending(w, token, c.life.pending)
	c.events.emit(ctx, Event{Kind: EventPending, SessionID: s.ID, User: in.user})
	return nil
}

// CompleteLogin is the second step of a two-step login: verify (never nil)
// checks the second factor against the user of the browser's pending
// session, and if it accepts, CompleteLogin signs the user in as Login does,
// with the methods of both steps. A refusal returns verify's error, and the
// pending session stays for another try, five in all, each counted by a
// write before verify runs; after the fifth, once the pending session
// expires, or after a RevokeAll between the steps, it returns ErrNoSession.
// Of racing completions only one signs in.
func (m *Manager[U]) CompleteLogin(w http.ResponseWriter, r *http.Request, verify func(U) error, methods ...string) error {
	return wrap("complete login", m.completeLogin(w, r, verify, methods))
}

func (m *Manager[U]) completeLogin(w http.ResponseWriter, r *http.Request, verify func(U) error, methods []string) error {
	if verify == nil {
		return errors.New("verify is nil: it checks the second factor")
	}
	if len(methods) > maxMethods {
		return fmt.Errorf("%d methods, more than %d", len(methods), maxMethods)
	}
	var u U
	check := verifier(&u, verify)
	p, try, err := m.takeAttempt(r)
	if err == nil {
		var proofErr error
		in := signIn{user: userOf(p), out: &u, methods: methods, end: endAll, pending: &p, read: m.stored(r)}
		in.verify = func() error {
			if proofErr = check(); proofErr != nil {
				m.events.emit(r.Context(), Event{Kind: EventSecondFactorFailed, SessionID: p.ID, User: userOf(p)})
			}
			return proofErr
		}
		_, err = m.signInBrowser(w, r, in)
		switch {
		case err == nil:
		case proofErr != nil && try < maxAttempts:
			return err // another try is left: the cookie stays
		case proofErr != nil:
			// That was the last try: the pending session goes, and the
			// user starts over.
			ctx, cancel := m.storeContext(context.WithoutCancel(r.Context()))
			defer cancel()
			if _, _, derr := m.store.deleteSession(ctx, p); derr != nil {
				return derr
			}
			err = ErrNoSession
		}
	}
	if err == nil || errors.Is(err, ErrNoSession) {
		m.cookies.clearPending(w)
	}
	if errors.Is(err, ErrNoSession) {
		return ErrNoSession
	}
	return err
}

// takeAttempt reads the pending session of r's pending cookie, counting
// one more try of it, and returns it with the try's number; ErrNoSession
// for none, or one whose tries or time are over. The session returned
// knows its key.
func (c *core) takeAttempt(r *http.Request) (item.Session, int, error) {
	token, _ := c.cookies.pendingToken(r)
	if token == "" {
		return item.Session{}, 0, ErrNoSession
	}
	ctx, cancel := c.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	if err := c.read.CheckLayout(ctx); err != nil {
		return item.Session{}, 0, err
	}
	p, try, ok, err := c.store.takeTry(ctx, c.store.SessionPK(token), maxAttempts, c.now())
	switch {
	case err != nil:
		return p, 0, err
	case !ok:
		return p, 0, ErrNoSession
	}
	return p, try, nil
}
