package mcphandle_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/ddbstream"
	"github.com/ddbsession/ddbsession/mcphandle"
)

var alice = ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}

// wroteOnly fails unless every written partition key is one of the
// caller's own: a session item's (one key each) or the user's.
func wroteOnly(t *testing.T, step, user string, written []string) {
	t.Helper()
	for _, pk := range written {
		if !strings.HasPrefix(pk, "SESSION#") && pk != user && !strings.HasSuffix(pk, user+"PROFILE") {
			t.Errorf("%s wrote the partition %q, which is not the caller's own", step, pk)
		}
	}
}

// Open writes the caller's items alone, and the handle works on another
// instance, with the state the request gave it; a use is one read.
func TestOpenAndUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.manager(), e.manager()
	hc := open(t, one, request("carol", ""), 0) // the table's key, carol's user item
	if _, err := two.Get(context.Background(), request("carol", ""), hc); err != nil {
		t.Fatal(err) // instance 2 reads the key
	}
	e.take(one, two)

	h := open(t, one, request("alice", "app-1"), 40)
	calls, written := e.take(one)
	// LoginBearer's read of the user item, which misses; CreateUser's
	// PutItem of it; LoginBearer's read and its two PutItems (the session,
	// its index item); the check of the new session (BatchGetItem), and
	// UpdateData's UpdateItem of the state and its read of the user after.
	want := map[string]int{"GetItem": 3, "PutItem": 3, "BatchGetItem": 1, "UpdateItem": 1}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("the first Open of a caller: calls (-want +got):\n%s", diff)
	}
	wroteOnly(t, "Open", "USER#alice", written)

	h2 := open(t, one, request("alice", "app-1"), 1)
	calls, written = e.take(one)
	want = map[string]int{"GetItem": 2, "PutItem": 2, "BatchGetItem": 1, "UpdateItem": 1}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("Open: calls (-want +got):\n%s", diff)
	}
	wroteOnly(t, "Open", "USER#alice", written)
	if h == h2 || len(h) != 72 {
		t.Errorf("handles %q and %q, want two of 72 characters", h, h2)
	}

	s, err := two.Update(context.Background(), request("alice", "app-1"), h, func(s *mcphandle.State[int]) error {
		s.Data += 2
		return nil
	})
	if err != nil || s.Data != 42 {
		t.Fatalf("Update on instance 2 = %+v, %v; want 42", s, err)
	}
	calls, written = e.take(two)
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "UpdateItem": 1, "GetItem": 1}, calls); diff != "" {
		t.Errorf("Update: calls (-want +got):\n%s", diff)
	}
	wroteOnly(t, "Update", "USER#alice", written)
	s, err = two.Get(context.Background(), request("alice", "app-1"), h)
	wantState := mcphandle.State[int]{
		ClientInfo:      &mcp.Implementation{Name: "test-client", Version: "1.0"},
		ProtocolVersion: "2026-07-28", LogLevel: "warning", Data: 42,
	}
	if diff := cmp.Diff(wantState, s); diff != "" || err != nil {
		t.Errorf("Get: %v; state (-want +got):\n%s", err, diff)
	}
	if calls, _ := e.take(two); !cmp.Equal(calls, map[string]int{"BatchGetItem": 1}) {
		t.Errorf("Get: calls %v, want one BatchGetItem", calls)
	}
	// An update that changes nothing writes nothing.
	if _, err := two.Update(context.Background(), request("alice", "app-1"), h, func(*mcphandle.State[int]) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if calls, _ := e.take(two); !cmp.Equal(calls, map[string]int{"BatchGetItem": 1}) {
		t.Errorf("an Update without a change: calls %v, want one BatchGetItem", calls)
	}

	// Close ends it on every instance, with the caller's items alone.
	if err := one.Close(context.Background(), request("alice", "app-1"), h2); err != nil {
		t.Fatal(err)
	}
	calls, written = e.take(one)
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "DeleteItem": 2}, calls); diff != "" {
		t.Errorf("Close: calls (-want +got):\n%s", diff)
	}
	wroteOnly(t, "Close", "USER#alice", written)
	if _, err := two.Get(context.Background(), request("alice", "app-1"), h2); !errors.Is(err, mcphandle.ErrNoHandle) {
		t.Errorf("Get of a closed handle on instance 2: %v, want ErrNoHandle", err)
	}
}

// Every handle that is not the caller's live one gets ErrNoHandle, with
// no write: another caller's, another client's, a made-up one, a changed
// one, and one expired, closed or revoked.
func TestRefusalsAreAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	one, two := e.manager(), e.manager()
	ctx := context.Background()
	aliceReq := request("alice", "app-1")
	h := open(t, one, aliceReq, 7)
	if _, err := two.Get(ctx, aliceReq, h); err != nil { // instance 2 reads the key
		t.Fatal(err)
	}
	e.take(one, two)

	changed := []byte(h)
	changed[40] ^= 1
	cases := []struct {
		name, handle string
		req          *mcp.CallToolRequest
		calls        map[string]int // at most; writes never
	}{
		{"another caller's", h, request("bob", "app-1"), map[string]int{}},
		{"another client's", h, request("alice", "app-2"), map[string]int{}},
		{"made up", strings.Repeat("A", 72), aliceReq, map[string]int{}},
		{"changed by a bit", string(changed), aliceReq, map[string]int{}},
		{"too long", h + "A", aliceReq, map[string]int{}},
		{"empty", "", aliceReq, map[string]int{}},
	}
	for _, c := range cases {
		for _, m := range []*mcphandle.Manager[int]{one, two} {
			_, err := m.Get(ctx, c.req, c.handle)
			if err != mcphandle.ErrNoHandle {
				t.Errorf("%s, Get: %v, want ErrNoHandle itself", c.name, err)
			}
			_, err = m.Update(ctx, c.req, c.handle, func(s *mcphandle.State[int]) error { s.Data++; return nil })
			if err != mcphandle.ErrNoHandle {
				t.Errorf("%s, Update: %v, want ErrNoHandle itself", c.name, err)
			}
			if err := m.Close(ctx, c.req, c.handle); err != mcphandle.ErrNoHandle {
				t.Errorf("%s, Close: %v, want ErrNoHandle itself", c.name, err)
			}
			if calls, _ := e.take(one, two); !cmp.Equal(c.calls, calls) {
				t.Errorf("%s: calls %v, want %v", c.name, calls, c.calls)
			}
		}
	}
	if s, err := one.Get(ctx, aliceReq, h); err != nil || s.Data != 7 {
		t.Fatalf("Get after the refusals = %+v, %v; want 7", s, err)
	}

	// The ends of a handle: each refused alike, at a read and no write.
	ends := []struct {
		name string
		end  func(t *testing.T, h string)
	}{
		{"expired", func(t *testing.T, _ string) { e.clock.Advance(idle) }},
		{"closed", func(t *testing.T, h string) {
			if err := one.Close(ctx, aliceReq, h); err != nil {
				t.Fatal(err)
			}
		}},
		{"RevokeAll of the caller", func(t *testing.T, _ string) {
			if err := one.Sessions().RevokeAll(ctx, alice); err != nil {
				t.Fatal(err)
			}
		}},
		{"RevokeEveryone", func(t *testing.T, _ string) {
			if err := one.Sessions().RevokeEveryone(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, end := range ends {
		h := open(t, one, aliceReq, 1)
		end.end(t, h)
		e.take(one, two)
		_, err := one.Get(ctx, aliceReq, h)
		if err != mcphandle.ErrNoHandle {
			t.Errorf("%s: Get %v, want ErrNoHandle itself", end.name, err)
		}
		calls, _ := e.take(one, two)
		if calls["PutItem"]+calls["UpdateItem"]+calls["DeleteItem"] != 0 || calls["BatchGetItem"] != 1 {
			t.Errorf("%s: calls %v, want a read and no write", end.name, calls)
		}
	}
}

// A use slides the handle's expiry forward once per RefreshInterval, with
// one write after the call, and the calls in between write nothing.
func TestUseSlidesTheExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager()
	req := request("alice", "")
	h := open(t, m, req, 0)
	for i := range 8 { // over two idle timeouts, in steps of half a refresh interval
		e.clock.Advance(refresh / 2)
		e.take(m)
		if _, err := m.Get(context.Background(), req, h); err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
		calls, written := e.take(m)
		if want := i % 2; calls["UpdateItem"] != want {
			t.Errorf("use %d: calls %v, want %d UpdateItem", i, calls, want)
		}
		wroteOnly(t, "a refresh", "USER#alice", written)
	}
}

// A Get on a table where no handle was ever opened reads the key item and
// writes nothing; a request without an authenticated caller costs no call.
func TestWithoutKeyOrCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager()
	if _, err := m.Get(context.Background(), request("alice", ""), strings.Repeat("A", 72)); err != mcphandle.ErrNoHandle {
		t.Errorf("Get before any Open: %v, want ErrNoHandle", err)
	}
	if calls, _ := e.take(m); !cmp.Equal(calls, map[string]int{"GetItem": 1}) {
		t.Errorf("Get before any Open: calls %v, want the key's GetItem", calls)
	}
	for _, req := range []*mcp.CallToolRequest{request("", ""), {Params: &mcp.CallToolParamsRaw{}}} {
		if _, err := m.Open(context.Background(), req, 0); err == nil || errors.Is(err, mcphandle.ErrNoHandle) {
			t.Errorf("Open without a caller: %v, want an error that says so", err)
		}
		if _, err := m.Get(context.Background(), req, strings.Repeat("A", 72)); err == nil || errors.Is(err, mcphandle.ErrNoHandle) {
			t.Errorf("Get without a caller: %v, want an error that says so", err)
		}
	}
	if calls, _ := e.take(m); len(calls) != 0 {
		t.Errorf("requests without a caller: calls %v, want none", calls)
	}
}

// A store failure is an error, never ErrNoHandle, and never lets a call
// through; a state over ddbitem.MaxData is refused before any call.
func TestFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager()
	req := request("alice", "")
	h := open(t, m, req, 0)
	e.take(m)
	outage := errors.New("outage")
	e.calls.Fail = func(context.Context, string, any) error { return outage }
	_, err := m.Get(context.Background(), req, h)
	e.calls.Fail = nil
	if err == nil || errors.Is(err, mcphandle.ErrNoHandle) {
		t.Errorf("Get in an outage: %v, want a store error", err)
	}

	// An Open whose state cannot be written ends the session it made.
	e.take(m)
	e.calls.Fail = func(_ context.Context, op string, _ any) error {
		if op == "UpdateItem" {
			return outage
		}
		return nil
	}
	_, err = m.Open(context.Background(), req, 1)
	e.calls.Fail = nil
	if !errors.Is(err, outage) {
		t.Errorf("Open whose state write fails: %v, want the outage", err)
	}
	if calls, _ := e.take(m); calls["DeleteItem"] != 2 {
		t.Errorf("Open whose state write fails: calls %v, want the session's and its index item's DeleteItems", calls)
	}
	if list, err := m.List(context.Background(), alice); err != nil || len(list) != 1 {
		t.Errorf("List after the failed Open: %d handles, %v; want the one opened before", len(list), err)
	}

	big, err := mcphandle.New[string](mcphandle.Config{Sessions: ddbsession.Config[struct{}]{Client: e.calls, Table: e.table}})
	if err != nil {
		t.Fatal(err)
	}
	e.take(m)
	if _, err := big.Open(context.Background(), req, strings.Repeat("x", ddbitem.MaxData)); err == nil || !strings.Contains(err.Error(), "MaxData") {
		t.Errorf("Open of a state over MaxData: %v, want an error naming the limit", err)
	}
	if calls, _ := e.take(m); len(calls) != 0 {
		t.Errorf("Open of a state over MaxData: calls %v, want none", calls)
	}
}

// List lists a caller's handles and none of their other sessions;
// ddbstream's clean-up of a handle's item gets its state.
func TestListAndStateOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager()
	req := request("alice", "")
	h1, h2 := open(t, m, req, 1), open(t, m, req, 2)
	_ = h1
	if err := m.Close(context.Background(), req, h2); err != nil {
		t.Fatal(err)
	}
	web, err := ddbsession.New(ddbsession.Config[struct{}]{Client: e.client, Table: e.table, BearerTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := httpRequest()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := web.LoginBearer(r, alice, nil, "password"); err != nil {
		t.Fatal(err)
	}
	list, err := m.List(context.Background(), alice)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Methods, []string{"mcphandle"}) {
		t.Errorf("List = %+v, %v; want the one live handle", list, err)
	}
	if list, err := m.List(context.Background(), ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"}); err != nil || len(list) != 0 {
		t.Errorf("List of a user without an item = %v, %v; want none", list, err)
	}

	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{
		TableName: &e.table, ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("kind = :kind"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": &types.AttributeValueMemberS{Value: "session"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every session item, as TTL would delete it, through ddbstream.
	var states []int
	cleanup, err := ddbstream.New(ddbstream.Config{
		Cleanup: func(_ context.Context, s ddbsession.Session) error {
			if st, ok := mcphandle.StateOf[int](s); ok && s.User == alice {
				states = append(states, st.Data)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	for i, item := range out.Items {
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{
			EventName:    "REMOVE",
			UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
			Change:       events.DynamoDBStreamRecord{OldImage: streamImage(t, item), SequenceNumber: strconv.Itoa(i + 1), StreamViewType: "OLD_IMAGE"},
		})
	}
	if resp, err := cleanup.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("ddbstream's Handle = %v, %v", resp, err)
	}
	slices.Sort(states)
	if !slices.Equal(states, []int{1}) {
		t.Errorf("StateOf the session items: %v, want the live handle's 1 (the closed one is deleted, the web session is no handle)", states)
	}
}

// New refuses a Config it cannot serve, naming the field.
func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field string
		cfg         mcphandle.Config
	}{
		{"MaxSessions", "MaxSessions", mcphandle.Config{Sessions: ddbsession.Config[struct{}]{Table: "t", Limits: ddbsession.Limits{MaxSessions: 3}}}},
		{"hash-only without a Caller", "Config.Caller", mcphandle.Config{Sessions: ddbsession.Config[struct{}]{Table: "t", Layout: ddbsession.Layout{HashOnly: true}}}},
		{"no table", "Config.Sessions", mcphandle.Config{}},
	} {
		if _, err := mcphandle.New[int](c.cfg); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: New = %v, want an error naming %s", c.name, err, c.field)
		}
	}
}

// streamImage is item as a stream record's image carries it.
func streamImage(t *testing.T, item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	image := make(map[string]events.DynamoDBAttributeValue, len(item))
	for name, av := range item {
		image[name] = streamValue(t, av)
	}
	return image
}

func streamValue(t *testing.T, av types.AttributeValue) events.DynamoDBAttributeValue {
	t.Helper()
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = streamValue(t, e)
		}
		return events.NewListAttribute(l)
	}
	t.Fatalf("attribute value of a type session items do not hold: %T", av)
	return events.DynamoDBAttributeValue{}
}
