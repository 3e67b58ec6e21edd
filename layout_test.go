package ddbsession_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// handSession is a session written by hand in the documented item format,
// as another language's implementation would write it.
type handSession struct {
	token       string
	sid         string
	user        ddbsession.UserKey
	createdMs   int64
	refreshedMs int64
	expiresSec  int64
	agent       string
	gen         int64 // the user's sessions version, as the login read it
}

func newHandSession(user ddbsession.UserKey, gen int64) handSession {
	var id [10]byte
	rand.Read(id[:])
	created := start.Add(-5*time.Minute - 123*time.Millisecond).UnixMilli()
	return handSession{
		token:       rand.Text(),
		sid:         fmt.Sprintf("%012x", created) + hex.EncodeToString(id[:]),
		user:        user,
		createdMs:   created,
		refreshedMs: start.Add(-2*time.Minute + 77*time.Millisecond).UnixMilli(),
		expiresSec:  start.Add(40 * time.Minute).Unix(),
		agent:       "Mozilla/5.0 (hand written)",
		gen:         gen,
	}
}

// items returns the session item and its per-user index item, in format
// 4, of a session whose login read a user item without a credential
// version.
func (h handSession) items() (session, index map[string]types.AttributeValue) {
	common := func(kind string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"v":           attrN(4),
			"kind":        attrS(kind),
			"sid":         attrS(h.sid),
			"userPK":      attrS(h.user.PK),
			"userSK":      attrS(h.user.SK),
			"createdAt":   attrN(h.createdMs),
			"refreshedAt": attrN(h.refreshedMs),
			"expiresAt":   attrN(h.expiresSec),
			"userAgent":   attrS(h.agent),
			"gen":         attrN(h.gen),
			"userGen":     attrN(h.gen),
			"credGen":     attrN(0),
			"globalGen":   attrN(0),
			"authAt":      attrN(h.createdMs),
		}
	}
	sessionPK := "SESSION#" + tokenHash(h.token)
	session = common("session")
	session["pk"] = attrS(sessionPK)
	session["sk"] = attrS("SESSION")
	index = common("session-index")
	index["pk"] = attrS("USERSESSIONS#" + strconv.Itoa(len(h.user.PK)) + "#" + h.user.PK + h.user.SK)
	index["sk"] = attrS("S#" + h.sid)
	index["sessionPK"] = attrS(sessionPK)
	return session, index
}

func (h handSession) session() ddbsession.Session {
	return ddbsession.Session{
		ID:              h.sid,
		User:            h.user,
		CreatedAt:       time.UnixMilli(h.createdMs),
		RefreshedAt:     time.UnixMilli(h.refreshedMs),
		ExpiresAt:       time.Unix(h.expiresSec, 0),
		UserAgent:       h.agent,
		AuthenticatedAt: time.UnixMilli(h.createdMs),
	}
}

func TestHandWrittenItemsAreRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		mutate       func(session, index map[string]types.AttributeValue)
		valid, shown bool
	}{
		{"format 4", func(_, _ map[string]types.AttributeValue) {}, true, true},
		{"format 1, of release v0.1.0", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(1), attrN(1)
			for _, av := range []map[string]types.AttributeValue{session, index} {
				delete(av, "userGen")
				delete(av, "credGen")
			}
		}, true, true},
		{"format 5: device-bound, and no bound cookie sent", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(5), attrN(5)
			session["boundKey"] = attrS(`{"kty":"EC"}`)
			session["boundCookie"], session["boundExpires"] = attrS("digest"), attrN(start.Add(time.Hour).Unix())
		}, false, true},
		{"format 2, device-bound, of release v0.1.0", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(2), attrN(2)
			session["boundKey"] = attrS(`{"kty":"EC"}`)
			session["boundCookie"], session["boundExpires"] = attrS("digest"), attrN(start.Add(time.Hour).Unix())
		}, false, true},
		{"a pending login's format 6, which only CompleteLogin takes", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(6), attrN(6)
		}, false, false},
		{"format 7: DPoP-bound, and the token sent without a proof", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(7), attrN(7)
			session["dpopJkt"] = attrS("NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
		}, false, true},
		{"unknown format 8", func(session, index map[string]types.AttributeValue) {
			session["v"], index["v"] = attrN(8), attrN(8)
		}, false, false},
		{"index item of format 6, which no index item has", func(_, index map[string]types.AttributeValue) { index["v"] = attrN(6) }, true, false},
		{"format 4 without userGen", func(session, index map[string]types.AttributeValue) {
			delete(session, "userGen")
			delete(index, "userGen")
		}, false, false},
		{"another credential version than the user item's", func(session, _ map[string]types.AttributeValue) {
			session["credGen"] = attrN(1)
		}, false, false},
		{"no gen", func(session, index map[string]types.AttributeValue) {
			delete(session, "gen")
			delete(index, "gen")
		}, false, false},
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
			h := newHandSession(alice, storedNumber(t, e, userItemKey(alice), "sessionsVersion"))
			session, index := h.items()
			tc.mutate(session, index)
			e.putItem(index)
			e.putItem(session)
			cookie := &http.Cookie{Name: cookieName, Value: h.token}

			if !tc.valid {
				if got := e.status(cookie); got != http.StatusUnauthorized {
					t.Errorf("status %d, want 401", got)
				}
			} else {
				var (
					gotSession ddbsession.Session
					gotUser    User
					gotList    []ddbsession.Session
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
				var want []ddbsession.Session
				if tc.shown {
					want = []ddbsession.Session{current(h.session())}
				}
				if listErr != nil {
					t.Fatalf("List: %v", listErr)
				}
				if diff := cmp.Diff(want, gotList, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("List in the request (-want +got):\n%s", diff)
				}
			}

			if !tc.valid || !tc.shown {
				var want []ddbsession.Session
				if tc.shown {
					want = []ddbsession.Session{h.session()}
					want[0].DeviceBound = slices.Contains([]string{"N:2", "N:5", "N:7"}, attrText(index["v"]))
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

func TestHashOnlyTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true })
	if err := e.m.CreateTable(context.Background()); err != nil {
		t.Fatalf("CheckTable: %v", err)
	}
	alice := e.putUser("alice")
	cookie := e.login(alice)
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Fatalf("got %d %q", w.Code, w.Body)
	}
	for _, item := range e.scanAll() {
		if _, ok := item["sk"]; ok {
			t.Errorf("hash-only table got an item with sk: %v", item)
		}
	}
	if n := len(e.scanAll()); n != 2 {
		t.Errorf("%d items, want 2 (user and session; no index item without a sort key)", n)
	}
	if _, err := e.m.List(context.Background(), alice); !needsSortKey(err) {
		t.Errorf("List in a hash-only table = %v, want the error that a sort key is needed", err)
	}
	r := newRequest(cookie)
	if err := e.m.Logout(newRecorder(), r); err != nil {
		t.Fatal(err)
	}
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("after Logout: %d", got)
	}
}

// Sessions can share an app's single table with its own names and prefixes.
func TestCustomKeyNamesAndPrefixes(t *testing.T) {
	t.Parallel()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	m, err := ddbsession.New(ddbsession.Config[map[string]any]{
		Client: client, Table: table,
		Layout: ddbsession.Layout{
			PartitionKey: "PK", SortKey: "SK",
			SessionPrefix: "S#", UserSessionsPrefix: "US#",
			TTLAttribute: "ttl", VersionAttribute: "sessionsEpoch", CredentialAttribute: "passwordEpoch",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	user := ddbsession.UserKey{PK: "TENANT#1", SK: "USER#bob"}
	_, err = client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"PK": attrS(user.PK), "SK": attrS(user.SK), "sessionsEpoch": newVersion(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := newRecorder()
	if err := m.Login(w, newRequest(), user, nil); err != nil {
		t.Fatal(err)
	}
	cookie := sessionCookie(t, w.Result(), cookieName)
	var got string
	h := m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := m.User(r.Context())
		got = u["SK"].(string)
	}))
	r := newRequest(cookie)
	h.ServeHTTP(newRecorder(), r)
	if got != user.SK {
		t.Fatalf("user in context has SK %q, want %q", got, user.SK)
	}
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, item := range out.Items {
		pk := item["PK"].(*types.AttributeValueMemberS).Value
		if pk == "DDBSESSION#LAYOUT" {
			continue // the layout record, which keeps its key whatever the prefixes
		}
		keys = append(keys, pk[:strings.IndexByte(pk, '#')+1])
		if _, ok := item["ttl"]; pk != user.PK && !ok {
			t.Errorf("item %q has no ttl attribute", pk)
		}
	}
	// US# twice: the session's index item, and the login's history event.
	if diff := cmp.Diff([]string{"S#", "TENANT#", "US#", "US#"}, keys, cmpopts.SortSlices(strings.Compare)); diff != "" {
		t.Errorf("item key prefixes (-want +got):\n%s", diff)
	}
	if err := m.RevokeAll(context.Background(), user); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	h.ServeHTTP(rec, newRequest(cookie))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("after RevokeAll with a custom version attribute: %d, want 401", rec.Code)
	}
	// The credential version, under its own name, ends the sessions before
	// it too.
	cookie = e2eLogin(t, m, user)
	if _, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &table, Key: map[string]types.AttributeValue{"PK": attrS(user.PK), "SK": attrS(user.SK)},
		UpdateExpression: ptr("SET passwordEpoch = :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": attrN(1)},
	}); err != nil {
		t.Fatal(err)
	}
	rec = newRecorder()
	h.ServeHTTP(rec, newRequest(cookie))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("after a new credential version under a custom name: %d, want 401", rec.Code)
	}
}

// e2eLogin signs user in on m and returns the session cookie.
func e2eLogin(t *testing.T, m *ddbsession.Manager[map[string]any], user ddbsession.UserKey) *http.Cookie {
	t.Helper()
	w := newRecorder()
	if err := m.Login(w, newRequest(), user, nil); err != nil {
		t.Fatal(err)
	}
	return sessionCookie(t, w.Result(), cookieName)
}
