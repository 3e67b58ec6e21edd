package ddbstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/ddbstream"
)

func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }

// User is the app's user type in these tests.
type User struct {
	PK string `dynamodbav:"pk"`
}

// toStream converts an attribute value as the SDK reads it from the table
// into the form that a stream record carries.
func toStream(t *testing.T, av types.AttributeValue) events.DynamoDBAttributeValue {
	t.Helper()
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = toStream(t, e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(toStreamImage(t, v.Value))
	default:
		t.Fatalf("attribute value of unknown type %T", av)
		panic("unreachable")
	}
}

func toStreamImage(t *testing.T, item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	image := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, v := range item {
		image[k] = toStream(t, v)
	}
	return image
}

// ttlRemove wraps item as the stream record of its deletion by TTL.
func ttlRemove(t *testing.T, item map[string]types.AttributeValue, seq string) events.DynamoDBEventRecord {
	t.Helper()
	return events.DynamoDBEventRecord{
		EventID:      "id-" + seq,
		EventName:    "REMOVE",
		EventSource:  "aws:dynamodb",
		EventVersion: "1.1",
		UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
		Change: events.DynamoDBStreamRecord{
			OldImage:       toStreamImage(t, item),
			SequenceNumber: seq,
			StreamViewType: "OLD_IMAGE",
		},
	}
}

var sessionIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestHandlerDecodesManagerItems signs a user in through a real Manager,
// reads back the items it wrote, and feeds their TTL deletion to the
// handler: the handler must decode exactly the session the Manager holds,
// which ties this package to the library's item format.
func TestHandlerDecodesManagerItems(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)
	const idle = time.Hour

	tests := []struct {
		name   string
		mutate func(*ddbsession.Config[User])
		user   ddbsession.UserKey
	}{
		{
			name: "default layout",
			user: ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"},
		},
		{
			name:   "custom TTL attribute",
			mutate: func(c *ddbsession.Config[User]) { c.Layout.TTLAttribute = "ttl" },
			user:   ddbsession.UserKey{PK: "USER#bob", SK: "PROFILE"},
		},
		{
			name:   "hash-only table",
			mutate: func(c *ddbsession.Config[User]) { c.Layout.HashOnly = true },
			user:   ddbsession.UserKey{PK: "USER#carol"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := ddbsessiontest.Client(t)
			table := ddbsessiontest.TableName(t, client)
			cfg := ddbsession.Config[User]{
				Client: client,
				Table:  table,
				Limits: ddbsession.Limits{
					IdleTimeout: idle,
					// Calls a busy test machine delays are no store fault.
					StoreTimeout: time.Minute,
				},
				Now:    func() time.Time { return now },
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			if tt.mutate != nil {
				tt.mutate(&cfg)
			}
			m, err := ddbsession.New(cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := m.CreateTable(ctx); err != nil {
				t.Fatalf("CreateTable: %v", err)
			}
			// The app's own user item, with the random non-zero sessions
			// version that docs/item-format.md#user-items asks of it.
			userItem := map[string]types.AttributeValue{
				"pk":              &types.AttributeValueMemberS{Value: tt.user.PK},
				"sessionsVersion": &types.AttributeValueMemberN{Value: fmt.Sprint(rand.Int64N(1<<62) + 1)},
			}
			if tt.user.SK != "" {
				userItem["sk"] = &types.AttributeValueMemberS{Value: tt.user.SK}
			}
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: userItem}); err != nil {
				t.Fatalf("put user: %v", err)
			}

			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "https://example.test/login", nil)
			r.Header.Set("User-Agent", "test-agent/1.0")
			if err := m.Login(w, r, tt.user, nil, "password"); err != nil {
				t.Fatalf("Login: %v", err)
			}
			var token string
			for _, c := range w.Result().Cookies() {
				if c.Name == "__Host-session" {
					token = c.Value
				}
			}
			// The app keeps data in the session, which the clean-up gets:
			// the seed's side effects on expiry.
			set := m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := m.UpdateData(r.Context(), func(json.RawMessage) (any, error) { return map[string]int{"cart": 3}, nil }); err != nil {
					t.Errorf("UpdateData: %v", err)
				}
			}))
			r = httptest.NewRequest("GET", "https://example.test/cart", nil)
			r.AddCookie(&http.Cookie{Name: "__Host-session", Value: token})
			set.ServeHTTP(httptest.NewRecorder(), r)
			live, _, err := m.Authenticate(ctx, token)
			if err != nil {
				t.Fatalf("Authenticate of the new session: %v", err)
			}

			out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			var records []events.DynamoDBEventRecord
			for i, item := range out.Items {
				records = append(records, ttlRemove(t, item, fmt.Sprint(100+i)))
			}
			// user, session, index, the sign-in's history event, and the
			// layout record that CreateTable wrote
			// (docs/item-format.md#the-layout-record), which the handler
			// must pass over as other kinds, as it does the user
			wantItems := 5
			if cfg.Layout.HashOnly {
				wantItems = 3 // no index item, no history
			}
			if len(records) != wantItems {
				t.Fatalf("table holds %d items, want %d: %v", len(records), wantItems, out.Items)
			}

			var calls []ddbsession.Session
			logger, logs := newLogger()
			h := newHandler(t, ddbstream.Config{
				Cleanup: func(_ context.Context, s ddbsession.Session) error {
					calls = append(calls, s)
					return nil
				},
				Layout: cfg.Layout, // one layout for the Manager and the handler
				Logger: logger,
			})
			resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: records})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("handler = %v, %v; want no failures", resp, err)
			}
			if logs.Len() > 0 {
				t.Errorf("unexpected log:\n%s", logs)
			}

			// The values the test itself expects...
			want := ddbsession.Session{
				User:        tt.user,
				CreatedAt:   now.Truncate(time.Millisecond),
				RefreshedAt: now.Truncate(time.Millisecond),
				ExpiresAt:   now.Add(idle).Truncate(time.Second),
				UserAgent:   "test-agent/1.0",
				// httptest's requests come from 192.0.2.1.
				Address:     "192.0.2.1",
				LastAddress: "192.0.2.1",

				AuthenticatedAt: now.Truncate(time.Millisecond),
				Methods:         []string{"password"},
				Data:            json.RawMessage(`{"cart":3}`),
			}
			if len(calls) == 1 {
				want.ID = calls[0].ID
				if !sessionIDPattern.MatchString(calls[0].ID) {
					t.Errorf("session ID %q is not 32 lowercase hex digits", calls[0].ID)
				}
			}
			if diff := cmp.Diff([]ddbsession.Session{want}, calls); diff != "" {
				t.Errorf("cleanup calls (-want +got):\n%s", diff)
			}
			// ...and the session as the Manager itself reads it.
			if diff := cmp.Diff([]ddbsession.Session{live}, calls); diff != "" {
				t.Errorf("cleanup calls differ from Manager.Authenticate's session (-Authenticate +cleanup):\n%s", diff)
			}
		})
	}
}
