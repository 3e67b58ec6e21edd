package mcpsession_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/mcpsession"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	e := &env{t: t, table: "t", clock: ddbtest.NewClock(start)}
	for _, tc := range []struct {
		name string
		edit func(*mcpsession.Config)
		want string
	}{
		{"no name", func(c *mcpsession.Config) { c.Name = "" }, "Config.Name"},
		{"long name", func(c *mcpsession.Config) { c.Name = strings.Repeat("n", 65) }, "Config.Name"},
		{"name with a line break", func(c *mcpsession.Config) { c.Name = "notes\n" }, "Config.Name"},
		{"name beyond ASCII", func(c *mcpsession.Config) { c.Name = "notés" }, "Config.Name"},
		{"key without PK", func(c *mcpsession.Config) { c.ServerKey = ddbsession.UserKey{SK: "S"} }, "Config.ServerKey"},
		{"key without SK", func(c *mcpsession.Config) { c.ServerKey = ddbsession.UserKey{PK: "P"} }, "Config.ServerKey"},
		{"key with SK, hash-only table", func(c *mcpsession.Config) {
			c.Sessions.Layout.HashOnly = true
			c.ServerKey = ddbsession.UserKey{PK: "P", SK: "S"}
		}, "Config.ServerKey"},
		{"bad layout", func(c *mcpsession.Config) { c.Sessions.Layout.PartitionKey = "sk" }, "Config.Sessions.Layout"},
		{"no table", func(c *mcpsession.Config) { c.Sessions.Table = "" }, "Config.Sessions: ddbsession: Config.Table"},
		{"no client", func(c *mcpsession.Config) { c.Sessions.Client = nil }, "Config.Sessions: ddbsession: Config.Client"},
		{"a session limit", func(c *mcpsession.Config) { c.Sessions.Limits.MaxSessions = 100 }, "Config.Sessions.Limits.MaxSessions 100: every MCP session is the server user's"},
		{"a session limit that refuses", func(c *mcpsession.Config) {
			c.Sessions.Limits.MaxSessions, c.Sessions.Limits.RefuseAtMaxSessions = 5, true
		}, "Config.Sessions.Limits.MaxSessions 5"},
		{"a LoadUser of the app's", func(c *mcpsession.Config) {
			c.Sessions.LoadUser = func(context.Context, ddbsession.UserKey) (struct{}, int64, error) { return struct{}{}, 0, nil }
		}, "Config.Sessions.LoadUser"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := e.config(newProbe(nil))
			tc.edit(&cfg)
			_, err := mcpsession.New(cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "mcpsession: "+tc.want) {
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// Revoke ends one session and RevokeAll every one, on every instance; a
// session initialized after RevokeAll lives, once the instance that
// initializes it has seen the RevokeAll (TestRevokeAllAcrossInstances
// tests the window before).
func TestRevokeAndRevokeAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var clock1 ddbtest.Mono
	one, two := e.startWith(wiring{mono: clock1.Now}), e.start()
	if err := one.sessions.RevokeAll(context.Background()); err != nil {
		t.Errorf("RevokeAll before any initialize: %v, want nil", err)
	}
	if list, err := one.sessions.List(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("List before any initialize = %v, %v; want none", list, err)
	}
	first := initializeRaw(t, one)
	second := initializeRaw(t, one)
	list, err := one.sessions.List(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %v, %v; want 2 sessions", list, err)
	}
	s, _, err := one.sessions.Sessions().Authenticate(context.Background(), first)
	if err != nil || (s.ID != list[0].ID && s.ID != list[1].ID) {
		t.Fatalf("Authenticate of the first session = %+v, %v; want one of the listed", s, err)
	}
	if err := one.sessions.Revoke(context.Background(), s.ID); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if err := one.sessions.Revoke(context.Background(), s.ID); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("Revoke of a revoked session: %v, want ErrNoSession", err)
	}
	status := func(id string) int {
		code, _ := post(t, two, id, callEcho)
		return code
	}
	if diff := cmp.Diff([]int{http.StatusNotFound, http.StatusOK}, []int{status(first), status(second)}); diff != "" {
		t.Errorf("after Revoke of the first, on instance 2 (-want +got):\n%s", diff)
	}

	if err := two.sessions.RevokeAll(context.Background()); err != nil {
		t.Fatalf("RevokeAll: %v", err)
	}
	if code := status(second); code != http.StatusNotFound {
		t.Errorf("after RevokeAll: status %d, want 404", code)
	}
	clock1.Advance(within) // instance 1's copy of the server's version is stale
	if code := status(initializeRaw(t, one)); code != http.StatusOK {
		t.Errorf("a session initialized after RevokeAll: status %d, want 200", code)
	}
}

// Servers that share a table refuse each other's session IDs, and a web
// app's bearer sessions: none of them is the server's. Refusing costs the
// one read of the session item and no write, and ends nothing.
func TestSharedTableRefusesOthersSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notes := e.start()
	files := e.startWith(wiring{config: func(c *mcpsession.Config) { c.Name = "files" }})
	notesID := initializeRaw(t, notes)
	initializeRaw(t, files) // files' first reads, of the global item and the layout record, are behind it

	web, err := ddbsession.New(ddbsession.Config[struct{}]{Client: e.client, Table: e.table, BearerTokens: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := web.CreateUser(context.Background(), map[string]string{"pk": alice.PK, "sk": alice.SK}); err != nil {
		t.Fatal(err)
	}
	webToken, _, err := web.LoginBearer(httptest.NewRequest(http.MethodPost, "/login", nil), alice, nil, "password")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		in   *instance
		id   string
	}{
		{"notes' session on files", files, notesID},
		{"a web session on notes", notes, webToken},
	} {
		for _, method := range []string{http.MethodPost, http.MethodDelete} {
			tc.in.calls.Reset()
			body := ""
			if method == http.MethodPost {
				body = callEcho
			}
			if code, answer := send(t, tc.in, method, tc.id, body); code != http.StatusNotFound {
				t.Errorf("%s, %s: status %d %q, want 404", tc.name, method, code, answer)
			}
			if diff := cmp.Diff(map[string]int{"GetItem": 1}, tc.in.calls.Take()); diff != "" {
				t.Errorf("%s, %s: DynamoDB calls (-want +got):\n%s", tc.name, method, diff)
			}
		}
	}
	if code, body := post(t, notes, notesID, callEcho); code != http.StatusOK {
		t.Errorf("notes' session on notes: status %d %q", code, body)
	}
	if _, _, err := web.Authenticate(context.Background(), webToken); err != nil {
		t.Errorf("the web session after its DELETE on notes: %v, want it alive", err)
	}
}

// In a hash-only table, the server's user item has no sort key, and
// sessions work as in any other.
func TestHashOnlyTable(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, ddbsession.Layout{HashOnly: true})
	one, two := e.start(), e.start()
	lb := &balancer{target: one}
	c, trans := mcpClient(t, lb)
	initialize(t, c)
	id := trans.GetSessionId()
	if len(id) != 26 {
		t.Errorf("session ID %q: want the token alone", id)
	}
	lb.to(two)
	if got := callWhoami(t, c); got.Client.Name != "tester" {
		t.Errorf("whoami on instance 2: %+v", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, one, id, callEcho); code != http.StatusNotFound {
		t.Errorf("after DELETE: status %d, want 404", code)
	}
}

// With an expiry index, the server's sessions are in it under their
// expiry, an hour after their initialize, as the table's design keeps
// every session there for the ddbsession command to find those about to
// expire; an ended session is not, and List agrees.
func TestExpiryIndexHoldsMCPSessions(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, ddbsession.Layout{ExpiryIndex: "expiry"})
	in := e.start()
	soon := initializeRaw(t, in)
	e.clock.Advance(30 * time.Minute)
	later := initializeRaw(t, in)
	ended := initializeRaw(t, in)
	if code, _ := send(t, in, http.MethodDelete, ended, ""); code != http.StatusOK {
		t.Fatalf("DELETE: status %d", code)
	}
	ctx := context.Background()
	id := func(token string) string {
		s, _, err := in.sessions.Sessions().Authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	want := map[string]time.Time{
		id(soon):  start.Add(idle).Truncate(time.Second),
		id(later): start.Add(30*time.Minute + idle).Truncate(time.Second),
	}

	out, err := e.client.Scan(ctx, &dynamodb.ScanInput{TableName: &e.table, IndexName: aws.String("expiry")})
	if err != nil {
		t.Fatal(err)
	}
	indexed := map[string]time.Time{}
	for _, it := range out.Items {
		// The index projects a session's identity, not all of it: read the
		// attributes that docs/item-format.md names.
		var s struct {
			ID        string `dynamodbav:"sid"`
			UserPK    string `dynamodbav:"userPK"`
			ExpiresAt int64  `dynamodbav:"expiresAt"`
		}
		if err := attributevalue.UnmarshalMap(it, &s); err != nil {
			t.Fatal(err)
		}
		if s.UserPK != "MCPSERVER#notes" {
			t.Errorf("the expiry index holds a session of %q", s.UserPK)
		}
		indexed[s.ID] = time.Unix(s.ExpiresAt, 0).UTC()
	}
	if diff := cmp.Diff(want, indexed); diff != "" {
		t.Errorf("sessions in the expiry index (-want +got):\n%s", diff)
	}

	list, err := in.sessions.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]time.Time{}
	for _, s := range list {
		listed[s.ID] = s.ExpiresAt.UTC()
	}
	if diff := cmp.Diff(want, listed); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

// A Manager whose Config.Sessions.Layout differs from the layout that the
// table records fails at its first use, whichever it is, with an error that
// names the field and both values, and changes nothing: a RevokeAll that
// wrote the server's version under another attribute would report success
// and end no session that the other instances serve.
func TestLayoutMismatchFailsAtFirstUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := e.start()
	id := initializeRaw(t, good)
	list, err := good.sessions.List(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v; want the one session", list, err)
	}
	other := wiring{config: func(c *mcpsession.Config) { c.Sessions.Layout.VersionAttribute = "ver" }}
	const want = `Layout.VersionAttribute: the table's "sessionsVersion", this "ver"`
	inLog := strings.ReplaceAll(want, `"`, `\"`) // as the log quotes it
	for _, tc := range []struct {
		name string
		use  func(*instance) error // the first use: its error, or the log of it
	}{
		{"initialize", func(in *instance) error {
			// mcp-go answers a failed initialize with a JSON-RPC error.
			if code, body := post(t, in, "", initializeV); !strings.Contains(body, `"error"`) {
				return fmt.Errorf("status %d %q, want an error", code, body)
			}
			return errors.New(in.logs.String())
		}},
		{"a request of a session", func(in *instance) error {
			if code, body := post(t, in, id, callEcho); code != http.StatusServiceUnavailable {
				return fmt.Errorf("status %d %q, want 503", code, body)
			}
			return errors.New(in.logs.String())
		}},
		{"List", func(in *instance) error {
			_, err := in.sessions.List(context.Background())
			return err
		}},
		{"Revoke", func(in *instance) error { return in.sessions.Revoke(context.Background(), list[0].ID) }},
		{"RevokeAll", func(in *instance) error { return in.sessions.RevokeAll(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := e.startWith(other)
			if err := tc.use(in); err == nil || !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), inLog) {
				t.Errorf("first use: %v\nwant an error naming %s", err, want)
			}
		})
	}
	if code, body := post(t, good, id, callEcho); code != http.StatusOK {
		t.Errorf("the session on the instance of the table's layout: status %d %q, want it alive", code, body)
	}
	for _, it := range e.items() {
		if it["ver"] != nil {
			t.Errorf("item %v has the other layout's version attribute", it)
		}
	}
}
