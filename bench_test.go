package ddbsession_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// BenchmarkAuthenticatedRequest compares, in one run against one engine, an
// authenticated request through RequireSession with the bare SDK calls that
// such a request needs: the same two strongly consistent GetItems. The
// difference is what the middleware costs. The README has the figures and
// the command (scripts/bench) that alternates the two over several runs.
func BenchmarkAuthenticatedRequest(b *testing.B) {
	e := newEnv(b, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	sessionKey := sessionItemKey(cookie.Value)
	userKey := userItemKey(alice)

	// Warm the engine (dynalite's JIT) so neither side pays for it.
	for range 1000 {
		if _, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, Key: userKey, ConsistentRead: aws.Bool(true)}); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("path=bare-sdk-getitems", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			s, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: sessionKey, ConsistentRead: aws.Bool(true)})
			if err != nil || s.Item == nil {
				b.Fatal("session read", err)
			}
			u, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: userKey, ConsistentRead: aws.Bool(true)})
			if err != nil || u.Item == nil {
				b.Fatal("user read", err)
			}
		}
	})

	// The middleware's own work, apart from the engine: the same request
	// through a Manager whose GetItems replay the answers the engine gave
	// above. Against the two paths above it shows what the middleware adds
	// without the engine's noise.
	b.Run("path=middleware-own-work", func(b *testing.B) {
		b.ReportAllocs()
		cfg := e.cfg
		cfg.Client = &replay{Client: e.client, answers: map[string]*dynamodb.GetItemOutput{}}
		m, err := ddbsession.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		h := m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := m.User(r.Context()); !ok {
				b.Fatal("no user")
			}
		}))
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(cookie)
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
		}
	})

	b.Run("path=require-session", func(b *testing.B) {
		b.ReportAllocs()
		h := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := e.m.User(r.Context()); !ok {
				b.Fatal("no user")
			}
		}))
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(cookie)
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}

// replay answers each GetItem with the engine's first answer for that key.
// It serves only the benchmark above, to time the middleware's own work.
type replay struct {
	ddbsession.Client
	answers map[string]*dynamodb.GetItemOutput
}

func (c *replay) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	key := in.Key["pk"].(*types.AttributeValueMemberS).Value
	if out, ok := c.answers[key]; ok {
		return out, nil
	}
	out, err := c.Client.GetItem(ctx, in, o...)
	if err == nil {
		c.answers[key] = out
	}
	return out, err
}
