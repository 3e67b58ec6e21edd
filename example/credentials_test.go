package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// These tests are about what a password change does to sessions: after it,
// no session that rests on the old password may live, however a login
// with the old password interleaves with it, on whichever instance. They
// do not run in parallel with the rest, whose hashing would stretch the
// pauses below towards ddbsession's store timeout.

// TestLoginPausedAcrossPasswordChange stops an attacker's login on a
// second instance right after it has read the user item, with the old
// hash, and lets the owner's password change run to completion before the
// login writes its session. The login succeeds, since it checked the old
// password against the hash it read, but its session must be dead on
// arrival. A login that checked the password on one read and took the
// versions from a later one (the hash read apart from Login's verify)
// would have copied the credential version after the change, and kept
// its session.
func TestLoginPausedAcrossPasswordChange(t *testing.T) {
	ta := newTestApp(t)
	second := ta.anotherInstance()
	owner, phone := ta.browser("owner"), ta.browser("owner's phone")
	owner.signup("alice", "old password")
	phone.login("alice", "old password")

	pause := second.faults.pauseAfter("*", readsUser(userKey("alice")))
	defer pause.release()
	attacker := second.browser("attacker")
	done := make(chan error, 1)
	var res response
	go func() {
		var err error
		res, err = attacker.postForm(context.Background(), second.srv.URL, "/login", url.Values{"username": {"alice"}, "password": {"old password"}})
		done <- err
	}()
	pause.waitReached(t)
	owner.mustPost(http.StatusSeeOther, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
	pause.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if res.code != http.StatusSeeOther || attacker.token() == "" {
		t.Fatalf("the paused login: %d, cookie %v; want it to succeed on the old hash it read, or this test shows nothing", res.code, attacker.token() != "")
	}
	if code := attacker.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the attacker's session, written after the change: /api/me %d, want 401", code)
	}
	assertOnlyOwnerSignedIn(t, owner, phone)
}

// TestLoginBetweenPasswordChangeWrites stops the owner's password change
// after its first write to the user item and lets an attacker's login with
// the old password run meanwhile on a second instance. With the new hash
// written first, the login reads it and fails. In the other order
// (RevokeAll, then hash) a login between them would read the old hash with
// the new sessions version, and a session of release v0.1.0, which carries
// no credential version, would copy that version and live on.
func TestLoginBetweenPasswordChangeWrites(t *testing.T) {
	ta := newTestApp(t)
	second := ta.anotherInstance()
	owner, phone := ta.browser("owner"), ta.browser("owner's phone")
	owner.signup("alice", "old password")
	phone.login("alice", "old password")

	pause := ta.faults.pauseAfter("UpdateItem", updatesUser(userKey("alice")))
	defer pause.release()
	done := make(chan error, 1)
	go func() {
		res, err := owner.postForm(context.Background(), ta.srv.URL, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
		if err == nil && res.code != http.StatusSeeOther {
			err = fmt.Errorf("password change: %d %s", res.code, pageMessage(t, res.body))
		}
		done <- err
	}()
	pause.waitReached(t)
	attacker := second.browser("attacker")
	res := attacker.post("/login", url.Values{"username": {"alice"}, "password": {"old password"}})
	pause.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if res.code != http.StatusUnauthorized {
		t.Errorf("login with the old password while the change was half done: %d, want 401", res.code)
	}
	if code := attacker.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the attacker after the change: /api/me %d, want 401", code)
	}
	assertOnlyOwnerSignedIn(t, owner, phone)
}

// TestPasswordChangeFinishesWhenClientHangsUp closes the owner's
// connection once the new password is written: RevokeAll must still
// follow, or the sessions that carry no credential version (of release
// v0.1.0), which only a new sessions version ends, would outlive it.
func TestPasswordChangeFinishesWhenClientHangsUp(t *testing.T) {
	ta := newTestApp(t)
	owner, phone := ta.browser("owner"), ta.browser("owner's phone")
	owner.signup("alice", "old password")
	phone.login("alice", "old password")

	// A server of its own in front of the app, to see the request's
	// context end on the server's side before the change goes on.
	requests := make(chan context.Context, 1)
	front := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests <- r.Context()
		ta.app.ServeHTTP(w, r)
	}))
	defer front.Close()

	before := ta.sessionsVersionOf("alice")
	pause := ta.faults.pauseAfter("UpdateItem", updatesUser(userKey("alice")))
	defer pause.release()
	ctx, hangUp := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := owner.postForm(ctx, front.URL, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
		done <- err
	}()
	serverSide := <-requests
	pause.waitReached(t)
	hangUp()
	<-done
	<-serverSide.Done() // the server saw the client go
	pause.release()

	// Nothing tells the test when the handler is done, but RevokeAll's
	// write, which changes the sessions version.
	waitUntil(t, "RevokeAll to change the sessions version", func() bool { return ta.sessionsVersionOf("alice") != before })
	if code := phone.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the phone after the change: /api/me %d, want 401", code)
	}
	if res := ta.browser("C").post("/login", url.Values{"username": {"alice"}, "password": {"old password"}}); res.code != http.StatusUnauthorized {
		t.Errorf("login with the old password: %d, want 401", res.code)
	}
	ta.browser("D").login("alice", "new password")
}

// TestPasswordChangeEndsOtherSessionsInItsWrite holds the owner's
// password change right after its write of the new password, before
// anything else it does: the phone's session, made before the change, is
// refused already, since the same write gave the user a new credential
// version (docs/item-format.md#user-items). With RevokeAll alone it lived
// on until RevokeAll's write, or for good if that write failed.
func TestPasswordChangeEndsOtherSessionsInItsWrite(t *testing.T) {
	ta := newTestApp(t)
	owner, phone := ta.browser("owner"), ta.browser("owner's phone")
	owner.signup("alice", "old password")
	phone.login("alice", "old password")

	pause := ta.faults.pauseAfter("UpdateItem", func(in any) bool {
		update := in.(*dynamodb.UpdateItemInput)
		return keyIs(update.Key, userKey("alice")) && strings.Contains(aws.ToString(update.UpdateExpression), "passwordHash")
	})
	defer pause.release()
	done := make(chan error, 1)
	go func() {
		res, err := owner.postForm(context.Background(), ta.srv.URL, "/password", url.Values{"current": {"old password"}, "new": {"new password"}})
		if err == nil && res.code != http.StatusSeeOther {
			err = fmt.Errorf("password change: %d %s", res.code, pageMessage(t, res.body))
		}
		done <- err
	}()
	pause.waitReached(t)
	if code := phone.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the phone's session, once the new password is written: /api/me %d, want 401", code)
	}
	pause.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	assertOnlyOwnerSignedIn(t, owner, phone)
}

// TestPasswordChangeRevokeAllFails fails RevokeAll's write after the new
// password is written. The other sessions ended with that write, which
// gave the user a new credential version: only those without one (of
// release v0.1.0) could live on, so the user hears that some may, and is
// told to log out everywhere; this browser is signed in anew.
func TestPasswordChangeRevokeAllFails(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	owner, phone := ta.browser("owner"), ta.browser("owner's phone")
	owner.signup("alice", "old password")
	phone.login("alice", "old password")

	ta.faults.failNext("UpdateItem", func(in any) bool {
		update := in.(*dynamodb.UpdateItemInput)
		return keyIs(update.Key, userKey("alice")) && !strings.Contains(aws.ToString(update.UpdateExpression), "passwordHash")
	})
	res := owner.post("/password", url.Values{"current": {"old password"}, "new": {"new password"}})
	if msg := pageMessage(t, res.body); res.code != http.StatusServiceUnavailable || !strings.Contains(msg, "may not have been signed out") || !strings.Contains(msg, "Log out everywhere") {
		t.Fatalf("password change whose RevokeAll failed: %d %q; want 503 saying that some sessions may live on", res.code, msg)
	}
	assertOnlyOwnerSignedIn(t, owner, phone)
	if res := ta.browser("C").post("/login", url.Values{"username": {"alice"}, "password": {"old password"}}); res.code != http.StatusUnauthorized {
		t.Errorf("login with the old password: %d, want 401", res.code)
	}
	owner.mustPost(http.StatusSeeOther, "/logout-everywhere", nil)
	ta.browser("D").login("alice", "new password")
}

// TestLoginsRacingPasswordChanges is the same race left to chance: several
// attackers log in with the current password over and over through a
// second instance while the owner changes it, round after round. Logins
// that read the old hash succeed until the change, and fail after it; none
// of their sessions may survive the change.
func TestLoginsRacingPasswordChanges(t *testing.T) {
	// One hash at a time per instance, so that two cores are enough for
	// the attackers, the owner, and dynalite.
	oneSlot := func(cfg *appConfig) { cfg.HashSlots = 1 }
	ta := newTestApp(t, oneSlot)
	second := ta.anotherInstance(unlimited, oneSlot)
	owner := ta.browser("owner")
	owner.signup("alice", "password 0")

	const rounds, attackers, maxAttempts = 3, 3, 100
	for round := range rounds {
		old, next := fmt.Sprintf("password %d", round), fmt.Sprintf("password %d", round+1)
		var (
			mu               sync.Mutex
			tokens           []string
			errs             []error
			attempts, signed atomic.Int64
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range attackers {
			b := second.browser("attacker")
			wg.Go(func() {
				for range maxAttempts {
					select {
					case <-stop:
						return
					default:
					}
					b.client.Jar, _ = cookiejar.New(nil) // a fresh browser for each try
					res, err := b.postForm(context.Background(), second.srv.URL, "/login", url.Values{"username": {"alice"}, "password": {old}})
					attempts.Add(1)
					mu.Lock()
					switch {
					case err != nil:
						errs = append(errs, err)
					case res.code == http.StatusSeeOther:
						signed.Add(1)
						tokens = append(tokens, b.token())
					case res.code != http.StatusUnauthorized:
						errs = append(errs, fmt.Errorf("attacker's login: %d %s", res.code, pageMessage(t, res.body)))
					}
					mu.Unlock()
				}
			})
		}
		waitUntil(t, "an attacker to sign in", func() bool { return signed.Load() > 0 })
		owner.mustPost(http.StatusSeeOther, "/password", url.Values{"current": {old}, "new": {next}})
		// Every attacker gets at least one more try after the change.
		after := attempts.Load()
		waitUntil(t, "more attacks after the change", func() bool { return attempts.Load() >= after+attackers })
		close(stop)
		wg.Wait()

		for _, err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		if len(errs) > 0 {
			t.Logf("the second instance's log:\n%s", second.logs)
		}
		var alive int
		for _, token := range tokens {
			if ta.withToken(token).meStatus() != http.StatusUnauthorized {
				alive++
			}
		}
		t.Logf("round %d: %d attacker logins, %d signed in before the change", round, attempts.Load(), len(tokens))
		if alive > 0 {
			t.Errorf("round %d: %d of %d attacker sessions survived the password change", round, alive, len(tokens))
		}
		if code := owner.meStatus(); code != http.StatusOK {
			t.Fatalf("round %d: the owner after the change: /api/me %d, want 200", round, code)
		}
		if n := len(owner.sessions()); n != 1 {
			t.Errorf("round %d: %d sessions listed after the change, want the owner's alone", round, n)
		}
	}
}

// assertOnlyOwnerSignedIn checks the state after a password change: the
// browser that changed it is signed in with the only session listed, and
// the owner's other browser is signed out.
// sessionsVersionOf is the sessions version of username's user item, as
// the table holds it.
func (ta *testApp) sessionsVersionOf(username string) string {
	ta.t.Helper()
	out, err := ta.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &ta.table, Key: dynamoKey(userKey(username)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		ta.t.Fatal(err)
	}
	n, ok := out.Item["sessionsVersion"].(*types.AttributeValueMemberN)
	if !ok {
		ta.t.Fatalf("%s's user item has no sessionsVersion: %v", username, out.Item)
	}
	return n.Value
}

func assertOnlyOwnerSignedIn(t *testing.T, owner, other *browser) {
	t.Helper()
	if code := owner.meStatus(); code != http.StatusOK {
		t.Errorf("the browser that changed the password: /api/me %d, want 200", code)
	}
	if code := other.meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the owner's other browser: /api/me %d, want 401", code)
	}
	if list := owner.sessions(); len(list) != 1 || !list[0].Current {
		t.Errorf("sessions after the change: %+v, want only the changing browser's", list)
	}
}

// TestRecreatedUserGetsNoOldSessions deletes a user item, as closing an
// account would, and signs up anew under the same name: the old account's
// session, which names the same user key, must not sign in the new one.
func TestRecreatedUserGetsNoOldSessions(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	first := ta.browser("first alice")
	first.signup("alice", "first password")
	token := first.token()

	_, err := ta.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &ta.table, Key: dynamoKey(userKey("alice"))})
	if err != nil {
		t.Fatal(err)
	}
	if code := ta.withToken(token).meStatus(); code != http.StatusUnauthorized {
		t.Fatalf("session of a deleted user: /api/me %d, want 401", code)
	}
	ta.browser("second alice").signup("alice", "second password")
	if code := ta.withToken(token).meStatus(); code != http.StatusUnauthorized {
		t.Errorf("the deleted account's session after the name was taken again: /api/me %d, want 401", code)
	}
}

// TestPasswordHashReachesNoResponse walks every page and API, and the
// error pages of the password forms, looking for the stored hash or either
// of its base64 parts.
func TestPasswordHashReachesNoResponse(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	b := ta.browser("browser-A")
	b.signup("alice", "correct horse")
	b.login("alice", "correct horse") // two sessions listed

	out, err := ta.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &ta.table, Key: dynamoKey(userKey("alice")), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	var item userItem
	if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
		t.Fatal(err)
	}
	hash := string(item.PasswordHash)
	parts := strings.Split(hash, "$") // "", "argon2id", "v=19", params, salt, key
	if len(parts) != 6 {
		t.Fatalf("stored hash %q is not in PHC format", hash)
	}
	secrets := []string{hash, parts[4], parts[5]}

	responses := map[string]response{
		"GET /":                      b.get("/"),
		"GET /api/me":                b.get("/api/me"),
		"GET /api/sessions":          b.get("/api/sessions"),
		"POST /password wrong":       b.post("/password", url.Values{"current": {"wrong"}, "new": {"new password"}}),
		"POST /password bad":         b.post("/password", url.Values{"current": {"correct horse"}}),
		"POST /login wrong":          ta.browser("B").post("/login", url.Values{"username": {"alice"}, "password": {"wrong"}}),
		"POST /signup taken":         ta.browser("B").post("/signup", url.Values{"username": {"alice"}, "password": {"taken over"}}),
		"POST /sessions/revoke none": b.post("/sessions/revoke", url.Values{"id": {"0123456789abcdef0123456789abcdef"}}),
	}
	for name, res := range responses {
		var headers strings.Builder
		res.header.Write(&headers)
		for _, secret := range secrets {
			if strings.Contains(res.body, secret) || strings.Contains(headers.String(), secret) {
				t.Errorf("%s: the response holds the password hash (or part of it, %q)", name, secret)
			}
		}
	}
	if strings.Contains(ta.logs.String(), parts[5]) {
		t.Errorf("the password hash reached the logs")
	}
}

// TestUserPrintsNoHash prints a User every way the app could by mistake.
func TestUserPrintsNoHash(t *testing.T) {
	t.Parallel()
	const hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5"
	u := User{Username: "alice", PasswordHash: hash}

	var out bytes.Buffer
	fmt.Fprintf(&out, "%v %+v %#v %s %q %x|", u, u, u, u.PasswordHash, u.PasswordHash, u.PasswordHash)
	js, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(js)
	js, err = json.Marshal(u.PasswordHash)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(js)
	if err := template.Must(template.New("").Parse("{{.}} {{.PasswordHash}}|")).Execute(&out, u); err != nil {
		t.Fatal(err)
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("text", "user", u, "hash", u.PasswordHash)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("json", "user", u, "hash", u.PasswordHash)

	if strings.Contains(out.String(), "a2V5a2V5a2V5") || strings.Contains(out.String(), "c2FsdHNhbHRzYWx0") {
		t.Errorf("the hash was printed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "alice") || !strings.Contains(out.String(), "[redacted]") {
		t.Errorf("want the username and [redacted] printed:\n%s", out.String())
	}
}
