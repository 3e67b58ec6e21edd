package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/google/go-cmp/cmp"
)

// The relying party of the Go tests: the software authenticator signs for
// it, whatever address the test server has.
const (
	testRPID   = "passkeys.example"
	testOrigin = "https://passkeys.example"
)

// passkeyApp is a newTestApp option: the tests' relying party, and a fake
// clock, which the option returns too.
func passkeyApp(clock *ddbtest.Clock) func(*appConfig) {
	return func(cfg *appConfig) {
		cfg.PasskeyOrigin = testOrigin
		cfg.Now = clock.Now
		cfg.Reauth = time.Minute
	}
}

// postJSON posts body, JSON, to path.
func (b *browser) postJSON(path string, body any) response {
	b.t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		b.t.Fatal(err)
	}
	r, err := http.NewRequest("POST", b.app.srv.URL+path, bytes.NewReader(data))
	if err != nil {
		b.t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	return b.do(r)
}

// mustJSON is postJSON that fails the test unless the answer is 200.
func (b *browser) mustJSON(path string, body any) response {
	b.t.Helper()
	res := b.postJSON(path, body)
	if res.code != http.StatusOK {
		b.t.Fatalf("POST %s: %d, want 200; body: %s", path, res.code, res.body)
	}
	return res
}

// ceremonyID is the passkey cookie in the browser's jar, "" for none.
func (b *browser) ceremonyID() string {
	u, _ := url.Parse(b.app.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == passkeyCookie {
			return c.Value
		}
	}
	return ""
}

// setCeremonyID puts a passkey cookie into the browser's jar, as a
// replaying client would send it.
func (b *browser) setCeremonyID(id string) {
	u, _ := url.Parse(b.app.srv.URL)
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: passkeyCookie, Value: id, Path: "/", Secure: true}})
}

// register adds k to the browser's signed-in user, named name.
func (b *browser) register(k *softKey, name string) {
	b.t.Helper()
	o := parseOptions(b.t, b.mustJSON("/passkeys/register/begin", nil).body)
	b.mustJSON("/passkeys/register/finish", map[string]any{"name": name, "credential": k.create(b.t, o)})
}

// passkeySignIn signs the browser in with k alone.
func (b *browser) passkeySignIn(k *softKey) {
	b.t.Helper()
	o := parseOptions(b.t, b.mustJSON("/passkeys/login/begin", nil).body)
	b.mustJSON("/passkeys/login/finish", k.get(b.t, o))
}

// TestPasskeys walks a passkey's life over HTTP with a software
// authenticator, counting DynamoDB calls at each step (docs/example.md
// has the numbers): register one (the options ask for a discoverable
// credential and user verification), see it listed, sign in with it alone
// in another browser (Session.Methods "passkey"), rename it, let the
// authentication age, re-authenticate with it to remove it, and find it
// signs in no more, and that every session of the user, the one it made
// and the remover's, ended with it.
func TestPasskeys(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, passkeyApp(clock))
	calls := func(step string, want int, do func()) {
		t.Helper()
		ta.app.sessions.Wait(context.Background())
		before := ta.api.Total()
		do()
		ta.app.sessions.Wait(context.Background())
		if got := ta.api.Total() - before; got != want {
			t.Errorf("%s: %d DynamoDB calls, want %d", step, got, want)
		}
	}
	a := ta.browser("browser-A")
	a.signup("alice", "correct horse")
	key := newSoftKey(t, testRPID, testOrigin)
	key.counting = true

	var o webauthnOptions
	calls("registration begin", 2, func() { // the session check, the ceremony's PutItem
		o = parseOptions(t, a.mustJSON("/passkeys/register/begin", nil).body)
	})
	if sel := o.PublicKey.AuthenticatorSelection; sel.ResidentKey != "required" || sel.UserVerification != "required" {
		t.Errorf("registration options ask for resident key %q, user verification %q; want both required", sel.ResidentKey, sel.UserVerification)
	}
	calls("registration finish, the first passkey", 4, func() { // check, DeleteItem, the handle's PutItem, UpdateItem
		a.mustJSON("/passkeys/register/finish", map[string]any{"name": "laptop", "credential": key.create(t, o)})
	})
	account := a.get("/account")
	if !strings.Contains(account.body, `value="laptop"`) || !strings.Contains(account.body, `data-label="Last used">never`) {
		t.Errorf("the account page does not list the new passkey, unused:\n%s", formHTML(t, account.body, "passkeys"))
	}

	b := ta.browser("browser-B")
	calls("sign-in begin", 1, func() { o = parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body) })
	if o.PublicKey.UserVerification != "required" || len(o.PublicKey.AllowCredentials) != 0 {
		t.Errorf("sign-in options: user verification %q, %d allowed credentials; want required, and none (discoverable)", o.PublicKey.UserVerification, len(o.PublicKey.AllowCredentials))
	}
	// DeleteItem, the handle's GetItem, Login's read and three writes (its
	// history event too), the device's read and write (browser-B is new to
	// the account), the counter's UpdateItem.
	calls("sign-in finish", 9, func() { b.mustJSON("/passkeys/login/finish", key.get(t, o)) })
	if list := b.sessions(); len(list) != 2 || !slices.Equal(sessionOf(list, "browser-B").Methods, []string{methodPasskey}) {
		t.Errorf("after a passkey sign-in, sessions %+v: want browser-B's with methods [passkey]", list)
	}
	if !strings.Contains(a.get("/account").body, "passkey</td>") {
		t.Errorf("the sessions list does not say passkey for browser-B's session")
	}
	if b.ceremonyID() != "" {
		t.Errorf("the passkey cookie outlived its ceremony")
	}

	id := passkeyID(key.credID)
	calls("rename", 2, func() {
		b.mustPost(http.StatusSeeOther, "/passkeys/rename", url.Values{"id": {id}, "name": {"work laptop"}})
	})
	if !strings.Contains(b.get("/account").body, `value="work laptop"`) {
		t.Errorf("the passkey was not renamed")
	}

	clock.Advance(2 * time.Minute) // past -reauth
	res := b.post("/passkeys/remove", url.Values{"id": {id}})
	if want := reauthFor("/passkeys/remove?id=" + id); res.code != http.StatusSeeOther || res.header.Get("Location") != want {
		t.Fatalf("removing a passkey long after signing in: %d to %q, want 303 to %q", res.code, res.header.Get("Location"), want)
	}
	if page := b.get(reauthFor("/passkeys/remove?id=" + id)); !strings.Contains(page.body, `id="passkey-reauth"`) {
		t.Errorf("the re-authentication page offers no passkey")
	}
	old := b.token()
	calls("step-up begin", 2, func() { o = parseOptions(t, b.mustJSON("/reauth/passkey/begin", nil).body) })
	if len(o.PublicKey.AllowCredentials) != 1 || o.PublicKey.AllowCredentials[0].ID != b64url.EncodeToString(key.credID) {
		t.Errorf("step-up options allow %+v, want the user's one passkey", o.PublicKey.AllowCredentials)
	}
	// The check, DeleteItem, Login's read, its writes (the old session's
	// two items deleted, the new one's two written, its history event),
	// the device's read (known), the counter's UpdateItem.
	calls("step-up finish", 10, func() {
		res = b.mustJSON("/reauth/passkey/finish?next="+url.QueryEscape("/passkeys/remove?id="+id), key.get(t, o))
	})
	if !strings.Contains(res.body, `"next":"/passkeys/remove?id=`+id+`"`) {
		t.Errorf("the step-up's answer %s does not send the browser back to the confirm page", res.body)
	}
	if b.token() == old || ta.withToken(old).meStatus() != http.StatusUnauthorized {
		t.Errorf("the step-up kept the old session")
	}
	if got := sessionOf(b.sessions(), "browser-B").Methods; !slices.Equal(got, []string{methodPasskey}) {
		t.Errorf("methods after a passkey step-up: %v, want [passkey]", got)
	}
	// The check, the UpdateItem that removes it with a new credential
	// version, and Logout's two DeleteItems of browser-B's session and its
	// history event.
	remover := b.token()
	calls("remove", 5, func() {
		res = b.post("/passkeys/remove", url.Values{"id": {id}})
	})
	if res.code != http.StatusSeeOther || res.header.Get("Location") != "/login?next=%2Faccount" || b.token() != "" {
		t.Errorf("removing a passkey: %d to %q, cookie %v; want 303 to log in, and the cookie cleared", res.code, res.header.Get("Location"), b.token() != "")
	}
	if codeA, codeB := a.meStatus(), ta.withToken(remover).meStatus(); codeA != http.StatusUnauthorized || codeB != http.StatusUnauthorized {
		t.Errorf("after removing a passkey: browser-A's session /api/me %d, browser-B's %d; want both ended", codeA, codeB)
	}

	c := ta.browser("browser-C")
	o = parseOptions(t, c.mustJSON("/passkeys/login/begin", nil).body)
	if res := c.postJSON("/passkeys/login/finish", key.get(t, o)); res.code != http.StatusUnauthorized || c.token() != "" {
		t.Errorf("a sign-in with a removed passkey: %d, token %v; want 401 and none", res.code, c.token() != "")
	}

	// With its last passkey gone, the user signs in again and adds one:
	// the map is there, empty, and the handle stays.
	second := newSoftKey(t, testRPID, testOrigin)
	b.login("alice", "correct horse")
	b.register(second, "")
	c.passkeySignIn(second)
	if !strings.Contains(c.get("/account").body, `value="Passkey"`) {
		t.Errorf("a passkey added without a name is not called Passkey")
	}
}

func sessionOf(list []sessionJSON, userAgent string) sessionJSON {
	for _, s := range list {
		if s.UserAgent == userAgent {
			return s
		}
	}
	return sessionJSON{}
}

// tableItems is every item of ta's table, decoded, by "pk sk".
func tableItems(t *testing.T, ta *testApp) map[string]map[string]any {
	t.Helper()
	ta.app.sessions.Wait(context.Background())
	items := map[string]map[string]any{}
	var start map[string]types.AttributeValue
	for {
		out, err := ta.client.Scan(t.Context(), &dynamodb.ScanInput{TableName: &ta.table, ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		if err != nil {
			t.Fatalf("scan the table: %v", err)
		}
		for _, av := range out.Items {
			var item map[string]any
			if err := attributevalue.UnmarshalMap(av, &item); err != nil {
				t.Fatal(err)
			}
			items[item["pk"].(string)+" "+item["sk"].(string)] = item
		}
		if start = out.LastEvaluatedKey; start == nil {
			return items
		}
	}
}

// TestPasskeyRefusals: each assertion that must not sign in is refused,
// and writes nothing. "Nothing written" is exact: the table's items after
// the refused request are the items before it, attribute for attribute,
// so no session, credential, sign counter or user item changed, but that
// the refused ceremony's own challenge item is gone when the finish
// consumed it (a ceremony is spent by its first finish, refused or not,
// so that a second try needs a new challenge). A finish that consumed
// nothing (a replay, another session's challenge) leaves the table as it
// was, the challenge item included. Each case also checks that the
// browser holds no new session.
func TestPasskeyRefusals(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, passkeyApp(clock), unlimited)
	alice, bob := ta.browser("alice-1"), ta.browser("bob-1")
	alice.signup("alice", "correct horse")
	bob.signup("bob", "correct horse")
	aliceKey, bobKey := newSoftKey(t, testRPID, testOrigin), newSoftKey(t, testRPID, testOrigin)
	aliceKey.counting = true
	alice.register(aliceKey, "alice's")
	bob.register(bobKey, "bob's")

	for _, tc := range []struct {
		name string
		// run makes the refused request, after the table's picture is
		// taken, and returns its answer, the browser it came from, and
		// whether it consumed a ceremony.
		prepare func(t *testing.T) (run func() response, b *browser, consumed bool)
		want    int
		why     string // in the answer or the log: the refusal's reason
	}{
		{"a registration from another origin", func(t *testing.T) (func() response, *browser, bool) {
			phished := newSoftKey(t, testRPID, "https://evil.example")
			o := parseOptions(t, alice.mustJSON("/passkeys/register/begin", nil).body)
			cred := phished.create(t, o)
			return func() response {
				return alice.postJSON("/passkeys/register/finish", map[string]any{"name": "evil", "credential": cred})
			}, alice, true
		}, http.StatusBadRequest, "Error validating origin"},
		{"a replayed sign-in assertion", func(t *testing.T) (func() response, *browser, bool) {
			b := ta.browser("replayer")
			o := parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body)
			id := b.ceremonyID()
			assertion := aliceKey.get(t, o)
			b.mustJSON("/passkeys/login/finish", assertion)
			thief := ta.browser("thief")
			thief.setCeremonyID(id)
			return func() response { return thief.postJSON("/passkeys/login/finish", assertion) }, thief, false
		}, http.StatusBadRequest, "was used already"},
		{"another session's step-up challenge", func(t *testing.T) (func() response, *browser, bool) {
			// Alice's second browser begins a step-up; her first sends its
			// ceremony ID and an assertion of her own passkey for it.
			other := ta.browser("alice-2")
			other.login("alice", "correct horse")
			o := parseOptions(t, other.mustJSON("/reauth/passkey/begin", nil).body)
			alice.setCeremonyID(other.ceremonyID())
			assertion := aliceKey.get(t, o)
			return func() response { return alice.postJSON("/reauth/passkey/finish", assertion) }, alice, false
		}, http.StatusBadRequest, "not this session's"},
		{"a sign-in challenge past its lifetime", func(t *testing.T) (func() response, *browser, bool) {
			b := ta.browser("slow")
			o := parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body)
			clock.Advance(ceremonyLifetime)
			return func() response { return b.postJSON("/passkeys/login/finish", aliceKey.get(t, o)) }, b, true
		}, http.StatusBadRequest, "took too long"},
		{"a step-up with another user's passkey", func(t *testing.T) (func() response, *browser, bool) {
			o := parseOptions(t, alice.mustJSON("/reauth/passkey/begin", nil).body)
			return func() response { return alice.postJSON("/reauth/passkey/finish", bobKey.get(t, o)) }, alice, true
		}, http.StatusUnauthorized, "not owned by the user"},
		{"a sign counter that went back", func(t *testing.T) (func() response, *browser, bool) {
			b := ta.browser("clone")
			b.passkeySignIn(aliceKey) // the counter is stored
			clone := *aliceKey
			clone.counting, clone.counter = false, aliceKey.counter-1
			o := parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body)
			return func() response { return b.postJSON("/passkeys/login/finish", clone.get(t, o)) }, b, true
		}, http.StatusUnauthorized, "sign counter went back"},
		{"another origin", func(t *testing.T) (func() response, *browser, bool) {
			b := ta.browser("phished")
			phished := *aliceKey
			phished.origin = "https://passkeys.example.evil"
			o := parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body)
			return func() response { return b.postJSON("/passkeys/login/finish", phished.get(t, o)) }, b, true
		}, http.StatusUnauthorized, "Error validating origin"},
		{"another RP ID", func(t *testing.T) (func() response, *browser, bool) {
			b := ta.browser("other-rp")
			other := *aliceKey
			other.rpID = "example"
			o := parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body)
			return func() response { return b.postJSON("/passkeys/login/finish", other.get(t, o)) }, b, true
		}, http.StatusUnauthorized, "RP Hash mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, b, consumed := tc.prepare(t)
			ceremony := b.ceremonyID()
			tokenBefore := b.token()
			before := tableItems(t, ta)
			logged := len(ta.logs.String())
			res := run()
			if why := res.body + ta.logs.String()[logged:]; !strings.Contains(why, tc.why) {
				t.Errorf("refused, but not because of %q: answer and log %s", tc.why, why)
			}
			after := tableItems(t, ta)
			if res.code != tc.want {
				t.Errorf("%d %s, want %d", res.code, res.body, tc.want)
			}
			if b.token() != tokenBefore {
				t.Errorf("the refused request changed the browser's session cookie")
			}
			if consumed {
				key := ceremonyKey(ceremony)
				k := key["pk"].(*types.AttributeValueMemberS).Value + " " + key["sk"].(*types.AttributeValueMemberS).Value
				if _, ok := before[k]; !ok {
					t.Fatalf("the ceremony's item was not in the table before the finish")
				}
				delete(before, k)
			}
			// A refusal that reached the login's verify counts a failed
			// sign-in in the user's history; nothing else is written.
			for _, items := range []map[string]map[string]any{before, after} {
				maps.DeleteFunc(items, func(k string, _ map[string]any) bool { return strings.HasSuffix(k, "#failed") })
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("the refused request wrote (-before +after):\n%s", diff)
			}
		})
	}
	if alice.meStatus() != http.StatusOK || bob.meStatus() != http.StatusOK {
		t.Errorf("a refused passkey request signed someone out")
	}
}

// TestPasskeyRemovalGuard: the last passkey of a user without a password
// is not removed, by the handler's check of the user as the request read
// it and by the write's own condition, which holds for a request that read
// the user before another removal. The app's accounts all have a password
// (sign-up sets one, nothing removes it), so the test makes one without
// by removing the hash from the item.
func TestPasskeyRemovalGuard(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, passkeyApp(clock))
	a := ta.browser("browser")
	a.signup("alice", "correct horse")
	first, second := newSoftKey(t, testRPID, testOrigin), newSoftKey(t, testRPID, testOrigin)
	a.register(first, "first")
	a.register(second, "second")
	if _, err := ta.client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName: &ta.table, Key: dynamoKey(userKey("alice")), UpdateExpression: aws.String("REMOVE passwordHash"),
	}); err != nil {
		t.Fatal(err)
	}

	u := User{Passkeys: map[string]passkey{"a": {}, "b": {}}}
	only := User{Passkeys: map[string]passkey{"a": {}}}
	for _, tc := range []struct {
		name   string
		u      User
		id     string
		viaSSO bool
		want   error
	}{
		{"one of two, no password", u, "a", false, nil},
		{"the only one, no password", only, "a", false, errLastPasskey},
		{"the only one, with a password", User{PasswordHash: "x", Passkeys: map[string]passkey{"a": {}}}, "a", false, nil},
		{"none such", u, "c", false, errPasskeyChanged},
		{"the only one, a user of the provider with single sign-on on", only, "a", true, nil},
	} {
		if got := passkeyRemovalRefused(tc.u, tc.id, tc.viaSSO); got != tc.want {
			t.Errorf("%s: passkeyRemovalRefused = %v, want %v", tc.name, got, tc.want)
		}
	}

	a.mustPost(http.StatusSeeOther, "/passkeys/remove", url.Values{"id": {passkeyID(first.credID)}})
	a.passkeySignIn(second) // the removal signed every session out
	before := tableItems(t, ta)
	if res := a.post("/passkeys/remove", url.Values{"id": {passkeyID(second.credID)}}); res.code != http.StatusConflict {
		t.Errorf("removing the last passkey of a user without a password: %d, want 409", res.code)
	}
	// A request that read the user while the first passkey was still there.
	if err := ta.app.users.removePasskey(t.Context(), userKey("alice"), passkeyID(second.credID), false); err != errPasskeyChanged {
		t.Errorf("removePasskey of the last passkey of a user without a password: %v, want errPasskeyChanged", err)
	}
	if diff := cmp.Diff(before, tableItems(t, ta)); diff != "" {
		t.Errorf("the refused removal wrote (-before +after):\n%s", diff)
	}
	ta.browser("again").passkeySignIn(second)
}

// TestPasskeyCeremonyRace: two finishes of one sign-in ceremony at once,
// as a copied request would race the browser's own. The first is held
// after it has taken the challenge (at its read of the handle's item); the
// second, sent meanwhile with the same cookie and assertion, finds no
// challenge and is refused; the first then signs in. One ceremony, one
// session.
func TestPasskeyCeremonyRace(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, passkeyApp(clock))
	a := ta.browser("browser")
	a.signup("alice", "correct horse")
	key := newSoftKey(t, testRPID, testOrigin)
	a.register(key, "laptop")

	first, second := ta.browser("first"), ta.browser("second")
	o := parseOptions(t, first.mustJSON("/passkeys/login/begin", nil).body)
	second.setCeremonyID(first.ceremonyID())
	assertion := key.get(t, o)
	held := ta.faults.pauseAfter("GetItem", func(in any) bool {
		get, ok := in.(*dynamodb.GetItemInput)
		pk, _ := get.Key["pk"].(*types.AttributeValueMemberS)
		return ok && pk != nil && strings.HasPrefix(pk.Value, passkeyHandlePrefix)
	})
	done := make(chan response)
	go func() {
		r, _ := http.NewRequest("POST", ta.srv.URL+"/passkeys/login/finish", bytes.NewReader(assertion))
		r.Header.Set("Content-Type", "application/json")
		res, err := first.send(r)
		if err != nil {
			t.Errorf("the first finish: %v", err)
		}
		done <- res
	}()
	held.waitReached(t)
	if res := second.postJSON("/passkeys/login/finish", assertion); res.code != http.StatusBadRequest || second.token() != "" {
		t.Errorf("the second finish, while the first holds the challenge: %d %s; want 400 and no session", res.code, res.body)
	}
	held.release()
	if res := <-done; res.code != http.StatusOK || first.token() == "" {
		t.Errorf("the first finish: %d %s; want 200 and a session", res.code, res.body)
	}
	if list, err := ta.app.sessions.List(t.Context(), userKey("alice")); err != nil || len(list) != 2 {
		t.Errorf("alice's sessions: %d, %v; want the sign-up's and the one passkey sign-in's", len(list), err)
	}
}

// A passkey cookie that is not of the shape the app sends (rand.Text: 26
// characters of base32) is refused with 400 before any DynamoDB call.
func TestPasskeyMalformedCeremonyCookie(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, passkeyApp(ddbtest.NewClock(time.Now())))
	owner := ta.browser("owner")
	owner.signup("alice", "correct horse")
	key := newSoftKey(t, testRPID, testOrigin)
	owner.register(key, "laptop")
	b := ta.browser("malformed")
	o := parseOptions(t, b.mustJSON("/passkeys/login/begin", nil).body)
	assertion := key.get(t, o)
	for _, id := range []string{strings.Repeat("a", 26), strings.Repeat("A", 27), strings.Repeat("A", 25) + "!", strings.Repeat("A", 64)} {
		b.setCeremonyID(id)
		before := ta.api.Total()
		if res := b.postJSON("/passkeys/login/finish", json.RawMessage(assertion)); res.code != http.StatusBadRequest {
			t.Errorf("passkey cookie %q: %d, want 400", id, res.code)
		}
		if n := ta.api.Total() - before; n != 0 {
			t.Errorf("passkey cookie %q: %d DynamoDB calls, want none", id, n)
		}
	}
}
