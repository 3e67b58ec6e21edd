package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

// RevokeAll must be right within one second: sessions made a few hundred
// milliseconds before it die, a login right after it lives.
func TestRevokeAllWithinOneSecond(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	bob := e.putUser("bob")

	first := e.login(alice) // 12:00:00.250
	e.clock.Advance(500 * time.Millisecond)
	second := e.login(alice) // 12:00:00.750
	e.clock.Advance(249 * time.Millisecond)
	last := e.login(alice) // 12:00:00.999, one millisecond before the revoke
	bobs := e.login(bob)
	e.clock.Advance(time.Millisecond)

	p.reset()
	if err := e.m.RevokeAll(context.Background(), alice); err != nil { // 12:00:01.000
		t.Fatal(err)
	}
	// No scan, no query: one conditional write.
	if diff := cmp.Diff(map[string]int{"UpdateItem": 1}, p.calls); diff != "" {
		t.Errorf("RevokeAll's DynamoDB calls (-want +got):\n%s", diff)
	}
	sameMillisecond := e.login(alice) // 12:00:01.000
	e.clock.Advance(100 * time.Millisecond)
	later := e.login(alice)

	for name, tc := range map[string]struct {
		c    *http.Cookie
		want int
	}{
		"750ms before":                {first, http.StatusUnauthorized},
		"250ms before":                {second, http.StatusUnauthorized},
		"1ms before":                  {last, http.StatusUnauthorized},
		"login in the same ms, after": {sameMillisecond, http.StatusOK},
		"login 100ms after":           {later, http.StatusOK},
		"another user's session":      {bobs, http.StatusOK},
	} {
		if got := e.status(tc.c); got != tc.want {
			t.Errorf("%s: status %d, want %d", name, got, tc.want)
		}
	}

	// The cutoff is stored in epoch milliseconds.
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.table,
		Key:       userItemKey(alice),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &types.AttributeValueMemberN{Value: "1796040001000"}
	if diff := cmp.Diff(want, out.Item["sessionsValidAfter"], cmp.AllowUnexported(types.AttributeValueMemberN{})); diff != "" {
		t.Errorf("sessionsValidAfter (-want +got):\n%s", diff)
	}
}

func TestRevokeAllNeverMovesCutoffBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	e.clock.Advance(time.Minute)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	// An instance whose clock lags a minute revokes too; sessions made in
	// that minute must stay revoked.
	e.clock.Advance(-time.Minute)
	stale := e.login(alice)
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatalf("RevokeAll with a lagging clock: %v", err)
	}
	if got := e.status(stale); got != http.StatusUnauthorized {
		t.Errorf("session from before the later cutoff: status %d, want 401", got)
	}
}

func TestRevokeAllUnknownUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	err := e.m.RevokeAll(context.Background(), ddbsession.UserKey{PK: "USER#ghost", SK: "PROFILE"})
	if !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("RevokeAll(unknown) = %v, want ErrUserNotFound", err)
	}
	if items := e.scanAll(); len(items) != 0 {
		t.Errorf("RevokeAll of an unknown user wrote %d items", len(items))
	}
}
