package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
)

// loseAnswer is a client whose nth PutItem is applied by the engine but
// answered with an error, as when DynamoDB's answer is lost and the SDK's
// retry then meets its own write (ConditionalCheckFailed for a put that
// must not overwrite), or gives up.
type loseAnswer struct {
	ddbsession.Client
	n int

	mu   sync.Mutex
	puts int
}

func (l *loseAnswer) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := l.Client.PutItem(ctx, in, o...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.puts++; l.puts == l.n && err == nil {
		return nil, errors.New("InternalServerError: the answer was lost")
	}
	return out, err
}

// A Login that fails must leave nothing that List shows. Login writes the
// index item first; when that write is applied but its answer lost, Login
// fails, and the index item must not stay behind as a session on the
// user's "where you're signed in" page (until TTL, an idle timeout plus up
// to 48 hours later). When the second write (the session item) is lost,
// Login already undoes the index item; that case is here to keep it so.
func TestLoginWhoseWriteIsLostLeavesNoListedSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		put  int
	}{{"index item write lost", 1}, {"session item write lost", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *ddbsession.Config[User]) { c.Client = &loseAnswer{Client: c.Client, n: tc.put} })
			alice := e.putUser("alice")
			if err := e.m.Login(httptest.NewRecorder(), newRequest(), alice); err == nil {
				t.Fatal("Login succeeded though a write's answer was lost")
			}
			if list := e.mustList(alice); len(list) != 0 {
				t.Errorf("List after a failed Login = %+v, want none", list)
			}
			if items := e.itemsOf(kindIndex, ""); len(items) != 0 {
				t.Errorf("index items after a failed Login: %v", itemsText(items))
			}
		})
	}
}

// loseUpdate is a client whose UpdateItems of one kind of DBSC write (the
// session item's binding or bound cookie, told apart by the attribute it
// sets) are applied by the engine but answered with an error.
type loseUpdate struct {
	ddbsession.Client
	sets string // a substring of the UpdateExpression to lose the answer of

	mu   sync.Mutex
	lost int
}

func (l *loseUpdate) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.Client.UpdateItem(ctx, in, o...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.sets != "" && strings.Contains(*in.UpdateExpression, l.sets) {
		l.lost++
		return nil, errors.New("InternalServerError: the answer was lost")
	}
	return out, err
}

// A registration whose write is applied but whose answer is lost must
// still answer with the bound cookie: Chromium does not retry a failed
// registration, and a session bound to a key whose browser gave up would
// refuse every request. A refresh likewise.
func TestDeviceBindingWriteWhoseAnswerIsLost(t *testing.T) {
	t.Parallel()
	lose := &loseUpdate{}
	e := newEnv(t, withDeviceBinding(10*time.Minute), func(c *ddbsession.Config[User]) {
		lose.Client = c.Client
		c.Client = lose
	})
	alice := e.putUser("alice")
	b, offer := e.loginOffered(dbsctest.NewES256(), alice)

	lose.sets = "#key = :key" // bind's write
	b.register(offer)
	if lose.lost != 1 {
		t.Fatalf("%d registration answers lost, want 1", lose.lost)
	}
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("after a registration whose answer was lost: status %d", got)
	}
	if list := e.mustList(alice); len(list) != 1 || !list[0].DeviceBound {
		t.Fatalf("List: %+v", list)
	}

	lose.sets = "#prev = :prev" // rebind's write, once there is a cookie to keep
	e.clock.Advance(10 * time.Minute)
	b.refresh()
	if lose.lost != 2 {
		t.Fatalf("%d answers lost, want 2", lose.lost)
	}
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("after a refresh whose answer was lost: status %d", got)
	}
}
