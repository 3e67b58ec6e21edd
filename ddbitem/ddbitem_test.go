package ddbitem_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
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
		TTLAttribute: "expiresAt", VersionAttribute: "sessionsVersion", CredentialAttribute: "credentialVersion", ExpiryIndexShards: 8}
	if err != nil || got != want {
		t.Errorf("Resolve = %+v, %v; want %+v", got, err, want)
	}
	if _, err := ddbitem.Resolve(ddbsession.Layout{PartitionKey: "sid"}); err == nil {
		t.Error("Resolve accepted a partition key that clashes with a session attribute")
	}
}

// A Reader holds a stamp to what a Manager's sessions are held to: a
// stamp taken before a RevokeAll, a RevokeEveryone, a new credential or
// the user item made anew no longer holds, and one taken after it does.
// The Reader keeps its copy of the global generation as a Manager does,
// aged on the test's clock.
func TestReaderHoldsStamps(t *testing.T) {
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
		var mono ddbtest.Mono
		r, err := ddbitem.NewReader(ddbitem.ReaderConfig{Client: client, Table: table, Layout: layout, Monotonic: mono.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CheckLayout(ctx); err != nil {
			t.Fatal(err)
		}
		alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
		if err := m.CreateUser(ctx, user{PK: alice.PK, SK: alice.SK}); err != nil {
			t.Fatal(err)
		}
		read := func() ddbitem.User {
			t.Helper()
			mono.Advance(time.Minute) // the copy is stale: read the global item again
			u, err := r.User(ctx, alice)
			if err != nil || u.Item() == nil {
				t.Fatalf("User = %+v, %v", u, err)
			}
			return u
		}
		stamp := func() ddbitem.Stamp {
			t.Helper()
			s, err := read().Stamp()
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		holds := func(what string, s ddbitem.Stamp, want bool) {
			t.Helper()
			if ok, _ := read().Holds(s); ok != want {
				t.Errorf("MREC %v: %s: Holds = %v, want %v", mrec, what, ok, want)
			}
		}
		before := stamp()
		holds("no change", before, true)
		if err := m.RevokeAll(ctx, alice); err != nil {
			t.Fatal(err)
		}
		holds("a stamp from before RevokeAll", before, false)
		afterAll := stamp()
		holds("a stamp from after RevokeAll", afterAll, true)
		if err := m.RevokeEveryone(ctx); err != nil {
			t.Fatal(err)
		}
		holds("a stamp from before RevokeEveryone", afterAll, false)
		afterEveryone := stamp()
		holds("a stamp from after RevokeEveryone", afterEveryone, true)
		if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: alice.PK}, "sk": &types.AttributeValueMemberS{Value: alice.SK}},
			UpdateExpression: aws.String("SET credentialVersion = :c"), ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberN{Value: "2"}},
		}); err != nil {
			t.Fatal(err)
		}
		holds("a stamp from before a new credential", afterEveryone, false)
		text, err := stamp().MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back ddbitem.Stamp
		if err := back.UnmarshalText(text); err != nil {
			t.Fatal(err)
		}
		holds("a stamp through its text", back, true)
		if _, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: alice.PK}, "sk": &types.AttributeValueMemberS{Value: alice.SK}}}); err != nil {
			t.Fatal(err)
		}
		if err := m.CreateUser(ctx, user{PK: alice.PK, SK: alice.SK}); err != nil {
			t.Fatal(err)
		}
		holds("a stamp of the user item before it was made anew", back, false)
	}
}

// MaxData, spelt out for go doc, is the format's bound.
func TestMaxDataIsTheFormats(t *testing.T) {
	if ddbitem.MaxData != item.MaxData {
		t.Errorf("ddbitem.MaxData = %d, the format's is %d", ddbitem.MaxData, item.MaxData)
	}
}
