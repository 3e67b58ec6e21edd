package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestLoginLimitAcrossInstances races wrong passwords for one username
// on two instances of the app on one table, from addresses of their own:
// together the instances let the burst through, not twice the burst, and
// both refuse what follows.
func TestLoginLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	limits := func(cfg *appConfig) {
		cfg.Now = clock.Now
		cfg.UserLimit = rateLimit{Every: time.Minute, Burst: 3}
		cfg.AddrLimit = rateLimit{Every: time.Minute, Burst: 100}
	}
	one := newTestApp(t, limits)
	two := one.anotherInstance(limits)
	instances := []*testApp{one, two}
	one.browser("A").signup("alice", "correct horse")

	const guesses = 12
	codes := make([]int, guesses)
	var wg sync.WaitGroup
	for i := range guesses {
		wg.Go(func() {
			from := fmt.Sprintf("192.0.2.%d:1", i)
			codes[i] = instances[i%2].postFrom(from, "/login", creds("alice", fmt.Sprint("guess ", i))).Code
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, code := range codes {
		count[code]++
	}
	if count[http.StatusUnauthorized] != 3 || count[http.StatusTooManyRequests] != guesses-3 {
		t.Errorf("%d racing guesses on two instances with a burst of 3: %v by status, want 3 checked (401) and the rest refused (429)", guesses, count)
	}

	for i, ta := range instances {
		w := ta.postFrom("198.51.100.1:1", "/login", creds("alice", "correct horse"))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
			t.Errorf("the right password on instance %d: %d, Retry-After %q; want 429, 60", i+1, w.Code, w.Header().Get("Retry-After"))
		}
	}
	clock.Advance(time.Minute)
	if w := two.postFrom("198.51.100.1:1", "/login", creds("alice", "correct horse")); w.Code != http.StatusSeeOther {
		t.Errorf("the right password a minute on: %d, want 303", w.Code)
	}
	// The success gave its token back: one guess is left, on either.
	if w := one.postFrom("198.51.100.2:1", "/login", creds("alice", "guess")); w.Code != http.StatusUnauthorized {
		t.Errorf("a guess with one failure back: %d, want 401", w.Code)
	}
	if w := two.postFrom("198.51.100.3:1", "/login", creds("alice", "guess")); w.Code != http.StatusTooManyRequests {
		t.Errorf("the next guess, on the other instance: %d, want 429", w.Code)
	}

	// The count is one small item with a TTL, apart from the user item.
	out, err := one.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      &one.table,
		Key:            userBucket{"alice", loginCheck}.key(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	var expires int64
	if ttl, ok := out.Item[ttlAttribute].(*types.AttributeValueMemberN); ok {
		expires, _ = strconv.ParseInt(ttl.Value, 10, 64)
	}
	if expires < clock.Now().Unix() || len(out.Item) != 4 {
		t.Errorf("the failure item %v: want pk, sk, fullAt and a TTL in the future", out.Item)
	}
}
