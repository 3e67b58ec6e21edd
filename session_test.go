package ddbsession_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// Lowering AbsoluteLifetime ends older sessions at once, not at their
// stored expiry.
func TestAbsoluteLifetimeCheckedOnRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cookie := e.login(e.putUser("alice"))
	e.clock.Advance(50 * time.Minute)
	stricter := e.cfg
	stricter.Limits.IdleTimeout, stricter.Limits.AbsoluteLifetime = 30*time.Minute, 45*time.Minute
	m, err := ddbsession.New(stricter)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Authenticate(context.Background(), cookie.Value); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("50-minute-old session under a 45-minute AbsoluteLifetime: %v, want ErrNoSession", err)
	}
	if _, _, err := e.m.Authenticate(context.Background(), cookie.Value); err != nil {
		t.Errorf("the same session under the default lifetime: %v", err)
	}
}

func TestRefreshStopsAtAbsoluteLifetime(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.Limits.AbsoluteLifetime = 90 * time.Minute
	})
	cookie := e.login(e.putUser("alice"))
	limit := start.Add(90 * time.Minute).Unix()
	for range 8 { // a request every 11 minutes, up to 88m
		e.clock.Advance(11 * time.Minute)
		if got := e.status(cookie); got != http.StatusOK {
			t.Fatalf("at %v: status %d", e.clock.Now().Sub(start), got)
		}
		if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got > limit {
			t.Fatalf("expiresAt %d is past the absolute limit %d", got, limit)
		}
	}
	if got := itemExpiry(t, e.itemOf(kindSession, "")).Unix(); got != limit {
		t.Errorf("expiresAt = %d, want capped at %d", got, limit)
	}
	// At the cap a due refresh has nothing to move: no write.
	p.Reset()
	e.clock.Advance(50 * time.Second)
	e.status(cookie)
	if n := p.Count("UpdateItem"); n != 0 {
		t.Errorf("%d writes at the cap, want 0", n)
	}
	e.clock.Advance(70 * time.Second) // 90m0.25s: past created+90m
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("past the absolute lifetime: status %d, want 401", got)
	}
}

// visits is session data that tests change: a number of visits.
type visits struct {
	N int `json:"n"`
}

// increment is an UpdateData update that adds one to the visits.
func increment(old json.RawMessage) (any, error) {
	var c visits
	if old != nil {
		if err := json.Unmarshal(old, &c); err != nil {
			return nil, err
		}
	}
	c.N++
	return c, nil
}

// dataIn returns the session data that a request carrying c reads.
func (e *env) dataIn(c *http.Cookie) string {
	e.t.Helper()
	var data string
	e.inRequest(c, func(ctx context.Context) {
		s, _ := e.m.Session(ctx)
		data = string(s.Data)
	})
	return data
}

// Session data comes with the session at no extra call, is written only
// when it changes, with one conditional UpdateItem, and is bounded so that
// the session item stays within one read unit.
func TestSessionData(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	c := e.login(e.putUser("alice"))
	if got := e.dataIn(c); got != "" {
		t.Errorf("a new session's data = %q, want none", got)
	}
	p.Reset()
	e.inRequest(c, func(ctx context.Context) {
		if err := e.m.UpdateData(ctx, increment); err != nil {
			t.Fatal(err)
		}
		if err := e.m.UpdateData(ctx, increment); err != nil { // starts from the first's write
			t.Fatal(err)
		}
		if err := e.m.UpdateData(ctx, func(old json.RawMessage) (any, error) { return old, nil }); err != nil {
			t.Fatal(err)
		}
	})
	if got := p.Count("UpdateItem"); got != 2 {
		t.Errorf("two changes and one non-change made %d UpdateItems, want 2", got)
	}
	p.Reset()
	if got := e.dataIn(c); got != `{"n":2}` {
		t.Errorf("data = %q, want {\"n\":2}", got)
	}
	if p.Total() != 1 {
		t.Errorf("reading the data made %v, want the session's one BatchGetItem", p.Calls())
	}

	p.Reset()
	e.inRequest(c, func(ctx context.Context) {
		full := json.RawMessage(`"` + strings.Repeat("x", 2046) + `"`) // 2048 bytes
		if err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return full, nil }); err != nil {
			t.Errorf("2048 bytes of data: %v", err)
		}
		over := json.RawMessage(`"` + strings.Repeat("x", 64<<10-1) + `"`)
		err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return over, nil })
		if want := "65537 bytes of JSON, more than the 65536 a session's data may hold"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("65537 bytes of data: %v, want it refused saying %q", err, want)
		}
		if err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return json.RawMessage("{"), nil }); err == nil {
			t.Error("data that is not JSON was written")
		}
	})
	if got := p.Count("UpdateItem"); got != 1 {
		t.Errorf("refused data made writes: %d UpdateItems, want the one of 2048 bytes", got)
	}
	e.inRequest(c, func(ctx context.Context) {
		if err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	})
	if got := e.dataIn(c); got != "" {
		t.Errorf("data after removing it = %q", got)
	}
	if err := e.m.UpdateData(context.Background(), increment); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("UpdateData outside a request: %v, want ErrNoSession", err)
	}
}

// Data over ddbitem.MaxData lives in a data item of its own: 32 KB
// round-trip through Data, a request that does not ask for it costs the
// one BatchGetItem of any request, one that does one GetItem more, once; a
// new write replaces the item, data that shrinks moves back into the
// session item, a re-authentication hands it on, and Logout deletes it.
func TestSessionDataApart(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	c := e.login(alice)
	big := func(fill string) json.RawMessage {
		return json.RawMessage(`{"draft":"` + strings.Repeat(fill, 32<<10) + `"}`)
	}
	write := func(v json.RawMessage) {
		t.Helper()
		e.inRequest(c, func(ctx context.Context) {
			if err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return v, nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
	read := func(c *http.Cookie) (data json.RawMessage) {
		t.Helper()
		e.inRequest(c, func(ctx context.Context) {
			var err error
			if data, err = e.m.Data(ctx); err != nil {
				t.Fatal(err)
			}
			if again, _ := e.m.Data(ctx); !bytes.Equal(again, data) {
				t.Errorf("Data read twice differs")
			}
		})
		return data
	}
	dataItems := func() int {
		n := 0
		for _, av := range e.scanAll() {
			if attrText(av["kind"]) == "S:session-data" {
				n++
			}
		}
		return n
	}

	p.Reset()
	write(big("a"))
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "PutItem": 1, "UpdateItem": 1, "GetItem": 1}, p.Calls()); diff != "" {
		t.Errorf("a write of 32 KB: calls (-want +got):\n%s", diff)
	}
	p.Reset()
	if got := e.dataIn(c); got != "" {
		t.Errorf("Session.Data of data kept apart = %d bytes, want none", len(got))
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.Calls()); diff != "" {
		t.Errorf("a request that does not read the data: calls (-want +got):\n%s", diff)
	}
	p.Reset()
	if got := read(c); !bytes.Equal(got, big("a")) {
		t.Errorf("Data = %d bytes, want the 32 KB written", len(got))
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1, "GetItem": 1}, p.Calls()); diff != "" {
		t.Errorf("a request that reads the data: calls (-want +got):\n%s", diff)
	}
	write(big("b"))
	if got := read(c); !bytes.Equal(got, big("b")) || dataItems() != 1 {
		t.Errorf("after a second write: Data = %.20q…, %d data items; want the second, and one", got, dataItems())
	}
	c = e.login(alice, c) // a re-authentication
	if got := read(c); !bytes.Equal(got, big("b")) || dataItems() != 1 {
		t.Errorf("after re-authenticating: Data = %.20q…, %d data items; want it handed on, one", got, dataItems())
	}
	write(json.RawMessage(`{"n":1}`))
	if got := e.dataIn(c); got != `{"n":1}` || dataItems() != 0 {
		t.Errorf("small data again: Session.Data = %q, %d data items; want it in the session, none apart", got, dataItems())
	}
	write(big("c"))
	w := newRecorder()
	r := newRequest(c)
	if err := e.m.Logout(w, r); err != nil {
		t.Fatal(err)
	}
	if n := dataItems(); n != 0 {
		t.Errorf("after Logout: %d data items, want none", n)
	}
}

// A v0.2.0 instance's UpdateData (its "SET #data = :data, #rev = :next",
// which leaves dataApart) of a session whose data was kept apart: dataApart
// no longer names the revision, and this release reads and writes the data
// that write left inline, during and after a rolling deploy.
func TestDataApartAfterAnOlderReleasesWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.putUser("alice")
	c := e.login(alice)
	big := json.RawMessage(`{"draft":"` + strings.Repeat("a", 32<<10) + `"}`)
	e.inRequest(c, func(ctx context.Context) {
		if err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return big, nil }); err != nil {
			t.Fatal(err)
		}
	})

	ctx := context.Background()
	key := sessionItemKey(c.Value)
	got, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: key, ConsistentRead: ptr(true)})
	if err != nil || got.Item["dataApart"] == nil {
		t.Fatalf("the session item: %v %v, want one with dataApart", got, err)
	}
	_, err = e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &e.table,
		Key:                      key,
		UpdateExpression:         ptr("SET #data = :data, #rev = :next"),
		ConditionExpression:      ptr("attribute_exists(#pk) AND #kind = :kind AND #ttl > :now AND #rev = :rev"),
		ExpressionAttributeNames: map[string]string{"#pk": "pk", "#kind": "kind", "#ttl": "expiresAt", "#data": "appData", "#rev": "dataRev"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":kind": attrS("session"), ":next": attrN(42), ":now": attrN(e.clock.Now().Unix()),
			":rev": got.Item["dataRev"], ":data": attrS(`{"n":1}`),
		},
	})
	if err != nil {
		t.Fatalf("v0.2.0's write: %v", err)
	}

	e.inRequest(c, func(ctx context.Context) {
		data, err := e.m.Data(ctx)
		if err != nil || string(data) != `{"n":1}` {
			t.Errorf("Data after a v0.2.0 instance's write = %.40q, %v; want its {\"n\":1}", data, err)
		}
		if err := e.m.UpdateData(ctx, func(json.RawMessage) (any, error) { return json.RawMessage(`{"n":2}`), nil }); err != nil {
			t.Errorf("UpdateData after a v0.2.0 instance's write: %v", err)
		}
	})
	e.inRequest(c, func(ctx context.Context) {
		if data, err := e.m.Data(ctx); err != nil || string(data) != `{"n":2}` {
			t.Errorf("Data after this release's next write = %.40q, %v; want {\"n\":2}", data, err)
		}
	})
}

// Two requests of one session, on two instances, change its data at once:
// the second writer's condition fails, it reads again and applies its
// change to the first's, so neither is lost. A write whose answer was lost
// and whose retry met its own result counts once.
func TestSessionDataRacingWriters(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p))
	other := primed(t, e.cfg)
	c := e.login(e.putUser("alice"))
	h := func(m *ddbsession.Manager[User], during func()) http.Handler {
		return m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if during != nil {
				during()
			}
			if err := m.UpdateData(r.Context(), increment); err != nil {
				t.Error(err)
			}
		}))
	}
	// The first request has read the session (no data) when the second
	// runs to the end; then the first writes.
	e.get(h(e.m, func() { e.get(h(other, nil), c) }), c)
	if got := e.dataIn(c); got != `{"n":2}` {
		t.Errorf("data after two racing increments = %q, want {\"n\":2}", got)
	}

	lost := answerApplied(p, "UpdateItem", 1, nil, &types.ConditionalCheckFailedException{Message: aws.String("the retry met its own write")})
	e.get(h(e.m, nil), c)
	if lost() != 1 {
		t.Fatal("no answer was lost")
	}
	if got := e.dataIn(c); got != `{"n":3}` {
		t.Errorf("data after an increment whose answer was lost = %q, want {\"n\":3}", got)
	}
}

// Data is never written into a session that ended meanwhile; Authenticate's
// session takes data through NewContext too.
func TestSessionDataOfEndedAndCheckedSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withBearer)
	alice := e.putUser("alice")
	c := e.login(alice)
	var err error
	e.inRequest(c, func(ctx context.Context) {
		if lerr := e.m.Logout(newRecorder(), newRequest(c)); lerr != nil {
			t.Fatal(lerr)
		}
		err = e.m.UpdateData(ctx, increment)
	})
	if !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("UpdateData of a session logged out meanwhile: %v, want ErrNoSession", err)
	}
	for _, item := range e.scanAll() {
		if attrText(item["kind"]) == "S:session" {
			t.Errorf("the logged-out session is back: %s", itemText(item))
		}
	}

	token, _, err := e.m.LoginBearer(newRequest(), alice, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, u, err := e.m.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.UpdateData(e.m.NewContext(context.Background(), s, u), increment); err != nil {
		t.Fatalf("UpdateData through Authenticate and NewContext: %v", err)
	}
	if s, _, _ := e.m.Authenticate(context.Background(), token); string(s.Data) != `{"n":1}` {
		t.Errorf("Authenticate's data = %q, want {\"n\":1}", s.Data)
	}
}

// Re-authentication hands the data on; a login of another user, or after
// a RevokeAll, starts without it.
func TestSessionDataAcrossRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.putUser("alice"), e.putUser("bob")
	c := e.login(alice)
	e.inRequest(c, func(ctx context.Context) {
		if err := e.m.UpdateData(ctx, increment); err != nil {
			t.Fatal(err)
		}
	})
	again := e.login(alice, c)
	if got := e.dataIn(again); got != `{"n":1}` {
		t.Errorf("data after re-authenticating = %q, want it handed on", got)
	}
	if got := e.dataIn(e.login(bob, again)); got != "" {
		t.Errorf("another user's login carrying alice's session has data %q", got)
	}
	c = e.login(alice)
	e.inRequest(c, func(ctx context.Context) { e.m.UpdateData(ctx, increment) })
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	if got := e.dataIn(e.login(alice, c)); got != "" {
		t.Errorf("a login after RevokeAll carrying the revoked session has data %q", got)
	}
}

// A RevokeAll or a RevokeEveryone that ends the session while its request
// runs leaves UpdateData no success to report: the write's condition sees
// the session item alone, so UpdateData reads the user's revocation state
// after it, and answers ErrNoSession.
func TestSessionDataOfARevokedSession(t *testing.T) {
	t.Parallel()
	for _, revoke := range []string{"RevokeAll", "RevokeEveryone"} {
		t.Run(revoke, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			alice := e.putUser("alice")
			c := e.login(alice)
			var err error
			e.inRequest(c, func(ctx context.Context) {
				var rerr error
				if revoke == "RevokeAll" {
					rerr = e.m.RevokeAll(context.Background(), alice)
				} else {
					rerr = e.m.RevokeEveryone(context.Background())
				}
				if rerr != nil {
					t.Fatal(rerr)
				}
				err = e.m.UpdateData(ctx, increment)
			})
			if !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("UpdateData of a session %s ended during its request: %v, want ErrNoSession", revoke, err)
			}
		})
	}
}

// Racing writers of different keys of one session's data all land: each
// loser reads the winner's data and tries again, after a pause that spreads
// them apart, until the call's deadline.
func TestSessionDataManyRacingWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.login(e.putUser("alice"))
	const writers = 20
	s, u, err := e.m.Authenticate(context.Background(), c.Value)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range writers {
		ctx := e.m.NewContext(context.Background(), s, u) // a request of its own each
		wg.Go(func() {
			err := e.m.UpdateData(ctx, func(old json.RawMessage) (any, error) {
				keys := map[string]bool{}
				if old != nil {
					if err := json.Unmarshal(old, &keys); err != nil {
						return nil, err
					}
				}
				keys[strconv.Itoa(i)] = true
				return keys, nil
			})
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var keys map[string]bool
	if err := json.Unmarshal([]byte(e.dataIn(c)), &keys); err != nil || len(keys) != writers {
		t.Errorf("data after %d racing writers of a key each: %v (%v), want %d keys", writers, keys, err, writers)
	}
}
