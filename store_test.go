package ddbsession_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// Keys that DynamoDB leaves unprocessed are asked for again within the
// request's deadline.
func TestOneRoundTripRetriesUnprocessedKeys(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	unprocessedKeys(p, true)
	p.Reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Errorf("status %d %q, want 200 after the retry", w.Code, w.Body)
	}
	if got := p.Count("BatchGetItem"); got != 2 {
		t.Errorf("%d BatchGetItems, want 2 (the first left its keys unprocessed)", got)
	}
}

func TestLoginItemFormat(t *testing.T) {
	t.Parallel()
	// The documented attributes of each item and their types.
	sessionAttrs := map[string]string{
		"pk": "S", "sk": "S", "v": "N", "kind": "S", "sid": "S", "userPK": "S", "userSK": "S",
		"createdAt": "N", "refreshedAt": "N", "expiresAt": "N", "userAgent": "S", "gen": "N", "userGen": "N", "credGen": "N", "globalGen": "N", "authAt": "N",
		"addr": "S", "lastAddr": "S",
	}
	indexAttrs := map[string]string{"sessionPK": "S"}
	maps.Copy(indexAttrs, sessionAttrs)
	delete(indexAttrs, "lastAddr") // a refresh writes the session item alone
	withBucket := map[string]string{"expiryBucket": "S"}
	maps.Copy(withBucket, sessionAttrs)
	hashOnly := map[string]string{}
	for k, v := range sessionAttrs {
		if k != "sk" && k != "userSK" {
			hashOnly[k] = v
		}
	}

	for _, tc := range []struct {
		name                   string
		mutate                 func(*ddbsession.Config[User])
		wantSession, wantIndex map[string]string // nil: no such item
	}{
		{"default", nil, sessionAttrs, indexAttrs},
		{"with expiry index", withExpiryIndex, withBucket, indexAttrs},
		{"hash-only table", func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true }, hashOnly, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.mutate)
			alice := e.putUser("alice")
			cookie := e.login(alice)

			byKind := map[string][]map[string]types.AttributeValue{}
			for _, item := range e.scanAll() {
				byKind[attrText(item["kind"])] = append(byKind[attrText(item["kind"])], item)
			}
			// The user item has no kind.
			wantCounts := map[string]int{"<nil>": 1, "S:session": 1}
			if tc.wantIndex != nil {
				wantCounts["S:session-index"] = 1
			}
			gotCounts := map[string]int{}
			for k, items := range byKind {
				gotCounts[k] = len(items)
			}
			if diff := cmp.Diff(wantCounts, gotCounts); diff != "" {
				t.Fatalf("items by kind (-want +got):\n%s", diff)
			}
			session := byKind["S:session"][0]

			sid := attrText(session["sid"])
			if !sessionIDFormat.MatchString(strings.TrimPrefix(sid, "S:")) {
				t.Errorf("sid %s is not 32 lowercase hex digits", sid)
			}
			// The ID starts with the creation time: 1796040000250 ms in 12 hex digits.
			if want := fmt.Sprintf("S:%012x", int64(1796040000250)); !strings.HasPrefix(sid, want) {
				t.Errorf("sid %s does not start with the creation time %s", sid, want)
			}
			sessionPK := "SESSION#" + tokenHash(cookie.Value)
			userKey := userItemKey(alice)
			if e.cfg.Layout.HashOnly {
				userKey = map[string]types.AttributeValue{"pk": attrS(alice.PK)}
			}
			version := fmt.Sprintf("N:%d", storedNumber(t, e, userKey, "sessionsVersion"))
			common := map[string]string{
				"v":           "N:4",
				"sid":         sid,
				"userPK":      "S:USER#alice",
				"userSK":      "S:PROFILE",
				"createdAt":   "N:1796040000250", // 2026-11-30T12:00:00.250Z in epoch ms
				"refreshedAt": "N:1796040000250",
				"expiresAt":   "N:1796043600", // an hour later, in epoch seconds
				"userAgent":   "S:" + testAgent,
				"gen":         version, // the user's sessions version as read
				"userGen":     version,
				"credGen":     "N:0", // putUser's has no credential version
				"globalGen":   "N:0", // no RevokeEveryone yet
				"authAt":      "N:1796040000250",
				"addr":        "S:" + testAddr, // the request's RemoteAddr
			}
			wantValues := map[string]string{"pk": "S:" + sessionPK, "sk": "S:SESSION", "kind": "S:session", "lastAddr": "S:" + testAddr}
			maps.Copy(wantValues, common)
			if tc.wantIndex == nil {
				delete(wantValues, "sk")
				delete(wantValues, "userSK")
			}
			checkItem(t, "session item", session, tc.wantSession, wantValues)

			if tc.wantIndex != nil {
				wantValues := map[string]string{
					// USERSESSIONS#<len(userPK)>#<userPK><userSK>
					"pk":        "S:USERSESSIONS#10#USER#alicePROFILE",
					"sk":        "S:S#" + strings.TrimPrefix(sid, "S:"),
					"kind":      "S:session-index",
					"sessionPK": "S:" + sessionPK,
				}
				maps.Copy(wantValues, common)
				// TTL removes it at the session's absolute lifetime, 30
				// days: List reads the session item for its expiry.
				wantValues["expiresAt"] = "N:1798632000"
				checkItem(t, "index item", byKind["S:session-index"][0], tc.wantIndex, wantValues)
			}
		})
	}
}

// checkItem compares a raw item's attribute names and types with the
// documented set, and its values with want; expiryBucket, whose shard is not
// documented, is checked for its format and hour only.
func checkItem(t *testing.T, what string, item map[string]types.AttributeValue, wantTypes, wantValues map[string]string) {
	t.Helper()
	gotTypes := map[string]string{}
	gotValues := map[string]string{}
	for k, v := range item {
		text := attrText(v)
		typ, value, _ := strings.Cut(text, ":")
		gotTypes[k] = typ
		if k == "expiryBucket" {
			if hour, _ := bucketParts(t, item); hour != "2026113013" {
				t.Errorf("%s: expiryBucket %s, want the hour 2026113013", what, value)
			}
			continue
		}
		gotValues[k] = text
	}
	if diff := cmp.Diff(wantTypes, gotTypes); diff != "" {
		t.Errorf("%s: attribute names and types (-documented +written):\n%s", what, diff)
	}
	if diff := cmp.Diff(wantValues, gotValues); diff != "" {
		t.Errorf("%s: attribute values (-want +got):\n%s", what, diff)
	}
}

func TestTableAndLogsNeverHoldToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExpiryIndex)
	alice := e.putUser("alice")
	bob := e.putUser("bob")
	h := e.m.RequireSession(whoami(e.m))

	// The secret is the token, the cookie's part before the user key: 26
	// upper-case base32 characters, looked for in upper-cased text so that
	// a lower-cased copy shows too.
	var tokens []string
	keep := func(c *http.Cookie) *http.Cookie {
		token := c.Value[:26]
		if len(token) != 26 || strings.ToUpper(token) != token {
			t.Fatalf("cookie %q does not start with a token", c.Value)
		}
		tokens = append(tokens, token)
		return c
	}
	first := keep(e.login(alice))
	rotated := keep(e.login(alice, first)) // rotation deletes first
	bobs := keep(e.login(bob))
	other := keep(e.login(alice))
	e.clock.Advance(11 * time.Minute)
	for _, c := range []*http.Cookie{first, rotated, bobs, other} {
		e.get(h, c) // refreshes the live ones
	}
	if err := e.m.Revoke(context.Background(), alice, e.sessionFor(other).ID); err != nil {
		t.Fatal(err)
	}
	e.get(h, other)
	if err := e.m.Logout(newRecorder(), newRequest(bobs)); err != nil {
		t.Fatal(err)
	}
	keep(e.login(bob))

	// An item in an unknown format is logged about.
	hs := newHandSession(alice, storedNumber(t, e, userItemKey(alice), "sessionsVersion"))
	session, _ := hs.items()
	session["v"] = attrN(9) // 3 is a pending login's
	e.putItem(session)
	tokens = append(tokens, hs.token)
	if got := e.status(&http.Cookie{Name: cookieName, Value: hs.token}); got != http.StatusUnauthorized {
		t.Errorf("unknown-format session: status %d, want 401", got)
	}
	// A store failure is logged about.
	cfg := e.cfg
	cfg.Limits.StoreTimeout = time.Nanosecond
	failing, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := e.get(failing.RequireSession(whoami(failing)), rotated); w.Code != http.StatusServiceUnavailable {
		t.Errorf("request with a timed-out store: status %d, want 503", w.Code)
	}

	items := e.scanAll()
	if len(items) < 5 {
		t.Fatalf("only %d items in the table", len(items))
	}
	for _, item := range items {
		for name, v := range item {
			text := strings.ToUpper(attrText(v))
			for _, tok := range tokens {
				if strings.Contains(text, tok) {
					t.Errorf("attribute %s of item %s holds a raw token: %s", name, attrText(item["pk"]), text)
				}
			}
		}
	}
	logs := e.logs.String()
	for _, want := range []string{"unknown format", "failing closed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q, so the test did not exercise that path; logs:\n%s", want, logs)
		}
	}
	for _, tok := range tokens {
		if strings.Contains(strings.ToUpper(logs), tok) {
			t.Errorf("logs hold a raw token:\n%s", logs)
		}
	}
}

// Every operation on a table that does not exist fails with an error that
// names the table: the engine's "Requested resource not found" does not.
func TestMissingTableErrorsNameIt(t *testing.T) {
	t.Parallel()
	token := rand.Text()
	user := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	ctx := context.Background()
	// call makes one call on m and returns the text that must name the
	// table: an error's, or the log's.
	type call func(t *testing.T, m *ddbsession.Manager[User], logs *syncBuffer) string
	carrying := func(m *ddbsession.Manager[User]) *http.Request {
		return newRequest(&http.Cookie{Name: cookieName, Value: token})
	}
	// middleware sends a request with a well-formed session cookie through
	// a middleware, which must answer 503 and log why.
	middleware := func(h func(*ddbsession.Manager[User], http.Handler) http.Handler) call {
		return func(t *testing.T, m *ddbsession.Manager[User], logs *syncBuffer) string {
			w := newRecorder()
			h(m, whoami(m)).ServeHTTP(w, carrying(m))
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", w.Code)
			}
			if !strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("no error logged:\n%s", logs)
			}
			return logs.String()
		}
	}
	cases := []struct {
		name string
		call call
	}{
		{"RequireSession", middleware((*ddbsession.Manager[User]).RequireSession)},
		{"LoadSession", middleware((*ddbsession.Manager[User]).LoadSession)},
		{"Authenticate", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			_, _, err := m.Authenticate(ctx, token)
			return missingTableError(t, err)
		}},
		{"Login", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Login(newRecorder(), newRequest(), user, nil))
		}},
		{"Login carrying a session", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Login(newRecorder(), carrying(m), user, nil))
		}},
		{"Login with verify", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Login(newRecorder(), newRequest(), user, func(User) error { return nil }))
		}},
		{"LoginBearer", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			_, _, err := m.LoginBearer(newRequest(), user, nil)
			return missingTableError(t, err)
		}},
		{"CreateUser", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.CreateUser(ctx, User{PK: user.PK, SK: user.SK, Name: "alice"}))
		}},
		{"Logout", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Logout(newRecorder(), carrying(m)))
		}},
		{"RevokeAll", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.RevokeAll(ctx, user))
		}},
		{"List", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			_, err := m.List(ctx, user)
			return missingTableError(t, err)
		}},
		{"Revoke", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Revoke(ctx, user, strings.Repeat("0f", 16)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := ddbtest.Client(t)
			table := ddbtest.TableName(t, client) // never created
			logs := &syncBuffer{}
			m, err := ddbsession.New(ddbsession.Config[User]{
				Client:       client,
				Table:        table,
				Layout:       ddbsession.Layout{ExpiryIndex: "expiry"},
				BearerTokens: true,
				Now:          func() time.Time { return start },
				Logger:       slog.New(slog.NewTextHandler(logs, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.call(t, m, logs); !strings.Contains(got, table) {
				t.Errorf("does not name table %q:\n%s", table, got)
			}
		})
	}
}

// missingTableError returns err's text, and fails unless err is the
// engine's answer for a missing table, which callers can still tell.
func missingTableError(t *testing.T, err error) string {
	t.Helper()
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("error %v, want one wrapping a ResourceNotFoundException", err)
	}
	if err == nil {
		return ""
	}
	return err.Error()
}
