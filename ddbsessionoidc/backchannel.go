package ddbsessionoidc

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/ddbsession/ddbsession"
)

// This file serves OpenID Connect Back-Channel Logout 1.0: the provider
// POSTs a logout token, and the sessions it names end on every instance.

// Bounds of a back-channel logout request: its body; how far in the
// future a token's iat may be, for the provider's clock against this one
// (go-oidc allows nbf the same); and how long ago, on this clock. A
// logout token is a notice of a logout that just happened: Back-Channel
// Logout 1.0 (section 4) has providers expire it at most two minutes on,
// as Keycloak does, but exp is the provider's to set, and a token
// captured or held back could carry one far out. Two minutes, plus the
// skew again for a provider whose clock is behind this one, are 7.
const (
	maxLogoutBody     = 64 << 10
	clockSkew         = 5 * time.Minute
	maxLogoutTokenAge = 2*time.Minute + clockSkew
)

// BackChannelLogout serves the back-channel logout URI registered at the
// provider. It takes a POST of application/x-www-form-urlencoded with a
// logout_token, verifies the token (signature from the provider's keys,
// iss, aud, exp, iat, the back-channel-logout event, no nonce, sid and/or
// sub), refuses a jti seen before within the token's lifetime (one
// conditional PutItem), and ends the sessions it names on every instance,
// with [ddbsession.Manager.Revoke]:
//
//   - with a sid, every session that sign-ins of that provider session
//     made (with a sub too, only if it is the sid's subject). The provider
//     session stays ended: a sign-in of it still on its way is refused.
//   - with a sub alone, every session that the subject signed in with ID
//     tokens issued at or before the logout token; a later sign-in, of a
//     new provider session, lives. It is not [ddbsession.Manager.RevokeAll],
//     which would end the user's sessions of other sign-ins (a password,
//     another provider) too, which the provider never vouched for.
//
// Each costs one UpdateItem that marks the provider session or subject
// ended and returns its sessions, in one write, and the Revokes. A token
// that names sessions never seen, or ended already, is a success: logout
// is idempotent. The answer is 200, or 400 with a JSON error
// (invalid_request for a bad token, temporarily_unavailable when the
// sessions could not be ended, for the provider to send it again), and
// always Cache-Control: no-store. A token that does not verify costs no
// DynamoDB call. Nor does one issued more than 7 minutes ago on the app's
// clock (a logout token's two minutes of life and 5 of clock skew) or
// more than 5 ahead: it does not verify, whatever its exp.
func (p *Provider[U]) BackChannelLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		logoutError(w, http.StatusMethodNotAllowed, "invalid_request", "POST the logout token")
		return
	}
	raw, msg := logoutTokenOf(w, r)
	if msg != "" {
		logoutError(w, http.StatusBadRequest, "invalid_request", msg)
		return
	}
	// Not cut short by the provider: a half-done logout helps no one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.timeout)
	defer cancel()
	lt, err := p.verifyLogout(ctx, raw)
	if err != nil {
		logoutError(w, http.StatusBadRequest, "invalid_request", "the logout token is not valid")
		return
	}
	switch err := p.logout(ctx, lt); {
	case errors.Is(err, errReplayed):
		logoutError(w, http.StatusBadRequest, "invalid_request", "the logout token was received before")
	case errors.Is(err, errOtherSubject):
		logoutError(w, http.StatusBadRequest, "invalid_request", "the logout token's sub and sid disagree")
	case err != nil:
		p.logger.ErrorContext(ctx, "ddbsessionoidc: back-channel logout: sessions not ended", "err", err)
		logoutError(w, http.StatusBadRequest, "temporarily_unavailable", "the sessions could not be ended now; send the logout again")
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// logoutTokenOf reads the logout token of a back-channel request, or says
// what is wrong with the request.
func logoutTokenOf(w http.ResponseWriter, r *http.Request) (token, problem string) {
	media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || media != "application/x-www-form-urlencoded" {
		return "", "want application/x-www-form-urlencoded"
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLogoutBody)
	if err := r.ParseForm(); err != nil {
		return "", "the form does not parse"
	}
	values := r.PostForm["logout_token"]
	if len(values) != 1 || values[0] == "" {
		return "", "want one logout_token"
	}
	return values[0], ""
}

// logoutError answers a back-channel request with an OAuth error.
func logoutError(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}{code, description})
}

// verifyLogout verifies a logout token: go-oidc checks the signature, iss,
// aud, exp, the event, the absence of a nonce, jti, and sid or sub; this,
// that iat is within maxLogoutTokenAge before now and clockSkew after.
func (p *Provider[U]) verifyLogout(ctx context.Context, raw string) (*oidc.LogoutToken, error) {
	lt, err := p.idTokens.VerifyLogout(ctx, raw)
	if err != nil {
		return nil, err
	}
	now := p.now()
	switch {
	case lt.IssuedAt.IsZero() || lt.IssuedAt.After(now.Add(clockSkew)):
		return nil, errors.New("iat missing or in the future")
	case lt.IssuedAt.Before(now.Add(-maxLogoutTokenAge)):
		return nil, errors.New("iat too long ago")
	}
	return lt, nil
}

// errReplayed is logout's answer for a token whose jti was seen before.
var errReplayed = errors.New("the logout token's jti was seen before")

// logout records lt's jti, refusing one seen before, and ends the
// sessions lt names. If they do not all end, the jti is forgotten again,
// so that the provider's retry of the same token is no replay.
func (p *Provider[U]) logout(ctx context.Context, lt *oidc.LogoutToken) error {
	if err := p.store.checkLayout(ctx); err != nil {
		return err
	}
	fresh, err := p.store.seeLogoutToken(ctx, lt.Issuer, lt.TokenID, lt.Expiry)
	if err != nil {
		return err
	}
	if !fresh {
		return errReplayed
	}
	err = p.end(ctx, lt)
	if err != nil && !errors.Is(err, errOtherSubject) {
		if ferr := p.store.forgetLogoutToken(ctx, lt.Issuer, lt.TokenID); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return err
}

// end ends the sessions that lt names.
func (p *Provider[U]) end(ctx context.Context, lt *oidc.LogoutToken) error {
	now := p.now()
	// A mark of a provider session or subject never seen is kept while a
	// sign-in that began before the logout may still complete.
	keep := now.Add(p.attemptLifetime + clockSkew)
	iat := lt.IssuedAt.Unix()
	if lt.SessionID != "" {
		links, _, err := p.store.endProviderSession(ctx, p.store.providerSessionKey(lt.Issuer, lt.SessionID), iat, lt.Subject, keep)
		if err != nil {
			return err
		}
		return p.revoke(ctx, links)
	}
	key := p.store.subjectKey(lt.Issuer, lt.Subject)
	links, raw, err := p.store.endSubject(ctx, key, iat, keep)
	if err != nil {
		return err
	}
	var ended []link
	var drop []string
	for i, l := range links {
		// Sessions of ID tokens issued after the logout token are of a
		// provider session that began after it: they live.
		if l.IAT <= iat || l.Until <= now.Unix() {
			ended = append(ended, l)
			drop = append(drop, raw[i])
		}
	}
	if err := p.revoke(ctx, ended); err != nil {
		return err
	}
	if err := p.store.dropLinks(ctx, key, drop); err != nil {
		// Ended sessions' links only cost the next logout a Revoke each.
		p.logger.WarnContext(ctx, "ddbsessionoidc: drop the links of ended sessions", "err", err)
	}
	return nil
}

// revoke ends the sessions of links, a few at a time, and deletes their
// records, which hold ID tokens no logout needs any more. A session gone
// already is no failure.
func (p *Provider[U]) revoke(ctx context.Context, links []link) error {
	errs := make([]error, len(links))
	limit := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, l := range links {
		if l.ID == "" {
			continue // an element that did not decode
		}
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			err := p.sessions.Revoke(ctx, ddbsession.UserKey{PK: l.PK, SK: l.SK}, l.ID)
			if err != nil && !errors.Is(err, ddbsession.ErrNoSession) {
				errs[i] = err
				return
			}
			if err := p.store.deleteRecord(ctx, l.ID); err != nil {
				p.logger.WarnContext(ctx, "ddbsessionoidc: delete the record of an ended session", "sid", l.ID, "err", err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
