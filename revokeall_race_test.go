package ddbsession_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// TestRevokeAllRacingLoginsAndRefreshes runs RevokeAll several times while
// logins (Login on one instance, LoginWith on another) and requests that
// refresh sessions run at full speed against the same user, with the
// injected clock advancing under all of them. Afterwards the table decides:
// with the user's final stored cutoff, every session created at or before
// it (its stored createdAt) is rejected by Check and left out of List, and
// every session created after it is accepted, with that createdAt, and
// listed. Both kinds must exist, and refreshes must have happened, or the
// race was not run.
func TestRevokeAllRacingLoginsAndRefreshes(t *testing.T) {
	t.Parallel()
	// A refresh is due a millisecond after the last, so that every request
	// whose expiry (whole seconds) can move writes one.
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.RefreshInterval = time.Millisecond })
	first := e.m
	second := e.members() // another instance, whose users carry a password
	alice := e.createMember(second, "alice", "pw")
	e.clock.Advance(time.Millisecond)

	var (
		mu        sync.Mutex
		cookies   []*http.Cookie
		logins    atomic.Int64
		refreshes atomic.Int64
		stop      atomic.Bool
		wg        sync.WaitGroup
	)
	for worker := range 4 {
		wg.Go(func() { // logins, on both instances
			for i := 0; !stop.Load(); i++ {
				var c *http.Cookie
				var err error
				if (worker+i)%2 == 0 {
					w := newRecorder()
					if err = first.Login(w, newRequest(), alice); err == nil {
						c = w.Result().Cookies()[0]
					}
				} else {
					c, err = loginWith(second, alice, "pw")
				}
				e.clock.Advance(3 * time.Millisecond)
				if err != nil {
					t.Errorf("login: %v", err)
					return
				}
				mu.Lock()
				cookies = append(cookies, c)
				mu.Unlock()
				logins.Add(1)
			}
		})
		wg.Go(func() { // requests, which refresh
			for i := 0; !stop.Load(); i++ {
				mu.Lock()
				var c *http.Cookie
				if len(cookies) > 0 {
					c = cookies[rand.IntN(len(cookies))]
				}
				mu.Unlock()
				if c == nil { // no session yet: wait without moving the clock
					runtime.Gosched()
					continue
				}
				e.clock.Advance(7 * time.Millisecond)
				var h http.Handler = first.RequireSession(whoami(first))
				if i%2 == 1 {
					h = second.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				}
				w := newRecorder()
				h.ServeHTTP(w, newRequest(c))
				if w.Code == http.StatusOK && len(w.Result().Cookies()) > 0 {
					refreshes.Add(1)
				}
			}
		})
	}
	awaitLogins := func(n int64) {
		for logins.Load() < n && !t.Failed() {
			time.Sleep(time.Millisecond)
		}
	}
	var final int64
	for round := range 6 {
		awaitLogins(int64(25 * (round + 1)))
		var err error
		if round%2 == 0 {
			err = first.RevokeAll(context.Background(), alice)
		} else {
			err = second.RevokeAll(context.Background(), alice)
		}
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		final = logins.Load()
	}
	awaitLogins(final + 25) // logins after the final cutoff
	stop.Store(true)
	wg.Wait()
	for _, m := range []interface{ Wait(context.Context) error }{first, second} {
		if err := m.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	// The table's word: the final cutoff, and each session's creation.
	cutoff := storedNumber(t, e, userItemKey(alice), "sessionsValidAfter")
	var dead, alive, refreshed int
	var wantListed []string
	for _, c := range cookies {
		stored := rawItem(t, e, sessionItemKey(c.Value))
		if stored == nil {
			t.Errorf("session item of a cookie is gone; nothing here deletes one")
			continue
		}
		created := numberOf(t, stored, "createdAt")
		if numberOf(t, stored, "refreshedAt") > created {
			refreshed++
		}
		s, _, err := first.Check(context.Background(), c.Value)
		if created <= cutoff {
			dead++
			if !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("session created at %d, at or before the final cutoff %d: Check = %v, want ErrNoSession", created, cutoff, err)
			}
			continue
		}
		alive++
		wantListed = append(wantListed, attrText(stored["sid"])[len("S:"):])
		if err != nil || s.CreatedAt.UnixMilli() != created {
			t.Errorf("session created at %d, after the final cutoff %d: Check = %v, createdAt %v", created, cutoff, err, s.CreatedAt.UnixMilli())
		}
	}
	list, err := first.List(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	got := listIDs(list)
	slices.Sort(got)
	slices.Sort(wantListed)
	if !slices.Equal(got, wantListed) {
		t.Errorf("List has %d sessions, want the %d created after the final cutoff", len(got), len(wantListed))
	}
	t.Logf("%d logins, %d refreshes started (%d sessions refreshed), 6 cutoffs; final cutoff %d: %d sessions before it, %d after",
		len(cookies), refreshes.Load(), refreshed, cutoff, dead, alive)
	if dead == 0 || alive == 0 || refreshed == 0 {
		t.Errorf("the race did not run: %d sessions before the cutoff, %d after, %d refreshed", dead, alive, refreshed)
	}
}

// rawItem reads an item straight from the engine; nil if there is none.
func rawItem(t *testing.T, e *env, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// storedNumber reads a Number attribute of an item straight from the engine.
func storedNumber(t *testing.T, e *env, key map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	item := rawItem(t, e, key)
	if item == nil {
		t.Fatalf("no item %v", itemText(key))
	}
	return numberOf(t, item, name)
}

func numberOf(t *testing.T, item map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%s is %T in %s, want a Number", name, item[name], itemText(item))
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
