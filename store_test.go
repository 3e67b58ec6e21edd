package ddbsession_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ddbsession/ddbsession"
	"github.com/google/go-cmp/cmp"
)

func TestLoginItemFormat(t *testing.T) {
	t.Parallel()
	// The documented attributes of each item and their types.
	sessionAttrs := map[string]string{
		"pk": "S", "sk": "S", "v": "N", "kind": "S", "sid": "S", "userPK": "S", "userSK": "S",
		"createdAt": "N", "refreshedAt": "N", "expiresAt": "N", "userAgent": "S", "gen": "N",
	}
	indexAttrs := map[string]string{"sessionPK": "S"}
	maps.Copy(indexAttrs, sessionAttrs)
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
			common := map[string]string{
				"v":           "N:1",
				"sid":         sid,
				"userPK":      "S:USER#alice",
				"userSK":      "S:PROFILE",
				"createdAt":   "N:1796040000250", // 2026-11-30T12:00:00.250Z in epoch ms
				"refreshedAt": "N:1796040000250",
				"expiresAt":   "N:1796043600", // an hour later, in epoch seconds
				"userAgent":   "S:" + testAgent,
				"gen":         "N:0", // the user's cutoff as read: the user has none
			}
			wantValues := map[string]string{"pk": "S:" + sessionPK, "sk": "S:SESSION", "kind": "S:session"}
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
		token, _, _ := strings.Cut(c.Value, ".")
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
	hs := newHandSession(alice)
	session, _ := hs.items()
	session["v"] = attrN(3)
	e.putItem(session)
	tokens = append(tokens, hs.token)
	if got := e.status(&http.Cookie{Name: cookieName, Value: hs.token}); got != http.StatusUnauthorized {
		t.Errorf("unknown-format session: status %d, want 401", got)
	}
	// A store failure is logged about.
	cfg := e.cfg
	cfg.StoreTimeout = time.Nanosecond
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
