// Package ddbsession keeps server-side web sessions in Amazon DynamoDB and
// guards net/http handlers with them, for services that already run on
// DynamoDB and do not want another datastore just for sessions.
//
// A [Manager] issues a random token in a __Host- cookie and keeps, in the
// table, only the token's SHA-256 digest. [Manager.RequireSession] checks a
// request with one strongly consistent BatchGetItem that reads the session
// and its user together (the cookie names the user's key next to the
// token), and puts the user, as the app's own type, in the request context,
// where [Manager.User] reads it back. It checks expiry in code, because
// DynamoDB's TTL deletes expired items up to 48 hours late, and it checks
// the user's sessions version, so that [Manager.RevokeAll] logs a user out
// everywhere with one write and no scan. Requests slide the expiry forward
// at most once per [Limits.RefreshInterval]; the requests in between cost
// no writes. Store failures fail closed.
//
// Guides: https://github.com/ddbsession/ddbsession/tree/main/docs.
//
// # Usage
//
//	client := dynamodb.NewFromConfig(awsCfg) // honours AWS_ENDPOINT_URL_DYNAMODB
//	sessions, err := ddbsession.New(ddbsession.Config[User]{
//		Client:       client,
//		Table:        "app",
//		Unauthorized: ddbsession.Redirect("/login"), // and back, after the login
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux := http.NewServeMux()
//	mux.Handle("GET /account", sessions.RequireSession(http.HandlerFunc(account)))
//	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
//		key := ddbsession.UserKey{PK: "USER#" + r.PostFormValue("name"), SK: "PROFILE"}
//		err := sessions.Login(w, r, key, func(u User) error {
//			return checkPassword(u.PasswordHash, r.PostFormValue("password")) // the app's own
//		})
//		if err != nil {
//			http.Error(w, "wrong name or password, or try again", http.StatusUnauthorized)
//			return
//		}
//		http.Redirect(w, r, ddbsession.ReturnPath(r, "/account"), http.StatusSeeOther)
//	})
//
//	func account(w http.ResponseWriter, r *http.Request) {
//		user, _ := sessions.User(r.Context())
//		fmt.Fprintf(w, "hello, %s", user.Name)
//	}
//
// # Table layout
//
// Sessions live in one table with string keys, by default "pk" and "sk", and
// TTL on the Number attribute "expiresAt" (epoch seconds). They can share
// the app's single table, where the user items already are, or live in a
// hash-only table ([Layout.HashOnly]). [Manager.CreateTable], at startup,
// creates a missing table (and logs it), checks an existing one, and
// checks Config.Layout against the layout the table records: a Manager,
// store or command of another layout is refused, naming both values.
//
// A session is two items: the session item, keyed
// SESSION#<base64url(sha256(token))>, and an index item in the user's own
// partition, which [Manager.List] reads. The user item is the app's own; the
// package needs its "sessionsVersion" and "credentialVersion"
// ([Layout.VersionAttribute], [Layout.CredentialAttribute]). The full
// format, with what an app that writes its own user items must write, is in
// https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md.
//
// # The cookie
//
// The cookie's value is the token, followed by the user item's key sealed
// (AES-GCM, under keys the table's layout record holds), so that one round
// trip reads both items and the cookie names its user to no one who sees
// it; a session whose user is not the cookie's is rejected. Every Manager
// accepts every form, [Cookie.HideUserKey]'s token alone included.
//
// # Revocation
//
// A login reads, in one strongly consistent read with the credential it
// checks, the user item's sessions version (which [Manager.RevokeAll]
// changes, and a user item made anew has anew), its credential version
// (which the app changes with the credential), and the table's global
// generation ([Manager.RevokeEveryone]), and stamps the new session with
// them. A request accepts the session only while each is still that value:
// numbers compared for equality, so no clock takes part, and a change by
// one write, with no scan, ends every session made before, on any instance.
// [Manager.Revoke] ends one session, [Manager.Logout] the request's.
//
// A password change writes the new credential and a new credential
// version in one write, then signs the changing browser in again with
// [Manager.Login]: every session of the old password ends, and so does a
// login that read it in Login's verify, however the two interleave.
//
// # Time
//
// Expiry is compared in epoch seconds, as TTL stores it: an instance whose
// clock is off by d ends sessions d early or late. No revocation compares
// clocks (docs/security.md#clocks).
//
// # Sessions and their data
//
// [Manager.List] and [Manager.Revoke] serve a "where you're signed in"
// page, [Manager.History] a user's security history; [Manager.UpdateData]
// keeps a value of the app's own in the session. With
// [Config.BearerTokens], a CLI signs in with [Manager.LoginBearer].
// [Manager.Adopt] moves browsers of another session store over on their
// first request (docs/migrate.md).
//
// # Events
//
// [Config.OnEvent] gets an [Event] of each [EventKind], never a token; the
// module ddbsessionotel makes them metrics and traces session checks.
//
// # Device-bound sessions
//
// With [Config.DeviceBinding], a copied cookie stops working within minutes
// where browsers implement Device Bound Session Credentials (DBSC), and a
// token copied without its key never works where bearer clients send DPoP
// proofs (RFC 9449): docs/device-binding.md and docs/dpop.md.
//
// # Step-up
//
// [Manager.RequireAuthentication] guards a sensitive action on how recently
// the user proved themselves ([Session.AuthenticatedAt]);
// [Manager.BeginLogin] and [Manager.CompleteLogin] make a two-step login;
// [Limits.MaxSessions] caps a user's sessions, and [Limits.AAL] sets NIST's
// session bounds (docs/step-up.md).
//
// # Multi-Region
//
// Global tables in strong consistency (MRSC) need nothing set; in eventual
// consistency (MREC), set [Layout.MREC], and a revoked session works in
// another Region for at most the replication lag (docs/multi-region.md).
//
// # Reading the code
//
// A request passes through the files from the top down, and no file refers
// to one above it:
//
//	middleware.go    RequireSession, LoadSession, Authenticate, the step-up guard
//	context.go       what the middleware hands the handler, and its accessors
//	rules.go         the rules that make a session valid
//	manager.go       Config, New, and the Manager that holds the parts below
//	dpop.go          DPoP: the proofs of a bearer session's key, nonces, replays
//	bound.go         device binding's bound cookie and the login's offer
//	refresh.go       sliding the expiry, after the response or before the handler
//	users.go         what a user item must hold, and its decoding
//	cookie.go        the session cookie and the bearer token
//	store.go         each write of an item, and the reads that serve a write
//	calls.go         the store's DynamoDB calls
//	internal/decide  every read that decides whether a session stands, and the one rule
//	internal/item    the item format: one encoder, one decoder
//
// Beside the path: login.go, twostep.go and adopt.go sign users in and out,
// slots.go keeps Limits.MaxSessions, ends.go and revoke.go end sessions,
// history.go and devices.go keep users' histories and devices, dbsc.go
// serves device binding, table.go the table, data.go a session's data. At
// the bottom, the words they share: session.go, events.go, errors.go,
// layout.go, limit.go, answers.go, headers.go, clock.go and panics.go.
//
// # Engines
//
// AWS_ENDPOINT_URL_DYNAMODB points the client at a local engine such as
// dynalite (for an app's tests, package ddbsessiontest). No transactions:
// writes to two items are ordered so that a failure between them leaves
// nothing live that should not be.
package ddbsession
