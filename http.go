package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/ddbsession/ddbsession/internal/item"
)

// RequireSession lets a request through only with a valid session, and puts
// the session and its user in the request context. Any other request gets
// [Config.Unauthorized], and a store failure gets [Config.StoreUnavailable].
//
// A request costs one strongly consistent BatchGetItem of the session and
// its user (two GetItems in turn with [Config.HideUserKey], a custom
// [Config.LoadUser], or a cookie without the user key; see "The cookie" in
// the package documentation). Once per [Config.RefreshInterval] a request
// also moves the session's expiry forward: it re-sends the cookie at once,
// and two UpdateItems (the session and its per-user index item) follow after
// the response, one per session per process however many requests find it
// due ([Manager.Wait] waits for them on shutdown). A malformed cookie costs
// no call at all.
func (m *Manager[U]) RequireSession(next http.Handler) http.Handler {
	return m.middleware(next, true, m.answers())
}

// LoadSession is [Manager.RequireSession] for pages that anonymous visitors
// may see too: a request without a valid session goes through without a
// user in its context. A store failure still fails the request closed, since
// the session it carries might be valid.
func (m *Manager[U]) LoadSession(next http.Handler) http.Handler {
	return m.middleware(next, false, m.answers())
}

// answers are the Config's answers.
func (m *Manager[U]) answers() Answers {
	return Answers{Unauthorized: m.cfg.Unauthorized, StoreUnavailable: m.cfg.StoreUnavailable}
}

func (m *Manager[U]) middleware(next http.Handler, required bool, answers Answers) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The response depends on the cookie whatever happens next.
		addVaryCookie(w.Header())
		s, u, bearer, err := m.authenticate(w, r)
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(m.NewContext(r.Context(), s, u)))
		case errors.Is(err, errBothCredentials):
			http.Error(w, "send a session cookie or a bearer token, not both", http.StatusBadRequest)
		case errors.Is(err, ErrNoSession) && required:
			if bearer {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
			answers.Unauthorized.ServeHTTP(w, r)
		case errors.Is(err, ErrNoSession):
			next.ServeHTTP(w, r)
		case errors.As(err, new(*userDecodeError)):
			// The app's type does not fit its own items: a bug to fix, not
			// an outage to wait out.
			m.cfg.Logger.ErrorContext(r.Context(), "ddbsession: cannot decode the user item, failing closed", "err", err)
			http.Error(w, "internal server error", http.StatusInternalServerError)
		default:
			m.logStoreFailure(r.Context(), err)
			if m.cfg.OnEvent != nil {
				m.emit(r.Context(), Event{Kind: EventStoreFailed, Err: err})
			}
			answers.StoreUnavailable.ServeHTTP(w, r)
		}
	})
}

// SessionExpiresHeader is the response header that tells a client with a
// bearer token the session's new expiry, in RFC 3339, when a request moved
// it forward: such a client has no cookie for the server to re-send.
const SessionExpiresHeader = "Session-Expires"

// authenticate checks the request's session, refreshes it when due, and
// clears the cookie of a session that is not valid. It reports whether the
// credential was a bearer token.
func (m *Manager[U]) authenticate(w http.ResponseWriter, r *http.Request) (_ Session, u U, bearer bool, err error) {
	cred, bearer, present, err := m.requestCredential(r)
	if err != nil {
		return Session{}, u, bearer, err
	}
	if cred.Token == "" {
		if !present {
			return Session{}, u, bearer, ErrNoSession
		}
		if !bearer {
			m.clearCookie(w)
		}
		if m.cfg.OnEvent != nil {
			m.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonMalformed})
		}
		return Session{}, u, bearer, rejected(ReasonMalformed)
	}
	ctx, cancel := m.storeContext(r.Context())
	defer cancel()
	now := m.cfg.Now()
	sessionPK := m.store.SessionPK(cred.Token)
	s, u, err := m.check(ctx, cred, sessionPK, now)
	if errors.Is(err, ErrNoSession) {
		if !bearer {
			m.clearCookie(w)
		}
		if m.cfg.OnEvent != nil {
			m.emit(r.Context(), Event{Kind: EventRejected, Reason: reasonOf(err), SessionID: s.ID, User: UserKey{PK: s.UserPK, SK: s.UserSK}})
		}
	}
	if err != nil {
		return Session{}, u, bearer, err
	}
	if s.DeviceBound && (bearer || !m.boundCookieValid(r, s, now)) {
		// The session cookie stays: the device's browser refreshes its
		// bound cookie before it sends a request without one, so this is
		// most likely a copy, and the session is not the copy's to end.
		if m.cfg.OnEvent != nil {
			m.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonNotBound, SessionID: s.ID, User: UserKey{PK: s.UserPK, SK: s.UserSK}})
		}
		var zero U
		return Session{}, zero, bearer, rejected(ReasonNotBound)
	}
	if next, ok := m.refresh(ctx, sessionPK, s, now); ok {
		s = next
		if bearer {
			w.Header().Set(SessionExpiresHeader, s.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			m.setCookie(w, cred.Token, s, now)
		}
	}
	return sessionOf(s), u, bearer, nil
}

// logStoreFailure logs why a request failed closed. A client that hung up
// is no store outage: it stays refused, but must not flood the error log. A
// panic is logged with the stack where it happened.
func (m *Manager[U]) logStoreFailure(ctx context.Context, err error) {
	level := slog.LevelError
	if ctx.Err() != nil {
		level = slog.LevelDebug
	}
	attrs := []any{"err", err}
	var p *panicError
	if errors.As(err, &p) {
		attrs = append(attrs, "stack", string(p.stack))
	}
	m.cfg.Logger.Log(ctx, level, "ddbsession: cannot check session, failing closed", attrs...)
}

// Login signs user in on this browser, for flows whose credentials are not
// read from the user item (a single sign-on callback, a magic link): a
// password login should use [Manager.LoginWith]. It reads the user item
// (strongly consistent), and returns [ErrUserNotFound], writing nothing,
// for a user without one. It rotates the session: every session the request
// carries is deleted first, so a token planted before sign-in (session
// fixation) dies with it, and a new session with a fresh token is created
// and sent in the cookie. The new session item is written with
// attribute_not_exists, so it can never overwrite another. If deleting a
// carried session fails, Login stops there and writes nothing.
func (m *Manager[U]) Login(w http.ResponseWriter, r *http.Request, user UserKey) error {
	return m.login(w, r, user, nil)
}

// LoginWith signs user in after verify accepts the user as read, in the
// same call, from the user item: verify checks the password (or other
// credential) against it and returns an error, which LoginWith returns,
// to refuse. Otherwise it is [Manager.Login].
//
// It is race-free against a credential change that writes the new
// credential and then calls [Manager.RevokeAll]: the session is stamped with
// a time taken before the user item was read, so a login that read the old
// credential is always created before the cutoff and dies with the others,
// and a login that read after the change saw the new credential, and the
// cutoff, and is stamped after it. A plain Login after the app's own read
// cannot promise that, since it cannot know when the app read.
//
// With a custom [Config.LoadUser], the loader must return the credential in
// U and read it, with the cutoff, in one strongly consistent read.
//
// verify runs within the call's StoreTimeout, between the read and the
// writes: a slow password hash fits, a wait for one does not. An app that
// bounds its hashing work takes its slot before calling LoginWith.
func (m *Manager[U]) LoginWith(w http.ResponseWriter, r *http.Request, user UserKey, verify func(U) error) error {
	if verify == nil {
		return errors.New("ddbsession: LoginWith: verify is nil")
	}
	return m.login(w, r, user, verify)
}

func (m *Manager[U]) login(w http.ResponseWriter, r *http.Request, user UserKey, verify func(U) error) error {
	token, s, now, err := m.signIn(r, user, verify, true)
	if err != nil {
		return err
	}
	m.setCookie(w, token, s, now)
	if m.cfg.DeviceBinding.Enabled {
		m.offerBinding(w, s)
	}
	return nil
}

// BearerToken is a session credential for a client without cookies, as
// [Manager.LoginBearer] issues it.
type BearerToken struct {
	// Token goes in each request's Authorization header as
	// "Bearer <Token>". It has the form of the session cookie's value.
	Token string
	// ExpiresAt is the session's expiry; a request that moves it forward
	// says so in the [SessionExpiresHeader] response header.
	ExpiresAt time.Time
}

// LoginBearer signs user in for a client without cookies (a CLI, a mobile
// app, a script) and returns the session's credential instead of setting a
// cookie. The session is like any other: hashed at rest, expiring and
// refreshed, listed with the request's User-Agent, revocable, and ended by
// RevokeAll. verify, if not nil, is [Manager.LoginWith]'s. It returns
// [ErrUserNotFound] for a user without an item. RequireSession accepts the
// token when [Config.BearerTokens] is set.
//
// Bearer requests need no cross-origin protection: a browser never adds an
// Authorization header to a request on its own, as it adds cookies, so
// another site cannot make a browser send one. Cookie requests do need it
// (SameSite=Lax, and http.CrossOriginProtection for state changes).
func (m *Manager[U]) LoginBearer(r *http.Request, user UserKey, verify func(U) error) (BearerToken, error) {
	token, s, _, err := m.signIn(r, user, verify, false)
	if err != nil {
		return BearerToken{}, err
	}
	return BearerToken{Token: m.credential(token, s), ExpiresAt: s.ExpiresAt}, nil
}

// signIn reads the user, verifies it if asked, ends the sessions the
// request carries in cookies if asked, and creates a new session. It
// returns the new token, the session and the time it took as now.
func (m *Manager[U]) signIn(r *http.Request, user UserKey, verify func(U) error, endCarried bool) (string, item.Session, time.Time, error) {
	var none item.Session
	if user.PK == "" || (user.SK == "") != m.cfg.HashOnly {
		return "", none, time.Time{}, fmt.Errorf("ddbsession: Login: user key %+v does not fit the table's key schema", user)
	}
	// Not cut short by the client: a half-done rotation helps no one.
	ctx, cancel := m.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	now := m.cfg.Now() // before the user is read: see LoginWith
	u, validAfter, err := m.loadUser(ctx, user)
	if errors.Is(err, ErrUserNotFound) {
		return "", none, now, err
	}
	if err != nil {
		return "", none, now, fmt.Errorf("ddbsession: Login: load user: %w", err)
	}
	if verify != nil {
		if err := verify(u); err != nil {
			return "", none, now, err
		}
	}
	if endCarried {
		if err := m.endRequestSessions(ctx, r, EventRotated); err != nil {
			return "", none, now, err
		}
	}
	// A cutoff newer than now was read with the user, so the credential
	// the login rests on is at least that new: stamp the session after it.
	created := max(now.UnixMilli(), validAfter.UnixMilli()+1)
	s := m.life.newSession(user, userAgent(r), time.UnixMilli(created))
	s.BrowserOnly = endCarried && m.cfg.KeepSignedIn != nil && !m.cfg.KeepSignedIn(r)
	if endCarried && m.cfg.DeviceBinding.Enabled {
		// The challenge of the offer to bind, which the Login response
		// makes, goes in with the session: it costs no write of its own.
		s.Challenge = challengeFor(now, registrationChallengeLifetime)
	}
	token := item.NewToken()
	if err := m.store.createSession(ctx, m.store.SessionPK(token), s); err != nil {
		return "", none, now, err
	}
	if m.cfg.OnEvent != nil {
		m.emit(ctx, Event{Kind: EventCreated, SessionID: s.ID, User: user})
	}
	return token, s, now, nil
}

// Logout ends every session the request carries, in cookies or (with
// [Config.BearerTokens]) as a bearer token: it deletes them from the table,
// so their tokens are dead on every instance, and clears the cookie.
// The cookie is cleared even when a delete fails, and the error is returned
// so that the app can tell the user the sign-out did not complete. A client
// that hangs up at once is still signed out.
func (m *Manager[U]) Logout(w http.ResponseWriter, r *http.Request) error {
	m.clearCookie(w)
	if len(r.CookiesNamed(m.cfg.DeviceBinding.CookieName)) > 0 {
		m.writeBoundCookie(w, "", -1)
	}
	ctx, cancel := m.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	return m.endRequestSessions(ctx, r, EventEnded)
}

// endRequestSessions deletes the sessions the request carries, and reports
// each as kind.
func (m *Manager[U]) endRequestSessions(ctx context.Context, r *http.Request, kind EventKind) error {
	var errs []error
	for _, token := range m.requestTokens(r) {
		s, found, err := m.store.deleteSession(ctx, m.store.SessionPK(token))
		if err != nil {
			errs = append(errs, err)
		}
		if found && m.cfg.OnEvent != nil {
			m.emit(ctx, Event{Kind: kind, SessionID: s.ID, User: UserKey{PK: s.UserPK, SK: s.UserSK}})
		}
	}
	return errors.Join(errs...)
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

// errBothCredentials is a request with a session cookie and a bearer token:
// refused, never guessed at.
var errBothCredentials = errors.New("ddbsession: a session cookie and a bearer token")

// requestCredential returns the request's credential: the first
// well-formed one among its cookies of our name or, with
// Config.BearerTokens, its bearer token. present says whether there was a
// cookie of our name or a bearer token at all, well-formed or not, and
// bearer which of the two it was.
func (m *Manager[U]) requestCredential(r *http.Request) (cred item.Credential, bearer, present bool, err error) {
	cred, present = m.cookieCredential(r)
	if !m.cfg.BearerTokens {
		return cred, false, present, nil
	}
	token, ok := bearerToken(r)
	switch {
	case !ok:
		return cred, false, present, nil
	case present:
		return item.Credential{}, true, true, errBothCredentials
	}
	cred, _ = m.store.ParseCredential(token)
	return cred, true, true, nil
}

// bearerToken returns the token of an "Authorization: Bearer" header (the
// scheme is case-insensitive, RFC 9110), and whether there was one.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return token, true
}

// cookieCredential returns the first well-formed credential among the
// request's cookies of our name, and whether there was any such cookie at
// all. Several cookies may share a name; malformed ones are ignored.
func (m *Manager[U]) cookieCredential(r *http.Request) (cred item.Credential, present bool) {
	for _, c := range r.CookiesNamed(m.cfg.CookieName) {
		present = true
		if cred, ok := m.store.ParseCredential(c.Value); ok {
			return cred, true
		}
	}
	return item.Credential{}, present
}

// maxCarriedTokens bounds how many of a request's session cookies Login and
// Logout end. A browser sends one, or a few where cookies were tossed; a
// client that sends hundreds must not turn one request into hundreds of
// deletes.
const maxCarriedTokens = 4

// requestTokens returns the well-formed session tokens the request carries
// in cookies and, with Config.BearerTokens, as a bearer token, for Login and
// Logout to end them.
func (m *Manager[U]) requestTokens(r *http.Request) []string {
	var tokens []string
	values := []string{}
	for _, c := range r.CookiesNamed(m.cfg.CookieName) {
		values = append(values, c.Value)
	}
	if token, ok := bearerToken(r); ok && m.cfg.BearerTokens {
		values = append(values, token)
	}
	for _, v := range values {
		if cred, ok := m.store.ParseCredential(v); ok && len(tokens) < maxCarriedTokens {
			tokens = append(tokens, cred.Token)
		}
	}
	return tokens
}

// setCookie sends the cookie of session s with a Max-Age that ends at its
// expiry, or none for a session that KeepSignedIn kept to the browser's.
func (m *Manager[U]) setCookie(w http.ResponseWriter, token string, s item.Session, now time.Time) {
	maxAge := max(int(s.ExpiresAt.Unix()-now.Unix()), 1)
	if s.BrowserOnly {
		maxAge = 0 // no Max-Age: the cookie ends with the browser
	}
	m.writeCookie(w, m.credential(token, s), maxAge)
}

// credential is the value a client presents for session s: the token, and
// the user's key unless LoadUser is the app's own or HideUserKey is set.
func (m *Manager[U]) credential(token string, s item.Session) string {
	withUser := m.cfg.LoadUser == nil && !m.cfg.HideUserKey
	return m.store.Credential(token, s.UserPK, s.UserSK, withUser)
}

// clearCookie tells the browser to drop the session cookie.
func (m *Manager[U]) clearCookie(w http.ResponseWriter) { m.writeCookie(w, "", -1) }

// writeCookie sets the cookie with attributes that browsers enforce for the
// __Host- prefix: Secure, Path=/ and no Domain. HttpOnly keeps it from
// scripts; SameSite=Lax keeps it off cross-site subrequests and POSTs. A
// response that carries it must not be cached, or a shared cache could hand
// one user's cookie to another.
func (m *Manager[U]) writeCookie(w http.ResponseWriter, value string, maxAge int) {
	writeCookie(w, m.cfg.CookieName, value, maxAge, !m.cfg.InsecureDevMode)
}

// writeCookie sets cookie name, host-only on Path=/, HttpOnly and
// SameSite=Lax, on a response that must not be cached. The session cookie
// and the bound cookie share it.
func writeCookie(w http.ResponseWriter, name, value string, maxAge int, secure bool) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	addVaryCookie(h)
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		Secure:   secure,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	})
}

func addVaryCookie(h http.Header) {
	for _, v := range h.Values("Vary") {
		if v == "Cookie" {
			return
		}
	}
	h.Add("Vary", "Cookie")
}

// textHandler answers with a status code and a one-line plain-text body.
func textHandler(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, msg, code)
	})
}
