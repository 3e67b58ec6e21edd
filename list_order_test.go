package ddbsession_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// scanCounter adds up the items that Queries read (ScannedCount, which is
// what DynamoDB bills), before any filter.
type scanCounter struct {
	ddbsession.Client
	mu      sync.Mutex
	scanned int32
	queries int
}

func (c *scanCounter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, o...)
	if err == nil {
		c.mu.Lock()
		c.scanned += out.ScannedCount
		c.queries++
		c.mu.Unlock()
	}
	return out, err
}

func (c *scanCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scanned, c.queries = 0, 0
}

// Sessions that RevokeAll ended cost nothing to list: the index sorts by
// creation time and List starts at the cutoff, so it reads only the live
// sessions, newest first.
func TestListAfterRevokeAllReadsOnlyLiveSessions(t *testing.T) {
	t.Parallel()
	var counter *scanCounter
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		counter = &scanCounter{Client: c.Client}
		c.Client = counter
	})
	alice := e.putUser("alice")
	const revoked = 300
	for range revoked {
		e.clock.Advance(time.Millisecond)
		e.login(alice)
	}
	counter.reset()
	if got := len(e.mustList(alice)); got != revoked {
		t.Fatalf("List before RevokeAll: %d sessions, want %d", got, revoked)
	}
	if counter.scanned != revoked {
		t.Errorf("List before RevokeAll read %d items, want %d", counter.scanned, revoked)
	}

	e.clock.Advance(time.Second)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	first := e.sessionFor(e.login(alice))
	e.clock.Advance(time.Millisecond)
	second := e.sessionFor(e.login(alice))

	counter.reset()
	list := e.mustList(alice)
	if len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
		t.Fatalf("List after RevokeAll = %v, want the two new sessions, newest first", list)
	}
	if counter.scanned != 2 {
		t.Errorf("List after RevokeAll of %d sessions read %d items, want 2 (the live ones)", revoked, counter.scanned)
	}
	if counter.queries != 2 {
		t.Errorf("List made %d Queries, want 2 (this release's index items, earlier releases')", counter.queries)
	}
}

// Index items that an earlier release wrote (random IDs, sort key
// "SID#<id>") stay readable: List merges them in by creation time, Revoke
// finds them by ID, and Logout removes them.
func TestLegacyIndexItems(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	older := newHandSession(alice) // created 5 minutes before start
	newer := newHandSession(alice)
	newer.createdMs = start.Add(time.Minute).UnixMilli()
	for _, h := range []handSession{older, newer} {
		session, index := h.items()
		e.putItem(index)
		e.putItem(session)
	}
	between := e.sessionFor(e.login(alice)) // at start, between the two

	list := e.mustList(alice)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if want := []string{newer.sid, between.ID, older.sid}; !slices.Equal(ids, want) {
		t.Errorf("List = %v, want %v (newest first, legacy items merged in)", ids, want)
	}

	if err := e.m.Revoke(context.Background(), alice, older.sid); err != nil {
		t.Errorf("Revoke of a legacy session: %v", err)
	}
	logout := newRequest(&http.Cookie{Name: e.m.CookieName(), Value: newer.token})
	if err := e.m.Logout(newRecorder(), logout); err != nil {
		t.Fatal(err)
	}
	if got := e.mustList(alice); len(got) != 1 || got[0].ID != between.ID {
		t.Errorf("List after revoking and logging out the legacy sessions = %v, want only %s", got, between.ID)
	}
	if n := len(e.scanAll()); n != 3 {
		t.Errorf("%d items left, want 3 (the user, the live session and its index item): %v", n, itemsText(e.scanAll()))
	}
}
