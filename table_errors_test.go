package ddbsession_test

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A table created by hand with other keys than the configured ones is a
// mistake CreateTable reports, instead of the first Login failing with
// "Missing the key id".
func TestCreateTableOnOtherSchema(t *testing.T) {
	t.Parallel()
	s, n := types.ScalarAttributeTypeS, types.ScalarAttributeTypeN
	cases := []struct {
		name   string
		keys   []tableKey // of the existing table
		mutate func(*ddbsession.Config[User])
	}{
		{"hash key id", []tableKey{{"id", s, types.KeyTypeHash}}, nil},
		{"other key names", []tableKey{{"PK", s, types.KeyTypeHash}, {"SK", s, types.KeyTypeRange}}, nil},
		{"Number partition key", []tableKey{{"pk", n, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}}, nil},
		{"sort key, hash-only config", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			func(c *ddbsession.Config[User]) { c.HashOnly = true }},
		{"no expiry index", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			withExpiryIndex},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := ddbtest.Client(t)
			table := ddbtest.TableName(t, client)
			createTable(t, client, table, tc.keys)
			cfg := ddbsession.Config[User]{Client: client, Table: table}
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			m, err := ddbsession.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = m.CreateTable(context.Background())
			if !errors.Is(err, ddbsession.ErrTableSchema) {
				t.Fatalf("CreateTable on an existing table with other keys = %v, want ErrTableSchema", err)
			}
			if !strings.Contains(err.Error(), table) {
				t.Errorf("CreateTable's error does not name table %q: %v", table, err)
			}
		})
	}
}

type tableKey struct {
	name     string
	attrType types.ScalarAttributeType
	keyType  types.KeyType
}

// createTable creates a table with the given keys behind the Manager's
// back, as a newcomer might by hand.
func createTable(t *testing.T, client *dynamodb.Client, table string, keys []tableKey) {
	t.Helper()
	in := &dynamodb.CreateTableInput{TableName: &table, BillingMode: types.BillingModePayPerRequest}
	for _, k := range keys {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k.name), AttributeType: k.attrType})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k.name), KeyType: k.keyType})
	}
	if _, err := client.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := waiter.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		t.Fatal(err)
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
		return newRequest(&http.Cookie{Name: m.CookieName(), Value: token})
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
		{"Check", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			_, _, err := m.Check(ctx, token)
			return missingTableError(t, err)
		}},
		{"Login", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Login(newRecorder(), newRequest(), user))
		}},
		{"Login carrying a session", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.Login(newRecorder(), carrying(m), user))
		}},
		{"LoginWith", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.LoginWith(newRecorder(), newRequest(), user, func(User) error { return nil }))
		}},
		{"LoginBearer", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			_, err := m.LoginBearer(newRequest(), user, nil)
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
		{"Expiring", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			_, err := m.Expiring(ctx, start, start.Add(time.Hour))
			return missingTableError(t, err)
		}},
		{"CheckTable", func(t *testing.T, m *ddbsession.Manager[User], _ *syncBuffer) string {
			return missingTableError(t, m.CheckTable(ctx))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := ddbtest.Client(t)
			table := ddbtest.TableName(t, client) // never created
			logs := &syncBuffer{}
			m, err := ddbsession.New(ddbsession.Config[User]{
				Client:      client,
				Table:       table,
				ExpiryIndex: "expiry",
				Now:         func() time.Time { return start },
				Logger:      slog.New(slog.NewTextHandler(logs, nil)),
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
