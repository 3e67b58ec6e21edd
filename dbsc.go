package ddbsession

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/dbsc"
	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds the two endpoints of device binding (DBSC): registration,
// where a browser binds a session to its key, and refresh, where it proves
// possession of the key for a fresh bound cookie. The bound cookie's check
// on every request, and the offer that Login makes, are in bound.go.

// DeviceBindingHandler serves DBSC at [DeviceBinding.RegistrationPath] and
// [DeviceBinding.RefreshPath] (404 elsewhere, and while Enabled is off).
// Mount it outside RequireSession, which refuses a refresh without its
// bound cookie: it checks the session cookie itself. Registration and
// refresh each cost a read and a write.
//
//	mux.Handle("POST /dbsc/", sessions.DeviceBindingHandler())
func (m *Manager[U]) DeviceBindingHandler() http.Handler {
	return http.HandlerFunc(m.serveBinding)
}

func (c *core) serveBinding(w http.ResponseWriter, r *http.Request) {
	d := c.binding
	if !d.Enabled || (r.URL.Path != d.RegistrationPath && r.URL.Path != d.RefreshPath) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	addVary(w.Header(), "Cookie")
	if r.URL.Path == d.RegistrationPath {
		c.register(w, r)
	} else {
		c.refreshBound(w, r)
	}
}

// register binds the request's session to the key in the registration
// JWT, once the JWT is shown to be signed with that key over the challenge
// that the login offered. Every refusal is a 4xx that changes nothing; the
// browser then keeps the session unbound.
func (c *core) register(w http.ResponseWriter, r *http.Request) {
	now := c.now()
	// The session cookie's form first, the signature next, DynamoDB last:
	// a request without a session costs no verification, and a bad JWT
	// no call.
	cred, _ := c.cookies.fromCookie(r)
	if cred.Token == "" {
		http.Error(w, "no session", http.StatusUnauthorized)
		return
	}
	jwt, err := requestJWT(r)
	if err == nil && jwt.Key == nil {
		err = errors.New("the registration JWT has no jwk")
	}
	if err == nil {
		err = jwt.Verify(jwt.Key)
	}
	if err != nil {
		http.Error(w, "bad registration: "+err.Error(), http.StatusBadRequest)
		return
	}
	// Not cut short by the client: a binding half made helps no one.
	ctx, cancel := c.storeContext(context.WithoutCancel(r.Context()))
	defer cancel()
	sessionPK := c.store.SessionPK(cred.Token)
	s, err := c.check(ctx, cred, sessionPK, now, nil)
	switch {
	case errors.Is(err, ErrNoSession):
		http.Error(w, "no session", http.StatusUnauthorized)
		return
	case err != nil:
		c.bindingStoreFailure(w, r, err)
		return
	case s.DeviceBound || s.DPoP:
		http.Error(w, "the session is bound already", http.StatusConflict)
		return
	case !challengeFits(s.Challenge, jwt.JTI, now):
		http.Error(w, "the challenge is not this session's, or has expired", http.StatusBadRequest)
		return
	}
	key, err := dbsc.MarshalJWK(jwt.Key)
	if err != nil {
		http.Error(w, "bad registration: "+err.Error(), http.StatusBadRequest)
		return
	}
	value, cookie := c.binding.newCookie(now)
	next := c.binding.newChallenge(now)
	err = c.bindingWrite(ctx, "bind session", c.store.SessionKey(sessionPK), c.store.Bind(s, jwt.JTI, key, cookie, next, now))
	if err != nil && c.boundCookieLanded(ctx, sessionPK, cookie) {
		// The answer was lost, not the write; or the SDK retried the
		// write after it landed, and the retry found its condition spent.
		// Refusing would leave the session bound to a key whose browser
		// gave up registering (Chromium does not retry), and so unusable.
		err = nil
	}
	switch {
	case errors.Is(err, errChallengeUsed):
		http.Error(w, "the challenge was used, or the session changed", http.StatusBadRequest)
		return
	case err != nil:
		c.bindingStoreFailure(w, r, err)
		return
	}
	c.events.emit(r.Context(), Event{Kind: EventBound, SessionID: s.ID, User: userOf(s)})
	c.sendBoundCookie(w, s.ID, value, cookie, next, now)
}

// refreshBound answers a bound session's refresh. Without a signed
// challenge, or with one the session no longer awaits (used, replaced,
// expired: Chromium re-sends an old one at times), it answers 403 with a
// fresh challenge. With a valid proof it sends a fresh bound cookie. A
// session that is gone, revoked, expired, or not the one the browser names
// is ended in the browser too, and a bad signature is refused with 400,
// which also ends it there.
func (c *core) refreshBound(w http.ResponseWriter, r *http.Request) {
	now := c.now()
	id := unquote(r.Header.Get(headerSessionID))
	if !item.ValidID(id) {
		http.Error(w, "no valid "+headerSessionID, http.StatusBadRequest)
		return
	}
	var jwt *dbsc.JWT
	if r.Header.Get(headerResponse) != "" {
		var err error
		if jwt, err = requestJWT(r); err == nil && jwt.Key != nil {
			err = errors.New("a refresh JWT must not carry a key")
		}
		if err != nil {
			http.Error(w, "bad refresh: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	cred, _ := c.cookies.fromCookie(r)
	if cred.Token == "" {
		c.endBinding(w, id)
		return
	}
	ctx, cancel := c.storeContext(r.Context())
	defer cancel()
	sessionPK := c.store.SessionPK(cred.Token)
	if jwt == nil {
		if err := c.read.CheckLayout(ctx); err != nil {
			c.bindingStoreFailure(w, r, err)
			return
		}
		c.challenge(ctx, w, r, sessionPK, id, now)
		return
	}
	s, err := c.check(ctx, cred, sessionPK, now, nil)
	switch {
	case errors.Is(err, ErrNoSession):
		c.endBinding(w, id)
		return
	case err == nil && (s.ID != id || !s.DeviceBound):
		// The session cookie is another session's (a later login), whose
		// bound cookie, if it has one, the browser keeps.
		c.endBindingOnly(w, id)
		return
	case err != nil:
		c.bindingStoreFailure(w, r, err)
		return
	}
	key, err := dbsc.ParseJWK([]byte(s.Binding.Key))
	if err != nil {
		// Not a key this release stored: the session cannot prove itself.
		c.logger.ErrorContext(r.Context(), "ddbsession: unreadable device key, ending the binding", "sid", s.ID, "err", err)
		c.endBinding(w, id)
		return
	}
	if err := jwt.Verify(key); err != nil {
		http.Error(w, "bad refresh: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !challengeFits(s.Challenge, jwt.JTI, now) {
		if challengeOpen(s.Challenge, now) {
			sendChallenge(w, s.Challenge, id) // the one it awaits, unused
		} else {
			c.challenge(ctx, w, r, sessionPK, id, now)
		}
		return
	}
	value, cookie := c.binding.newCookie(now)
	next := c.binding.newChallenge(now)
	err = c.bindingWrite(ctx, "refresh bound cookie", c.store.SessionKey(sessionPK), c.store.Rebind(s, jwt.JTI, cookie, next, now))
	if err != nil && c.boundCookieLanded(ctx, sessionPK, cookie) {
		err = nil // the answer was lost, not the write (as in register)
	}
	switch {
	case errors.Is(err, errChallengeUsed):
		// A concurrent refresh used the challenge first.
		c.challenge(ctx, w, r, sessionPK, id, now)
		return
	case err != nil:
		c.bindingStoreFailure(w, r, err)
		return
	}
	c.events.emit(r.Context(), Event{Kind: EventBoundRefreshed, SessionID: s.ID, User: userOf(s)})
	c.sendBoundCookie(w, s.ID, value, cookie, next, now)
}

// challenge answers a refresh with 403 and the challenge that session id
// awaits: a fresh one, with one write, unless the session still awaits an
// unused, unexpired one, which is read and sent again. A challenge is
// replaced only once spent, so that whoever holds a copy of the session
// cookie cannot make the device's challenge stale over and over (Chromium
// gives a session up after 5 challenges in a row). If the session is gone,
// expired, or not that one, the binding ends in the browser, and the bound
// cookie stays: where the session cookie is a later login's, the bound
// cookie the browser holds is that session's.
func (c *core) challenge(ctx context.Context, w http.ResponseWriter, r *http.Request, sessionPK, id string, now time.Time) {
	next := c.binding.newChallenge(now)
	err := c.bindingWrite(ctx, "set challenge", c.store.SessionKey(sessionPK), c.store.SetChallenge(id, next, now))
	if errors.Is(err, errChallengeUsed) {
		// Gone, another session, or a challenge still open: read which.
		s, found, rerr := c.store.getSession(ctx, sessionPK)
		switch {
		case rerr != nil:
			err = rerr
		case found && s.ID == id && s.DeviceBound && c.life.live(s, now) && challengeOpen(s.Challenge, now):
			next, err = s.Challenge, nil
		}
	}
	switch {
	case errors.Is(err, errChallengeUsed):
		c.endBindingOnly(w, id)
	case err != nil:
		c.bindingStoreFailure(w, r, err)
	default:
		sendChallenge(w, next, id)
	}
}

// sendChallenge answers a refresh with 403 and challenge c for session id.
func sendChallenge(w http.ResponseWriter, c item.Challenge, id string) {
	w.Header().Set(headerChallenge, challengeHeader(c, id))
	http.Error(w, "sign the challenge", http.StatusForbidden)
}

// challengeOpen reports whether c is a challenge, unexpired at now.
func challengeOpen(c item.Challenge, now time.Time) bool {
	return c.Value != "" && now.Unix() < c.Expires.Unix()
}

// boundCookieLanded reports whether a binding write whose outcome is
// unknown (an error that may have come after DynamoDB applied it) did
// land, by reading the session back within what is left of the request's
// deadline.
func (c *core) boundCookieLanded(ctx context.Context, sessionPK string, cookie item.BoundCookie) bool {
	ctx, cancel := detach(ctx)
	defer cancel()
	s, found, err := c.store.getSession(ctx, sessionPK)
	return err == nil && found && s.DeviceBound && s.Binding.Cookies[0] == cookie
}

// challengeFits reports whether jti answers challenge c, unexpired at now.
func challengeFits(c item.Challenge, jti string, now time.Time) bool {
	return challengeOpen(c, now) && jti == c.Value
}

// sendBoundCookie answers a registration or refresh that proved the device:
// the fresh bound cookie, the challenge for the next refresh, and the
// session configuration.
func (c *core) sendBoundCookie(w http.ResponseWriter, id, value string, cookie item.BoundCookie, next item.Challenge, now time.Time) {
	c.binding.writeCookie(w, value, boundMaxAge(cookie, now))
	w.Header().Set(headerChallenge, challengeHeader(next, id))
	writeJSON(w, sessionConfig{
		SessionIdentifier: id,
		RefreshURL:        c.binding.RefreshPath,
		Scope:             &configScope{},
		Credentials: []configCredential{{
			Type:       "cookie",
			Name:       c.binding.CookieName,
			Attributes: boundCookieAttributes,
		}},
	})
}

// endBinding tells the browser to stop refreshing session id, whose
// session is no more (or never was this one), and drops its bound cookie.
// The answer is 200, which is how DBSC ends a session in the browser.
func (c *core) endBinding(w http.ResponseWriter, id string) {
	c.binding.writeCookie(w, "", -1)
	c.endBindingOnly(w, id)
}

// endBindingOnly ends the binding in the browser and leaves the cookies.
func (c *core) endBindingOnly(w http.ResponseWriter, id string) {
	end := false
	writeJSON(w, sessionConfig{SessionIdentifier: id, Continue: &end})
}

func (c *core) bindingStoreFailure(w http.ResponseWriter, r *http.Request, err error) {
	// 5xx makes the browser keep the binding and try again later.
	c.events.storeFailed(r.Context(), err)
	c.storeUnavailable.ServeHTTP(w, r)
}

// sessionConfig is DBSC's session configuration, which registration and
// refresh answer with.
type sessionConfig struct {
	SessionIdentifier string             `json:"session_identifier"`
	Continue          *bool              `json:"continue,omitempty"`
	RefreshURL        string             `json:"refresh_url,omitempty"`
	Scope             *configScope       `json:"scope,omitempty"`
	Credentials       []configCredential `json:"credentials,omitempty"`
}

// configScope binds the whole origin of the registration: the bound cookie
// is host-only, like the session cookie.
type configScope struct {
	IncludeSite bool `json:"include_site"`
}

type configCredential struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Attributes string `json:"attributes"`
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// challengeHeader is a Secure-Session-Challenge value: the challenge as a
// structured-field string with the session's ID. Both are plain ASCII
// without quotes or backslashes, so %q quotes them as RFC 9651 does.
func challengeHeader(c item.Challenge, id string) string {
	return fmt.Sprintf("%q;id=%q", c.Value, id)
}

// requestJWT parses the request's Secure-Session-Response header.
func requestJWT(r *http.Request) (*dbsc.JWT, error) {
	raw := unquote(r.Header.Get(headerResponse))
	if raw == "" {
		return nil, errors.New("no " + headerResponse)
	}
	return dbsc.Parse(raw, dbsc.Type)
}

// unquote drops one pair of surrounding double quotes: the spec sends
// structured-field strings, Chromium sends the bare value.
func unquote(v string) string {
	if len(v) >= 2 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) {
		return v[1 : len(v)-1]
	}
	return v
}

// bindingWrite makes a device binding write w (see item.Layout's Bind,
// Rebind and SetChallenge): its failed condition is errChallengeUsed, and
// other errors say what failed.
func (c *core) bindingWrite(ctx context.Context, what string, key map[string]types.AttributeValue, w item.Writes) error {
	failed, err := c.store.update(ctx, key, w)
	switch {
	case failed:
		return errChallengeUsed
	case err != nil:
		return fmt.Errorf("ddbsession: %s: %w", what, err)
	}
	return nil
}
