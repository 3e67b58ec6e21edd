package ddbsession_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
)

// handSession is a session written by hand in the documented item format,
// as another release or another language's implementation would write it.
type handSession struct {
	token       string
	sid         string
	user        ddbsession.UserKey
	createdMs   int64
	refreshedMs int64
	expiresSec  int64
	agent       string
}

func newHandSession(user ddbsession.UserKey) handSession {
	var id [16]byte
	rand.Read(id[:])
	return handSession{
		token:       rand.Text(),
		sid:         hex.EncodeToString(id[:]),
		user:        user,
		createdMs:   start.Add(-5*time.Minute - 123*time.Millisecond).UnixMilli(),
		refreshedMs: start.Add(-2*time.Minute + 77*time.Millisecond).UnixMilli(),
		expiresSec:  start.Add(40 * time.Minute).Unix(),
		agent:       "Mozilla/5.0 (hand written)",
	}
}

// items returns the session item and its per-user index item.
func (h handSession) items() (session, index map[string]types.AttributeValue) {
	common := func(kind string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"v":           attrN(1),
			"kind":        attrS(kind),
			"sid":         attrS(h.sid),
			"userPK":      attrS(h.user.PK),
			"userSK":      attrS(h.user.SK),
			"createdAt":   attrN(h.createdMs),
			"refreshedAt": attrN(h.refreshedMs),
			"expiresAt":   attrN(h.expiresSec),
			"userAgent":   attrS(h.agent),
		}
	}
	sessionPK := "SESSION#" + tokenHash(h.token)
	session = common("session")
	session["pk"] = attrS(sessionPK)
	session["sk"] = attrS("SESSION")
	index = common("session-index")
	index["pk"] = attrS("USERSESSIONS#" + strconv.Itoa(len(h.user.PK)) + "#" + h.user.PK + h.user.SK)
	index["sk"] = attrS("SID#" + h.sid)
	index["sessionPK"] = attrS(sessionPK)
	return session, index
}

func (h handSession) session() ddbsession.Session {
	return ddbsession.Session{
		ID:          h.sid,
		User:        h.user,
		CreatedAt:   time.UnixMilli(h.createdMs),
		RefreshedAt: time.UnixMilli(h.refreshedMs),
		ExpiresAt:   time.Unix(h.expiresSec, 0),
		UserAgent:   h.agent,
	}
}

func TestHandWrittenItemsAreRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		mutate       func(session, index map[string]types.AttributeValue)
		valid, shown bool
	}{
		{"format 1", func(_, _ map[string]types.AttributeValue) {}, true, true},
		{"format 2: device-bound, and no bound cookie sent", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(2), attrN(2)
			session["boundKey"] = attrS(`{"kty":"EC"}`)
			session["boundCookie"], session["boundExpires"] = attrS("digest"), attrN(start.Add(time.Hour).Unix())
		}, false, true},
		{"unknown version 3", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(3), attrN(3)
		}, false, false},
		{"index item of version 3", func(_, index map[string]types.AttributeValue) { index["v"] = attrN(3) }, true, false},
		{"no version", func(session, index map[string]types.AttributeValue) {
			delete(session, "v")
			delete(index, "v")
		}, false, false},
		{"version as a string", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrS("1"), attrS("1")
		}, false, false},
		{"kinds swapped", func(session, index map[string]types.AttributeValue) {
			session["kind"], index["kind"] = attrS("session-index"), attrS("session")
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil) // clock at start, RefreshInterval 10m: no refresh
			alice := e.putUser("alice")
			h := newHandSession(alice)
			session, index := h.items()
			tc.mutate(session, index)
			e.putItem(index)
			e.putItem(session)
			cookie := &http.Cookie{Name: e.m.CookieName(), Value: h.token}

			if !tc.valid {
				if got := e.status(cookie); got != http.StatusUnauthorized {
					t.Errorf("status %d, want 401", got)
				}
			} else {
				var (
					gotSession ddbsession.Session
					gotUser    User
					gotList    []ddbsession.SessionInfo
					listErr    error
				)
				h2 := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					gotSession, _ = e.m.Session(r.Context())
					gotUser, _ = e.m.User(r.Context())
					gotList, listErr = e.m.List(r.Context(), alice)
				}))
				w := e.get(h2, cookie)
				if w.Code != http.StatusOK {
					t.Fatalf("status %d, want 200", w.Code)
				}
				if c := w.Header().Get("Set-Cookie"); c != "" {
					t.Errorf("request refreshed a session refreshed 2 minutes ago: Set-Cookie %q", c)
				}
				if diff := cmp.Diff(h.session(), gotSession); diff != "" {
					t.Errorf("Session in the request (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(User{PK: alice.PK, SK: alice.SK, Name: "alice"}, gotUser); diff != "" {
					t.Errorf("User in the request (-want +got):\n%s", diff)
				}
				var want []ddbsession.SessionInfo
				if tc.shown {
					want = []ddbsession.SessionInfo{{Session: h.session(), Current: true}}
				}
				if listErr != nil {
					t.Fatalf("List: %v", listErr)
				}
				if diff := cmp.Diff(want, gotList, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("List in the request (-want +got):\n%s", diff)
				}
			}

			if !tc.valid || !tc.shown {
				var want []ddbsession.SessionInfo
				if tc.shown {
					want = []ddbsession.SessionInfo{{Session: h.session()}}
					want[0].DeviceBound = attrText(index["v"]) == "N:2"
				}
				if diff := cmp.Diff(want, e.mustList(alice), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("List (-want +got):\n%s", diff)
				}
			}

			if tc.valid && tc.shown {
				// The index item's sessionPK leads Revoke to the session item.
				if err := e.m.Revoke(context.Background(), alice, h.sid); err != nil {
					t.Fatalf("Revoke of the hand-written session: %v", err)
				}
				if got := e.status(cookie); got != http.StatusUnauthorized {
					t.Errorf("after Revoke: status %d, want 401", got)
				}
			}
		})
	}
}

func TestLoginItemFormat(t *testing.T) {
	t.Parallel()
	// The documented attributes of each item and their types.
	sessionAttrs := map[string]string{
		"pk": "S", "sk": "S", "v": "N", "kind": "S", "sid": "S", "userPK": "S", "userSK": "S",
		"createdAt": "N", "refreshedAt": "N", "expiresAt": "N", "userAgent": "S",
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
		{"hash-only table", func(c *ddbsession.Config[User]) { c.HashOnly = true }, hashOnly, nil},
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
	if got := e.status(&http.Cookie{Name: e.m.CookieName(), Value: hs.token}); got != http.StatusUnauthorized {
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
