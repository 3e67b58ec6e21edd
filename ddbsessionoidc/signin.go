package ddbsessionoidc

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/ddbsession/ddbsession"
)

// This file signs users in: SignIn sends the browser to the provider, and
// Callback, where the provider sends it back, verifies the answer, signs
// the user in with the Manager and records the sign-in for a back-channel
// logout.

// SignIn starts a sign-in: it writes an attempt (one PutItem), sets the
// cookie that binds the attempt to this browser, and sends the browser
// with 303 See Other to the provider's authorization endpoint, with the
// authorization code flow, PKCE (S256) and a nonce. The request's "next"
// parameter, a path on this site ([ddbsession.ReturnPath]), is where
// Callback sends the browser once signed in. Serve it on GET or POST (a
// "Sign in with …" link or button). A store failure answers 503.
//
// The attempt's state (in the URL) and the cookie's secret are 256 random
// bits each; the table holds the state's digest and the secret's, and the
// PKCE verifier and the nonce are derived from the secret, so that neither
// the table nor the provider's URL can complete the sign-in without the
// browser's cookie. A second SignIn in the same browser replaces the
// cookie: the first attempt's callback then fails, and the user starts
// again.
func (p *Provider[U]) SignIn(w http.ResponseWriter, r *http.Request) { p.start(w, r, false) }

// Reauthenticate is SignIn for a re-authentication (the page that
// [ddbsession.Manager.RequireAuthentication] sends a browser to): the
// authorization request asks the provider to authenticate the user again
// (prompt=login and max_age=0, OpenID Connect Core 3.1.2.1), and Callback
// accepts only an ID token whose auth_time shows that it did during this
// attempt: the login's age at the token's iat (iat - auth_time, on the
// provider's clock) may be no more than the attempt's age when the
// callback came (on the app's clock, from Reauthenticate's write) and a
// few seconds' slack. Each age is read on one clock, so no clock of the
// app's is compared with the provider's. A token without auth_time, or
// whose login predates the attempt, is refused. Without that, a provider
// that still holds a session of the user signs them in silently, and the
// session would count as freshly authenticated by someone who typed
// nothing. A SignIn's session has a fresh AuthenticatedAt too, so a
// step-up guard must ask for [Config.FreshMethod], which the sessions of
// Reauthenticate carry, and of a SignIn only if the user logged in at the
// provider during its attempt, by the same rule. The same call costs as
// SignIn.
func (p *Provider[U]) Reauthenticate(w http.ResponseWriter, r *http.Request) { p.start(w, r, true) }

func (p *Provider[U]) start(w http.ResponseWriter, r *http.Request, fresh bool) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	state, secret := newSecret(), newSecret()
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	now := p.now()
	a := attempt{bind: digest(secret), returnTo: ddbsession.ReturnPath(r, "/"), started: now, expires: now.Add(p.attemptLifetime), fresh: fresh}
	if err := p.store.checkLayout(ctx); err != nil {
		p.failed(w, r, unavailable("sign in", err))
		return
	}
	if err := p.store.putAttempt(ctx, state, a); err != nil {
		p.failed(w, r, unavailable("sign in: write the attempt", err))
		return
	}
	p.writeCookie(w, secret, int(p.attemptLifetime.Seconds()))
	opts := []oauth2.AuthCodeOption{oidc.Nonce(derive(secret, "nonce")), oauth2.S256ChallengeOption(derive(secret, "pkce"))}
	if fresh {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"), oauth2.SetAuthURLParam("max_age", "0"))
	}
	target := p.oauth.AuthCodeURL(state, opts...)
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// Callback completes a sign-in at the RedirectURL, on GET: it takes the
// attempt that the state names, if this browser's cookie binds it (one
// conditional DeleteItem, which one of racing callbacks alone wins),
// exchanges the code with the PKCE verifier, verifies the ID token
// (signature from the provider's keys, iss, aud, exp, azp, the nonce),
// maps the provider's user to the app's through Config.User, and signs
// the user in with [ddbsession.Manager.Login], with Method (and
// FreshMethod if the ID token's auth_time shows a login during the
// attempt, as [Provider.Reauthenticate] says). Then it
// records the session under the provider session (sid) and the subject,
// for a back-channel logout, and keeps the ID token for the end-session
// request; only when all of that is written does the browser get its
// session cookie, with 303 See Other to the attempt's return path.
//
// A provider session or a subject that a back-channel logout ended after
// the ID token was issued refuses the sign-in, and the session it made is
// revoked before its cookie was ever sent. Any failure reaches
// Config.SignInFailed; a malformed state or cookie costs no call.
func (p *Provider[U]) Callback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	p.writeCookie(w, "", -1) // whatever happens next, the attempt is spent
	if err := p.callback(w, r); err != nil {
		p.failed(w, r, err)
	}
}

func (p *Provider[U]) callback(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	state, secret := q.Get("state"), p.secretOf(r)
	if !validSecret(state) || secret == "" {
		return refused("sign in: no sign-in attempt of this browser", nil)
	}
	// Not cut short by the client: a half-done sign-in helps no one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.timeout)
	defer cancel()
	now := p.now()
	if err := p.store.checkLayout(ctx); err != nil {
		return unavailable("sign in", err)
	}
	a, found, err := p.store.takeAttempt(ctx, state, digest(secret), now)
	if err != nil {
		return unavailable("sign in: take the attempt", err)
	}
	if !found {
		return refused("sign in: the attempt is unknown, expired, used, or another browser's", nil)
	}
	if code := q.Get("error"); code != "" {
		return refused("sign in: the provider answered "+safeCode(code), nil)
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		return refused("sign in: the provider's answer has no code", nil)
	}
	token, err := p.oauth.Exchange(oidc.ClientContext(ctx, p.http), code, oauth2.VerifierOption(derive(secret, "pkce")))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return refused("sign in: the provider refused the code: "+safeCode(re.ErrorCode), nil)
		}
		return &failure{http.StatusBadGateway, "sign in: exchange the code", err}
	}
	rawID, _ := token.Extra("id_token").(string)
	if rawID == "" {
		return &failure{http.StatusBadGateway, "sign in: the provider's token response has no id_token", nil}
	}
	id, fresh, err := p.verifyIDToken(ctx, rawID, secret, token, a, now)
	if err != nil {
		return err
	}
	methods := []string{p.method}
	if fresh {
		methods = append(methods, p.freshMethod)
	}
	key, err := p.user(ctx, id)
	if err != nil {
		return &failure{http.StatusForbidden, "sign in: Config.User", err}
	}
	held := &heldResponse{header: http.Header{}}
	if err := p.sessions.Login(held, r, key, nil, methods...); err != nil {
		if errors.Is(err, ddbsession.ErrUserNotFound) || errors.Is(err, ddbsession.ErrTooManySessions) {
			return &failure{http.StatusForbidden, "sign in", err}
		}
		return unavailable("sign in", err)
	}
	session, err := p.newSession(ctx, held)
	if err != nil {
		return unavailable("sign in: read the new session", err)
	}
	if err := p.recordSignIn(ctx, session, id, rawID); err != nil {
		// The cookie was never sent: end the session it would carry.
		if rerr := p.sessions.Revoke(ctx, session.User, session.ID); rerr != nil && !errors.Is(rerr, ddbsession.ErrNoSession) {
			p.logger.ErrorContext(ctx, "ddbsessionoidc: a sign-in failed, and its session, whose cookie was never sent, is not revoked", "sid", session.ID, "err", rerr)
		}
		if errors.Is(err, errEnded) {
			return refused("sign in", err)
		}
		return unavailable("sign in: record the session", err)
	}
	for name, values := range held.header {
		if name == "Set-Cookie" {
			w.Header()[name] = append(w.Header()[name], values...)
		} else {
			w.Header()[name] = values
		}
	}
	http.Redirect(w, r, a.returnTo, http.StatusSeeOther)
	return nil
}

// freshSlack is how much older than its attempt a login may seem and
// still count as the attempt's own. iat and auth_time are whole seconds,
// so the login's age may read up to a second too long, and the attempt's
// age is read as the callback begins, before the code's exchange at which
// the provider issues the token: that round trip, and the clocks of a
// provider's login and token servers, which may differ by a second, make
// an honest login look a little older than the attempt. Five seconds
// covers them; a provider session that old is a login the user made just
// before, no single sign-on from an earlier visit.
const freshSlack = 5 * time.Second

// verifyIDToken verifies the ID token of a code's exchange, against the
// attempt's secret: go-oidc checks the signature with the provider's keys,
// iss, aud and exp; this, the nonce, the authorized party, and the
// access token's hash where the token has one; for a re-authentication
// (a.fresh), a login during the attempt, whose callback came at now,
// which fresh reports for any sign-in.
func (p *Provider[U]) verifyIDToken(ctx context.Context, raw, secret string, token *oauth2.Token, a attempt, now time.Time) (_ Identity, fresh bool, err error) {
	idt, err := p.idTokens.Verify(ctx, raw)
	if err != nil {
		return Identity{}, false, refused("sign in: the ID token", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(derive(secret, "nonce"))) != 1 {
		return Identity{}, false, refused("sign in: the ID token's nonce is not this attempt's", nil)
	}
	var claims struct {
		SID      string `json:"sid"`
		AZP      string `json:"azp"`
		AuthTime int64  `json:"auth_time"`
	}
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, false, refused("sign in: the ID token's claims", err)
	}
	if claims.AZP != "" && claims.AZP != p.oauth.ClientID || len(idt.Audience) > 1 && claims.AZP == "" {
		return Identity{}, false, refused("sign in: the ID token was issued to another party", nil)
	}
	if idt.Subject == "" || idt.IssuedAt.IsZero() {
		return Identity{}, false, refused("sign in: the ID token has no sub or no iat", nil)
	}
	// The login is the attempt's if the provider says it was no longer
	// before the token (iat - auth_time, on its clock) than the attempt is
	// old (on the app's). An attempt without its start shows nothing.
	loginAge := idt.IssuedAt.Sub(time.Unix(claims.AuthTime, 0))
	fresh = claims.AuthTime != 0 && !a.started.IsZero() && loginAge <= now.Sub(a.started)+freshSlack
	if a.fresh && !fresh {
		return Identity{}, false, refused("sign in: the provider did not authenticate the user during the attempt (auth_time)", nil)
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(token.AccessToken); err != nil {
			return Identity{}, false, refused("sign in: the ID token's at_hash", err)
		}
	}
	// The configured issuer, which logout tokens are checked against: the
	// one name of the provider in the keys of its items.
	return Identity{Issuer: p.issuer, Subject: idt.Subject, SessionID: claims.SID, IDToken: idt}, fresh, nil
}

// newSession finds the session that Login made in its response's cookie,
// with one read (Manager.Authenticate): Login says the session only
// there.
func (p *Provider[U]) newSession(ctx context.Context, held *heldResponse) (ddbsession.Session, error) {
	for _, line := range held.header["Set-Cookie"] {
		c, err := http.ParseSetCookie(line)
		if err != nil || c.Value == "" || c.MaxAge < 0 {
			continue
		}
		s, _, err := p.sessions.Authenticate(ctx, c.Value)
		if errors.Is(err, ddbsession.ErrNoSession) {
			continue // another cookie of the response
		}
		return s, err
	}
	return ddbsession.Session{}, errors.New("the response of Login carries no session cookie")
}

// recordSignIn writes, side by side, the session's link under its provider
// session (if the ID token has a sid) and under its subject, and its
// record, which keeps the ID token for the end-session request. It
// returns errEnded if a back-channel logout ended either first. Links past
// their life, which a write returns, are dropped after, and a failure to
// is logged only.
func (p *Provider[U]) recordSignIn(ctx context.Context, s ddbsession.Session, id Identity, rawID string) error {
	until := s.CreatedAt.Add(p.sessionLifetime)
	l := link{ID: s.ID, PK: s.User.PK, SK: s.User.SK, IAT: id.IDToken.IssuedAt.Unix(), Until: until.Unix()}
	type write struct {
		key  map[string]types.AttributeValue
		kind string
		set  map[string]types.AttributeValue
	}
	writes := []write{{p.store.subjectKey(id.Issuer, id.Subject), kindSubject, map[string]types.AttributeValue{attrIssuer: str(id.Issuer)}}}
	if id.SessionID != "" {
		writes = append(writes, write{p.store.providerSessionKey(id.Issuer, id.SessionID), kindProviderSession,
			map[string]types.AttributeValue{attrIssuer: str(id.Issuer), attrSubject: str(id.Subject)}})
	}
	errs := make([]error, len(writes)+1)
	var wg sync.WaitGroup
	for i, wr := range writes {
		wg.Go(func() {
			links, raw, err := p.store.addLink(ctx, wr.key, wr.kind, l, wr.set)
			if errs[i] = err; err != nil {
				return
			}
			if stale := staleLinks(links, raw, p.now().Unix()); len(stale) > 0 {
				if err := p.store.dropLinks(ctx, wr.key, stale); err != nil {
					p.logger.WarnContext(ctx, "ddbsessionoidc: drop links of sessions past their life", "err", err)
				}
			}
		})
	}
	wg.Go(func() {
		errs[len(writes)] = p.store.putRecord(ctx, s.ID, record{
			issuer: id.Issuer, subject: id.Subject, sid: id.SessionID, idToken: rawID, user: s.User, until: until,
		})
	})
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, errEnded) {
			return err
		}
	}
	return errors.Join(errs...)
}

// staleLinks returns the raw form of the links past their life at now
// (epoch seconds), and of those that do not decode.
func staleLinks(links []link, raw []string, now int64) []string {
	var stale []string
	for i, l := range links {
		if l.Until <= now {
			stale = append(stale, raw[i])
		}
	}
	return stale
}

// heldResponse holds the headers of Login's response until the sign-in
// is recorded: a session whose record failed never reaches the browser.
type heldResponse struct{ header http.Header }

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) Write([]byte) (int, error) {
	return 0, errors.New("ddbsessionoidc: Login wrote a body")
}

func (h *heldResponse) WriteHeader(int) {}

// writeCookie sets the attempt's cookie, with the attributes that
// browsers enforce for the __Host- prefix. SameSite=Lax: the provider
// sends the browser back with a top-level GET from its own site.
func (p *Provider[U]) writeCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: p.cookie, Value: value, Path: "/", MaxAge: maxAge,
		Secure: p.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}

// secretOf returns the secret of r's attempt cookie, if one is of its
// shape.
func (p *Provider[U]) secretOf(r *http.Request) string {
	for _, c := range r.CookiesNamed(p.cookie) {
		if validSecret(c.Value) {
			return c.Value
		}
	}
	return ""
}

// newSecret returns 256 random bits, base64url.
func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validSecret reports whether s has the shape of newSecret's values.
func validSecret(s string) bool {
	if len(s) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil
}

// derive returns the value named label of an attempt's secret, base64url
// of HMAC-SHA256: the PKCE verifier (43 characters, as RFC 7636 wants)
// and the nonce, which only the browser's cookie can give.
func derive(secret, label string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("ddbsessionoidc " + label))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// safeCode returns an OAuth error code as it may be shown: its own
// characters (RFC 6749 allows printable ASCII but " and \), at most 64.
func safeCode(code string) string {
	if len(code) > 64 || strings.ContainsFunc(code, func(r rune) bool { return r < ' ' || r > '~' || r == '"' || r == '\\' }) {
		return "(an error code not shown)"
	}
	return code
}
