package ddbitem_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

type user struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
}

// DecodeSession reads the items a Manager writes as the Manager reads them
// (List shows the same session), and tells every other item apart.
func TestDecodeSessionReadsTheManagersItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	layout := ddbsession.Layout{TTLAttribute: "ttl", SessionPrefix: "S3SSION#"}
	m, err := ddbsession.New(ddbsession.Config[user]{Client: client, Table: table, Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := m.CreateUser(ctx, user{PK: alice.PK, SK: alice.SK}); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "https://app.example/login", nil)
	r.Header.Set("User-Agent", "test")
	if err := m.Login(httptest.NewRecorder(), r, alice, nil, "password"); err != nil {
		t.Fatal(err)
	}
	listed, err := m.List(ctx, alice)
	if err != nil || len(listed) != 1 {
		t.Fatalf("List = %v, %v", listed, err)
	}
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	sessions := 0
	for _, av := range out.Items {
		s, err := ddbitem.DecodeSession(layout, av)
		if errors.Is(err, ddbitem.ErrOtherKind) {
			continue
		}
		if err != nil {
			t.Fatalf("DecodeSession(%v): %v", av, err)
		}
		sessions++
		if diff := cmp.Diff(listed[0], s); diff != "" {
			t.Errorf("DecodeSession against List (-List +DecodeSession):\n%s", diff)
		}
	}
	if sessions != 1 {
		t.Errorf("%d of %d items decoded as sessions, want 1", sessions, len(out.Items))
	}
}

func TestDecodeSessionRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		av   map[string]types.AttributeValue
		want error
	}{
		{"the app's item", map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "USER#alice"}}, ddbitem.ErrOtherKind},
		{"a session item missing its attributes", map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "SESSION#x"}, "kind": &types.AttributeValueMemberS{Value: "session"},
			"v": &types.AttributeValueMemberN{Value: "1"},
		}, ddbitem.ErrMalformed},
		{"an unknown version", map[string]types.AttributeValue{
			"kind": &types.AttributeValueMemberS{Value: "session"}, "v": &types.AttributeValueMemberN{Value: "9"},
		}, ddbitem.ErrMalformed},
	} {
		if _, err := ddbitem.DecodeSession(ddbsession.Layout{}, tc.av); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeSession = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	got, err := ddbitem.Resolve(ddbsession.Layout{HashOnly: true})
	want := ddbsession.Layout{PartitionKey: "pk", HashOnly: true, SessionPrefix: "SESSION#", UserSessionsPrefix: "USERSESSIONS#",
		TTLAttribute: "expiresAt", VersionAttribute: "sessionsVersion", ExpiryIndexShards: 8}
	if err != nil || got != want {
		t.Errorf("Resolve = %+v, %v; want %+v", got, err, want)
	}
	if _, err := ddbitem.Resolve(ddbsession.Layout{PartitionKey: "sid"}); err == nil {
		t.Error("Resolve accepted a partition key that clashes with a session attribute")
	}
}

// ReadRevocation reads what a Manager's sessions copy: a session made
// before a RevokeAll copied another version, and one made before a
// RevokeEveryone another generation.
func TestReadRevocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mrec := range []bool{false, true} {
		client := ddbtest.Client(t)
		table := ddbtest.TableName(t, client)
		layout := ddbsession.Layout{MREC: mrec}
		m, err := ddbsession.New(ddbsession.Config[user]{Client: client, Table: table, Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
		if err := m.CreateUser(ctx, user{PK: alice.PK, SK: alice.SK}); err != nil {
			t.Fatal(err)
		}
		read := func() ddbitem.Revocation {
			t.Helper()
			keys, err := ddbitem.RevocationKeys(layout, alice)
			if err != nil {
				t.Fatal(err)
			}
			out, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				table: {Keys: keys, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				t.Fatal(err)
			}
			rev, userItem, err := ddbitem.ReadRevocation(layout, alice, out.Responses[table])
			if err != nil || userItem == nil {
				t.Fatalf("ReadRevocation = %+v, %v, %v", rev, userItem, err)
			}
			return rev
		}
		before := read()
		if err := m.RevokeAll(ctx, alice); err != nil {
			t.Fatal(err)
		}
		afterAll := read()
		if afterAll.Version == before.Version || afterAll.Global != before.Global {
			t.Errorf("MREC %v: RevokeAll took the revocation from %+v to %+v, want a new version alone", mrec, before, afterAll)
		}
		if err := m.RevokeEveryone(ctx); err != nil {
			t.Fatal(err)
		}
		if afterEveryone := read(); afterEveryone.Global <= afterAll.Global || afterEveryone.Version != afterAll.Version {
			t.Errorf("MREC %v: RevokeEveryone took the revocation from %+v to %+v, want a higher generation alone", mrec, afterAll, afterEveryone)
		}
	}
}
