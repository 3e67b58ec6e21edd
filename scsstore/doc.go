// Package scsstore keeps the sessions of github.com/alexedwards/scs/v2 in
// Amazon DynamoDB, in the same table layout and item format as ddbsession,
// for Go teams that run on scs and want neither Redis nor a store of their
// own to maintain. It is a module of its own, so that only its users
// download scs:
//
//	go get github.com/ddbsession/ddbsession/scsstore
//
// Its example app and benchmarks are in
// https://github.com/ddbsession/ddbsession/blob/main/docs/scs.md.
//
// A [Store] implements scs.Store and scs.CtxStore:
//
//   - Find is one strongly consistent GetItem (the redirect after a login
//     must see the session the login just wrote). It checks the expiry in
//     code, because TTL deletes expired items up to days late: an expired
//     item still in the table is not found, as are a missing one, a deleted
//     one and a malformed one. A token that does not have the shape of an
//     scs token is rejected before any call. The error is for DynamoDB
//     failures only.
//   - Commit writes the data and its expiry, in epoch seconds, into the
//     TTL attribute, unless it may skip the write (see below).
//   - Delete of a missing session is a no-op.
//
// Every DynamoDB failure is returned, so it reaches the SessionManager's
// ErrorFunc (by default a 500): a request is never served without its
// session because the store failed.
//
// # Usage
//
//	client := dynamodb.NewFromConfig(awsCfg) // honours AWS_ENDPOINT_URL_DYNAMODB
//	store, err := scsstore.New(scsstore.Config{Client: client, Table: "app"})
//	if err != nil {
//		log.Fatal(err)
//	}
//	sessions := scs.New()
//	sessions.Store = store
//	sessions.IdleTimeout = 20 * time.Minute
//	sessions.Cookie.Name = "__Host-session"
//	sessions.Cookie.Secure = true
//	http.ListenAndServe(addr, sessions.LoadAndSave(mux))
//
// The package example shows the rest of a sign-in on scs: [Store.Login],
// [Store.LoadUser], and "log out everywhere" (see Signed-in users).
//
// # Moving from another scs store
//
// An app on scs's Redis store (or any scs.Store) moves its sessions here
// without signing anyone out with a [Migration] of the old store and a
// Store, deployed in the phases of [Phase]: its doc says why instances of
// adjacent phases agree on every session, and
// https://github.com/ddbsession/ddbsession/blob/main/docs/migrate.md how
// long to stay in each and what each costs.
//
// # Table and item
//
// The table is the core's: string keys "pk" and "sk" by default (or a hash
// key alone), TTL on the Number attribute "expiresAt", as [Config.Layout]
// says, which must be the same value as ddbsession's Config.Layout where
// both share a table. ddbsession's Manager.CreateTable creates a missing
// table, checks an existing one and records its layout in it; the first
// Login or LoadUser of a Store checks Config.Layout against that record,
// and fails with an error that names each field that differs, with both
// values. One scs session is one item, which never holds the token, only
// its SHA-256 digest; its attributes are described, with the core's, in
// https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md#scs-session-items.
// The prefix ([Config.Prefix]), the sort key and the kind keep these items
// apart from the core's sessions and the app's own items in a shared single
// table. An item that lacks an attribute, has one of the
// wrong type, or has a format version this module does not know is not
// found.
//
// Delete does not remove the item but turns it into a tombstone: kind
// "scs-destroyed", no data, and an expiry an hour ahead for TTL to remove
// it by. Every Commit is conditional on the key being free or holding a
// live scs session, so a request that loaded a session before a logout
// deleted it (scs commits each request with IdleTimeout set) cannot write
// the old token back into life: its commit is dropped. The same condition
// keeps a Commit from overwriting an item of another kind.
//
// scs's HashTokenInStore is not needed: the store hashes every token
// itself. Setting it is harmless (the store then hashes scs's hash).
//
// # No iteration
//
// scs.IterableStore wants every session's raw token as a map key. The table
// holds only the tokens' digests, which cannot be turned back into tokens,
// so Store does not implement it, and SessionManager.Iterate panics with it,
// as with any store that lacks All. To end every session of a user, sign
// users in with [Store.Login] and revoke with ddbsession (see Signed-in
// users).
//
// # Fewer writes with an idle timeout
//
// With IdleTimeout set, scs marks every loaded session modified and commits
// it on every request, only to move its expiry: on DynamoDB, a write per
// page view. The store skips a commit whose data is the same session data
// the table holds and whose expiry moves forward by less than
// [Config.MinCommitInterval], so an idle timeout costs at most one write
// per interval per session, as the core's throttled refresh does. The cost
// is that a session may end up to MinCommitInterval before IdleTimeout has
// passed without requests. A commit whose data changed is always written;
// so is one that moves the expiry back.
//
// The store learns what the table holds without reading it again: it
// remembers, in memory bounded by [Config.RecordBytes], the data and expiry
// each session had when this instance last read or wrote it. "The same
// session data" is judged by decoding both with [Config.Codec], because gob
// encodes maps in random order. Instances do not share these records, and
// need not: a commit is skipped only when its data equals what this
// instance last saw in the table, and that record is kept only when no
// other call on the same item overlapped it (or all agreed), so it always
// holds a state that the table held after the committing request read the
// session. Skipping such a commit can leave in place a newer write by
// another request or instance, which writing would have undone, but never
// drops a change that is not in the table. Concurrent requests that change
// the same session are otherwise last-commit-wins, as with every scs store.
//
// # Signed-in users
//
// scs cannot find a user's sessions (see No iteration), and scanning the
// table is not an option. Instead, scs sessions keep to the core's
// revocation rules, read by the core's own reader ([ddbitem.Reader]), so
// that whatever ends the core's sessions ends them, with one write and no
// scan:
//
//   - [Store.Login] reads the user's item with the user's [ddbitem.Stamp]:
//     the user's sessions version (which RevokeAll changes; on a
//     Layout.MREC table, the user's revocation item's), the user item's
//     own sessionsVersion (its incarnation), its credentialVersion, and the
//     table's global revocation generation (which RevokeEveryone changes).
//     It has the app check the credential against what it read, renews the
//     token, and records the user's key and the stamp in the scs session,
//     under the key "scsstore.user", as
//     "2.<stamp>.<base64url PK>.<base64url SK>", the stamp being its four
//     numbers, dot-separated. A user item without a sessionsVersion fails
//     the login with an error that says so.
//   - [Store.LoadUser], on each request, reads the user again, and the
//     session holds while every part of its stamp is as it was. It ends, on
//     every instance at its next request, with RevokeAll, a new
//     credentialVersion, and the user item deleted, made anew or rewritten
//     without a sessionsVersion; with RevokeEveryone within
//     [Config.RevokeEveryoneWithin] (and on a Multi-Region table the
//     replication lag). Such a session is destroyed. On a Layout.MREC
//     table, a session whose login read a version this Region has not seen
//     yet is refused, not destroyed, until replication brings it. A record
//     that release v0.1.0 wrote, "1.<version>.<global>.<PK>.<SK>", still
//     loads, held as v0.1.0 held it to the sessions version and the global
//     generation alone, so that users signed in before the upgrade (whose
//     items have a sessionsVersion) stay signed in.
//
// An app that writes its own user items writes, when it creates one, a
// random non-zero sessionsVersion (CreateUser does), and moves
// credentialVersion on in the write that changes the credential:
// https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md#user-items.
// In the app's handlers, inside the SessionManager's LoadAndSave:
//
//	// POST /login
//	err := store.Login(r.Context(), sessions, key, &user, func() error { return checkPassword(user, r) })
//	// every request that needs the user
//	key, ok, err := store.LoadUser(r.Context(), sessions, &user)
//
// The stamp's numbers are compared for equality, never as times: no clock
// takes part, and a login that read the credential before a RevokeAll ends
// with it even if it finishes after. Sign out with SessionManager.Destroy,
// or RenewToken and Remove("scsstore.user") to keep an anonymous session's
// data.
//
// Costs: LoadUser, beside scs's GetItem of the session, is one strongly
// consistent GetItem of the user item, or on a Layout.MREC table one
// BatchGetItem of the user item and the user's revocation item; a session
// that nobody signed in on reads nothing. Login reads the same. The global
// item is added to that read (a BatchGetItem then) once per
// RevokeEveryoneWithin per instance, by one request at a time: the
// requests that find the copy stale meanwhile read their user and wait for
// that read. No item is read by every request of every user. The first
// read of a Store adds the layout record. docs/scs.md lists the tests
// behind each of these.
package scsstore
