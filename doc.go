// Package ddbsession keeps server-side web sessions in Amazon DynamoDB and
// guards net/http handlers with them, for services that already run on
// DynamoDB and do not want another datastore just for sessions.
//
// A [Manager] issues a random token in a __Host- cookie and keeps, in the
// table, only the token's SHA-256 digest. [Manager.RequireSession] checks a
// request with one strongly consistent BatchGetItem that reads the session
// and its user together (the cookie names the user's key next to the
// token), and puts the user, as the app's own type, in the request context,
// where [Manager.User] reads it back. It checks expiry in code,
// because DynamoDB's TTL deletes expired items up to 48 hours late, and it
// checks the user's sessions-valid-after cutoff, a revocation version that
// no instance's clock can get wrong, so that [Manager.RevokeAll] logs a
// user out everywhere with one write and no scan. Requests slide the
// expiry forward at most once per [Config.RefreshInterval]; the requests in
// between cost no writes. Store failures fail closed.
//
// # Usage
//
// The README has the same as a whole program, which a test compiles.
//
//	client := dynamodb.NewFromConfig(awsCfg) // honours AWS_ENDPOINT_URL_DYNAMODB
//	sessions, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: "app"})
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
// TTL on the Number attribute "expiresAt". They can share the app's single
// table, where the user items already are, or live in a hash-only table
// ([Layout.HashOnly]). [Manager.CreateTable] creates a fitting table and
// [Manager.CheckTable] checks an existing one at startup. The key names, the
// two prefixes, both attribute names of the app's choosing (TTL and cutoff)
// and the optional expiry index make up the [Layout], which scsstore and
// ddbstream take too; the rest is fixed.
//
// # Item format
//
// This section is the one description of the items; the README, ddbstream
// and every integration link here, and all of them read and write items
// through one encoder and one decoder (the module's internal/item package).
//
//	item             pk                                            sk
//	session          SESSION#<base64url(sha256(token))>            SESSION
//	per-user index   USERSESSIONS#<len(userPK)>#<userPK><userSK>   S#<session ID>
//	user (the app's) <userPK>                                      <userSK>
//
// Session and index items carry these attributes:
//
//	v            N  format version: 1, 2 for a device-bound session (see below),
//	                or, session items only, 3 for a login waiting for its second
//	                factor ([Manager.BeginLogin]), which only CompleteLogin takes
//	kind         S  "session" or "session-index"
//	sid          S  public session ID: 32 lowercase hex digits, the creation time
//	                in epoch milliseconds (12 digits) then 80 random bits, so that
//	                IDs sort by creation; unrelated to the token, so neither a
//	                cookie nor a table key
//	userPK       S  the user item's partition key
//	userSK       S  the user item's sort key (absent in a hash-only table)
//	createdAt    N  creation time, epoch milliseconds
//	refreshedAt  N  last refresh, epoch milliseconds
//	expiresAt    N  expiry, epoch seconds: the TTL attribute, never milliseconds
//	gen          N  the user's cutoff as the login read it with the credential:
//	                the session lives while the user's cutoff is still this one
//	                (see "Revocation"); absent in items of earlier releases
//	userAgent    S  the browser's User-Agent, at most 256 bytes, without control
//	                or format characters (optional)
//	browserOnly  N  1 for a session whose cookie ends with the browser
//	                ([Config.KeepSignedIn]); absent otherwise
//	authAt       N  when the user last proved themselves for the session, epoch
//	                milliseconds; absent in items of earlier releases, which count
//	                createdAt
//	methods      L  of S: how ("password", "otp"; the app's names, at most 4 of
//	                32 printable ASCII characters); optional
//	slotRev      N  a session that [Config.MaxSessions] counts: the state item
//	                revision that gave it its slot; absent otherwise
//	attempts     N  session items of version 3 only: second-factor tries so far
//	appData      S  session items only: the app's data ([Manager.UpdateData]),
//	                JSON, at most 2048 bytes; optional
//	dataRev      N  session items only: the data's revision, random and new with
//	                each write, for the next write's condition; optional
//	sessionPK    S  index items only: the session item's partition key
//	expiryBucket S  session items only, with [Layout.ExpiryIndex]: "<yyyymmddhh>#<shard>"
//
// Session items of [Config.DeviceBinding] carry these too (see "Device-bound
// sessions"); all are optional, and a bound session whose item lacks its key
// or bound cookie accepts no request:
//
//	challenge        S  the challenge the session awaits: 26 base32 characters,
//	                    signed once, for its registration or its next refresh
//	challengeExpires N  its expiry, epoch seconds
//	boundKey         S  v 2 only: the device's public key, a JWK (EC P-256 or RSA)
//	boundCookie      S  v 2 only: base64url(sha256(bound cookie value))
//	boundExpires     N  its expiry, epoch seconds
//	boundPrev        S  the bound cookie before the last refresh, as boundCookie
//	boundPrevExpires N  its expiry, epoch seconds
//
// A device-bound session's session and index items are version 2. A release
// that knows nothing of device binding would accept such a session with its
// session cookie alone; with a version it does not know, it treats the
// session as absent instead. Version 2 is otherwise version 1.
//
// Releases before this one wrote index items under the sort key
// "SID#<session ID>" with random IDs; they stay readable (List merges them in,
// Revoke and Logout find them) until they expire.
//
// Every attribute but userSK, userAgent, browserOnly, expiryBucket, authAt,
// methods, slotRev, attempts, appData, dataRev and those of device binding is
// required; an item that lacks one, has one of the wrong type, or has a fractional number is
// treated as absent. The format is stable: a release may add attributes,
// which older releases ignore, but changes none, so that releases can run
// side by side during a rolling deploy. An incompatible change would bump
// "v"; a reader treats an item with a "v" it does not know as absent, failing
// closed.
//
// The scsstore module (sessions for github.com/alexedwards/scs) keeps its
// items in the same table through the same encoder and decoder:
//
//	pk         S  SCS#<base64url(sha256(scs token))>
//	sk         S  SCS   (absent in a hash-only table)
//	v          N  1
//	kind       S  "scs-session"; "scs-destroyed" once deleted (a tombstone
//	              that keeps a late commit from bringing the token back)
//	data       B  scs's encoded session data (live sessions only)
//	expiresAt  N  epoch seconds, the TTL attribute
//
// The prefixes and kinds keep the three families (core sessions, scs
// sessions, the app's own items) apart: each decoder answers "another kind"
// for the others' items, and ddbstream reports core sessions only.
//
// The user item is the app's own. The package reads it with
// attributevalue.UnmarshalMap into the app's type, and reads and writes one
// attribute of it, "sessionsValidAfter" (N), the user's revocation version,
// which [Manager.CreateUser] sets and [Manager.RevokeAll] raises. Its value
// is a time in epoch milliseconds, so that releases before the version
// could read it as a cutoff, but no reader of this release compares it
// with a clock. A service whose users live elsewhere sets [Config.LoadUser]
// instead.
//
// With [Config.MREC] or [Config.MaxSessions], the package also keeps a state
// item per user, in the user's index partition, which only the package
// writes (see "Multi-Region" and "Step-up"):
//
//	pk             S  the user's index partition, as the index items'
//	sk             S  STATE
//	v              N  1
//	kind           S  "session-state"
//	gen            N  the user's revocation version, raised by RevokeAll; the
//	                  higher of it and the user item's counts
//	endedSessions  M  session ID -> N: epoch seconds until which a session that
//	                  Logout, Revoke or Login's rotation ended stays ended (MREC)
//	liveSessions   M  session ID -> N: creation, epoch ms, of the sessions that
//	                  MaxSessions counts, which alone of theirs are valid
//	endedRev       N  counts the writes of endedSessions and liveSessions
//
// A token is 26 characters of the RFC 4648 base32 alphabet (130 random
// bits). The table never holds one: whoever reads it, or a backup of it,
// cannot lift a live session out of it.
//
// # The cookie
//
// The cookie's value is the token, followed by the user item's key when
// users live in the table (the default [Config.LoadUser]):
//
//	<token>.<base64url(userPK)>.<base64url(userSK)>   (".<base64url(userPK)>" alone in a hash-only table)
//
// base64url is unpadded. With the key in hand, a request reads the session
// item and the user item in one BatchGetItem, one round trip, instead of two
// GetItems one after the other. The session item names its user, and a
// session whose user is not the cookie's is rejected, so a valid token can
// never be paired with someone else's user. For "USER#alice"/"PROFILE" the
// value is 52 characters; a key longer than 1,024 bytes is left out, and such
// a session costs two reads.
//
// The user key is visible to whoever holds the cookie, who holds the session
// anyway. Where the key itself is sensitive (an email address, say), set
// [Config.HideUserKey]: cookies then carry the token alone and requests read
// the session and the user in turn. A custom LoadUser always reads in turn.
//
// # Clients without cookies
//
// A CLI, a mobile app or a script can hold the same sessions as a browser.
// With [Config.BearerTokens] set, RequireSession and LoadSession also accept
// "Authorization: Bearer <token>", where the token is what
// [Manager.LoginBearer] returned: the same credential as a cookie's value,
// with the same checks (a malformed one costs no call). Such a session is
// listed with its User-Agent, revoked one by one or by RevokeAll, and ended
// by Logout, like any other. A request that carries both a session cookie
// and a bearer token is refused with 400. A refresh cannot re-send a
// cookie to such a client, so the response says the new expiry in the
// Session-Expires response header (RFC 3339).
//
// Bearer requests need no cross-origin protection, cookie requests do: a
// browser attaches cookies to requests that other sites make it send, but
// never an Authorization header.
//
// # Rolling deploys
//
// A release accepts cookies of both forms, with and without the user key,
// whatever its setting, and a refresh re-issues the cookie in the form its
// own setting asks for. Releases before the one-round-trip read accept only
// the token alone, and reject (and clear) a cookie with a user key. To roll
// out without signing anyone out: deploy this release with HideUserKey set,
// so that every instance reads both forms while still issuing the old one;
// once no older instance is left, unset it. To roll back past this release,
// set HideUserKey first and wait for the session cookies to be refreshed
// (at most [Config.RefreshInterval] of activity each).
//
// # Device-bound sessions
//
// A session cookie is a bearer credential: whoever copies it off the
// machine (malware, a leaked HAR file, a synced profile) is the user until
// the session ends. With [Config.DeviceBinding], browsers that implement
// Device Bound Session Credentials (W3C webappsec-dbsc; Chrome 145 and later
// on desktop) bind the session to a private key that never leaves the device,
// and a copied cookie stops working within minutes:
//
//  1. Login's response offers binding: Secure-Session-Registration names
//     ES256 and RS256, the registration path, and a challenge that Login
//     wrote into the new session item (no write of its own).
//  2. The browser makes a key pair and posts a JWT (typ "dbsc+jwt", its
//     public key in the "jwk" header, the challenge as "jti") to the
//     registration path. The handler of [Manager.DeviceBindingHandler]
//     verifies it (standard library only: ES256 or RS256, nothing else), stores
//     the public key with the session (item version 2), and answers with
//     the session configuration, a short-lived bound cookie and the
//     challenge for the next refresh.
//  3. Each request of a bound session needs both cookies. The bound cookie
//     is checked against the session item that the request reads anyway:
//     no DynamoDB call of its own. Without a valid one the request gets the
//     Unauthorized answer (reason "not-bound" in events) and the session
//     cookie is left alone: the device's browser refreshes its bound cookie
//     before it sends a request without one, so such a request is a copy's.
//  4. When a request finds the bound cookie within about two minutes of its
//     expiry ([DeviceBinding.CookieLifetime], 10 minutes by default),
//     Chromium first signs the challenge it was given and posts it to the
//     refresh path: one read, one write and one signature check for a fresh
//     bound cookie and the next challenge. An active browser so refreshes
//     every lifetime less two minutes: every 8 minutes by default, on
//     almost every request with a lifetime of a minute or two. A browser
//     without a challenge to sign, or with one that was used or has
//     expired, gets 403 and a new one (one write). Challenges are
//     single-use and expire.
//
// A bound session never falls back: there is no way back to the session
// cookie alone, and registration refuses a session that is bound already,
// so a thief with the session cookie cannot bind it to a key of their own.
// An unbound session can be bound only with the challenge of its login's
// offer, which expires after two minutes: a copy of the login's response
// (a HAR file) is the one way to bind it elsewhere, within that time.
// Refreshes replace a challenge only once it is spent or expired, so a
// copy of the session cookie cannot keep the device's challenge stale.
// Revoke, RevokeAll and Logout end bound sessions as any other; the next
// refresh then tells the browser to end the binding ("continue": false).
// List reports [Session.DeviceBound]. [Manager.Check], which sees no bound
// cookie, refuses bound sessions.
//
// One race is left to the browser: Chromium registers while it follows the
// login's redirect, and in the rare case that the registration is written
// before the redirected request is read, that request, sent without a bound
// cookie, is refused once; the next one carries the cookie. Letting it
// through would open a window in which the session cookie alone suffices.
//
// A copy of the cookies works until its bound cookie expires, or sooner:
// the session accepts the bound cookie of the last refresh and the one
// before it, so once the real browser has refreshed twice, a copy's bound
// cookie is neither. What it does not protect against: malware that acts
// on the device itself, which can use the key without extracting it, and
// a copy used within that window. Browsers without DBSC ignore the offer
// and keep unbound sessions, as before. DBSC needs HTTPS, so DeviceBinding
// cannot be combined with InsecureDevMode. Enable it only once every
// instance runs a release that knows item version 2.
//
// # Listing a user's sessions
//
// [Manager.List] and [Manager.Revoke] serve a "where you're signed in" page.
// They read a per-user index item that Login writes next to each session, in
// a partition of the user's own, rather than a global secondary index on the
// session items:
//
//   - Read consistency: a Query on the base table can be strongly
//     consistent, so a session created a moment ago is always listed. A GSI
//     is only eventually consistent.
//   - Write cost: Login writes two items (index first, so no session is ever
//     live without being listed), Logout deletes two, and a refresh updates
//     two. A GSI keyed on the user costs the same for Login and Logout (a
//     table write plus an index write). It could make a refresh one write
//     by not projecting the expiry, but then List would need a read per
//     session to leave out expired ones, and it would still be eventually
//     consistent. Refreshes are throttled, so the second write is rare.
//   - TTL: both items carry the same expiresAt, so TTL removes both. Until it
//     does, List filters expired items out twice: with a FilterExpression in
//     the Query and with a check in code.
//   - Revoked sessions cost nothing: index sort keys start with the session
//     ID, and IDs with their creation time, so List's Query starts at the
//     user's sessions-valid-after cutoff. After RevokeAll it reads only the
//     sessions created since, newest first, without sorting.
//   - Both need a sort key: in a hash-only table they return an error that
//     says so.
//
// Revoking one session finds its index item in the caller's own index
// partition; another user's session ID is not there, so it gets the same
// [ErrNoSession] as an unknown one.
//
// # Sessions about to expire
//
// With [Layout.ExpiryIndex] set, session items also carry expiryBucket, and
// a global secondary index on (expiryBucket, expiresAt) lets
// [Manager.Expiring] find the sessions that expire in a window. The bucket
// is the expiry's UTC hour plus a shard suffix, so one hour's sessions spread
// over [Layout.ExpiryIndexShards] index partitions, queried in parallel. The
// index is opt-in because each refresh moves the session within it: a
// delete and a put on the index, two more write units per refresh. Without
// it, no item carries expiryBucket and writes stay cheaper.
//
// # Events
//
// [Config.OnEvent] is told what sessions do, never with a token: an
// [Event] for each login, re-authentication, two-step login's first and
// failed second factor, refresh, rotation, logout, revocation, eviction
// under [Config.MaxSessions], step-up and rejection (with its [Reason]),
// and for each store failure; [EventKind] lists them all. It costs nothing
// when unset. For OpenTelemetry, the module
// [github.com/ddbsession/ddbsession/ddbsessionotel] records the events as
// metrics, one instrument per kind (its documentation lists them), and
// traces each request's session check; its Telemetry's OnEvent is the
// Config's:
//
//	tel, err := ddbsessionotel.New(ddbsessionotel.Config{MeterProvider: meters, TracerProvider: tracers})
//	if err != nil {
//		log.Fatal(err)
//	}
//	cfg.OnEvent = tel.OnEvent
//
// It is a module of its own, so that an app that does not import it never
// downloads OpenTelemetry. An app with an OnEvent of its own calls both
// from one function, as that documentation shows.
//
// # Revocation
//
// The user's sessions-valid-after cutoff is a version, not a time to
// compare. A login reads it in the same strongly consistent read as the
// credential it checks, and copies it into the new session ("gen"); a
// request accepts the session only while the user's cutoff is still that
// value. [Manager.RevokeAll] raises it, in one conditional write, so that
// every session made before is ended on its next request, on any instance,
// and every login that reads the user after it copies the new value and
// lives. No clock takes part: a login on an instance whose clock runs
// minutes ahead, or a RevokeAll on one whose clock lags, decides exactly as
// on any other. Raising it to the current time in epoch milliseconds (or
// one on, where it is there or later already) keeps its meaning for the
// releases before this one, which compare it with sessions' creation times:
// this release still creates sessions after the cutoff they read, so during
// a rolling deploy old and new instances agree on every session, and it
// dates an earlier release's sessions, which carry no "gen", the way that
// release did.
//
// # Credentials and sessions
//
// A password change must not leave a session that rests on the old
// password: write the new credential, then call [Manager.RevokeAll], then
// sign the changing browser in again with [Manager.Login]. Password logins
// check the password in Login's verify, which sees the credential and the
// cutoff of one read: a login that read the old password copied the old
// cutoff, and dies with the RevokeAll that follows the change, however the
// two interleave and whatever the clocks say; a login that read the new
// password read the raised cutoff too, and lives. New user items carry a
// cutoff of their creation time ([Manager.CreateUser]): a deleted user's
// sessions copied another value, so they never come back for a new account
// under the same key.
//
// # Time
//
// Time is left where a few seconds of skew between instances do no harm:
// expiry, compared in epoch seconds as TTL stores it, and the absolute
// lifetime, from the creation time in epoch milliseconds. An instance whose
// clock is off by d ends sessions d early or late. Device binding's
// challenges and bound cookies expire the same way. The cutoff's value is
// a time too, for the releases that read it as one (see "Revocation"), but
// no reader of this release compares it with a clock.
//
// # Multi-Region
//
// A DynamoDB global table replicates the table to other Regions, in one of
// two consistency modes.
//
// Multi-Region strong consistency (MRSC) replicates every write to another
// Region before it returns, so a strongly consistent read in any Region
// sees it: sessions, logouts and RevokeAll behave as in one Region, with no
// option to set. A write that meets a concurrent write of the same item in
// another Region fails with ReplicatedWriteConflictException, which the
// SDK's retryer does not retry; the package retries it until the call's
// deadline (StoreTimeout) and then fails closed, as for any store error.
// MRSC tables have no TTL: expired items stay until a sweep deletes them
// (they are rejected all the same), and [Manager.CheckTable] says so.
//
// Multi-Region eventual consistency (MREC), the default mode, replicates
// each item on its own, typically within a second; strongly consistent
// reads and conditions see the local Region's replica only, and concurrent
// writes of one item in two Regions are settled whole-item, last writer
// wins. Set [Config.MREC] for such a table ([Manager.CheckTable] refuses
// one without it). The package then keeps the user's revocation state in a
// state item of its own, which no write of the app's touches: each request
// reads it with the session and the user (three items, one round trip, a
// third read unit), RevokeAll raises its cutoff and leaves the user item
// alone, and Logout, Revoke and Login's rotation note the sessions they end
// in it, so that a refresh in another Region that brings a deleted session
// item back, whole, brings back no session. A session that has not reached
// a Region yet, or whose user's state lags there, is refused there with
// reason [ReasonNotReplicated] or [ReasonUnknown], and its cookie is kept:
// the next request, once replication has caught up, is accepted. A
// RevokeAll reaches another Region when its write does, and no later; until
// then a revoked session still works there. Two state writes of one user in
// two Regions within the replication lag (two logouts, or a logout and a
// RevokeAll) can lose one of them to the other, as any MREC item can; the
// session a lost note was for stays deleted unless a refresh raced it too.
//
// # Step-up
//
// A session knows when and how its user last proved themselves
// ([Session.AuthenticatedAt], [Session.Methods]), from the login that made
// it: reading that costs nothing, it comes with the session.
// [Manager.RequireAuthentication] guards a sensitive action on it (OWASP
// ASVS 5.0 V7.5): a browser that fails goes to [Config.ReauthPath] and
// back, an API client gets RFC 9470's insufficient_user_authentication
// challenge with max_age, and the session lives on. The app's
// re-authentication handler calls Login (or LoginBearer) on the signed-in
// request: a privilege change gets a new token, and the user's other
// sessions are left alone.
//
// A second factor takes two requests: [Manager.BeginLogin] checks the
// first and writes a pending session (item version 3, which no earlier
// release accepts) in a cookie of its own, for [Config.PendingLifetime];
// [Manager.CompleteLogin] checks the second, at most five times, and
// signs in with the methods of both. The pending session is no session
// anywhere else: RequireSession, Check and List do not take it.
//
// [Config.MaxSessions] caps a user's live sessions (ASVS 7.1.2): the
// user's state item lists the sessions that count, a login takes a slot
// with a conditional write (ending the oldest session, or refusing with
// [ErrTooManySessions]), and a session lives only while it holds one, so
// racing logins never leave more. [Config.AAL] sets and enforces the
// session bounds of NIST SP 800-63B-4's assurance levels.
//
// Costs: RequireAuthentication reads nothing. A login records its methods
// in the items it writes anyway. BeginLogin costs Login's user read and one
// write; each CompleteLogin try one write more. MaxSessions adds one read
// unit to every request (the state item, in the same round trip) and a
// write of the state item to each login, and a query of the user's index
// partition to a login at the limit.
//
// # Reading the code
//
// A request passes through the files from the top down, and no file refers
// to one above it:
//
//	middleware.go  RequireSession, LoadSession, Check: the check of a
//	               request's session, its rules, the context accessors
//	manager.go     Config, New, and the Manager that holds the parts below
//	bound.go       device binding's bound cookie and the login's offer
//	refresh.go     sliding the expiry, after the response
//	users.go       the user item and the user's revocation state
//	cookie.go      the session cookie and the bearer token, read and written
//	items.go       each read and write of an item, through store.go
//	store.go       every DynamoDB call, and nothing else
//	internal/item  the item format: one encoder, one decoder
//
// Beside the path, at the top: twostep.go signs users in with two factors,
// on login.go, which signs users up, in and out, and takes a session slot
// through limit.go; revoke.go lists and ends sessions; dbsc.go serves
// device binding's endpoints; table.go creates and checks the table;
// data.go writes a session's data. At the bottom, the words they all
// share: session.go, events.go, layout.go and answers.go. Tests follow the
// files (login_test.go covers twostep.go and limit.go too, session_test.go
// data.go, store_test.go items.go, races_test.go their races).
// The Manager's type parameter stops at its methods: everything below them
// decodes the user through a pointer.
//
// # Engines
//
// The client is built from the AWS SDK's own configuration, so
// AWS_ENDPOINT_URL_DYNAMODB points it at DynamoDB Local or dynalite. The
// package uses no transactions (dynalite has no TransactWriteItems): writes
// that touch two items are ordered so that a failure in between leaves
// nothing live that should not be. dynalite also has no UpdateTimeToLive;
// there CreateTable logs a warning, and so does CheckTable after it.
//
// Streams: the module github.com/ddbsession/ddbsession/ddbstream turns TTL
// deletions from a DynamoDB stream into clean-up calls. It is a module of its
// own, so that only its users download aws-lambda-go.
package ddbsession
