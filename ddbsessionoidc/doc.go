// Package ddbsessionoidc signs users in to a ddbsession Manager through an
// OpenID Connect provider, and ends their sessions, on every instance, when
// the provider says so by OpenID Connect Back-Channel Logout 1.0. It is a
// module of its own, so that only its users download go-oidc and oauth2:
//
//	go get github.com/ddbsession/ddbsession/ddbsessionoidc
//
// A [Provider] is one provider and the app's client there. Its handlers:
//
//   - [Provider.SignIn] sends the browser to the provider: the
//     authorization code flow with PKCE and a nonce, the state kept
//     server-side in an attempt item, single-use and expiring, which a
//     cookie binds to the browser; [Provider.Reauthenticate] is the same
//     for a step-up, and asks the provider to make the user log in again;
//   - [Provider.Callback] takes the attempt with one conditional delete,
//     exchanges the code, verifies the ID token, maps the provider's user
//     to the app's ([Config.User]), signs in with
//     [ddbsession.Manager.Login] (methods: [Config.Method], and
//     [Config.FreshMethod] if the provider made the user log in for this
//     sign-in), and records the session under the provider's issuer and session ID (sid) and subject;
//   - [Provider.BackChannelLogout] verifies a logout token and ends the
//     sessions of its sid, or of its subject, with
//     [ddbsession.Manager.Revoke];
//   - [Provider.Logout] is the app's logout: it ends the session and sends
//     the browser to the provider's end-session endpoint with the ID token,
//     kept in the table, as id_token_hint.
//
// # Usage
//
//	sso, err := ddbsessionoidc.New(ctx, ddbsessionoidc.Config[User]{
//		Sessions:     sessions, // the app's *ddbsession.Manager[User], and its table
//		Issuer:       "https://accounts.google.com",
//		ClientID:     os.Getenv("OIDC_CLIENT_ID"),
//		ClientSecret: os.Getenv("OIDC_CLIENT_SECRET"),
//		RedirectURL:  "https://app.example/oidc/callback",
//		Scopes:       []string{"email"},
//		User: func(ctx context.Context, id ddbsessionoidc.Identity) (ddbsession.UserKey, error) {
//			return linkedUser(ctx, id.Issuer, id.Subject) // the app's own
//		},
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux.HandleFunc("POST /login/oidc", sso.SignIn)
//	mux.HandleFunc("GET /oidc/callback", sso.Callback)
//	mux.HandleFunc("/oidc/backchannel-logout", sso.BackChannelLogout) // every method: it answers the others itself
//	mux.Handle("POST /logout", sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		if err := sso.Logout(w, r); err != nil {
//			http.Error(w, "sign-out did not complete", http.StatusServiceUnavailable)
//		}
//	})))
//
// # Items
//
// The module keeps its items in the Manager's table, with the same
// [ddbsession.Layout] and a prefix of its own ([Config.Prefix], "OIDC#"):
// an attempt per sign-in on its way (digests only: the state, the PKCE
// verifier and the nonce never reach the table), an item per provider
// session (issuer, sid) and per subject (issuer, sub), which list the
// app's sessions they signed in, a record per session with its ID token,
// and a record per logout token's jti until the token expires. A
// back-channel logout finds its sessions with one write to one item,
// never a Scan: the session's own data (Manager.UpdateData) is read only
// with the session itself. The items, the flow, its costs in DynamoDB
// calls, a provider's settings and the tests of each property are in
// https://github.com/ddbsession/ddbsession/blob/main/docs/oidc.md.
package ddbsessionoidc
