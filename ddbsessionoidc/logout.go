package ddbsessionoidc

import (
	"context"
	"net/http"
	"net/url"
)

// This file is RP-initiated logout: the app's sign-out, which ends the
// session here and sends the browser to the provider to end it there.

// Logout signs the request's session out, for the app's logout route
// inside [ddbsession.Manager.RequireSession] or LoadSession: it ends the
// session with [ddbsession.Manager.Logout], and sends the browser with
// 303 See Other to the provider's end_session_endpoint with the session's
// ID token as id_token_hint, PostLogoutRedirectURL as
// post_logout_redirect_uri and the client_id (OpenID Connect RP-Initiated
// Logout 1.0), for the provider to end its own session, and with it, by
// back-channel logout, the other apps'. The ID token comes from the
// table, where Callback kept it: it is never in a cookie. A session that
// did not sign in through this provider, or a provider without an
// end-session endpoint, goes to PostLogoutRedirectURL directly.
//
// It costs one GetItem, the Manager's Logout and a DeleteItem of the
// record. On an error it has written no redirect: the cookie is cleared,
// and the app says that the sign-out did not complete.
func (p *Provider[U]) Logout(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.timeout)
	defer cancel()
	var rec record
	var found bool
	var readErr error
	s, signedIn := p.sessions.Session(r.Context())
	if signedIn && s.ID != "" {
		if readErr = p.store.checkLayout(ctx); readErr == nil {
			rec, found, readErr = p.store.getRecord(ctx, s.ID, p.now())
		}
		// Another user's record under this ID is none of this session's.
		found = found && rec.user == s.User && rec.issuer == p.issuer
	}
	if err := p.sessions.Logout(w, r); err != nil {
		return err
	}
	if readErr != nil {
		return &failure{http.StatusServiceUnavailable, "logout: signed out here, but the provider's session is not known", readErr}
	}
	target := p.postLogout
	if found && p.endSession != "" {
		if err := p.store.deleteRecord(ctx, s.ID); err != nil {
			p.logger.WarnContext(ctx, "ddbsessionoidc: logout: delete the session's record", "err", err)
		}
		target = p.endSessionURL(rec.idToken)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil
}

// endSessionURL is the provider's end-session endpoint with the request's
// parameters added to its own.
func (p *Provider[U]) endSessionURL(idToken string) string {
	u, _ := url.Parse(p.endSession) // checked by New
	q := u.Query()
	q.Set("id_token_hint", idToken)
	q.Set("post_logout_redirect_uri", p.postLogout)
	q.Set("client_id", p.oauth.ClientID)
	u.RawQuery = q.Encode()
	return u.String()
}
