package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the request path, top down: the middleware, its check of the
// credential, the rules that make a session valid, the guard on a recent
// authentication, and the accessors that hand the session and its user to
// the handler.

// RequireSession lets a request through only with a valid session, and puts
// the session and its user in the request context; any other request gets
// [Config.Unauthorized], a store failure [Config.StoreUnavailable]. It costs
// one strongly consistent BatchGetItem of the session and its user (two
// GetItems in turn with HideUserKey or a custom LoadUser), a malformed
// credential nothing. Once per [Limits.RefreshInterval] one UpdateItem moves
// the expiry forward, after the response ([Manager.Wait] waits for it), or
// before the handler with [Config.WriteBeforeResponse].
func (m *Manager[U]) RequireSession(next http.Handler) http.Handler { return m.guard(next, true) }

// LoadSession is [Manager.RequireSession] for pages anonymous visitors see
// too: a request without a valid session goes through with no user in its
// context. A store failure still fails it closed: its session may be valid.
func (m *Manager[U]) LoadSession(next http.Handler) http.Handler { return m.guard(next, false) }

func (m *Manager[U]) guard(next http.Handler, required bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, checked := r.Context().Value(ctxKey[U]{m}).(*requestState[U]); checked {
			// Wrapped twice (a route inside a group that RequireSession
			// guards already): the outer check holds, and costs the read.
			m.doubleOnce.Do(func() {
				m.logger.WarnContext(r.Context(), "ddbsession: a handler is wrapped in RequireSession or LoadSession twice; the inner one reads nothing, but remove it")
			})
			next.ServeHTTP(w, r)
			return
		}
		// The response depends on the credential whatever happens next.
		addVary(w.Header(), "Cookie")
		if m.cookies.bearer {
			addVary(w.Header(), "Authorization")
		}
		st := new(requestState[U])
		bearer, err := m.authenticate(w, r, &st.user, &st.sessionState)
		switch {
		case err == nil:
			private(w.Header())
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey[U]{m}, st)))
		case errors.Is(err, ErrNoSession) && !required:
			next.ServeHTTP(w, r)
		default:
			m.refuse(w, r, bearer, err)
		}
	})
}

// authenticate checks the request's session, decoding its user into user,
// puts the session in st, refreshes it when due, and clears the cookie of a
// session that is not valid. It reports whether the credential was a bearer
// token.
func (c *core) authenticate(w http.ResponseWriter, r *http.Request, user any, st *sessionState) (bearer bool, err error) {
	cred, bearer, present, err := c.cookies.credential(r)
	if err != nil {
		return bearer, err
	}
	now := c.now()
	var proof *dpopProof
	if token, isDPoP, _ := bearerToken(r); bearer && isDPoP && cred.Token != "" {
		// The proof before the read: a bad one costs no DynamoDB call.
		if proof, err = c.dpop.check(r, token, now); err != nil {
			c.events.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonMalformed})
			return bearer, err
		}
	}
	if cred.Token == "" {
		if !present {
			return bearer, ErrNoSession
		}
		if !bearer {
			c.cookies.clear(w)
		}
		c.events.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonMalformed})
		return bearer, rejected(ReasonMalformed)
	}
	ctx, cancel := c.storeContext(r.Context())
	defer cancel()
	sessionPK := c.store.SessionPK(cred.Token)
	s, err := c.check(ctx, cred, sessionPK, now, user)
	if errors.Is(err, ErrNoSession) {
		if !bearer && !c.mayArrive(reasonOf(err)) {
			c.cookies.clear(w)
		}
		c.events.emit(r.Context(), Event{Kind: EventRejected, Reason: reasonOf(err), SessionID: s.ID, User: userOf(s)})
	}
	if err != nil {
		return bearer, err
	}
	if s.DeviceBound && (bearer || !c.binding.validCookie(r, s, now)) {
		// The session cookie stays: the device's browser refreshes its
		// bound cookie before it sends a request without one, so this is
		// most likely a copy, and the session is not the copy's to end.
		c.events.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonNotBound, SessionID: s.ID, User: userOf(s)})
		return bearer, rejected(ReasonNotBound)
	}
	if err := c.dpop.accept(s, proof, now); err != nil {
		if errors.Is(err, ErrNoSession) {
			c.events.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonNotBound, SessionID: s.ID, User: userOf(s)})
		}
		return bearer, err
	}
	if proof != nil && proof.renew {
		w.Header().Set(headerDPoPNonce, c.dpop.nonce(now))
	}
	if next, ok := c.refresh.start(ctx, sessionPK, s, clientAddress(r), now); ok {
		s = next
		if bearer {
			w.Header().Set(sessionExpiresHeader, s.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			c.cookies.set(w, cred.Token, s, now)
		}
	}
	*st = sessionState{session: sessionOf(s), stored: s, dataRev: s.DataRev, apart: s.DataApart}
	return bearer, nil
}

// refuse answers a request that authenticate did not let through.
func (c *core) refuse(w http.ResponseWriter, r *http.Request, bearer bool, err error) {
	switch {
	case errors.Is(err, errBothCredentials):
		http.Error(w, "send a session cookie or a bearer token, not both", http.StatusBadRequest)
	case errors.Is(err, ErrNoSession):
		if bearer {
			c.dpop.challenge(w, r, err, c.now())
		} else if c.cookies.bearer && fromProgram(w, r) {
			w.Header().Set("WWW-Authenticate", "Bearer") // RFC 6750 3: no credential, no error code
		}
		c.unauthorized.ServeHTTP(w, r)
	case errors.As(err, new(*userDecodeError)):
		// The app's type does not fit its own items: a bug to fix, not an
		// outage to wait out.
		c.logger.ErrorContext(r.Context(), "ddbsession: cannot decode the user item, failing closed", "err", err)
		http.Error(w, "internal server error", http.StatusInternalServerError)
	default:
		c.events.storeFailed(r.Context(), err)
		c.storeUnavailable.ServeHTTP(w, r)
	}
}

// Authenticate does the middleware's work without HTTP, for a credential
// that arrived some other way (a gRPC call's metadata, a test): ErrNoSession
// for any value that grants no session, another error only when the store
// failed. It never writes, so it never refreshes: a router's middleware
// wraps RequireSession instead (see example/routers). A device-bound
// session, whose bound cookie it cannot see, is never valid through it.
func (m *Manager[U]) Authenticate(ctx context.Context, token string) (Session, U, error) {
	var u U
	s, err := m.checkToken(ctx, token, &u)
	if err != nil {
		var zero U
		return Session{}, zero, wrap("authenticate", err)
	}
	return s, u, nil
}

func (c *core) checkToken(ctx context.Context, token string, user any) (Session, error) {
	cred, ok := c.store.ParseCredential(token)
	if !ok {
		return Session{}, ErrNoSession
	}
	ctx, cancel := c.storeContext(ctx)
	defer cancel()
	s, err := c.check(ctx, cred, c.store.SessionPK(cred.Token), c.now(), user)
	if err == nil && (s.DeviceBound || s.DPoP) {
		err = ErrNoSession // proof of the device comes with a request only
	}
	if errors.Is(err, ErrNoSession) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, err
	}
	return sessionOf(s), nil
}

// Recent authentication: a guard, for a sensitive action (OWASP ASVS 5.0
// V7.5), on how recently and how the session's user last proved
// themselves.

// RequireAuthentication returns middleware that lets a request through only
// if its session's user authenticated within the last within, with each of
// methods among [Session.Methods] (none named: any). It goes inside
// [Manager.RequireSession], whose session it reads, and costs no call:
//
//	recent := sessions.RequireAuthentication(10 * time.Minute)
//	mux.Handle("POST /logout-everywhere", sessions.RequireSession(recent(logoutEverywhere)))
//
// A request that fails it gets [Config.StepUp]; one with a bearer token is
// told RFC 9470's insufficient_user_authentication challenge first, with
// max_age and, if methods are named, acr_values. The
// session lives on, and a Login on it re-authenticates. The window is the
// login instance's clock against this one's.
func (m *Manager[U]) RequireAuthentication(within time.Duration, methods ...string) func(http.Handler) http.Handler {
	if within <= 0 {
		panic(fmt.Sprintf("ddbsession: RequireAuthentication(%v): within must be positive", within))
	}
	// RFC 9470: max_age says how recent, acr_values (the app's method
	// names, space-separated) which methods the client must present.
	challenge := `Bearer error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age=` +
		strconv.FormatInt(int64((within+time.Second-1)/time.Second), 10)
	if len(methods) > 0 {
		challenge += `, acr_values="` + strings.Join(methods, " ") + `"`
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, ok := m.Session(r.Context())
			if !ok {
				m.refuse(w, r, m.carriesBearer(r), ErrNoSession)
				return
			}
			if m.now().Sub(s.AuthenticatedAt) <= within && hasAll(s.Methods, methods) && !slices.Contains(s.Methods, methodMigrated) {
				next.ServeHTTP(w, r)
				return
			}
			m.events.emit(r.Context(), Event{Kind: EventStepUp, SessionID: s.ID, User: s.User})
			if m.carriesBearer(r) {
				if _, isDPoP, _ := bearerToken(r); isDPoP {
					w.Header().Set("WWW-Authenticate", "DPoP"+strings.TrimPrefix(challenge, "Bearer"))
				} else {
					w.Header().Set("WWW-Authenticate", challenge)
				}
			}
			m.stepUp.ServeHTTP(w, r)
		})
	}
}

// carriesBearer reports whether r's credential is a bearer token.
func (c *core) carriesBearer(r *http.Request) bool {
	_, _, ok := bearerToken(r)
	return ok && c.cookies.bearer
}

// hasAll reports whether have holds each of want.
func hasAll(have, want []string) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}

// Wait waits until the refreshes that requests started are written, or ctx
// ends: call it on shutdown, after http.Server.Shutdown.
func (m *Manager[U]) Wait(ctx context.Context) error { return m.refresh.flights.wait(ctx) }
