package scsstore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/scsstore"
)

// The layouts the revocation tests run on: a plain table, where the
// user's sessions version is in the user item, and one of Layout.MREC,
// where it is in the user's revocation item and RevokeAll leaves the user
// item alone.
var revocationLayouts = []struct {
	name   string
	layout ddbsession.Layout
}{
	{"plain", ddbsession.Layout{}},
	{"MREC", ddbsession.Layout{MREC: true}},
}

var (
	alice = ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	bob   = ddbsession.UserKey{PK: "USER#bob", SK: "PROFILE"}
	carol = ddbsession.UserKey{PK: "USER#carol", SK: "PROFILE"}
)

// attributeValues lets cmp look into the SDK's attribute value types.
var attributeValues = cmp.AllowUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{})

// createUsers creates users through the core, which stamps each with a
// random sessions version.
func createUsers(t *testing.T, core *ddbsession.Manager[testUser], users ...ddbsession.UserKey) {
	t.Helper()
	for _, u := range users {
		if err := core.CreateUser(context.Background(), testUser{PK: u.PK, SK: u.SK, Name: u.PK[len("USER#"):]}); err != nil {
			t.Fatal(err)
		}
	}
}

// me is what GET /me answers for user.
func me(user ddbsession.UserKey) string { return user.PK[len("USER#"):] + " " + user.PK }

// tableKeys are the partition keys of the items that decide whether
// user's sessions stand, on layout: the user's (the user item, and on
// MREC the user's revocation item, in that order), the global revocation
// item's, and the layout record's.
type tableKeys struct {
	user                 []string
	global, layoutRecord string
	// The keys of the global item, and of the revocation item on MREC.
	globalKey, revocation map[string]types.AttributeValue
}

func keysOf(t *testing.T, layout ddbsession.Layout, user ddbsession.UserKey) tableKeys {
	t.Helper()
	l, err := item.Layout(layout).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	pk := func(key map[string]types.AttributeValue) string {
		return key[l.PartitionKey].(*types.AttributeValueMemberS).Value
	}
	k := tableKeys{user: []string{user.PK}, global: pk(l.GlobalKey()), layoutRecord: pk(l.LayoutKey()), globalKey: l.GlobalKey()}
	if l.MREC {
		k.revocation = l.RevocationKey(user.PK, user.SK)
		k.user = append(k.user, pk(k.revocation))
	}
	return k
}

// putUser writes user's item as the app's own code would, with a
// sessionsVersion of version unless it is 0.
func putUser(t *testing.T, client *dynamodb.Client, table string, user ddbsession.UserKey, version int64) {
	t.Helper()
	av := map[string]types.AttributeValue{"pk": avS(user.PK), "sk": avS(user.SK), "name": avS(user.PK[len("USER#"):])}
	if version != 0 {
		av["sessionsVersion"] = avN(version)
	}
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: av}); err != nil {
		t.Fatal(err)
	}
}

// newVersion is a sessions version as docs/item-format.md tells an app to
// write one: random, 63 bits, non-zero.
func newVersion() int64 { return rand.Int64N(1<<62) + 1 }

// deleteUser deletes user's item, as the app's own code would.
func deleteUser(t *testing.T, client *dynamodb.Client, table string, user ddbsession.UserKey) {
	t.Helper()
	if _, err := client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
		TableName: &table, Key: map[string]types.AttributeValue{"pk": avS(user.PK), "sk": avS(user.SK)},
	}); err != nil {
		t.Fatal(err)
	}
}

// userItem reads user's item, as the app's own code would.
func userItem(t *testing.T, client *dynamodb.Client, table string, user ddbsession.UserKey) map[string]types.AttributeValue {
	t.Helper()
	return itemAt(t, client, table, map[string]types.AttributeValue{"pk": avS(user.PK), "sk": avS(user.SK)})
}

// itemAt reads the item under key; nil for none.
func itemAt(t *testing.T, client *dynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// Manager.RevokeAll ends every scs session of that user, on every
// instance, and no other user's; a login after it lives. On an MREC table
// RevokeAll leaves the user item as it was, so a check of the user item's
// version (the pattern before Login and LoadUser) would miss it.
func TestRevokeAllEndsTheUsersSessions(t *testing.T) {
	t.Parallel()
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice, bob)
			store1, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			store2, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			one, two := newInstance(t, store1, 0), newInstance(t, store2, 0)
			laptop, phone, desktop := newBrowser(t), newBrowser(t), newBrowser(t)
			laptop.expect(one, "POST", "/login", login(alice), http.StatusNoContent, "")
			phone.expect(two, "POST", "/login", login(alice), http.StatusNoContent, "")
			desktop.expect(one, "POST", "/login", login(bob), http.StatusNoContent, "")
			for _, in := range []*instance{one, two} {
				laptop.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
				phone.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
				desktop.expect(in, "GET", "/me", nil, http.StatusOK, me(bob))
			}
			laptop.expect(one, "POST", "/put", msg("alice's cart"), http.StatusNoContent, "")
			oldToken := laptop.token(one)
			before := userItem(t, client, table, alice)

			if err := core.RevokeAll(context.Background(), alice); err != nil {
				t.Fatal(err)
			}
			if tc.layout.MREC {
				if diff := cmp.Diff(before, userItem(t, client, table, alice), attributeValues); diff != "" {
					t.Errorf("RevokeAll changed the user item on an MREC table (-before +after):\n%s", diff)
				}
			}
			laptop.expect(two, "GET", "/me", nil, http.StatusUnauthorized, "")
			phone.expect(one, "GET", "/me", nil, http.StatusUnauthorized, "")
			desktop.expect(two, "GET", "/me", nil, http.StatusOK, me(bob))
			// The revoked session was destroyed, its data with it, on every
			// instance: a thief with its token reads nothing.
			thief := newBrowser(t)
			thief.setToken(one, oldToken)
			thief.expect(one, "GET", "/get", nil, http.StatusNotFound, "")
			thief.expect(two, "GET", "/me", nil, http.StatusUnauthorized, "")

			laptop.expect(two, "POST", "/login", login(alice), http.StatusNoContent, "")
			for _, in := range []*instance{one, two, one} {
				laptop.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
			}
			phone.expect(two, "GET", "/me", nil, http.StatusUnauthorized, "")
		})
	}
}

// Manager.RevokeEveryone ends every scs session: on an instance within
// Config.RevokeEveryoneWithin, once its copy of the global generation is
// that old (at once on an instance that never read it), and at once on an
// instance where a login reads the generation anew. A login after it
// lives everywhere.
func TestRevokeEveryoneEndsAllSessions(t *testing.T) {
	t.Parallel()
	const within = 2 * time.Second
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice, bob, carol)
			// Each instance's monotonic clock, which the test advances.
			newInstanceAt := func(clock *ddbtest.Mono) *instance {
				store, _ := newStoreOn(t, client, table, clock.Now, func(c *scsstore.Config) { c.Layout, c.RevokeEveryoneWithin = tc.layout, within })
				return newInstance(t, store, 0)
			}
			var clock1, clock2, clock3 ddbtest.Mono
			one, two := newInstanceAt(&clock1), newInstanceAt(&clock2)
			laptop, tablet, desktop := newBrowser(t), newBrowser(t), newBrowser(t)
			laptop.expect(one, "POST", "/login", login(alice), http.StatusNoContent, "")
			tablet.expect(one, "POST", "/login", login(alice), http.StatusNoContent, "")
			desktop.expect(one, "POST", "/login", login(bob), http.StatusNoContent, "")
			laptop.expect(one, "GET", "/me", nil, http.StatusOK, me(alice))
			tablet.expect(two, "GET", "/me", nil, http.StatusOK, me(alice)) // instance 2 reads the generation

			if err := core.RevokeEveryone(context.Background()); err != nil {
				t.Fatal(err)
			}
			// An instance whose copy was never read refuses at once, and
			// destroys the session for every instance.
			three := newInstanceAt(&clock3)
			desktop.expect(three, "GET", "/me", nil, http.StatusUnauthorized, "")
			desktop.expect(one, "GET", "/me", nil, http.StatusUnauthorized, "")

			// Instance 1's copy is fresh: the session passes there until the
			// copy is RevokeEveryoneWithin old, and not after.
			laptop.expect(one, "GET", "/me", nil, http.StatusOK, me(alice))
			clock1.Advance(within)
			laptop.expect(one, "GET", "/me", nil, http.StatusUnauthorized, "")

			// Instance 2's copy is fresh too, and a login there copies it
			// rather than read the global item, which no login reads while
			// the copy is fresh: that session ends with those from before
			// once the copy is stale, and its user signs in once more.
			tablet.expect(two, "GET", "/me", nil, http.StatusOK, me(alice))
			early := newBrowser(t)
			early.expect(two, "POST", "/login", login(carol), http.StatusNoContent, "")
			early.expect(two, "GET", "/me", nil, http.StatusOK, me(carol))
			clock2.Advance(within)
			tablet.expect(two, "GET", "/me", nil, http.StatusUnauthorized, "")
			early.expect(two, "GET", "/me", nil, http.StatusUnauthorized, "")

			// Logins after RevokeEveryone live on every instance, before and
			// after their copies are stale.
			laptop.expect(two, "POST", "/login", login(alice), http.StatusNoContent, "")
			desktop.expect(three, "POST", "/login", login(bob), http.StatusNoContent, "")
			for range 2 {
				for _, in := range []*instance{one, two, three} {
					laptop.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
					desktop.expect(in, "GET", "/me", nil, http.StatusOK, me(bob))
				}
				for _, c := range []*ddbtest.Mono{&clock1, &clock2, &clock3} {
					c.Advance(within)
				}
			}
		})
	}
}

// A login copies the revocation state it read with the credential: a
// RevokeAll that comes between that read and the end of the login (staged
// inside the credential check) ends the new session too. A
// RevokeEveryone there ends it once this instance's copy is stale.
func TestLoginRacingRevocation(t *testing.T) {
	t.Parallel()
	const within = 2 * time.Second
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice)
			var clock ddbtest.Mono
			store, _ := newStoreOn(t, client, table, clock.Now, func(c *scsstore.Config) { c.Layout, c.RevokeEveryoneWithin = tc.layout, within })
			in := newInstance(t, store, 0)

			for _, revoke := range []struct {
				name string
				call func(context.Context) error
			}{
				{"RevokeAll", func(ctx context.Context) error { return core.RevokeAll(ctx, alice) }},
				{"RevokeEveryone", core.RevokeEveryone},
			} {
				racing := func() error { return revoke.call(context.Background()) }
				in.verify.Store(&racing)
				attacker := newBrowser(t)
				attacker.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
				in.verify.Store(nil)
				if revoke.name == "RevokeEveryone" {
					clock.Advance(within)
				}
				attacker.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
				owner := newBrowser(t)
				owner.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
				owner.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
			}
		})
	}
}

// What signing in and loading the user cost, in reads and in the read
// units the engine reports: LoadUser reads the user item alone (a
// GetItem), on MREC with the user's revocation item (a BatchGetItem), and
// the global item with them once per RevokeEveryoneWithin (a
// BatchGetItem); Login reads as LoadUser does; the first read of a Store
// takes the table's layout record too; a session nobody signed in on reads
// no user. With scs's own read of the session (one GetItem), a signed-in
// request is two round trips, as reading the user item apart would be.
func TestSignedInCosts(t *testing.T) {
	t.Parallel()
	const within = 2 * time.Second
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice)
			// Every item that a read asks for is there: the global item,
			// and on MREC the revocation item.
			if err := core.RevokeEveryone(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := core.RevokeAll(context.Background(), alice); err != nil {
				t.Fatal(err)
			}
			keys := keysOf(t, tc.layout, alice)
			userRead := ddbtest.Read{Op: "GetItem", PKs: keys.user}
			if tc.layout.MREC {
				userRead.Op = "BatchGetItem"
			}
			withGlobal := ddbtest.Read{Op: "BatchGetItem", PKs: append(slices.Clone(keys.user), keys.global)}
			var clock ddbtest.Mono
			store, count := newStoreOn(t, client, table, clock.Now, func(c *scsstore.Config) { c.Layout, c.RevokeEveryoneWithin = tc.layout, within })
			in := newInstance(t, store, 0)
			b := newBrowser(t)

			// Every item is small: one read unit each, strongly consistent.
			step := func(name string, do func(), wantSCSGets int, want ...ddbtest.Read) {
				t.Helper()
				count.TakeReads()
				do()
				var scsGets int
				var got []ddbtest.Read
				for _, r := range count.TakeReads() {
					if len(r.PKs) == 1 && strings.HasPrefix(r.PKs[0], "SCS#") {
						scsGets++
						continue
					}
					got = append(got, r)
				}
				if scsGets != wantSCSGets {
					t.Errorf("%s: scs read %d sessions, want %d", name, scsGets, wantSCSGets)
				}
				for i := range want {
					want[i].Units = float64(len(want[i].PKs))
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: the reads of the user (-want +got):\n%s", name, diff)
				}
			}
			step("a request without a session", func() { b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "") }, 0)
			step("an anonymous session", func() {
				b.expect(in, "POST", "/put", msg("m"), http.StatusNoContent, "")
				b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
			}, 1)
			step("the first login", func() { b.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "") }, 1,
				ddbtest.Read{Op: "BatchGetItem", PKs: append(slices.Clone(withGlobal.PKs), keys.layoutRecord)})
			step("a signed-in request", func() { b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice)) }, 1, userRead)
			clock.Advance(within)
			step("once the copy is stale", func() { b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice)) }, 1, withGlobal)
			step("and then", func() { b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice)) }, 1, userRead)
			step("a login while the copy is fresh", func() { b.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "") }, 1, userRead)
		})
	}
}

// A signed-in session whose user item is gone is destroyed; a session that
// nobody signed in on is no user's, and keeps its data.
func TestLoadUserOfAGoneUser(t *testing.T) {
	t.Parallel()
	client, table, core := newTableWith(t, ddbsession.Layout{})
	createUsers(t, core, alice)
	store, _ := newStore(t, client, table)
	in := newInstance(t, store, 0)
	anonymous, signedIn := newBrowser(t), newBrowser(t)
	anonymous.expect(in, "POST", "/put", msg("cart"), http.StatusNoContent, "")
	anonymous.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
	anonymous.expect(in, "GET", "/get", nil, http.StatusOK, "cart")

	signedIn.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
	signedIn.expect(in, "POST", "/put", msg("alice's cart"), http.StatusNoContent, "")
	deleteUser(t, client, table, alice)
	token := signedIn.token(in)
	signedIn.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
	thief := newBrowser(t)
	thief.setToken(in, token)
	thief.expect(in, "GET", "/get", nil, http.StatusNotFound, "") // destroyed, data and all
}

// Login refuses a user without an item with ddbsession.ErrUserNotFound, and
// a credential that verify refuses with verify's error; neither signs the
// session in or renews its token.
func TestLoginRefusals(t *testing.T) {
	t.Parallel()
	client, table, core := newTableWith(t, ddbsession.Layout{})
	createUsers(t, core, alice)
	store, _ := newStore(t, client, table)
	in := newInstance(t, store, 0)
	b := newBrowser(t)
	b.expect(in, "POST", "/put", msg("cart"), http.StatusNoContent, "")
	token := b.token(in)

	b.expect(in, "POST", "/login", login(bob), http.StatusUnauthorized, "")
	errWrongPassword := errors.New("wrong password")
	refuse := func() error { return errWrongPassword }
	in.verify.Store(&refuse)
	if status, body := b.do(in, "POST", "/login", login(alice)); status != http.StatusInternalServerError || body != errWrongPassword.Error() {
		t.Errorf("POST /login that verify refuses: %d %q, want 500 %q (verify's error as it is)", status, body, errWrongPassword)
	}
	in.verify.Store(nil)
	b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
	if b.token(in) != token {
		t.Errorf("a refused login renewed the session's token")
	}
	b.expect(in, "GET", "/get", nil, http.StatusOK, "cart")

	// A malformed key is refused before any call.
	if status, _ := b.do(in, "POST", "/login", login(ddbsession.UserKey{PK: "USER#alice"})); status != http.StatusInternalServerError {
		t.Errorf("POST /login of a key without SK: %d, want 500", status)
	}
}

// A session whose login read a higher version than the table holds here:
// on MREC, a login in another Region after a RevokeAll there, whose raised
// version has not replicated yet, is refused but kept, and lives once the
// version arrives; on a plain table, where only a user item made anew
// lowers the version, it is destroyed. The test lowers the version by
// hand, as the Region that has not seen the RevokeAll holds it.
func TestLoadUserAheadOfReplication(t *testing.T) {
	t.Parallel()
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice)
			if err := core.RevokeAll(context.Background(), alice); err != nil { // on MREC, the revocation item is there
				t.Fatal(err)
			}
			store, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			in := newInstance(t, store, 0)
			b := newBrowser(t)
			b.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
			b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))

			versionKey, versionAttr := map[string]types.AttributeValue{"pk": avS(alice.PK), "sk": avS(alice.SK)}, "sessionsVersion" // the user item
			if tc.layout.MREC {
				versionKey, versionAttr = keysOf(t, tc.layout, alice).revocation, "gen"
			}
			setVersion := func(add int64) {
				t.Helper()
				if _, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
					TableName: &table, Key: versionKey,
					UpdateExpression:          aws.String("ADD #v :d"),
					ExpressionAttributeNames:  map[string]string{"#v": versionAttr},
					ExpressionAttributeValues: map[string]types.AttributeValue{":d": avN(add)},
				}); err != nil {
					t.Fatal(err)
				}
			}
			setVersion(-1)
			b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
			setVersion(+1)
			if tc.layout.MREC {
				b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
			} else {
				b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
			}
		})
	}
}

// A new credential ends the sessions signed in with the old one: the app
// moves the user's credentialVersion on (Layout.CredentialAttribute) in
// the write that changes the password, and a session that Login signed in
// before it is refused and destroyed at its next request, on MREC too; a
// login after it lives.
func TestCredentialChangeEndsTheSession(t *testing.T) {
	t.Parallel()
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice, bob)
			store, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			in := newInstance(t, store, 0)
			attacker, owner, other := newBrowser(t), newBrowser(t), newBrowser(t)
			attacker.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
			attacker.expect(in, "POST", "/put", msg("attacker's cart"), http.StatusNoContent, "")
			attacker.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
			other.expect(in, "POST", "/login", login(bob), http.StatusNoContent, "")
			token := attacker.token(in)

			changePassword := func() {
				t.Helper()
				if _, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
					TableName: &table, Key: map[string]types.AttributeValue{"pk": avS(alice.PK), "sk": avS(alice.SK)},
					UpdateExpression:          aws.String("SET passwordHash = :hash ADD credentialVersion :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":hash": avS("a new hash"), ":one": avN(1)},
				}); err != nil {
					t.Fatal(err)
				}
			}
			changePassword()
			attacker.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
			thief := newBrowser(t)
			thief.setToken(in, token)
			thief.expect(in, "GET", "/get", nil, http.StatusNotFound, "") // destroyed, data and all
			other.expect(in, "GET", "/me", nil, http.StatusOK, me(bob))

			owner.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
			owner.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
			changePassword() // and once more, from a version the app wrote
			owner.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
		})
	}
}

// A user item deleted and made anew under the same key does not inherit
// the sessions of the one before: whether the app writes it with a fresh
// sessionsVersion, writes it without one, or has CreateUser make it, a
// session signed in before is refused and destroyed; on MREC too, where
// the user's revocation item outlives the user item. A login of the new
// item lives, or fails loudly where the item has no sessionsVersion.
func TestUserMadeAnewEndsTheSession(t *testing.T) {
	t.Parallel()
	for _, tc := range revocationLayouts {
		for _, anew := range []struct {
			name   string
			make   func(*testing.T, *dynamodb.Client, string, *ddbsession.Manager[testUser])
			signIn int // what a login of the new item answers
		}{
			{"PutItem with a fresh sessionsVersion", func(t *testing.T, client *dynamodb.Client, table string, _ *ddbsession.Manager[testUser]) {
				putUser(t, client, table, alice, newVersion())
			}, http.StatusNoContent},
			{"PutItem without a sessionsVersion", func(t *testing.T, client *dynamodb.Client, table string, _ *ddbsession.Manager[testUser]) {
				putUser(t, client, table, alice, 0)
			}, http.StatusInternalServerError},
			{"CreateUser", func(t *testing.T, _ *dynamodb.Client, _ string, core *ddbsession.Manager[testUser]) {
				createUsers(t, core, alice)
			}, http.StatusNoContent},
		} {
			t.Run(tc.name+"/"+anew.name, func(t *testing.T) {
				t.Parallel()
				client, table, core := newTableWith(t, tc.layout)
				createUsers(t, core, alice)
				if err := core.RevokeAll(context.Background(), alice); err != nil { // on MREC, the revocation item is there
					t.Fatal(err)
				}
				store, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
				in := newInstance(t, store, 0)
				b := newBrowser(t)
				b.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
				b.expect(in, "POST", "/put", msg("the old alice's cart"), http.StatusNoContent, "")
				b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
				token := b.token(in)

				deleteUser(t, client, table, alice)
				anew.make(t, client, table, core)
				b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
				thief := newBrowser(t)
				thief.setToken(in, token)
				thief.expect(in, "GET", "/get", nil, http.StatusNotFound, "")

				if status, body := b.do(in, "POST", "/login", login(alice)); status != anew.signIn {
					t.Fatalf("POST /login of the new item: %d %q, want %d", status, body, anew.signIn)
				}
				if anew.signIn == http.StatusNoContent {
					b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
				}
			})
		}
	}
}

// Login of a user item that the app wrote without a sessionsVersion fails
// loudly, with an error naming the attribute, the user and the docs that
// say what to write, and signs nothing in: nothing would tell that item
// from the next one made under its key. Once the app writes one, the user
// signs in.
func TestLoginOfAUserWithoutSessionsVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, _ := newTableWith(t, tc.layout)
			putUser(t, client, table, alice, 0)
			store, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			in := newInstance(t, store, 0)
			b := newBrowser(t)
			b.expect(in, "POST", "/put", msg("cart"), http.StatusNoContent, "")
			token := b.token(in)

			status, body := b.do(in, "POST", "/login", login(alice))
			if status != http.StatusInternalServerError {
				t.Fatalf("POST /login: %d %q, want 500", status, body)
			}
			for _, want := range []string{"scsstore: login: ", alice.PK, "sessionsVersion (Layout.VersionAttribute)", "docs/item-format.md#user-items"} {
				if !strings.Contains(body, want) {
					t.Errorf("the error %q does not say %q", body, want)
				}
			}
			b.expect(in, "GET", "/me", nil, http.StatusUnauthorized, "")
			if b.token(in) != token {
				t.Errorf("a refused login renewed the session's token")
			}
			b.expect(in, "GET", "/get", nil, http.StatusOK, "cart")

			putUser(t, client, table, alice, newVersion())
			b.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")
			b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
		})
	}
}

// A session that release v0.1.0's Login signed in stays signed in across
// the upgrade while nothing changed, and ends with a RevokeAll. The test
// writes its record by hand, as v0.1.0 wrote it:
// "1.<version>.<global>.<base64url PK>.<base64url SK>", where version is
// the user's sessions version (on MREC the revocation item's) and global
// the global revocation generation, each as the table holds it.
func TestLoadUserOfARecordOfV010(t *testing.T) {
	t.Parallel()
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice)
			// Both numbers are not 0, so that a record that dropped either
			// would not pass.
			if err := core.RevokeEveryone(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := core.RevokeAll(context.Background(), alice); err != nil {
				t.Fatal(err)
			}
			keys := keysOf(t, tc.layout, alice)
			version := number(t, userItem(t, client, table, alice), "sessionsVersion")
			if tc.layout.MREC {
				version = number(t, itemAt(t, client, table, keys.revocation), "gen")
			}
			global := number(t, itemAt(t, client, table, keys.globalKey), "gen")
			record := func(version, global int64) url.Values {
				b64 := base64.RawURLEncoding.EncodeToString
				return url.Values{"v": {fmt.Sprintf("1.%d.%d.%s.%s", version, global, b64([]byte(alice.PK)), b64([]byte(alice.SK)))}}
			}
			store1, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			store2, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout = tc.layout })
			one, two := newInstance(t, store1, 0), newInstance(t, store2, 0)

			// A record of another version, or of another generation, is no
			// session of alice's.
			for _, v := range []url.Values{record(version+1, global), record(version, global+1)} {
				stranger := newBrowser(t)
				stranger.expect(one, "POST", "/record", v, http.StatusNoContent, "")
				stranger.expect(one, "GET", "/me", nil, http.StatusUnauthorized, "")
			}

			b := newBrowser(t)
			b.expect(one, "POST", "/put", msg("alice's cart"), http.StatusNoContent, "")
			b.expect(one, "POST", "/record", record(version, global), http.StatusNoContent, "")
			for _, in := range []*instance{one, two, one} {
				b.expect(in, "GET", "/me", nil, http.StatusOK, me(alice))
			}
			token := b.token(one)
			if err := core.RevokeAll(context.Background(), alice); err != nil {
				t.Fatal(err)
			}
			b.expect(two, "GET", "/me", nil, http.StatusUnauthorized, "")
			thief := newBrowser(t)
			thief.setToken(one, token)
			thief.expect(one, "GET", "/get", nil, http.StatusNotFound, "")
		})
	}
}

// The copy of the global revocation generation is read once per
// RevokeEveryoneWithin per Store, one read at a time: with 32 LoadUsers in
// flight on a stale copy, the global item is read once, and not at all
// while the copy is fresh. The read that takes the global item is held
// until all 32 have begun their reads, so that every one of them begins
// while the copy is stale.
func TestRevokeEveryoneCopyIsReadOnce(t *testing.T) {
	t.Parallel()
	const within, inFlight = 2 * time.Second, 32
	for _, tc := range revocationLayouts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, table, core := newTableWith(t, tc.layout)
			createUsers(t, core, alice)
			keys := keysOf(t, tc.layout, alice)
			var clock ddbtest.Mono
			store, count := newStoreOn(t, client, table, clock.Now, func(c *scsstore.Config) { c.Layout, c.RevokeEveryoneWithin = tc.layout, within })
			in := newInstance(t, store, 0)
			b := newBrowser(t)
			b.expect(in, "POST", "/login", login(alice), http.StatusNoContent, "")

			globalReads := func() int {
				n := 0
				for _, r := range count.TakeReads() {
					if slices.Contains(r.PKs, keys.global) {
						n++
					}
				}
				return n
			}
			wave := func() {
				t.Helper()
				statuses := make([]int, inFlight)
				var wg sync.WaitGroup
				for i := range inFlight {
					wg.Go(func() { statuses[i], _ = b.do(in, "GET", "/me", nil) })
				}
				wg.Wait()
				for i, status := range statuses {
					if status != http.StatusOK {
						t.Errorf("request %d of %d in flight: %d, want 200", i, inFlight, status)
					}
				}
			}

			clock.Advance(within)
			var started atomic.Int32
			allStarted := make(chan struct{})
			count.Before = func(_ context.Context, _ string, in any) {
				pks, _ := ddbtest.ReadPKs(in)
				if !slices.Contains(pks, alice.PK) {
					return
				}
				if started.Add(1) == inFlight {
					close(allStarted)
				}
				if slices.Contains(pks, keys.global) {
					select {
					case <-allStarted:
					case <-time.After(time.Minute): // a failsafe, not a window: never reached while the store works
						t.Errorf("a read of the global item waited a minute for %d reads of the user to begin; %d did", inFlight, started.Load())
					}
				}
			}
			globalReads()
			wave()
			if n := globalReads(); n != 1 {
				t.Errorf("%d LoadUsers in flight on a stale copy read the global item %d times, want 1", inFlight, n)
			}
			count.Before = nil

			wave()
			if n := globalReads(); n != 0 {
				t.Errorf("%d LoadUsers on a fresh copy read the global item %d times, want 0", inFlight, n)
			}
			clock.Advance(within)
			wave()
			if n := globalReads(); n != 1 {
				t.Errorf("%d LoadUsers once the copy is stale again read the global item %d times, want 1", inFlight, n)
			}
		})
	}
}

// A Store whose Config.Layout differs from the layout that the table
// records (CreateTable recorded it) fails its first LoadUser, and its
// first Login, with an error that names each field that differs with the
// table's value and its own, and signs nothing in nor out.
func TestLayoutMismatch(t *testing.T) {
	t.Parallel()
	client, table, core := newTableWith(t, ddbsession.Layout{})
	createUsers(t, core, alice)
	store, _ := newStore(t, client, table)
	good := newInstance(t, store, 0)
	b := newBrowser(t)
	b.expect(good, "POST", "/login", login(alice), http.StatusNoContent, "")

	for _, tc := range []struct {
		name   string
		layout ddbsession.Layout
		want   []string // in the error
	}{
		{"VersionAttribute", ddbsession.Layout{VersionAttribute: "ver"}, []string{`Layout.VersionAttribute: the table's "sessionsVersion", this "ver"`}},
		{"MREC", ddbsession.Layout{MREC: true}, []string{`Layout.MREC: the table's "false", this "true"`}},
		// Not a key name nor the TTL attribute, which scs's own read of
		// the session uses: a store that differs there loses its sessions
		// before LoadUser can say why.
		{"two fields", ddbsession.Layout{SessionPrefix: "S#", CredentialAttribute: "pwv"},
			[]string{`Layout.SessionPrefix: the table's "SESSION#", this "S#"`, `Layout.CredentialAttribute: the table's "credentialVersion", this "pwv"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mismatched := func(t *testing.T, what string, status int, body string) {
				t.Helper()
				if status != http.StatusInternalServerError {
					t.Errorf("%s: %d %q, want 500", what, status, body)
				}
				for _, want := range append(tc.want, table) {
					if !strings.Contains(body, want) {
						t.Errorf("%s: the error %q does not name %s", what, body, want)
					}
				}
			}
			edit := func(c *scsstore.Config) { c.Layout = tc.layout }
			loads, _ := newStore(t, client, table, edit)
			status, body := b.do(newInstance(t, loads, 0), "GET", "/me", nil)
			mismatched(t, "the first LoadUser", status, body)

			logs, _ := newStore(t, client, table, edit)
			in := newInstance(t, logs, 0)
			other := newBrowser(t)
			status, body = other.do(in, "POST", "/login", login(alice))
			mismatched(t, "the first Login", status, body)
			other.expect(good, "GET", "/me", nil, http.StatusUnauthorized, "")

			b.expect(good, "GET", "/me", nil, http.StatusOK, me(alice))
		})
	}
}
