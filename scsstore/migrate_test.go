package scsstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/redisstore"
	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/gomodule/redigo/redis"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/redistest"
	"github.com/ddbsession/ddbsession/scsstore"
)

const (
	old      = scsstore.PhaseOld
	dual     = scsstore.PhaseDual
	ddbFirst = scsstore.PhaseDynamoDBFirst
	ddbOnly  = scsstore.PhaseDynamoDBOnly
)

// migration is one Redis (the old store, scs's redisstore) and one table,
// shared by instances in any phases, on one test clock.
type migration struct {
	t      *testing.T
	client *dynamodb.Client
	table  string
	redis  *redisstore.RedisStore
	clock  *ddbtest.Clock
}

func newMigration(t *testing.T) *migration {
	t.Helper()
	client, table := newTable(t, false)
	addr := redistest.Start(t)
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	t.Cleanup(func() { pool.Close() })
	// scs stamps its deadlines and redisstore its expiries with the
	// machine's clock: the test clock starts there, and moves only ahead.
	return &migration{t: t, client: client, table: table, redis: redisstore.New(pool), clock: ddbtest.NewClock(time.Now())}
}

// store returns a store of one instance in phase, with a Store of its own
// on the table through a probe; in PhaseDynamoDBOnly without the old
// store, as once Redis is switched off. edit changes its config.
func (e *migration) store(phase scsstore.Phase, edit ...func(*scsstore.MigrationConfig)) (*scsstore.Migration, *scsstore.Store, *ddbtest.Probe) {
	e.t.Helper()
	store, probe := newStore(e.t, e.client, e.table, func(c *scsstore.Config) { c.Now = e.clock.Now })
	cfg := scsstore.MigrationConfig{Old: e.redis, New: store, Phase: phase}
	if phase == ddbOnly {
		cfg.Old = nil
	}
	for _, f := range edit {
		f(&cfg)
	}
	m, err := scsstore.NewMigration(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return m, store, probe
}

// instance returns an app server in phase, with scs's IdleTimeout set, so
// that every request commits.
func (e *migration) instance(phase scsstore.Phase) *instance {
	e.t.Helper()
	m, store, _ := e.store(phase, func(c *scsstore.MigrationConfig) { c.IdleTimeout = time.Hour })
	return newInstanceOn(e.t, m, store, time.Hour)
}

// item returns what the table holds under token's key: its kind, or ""
// for no item.
func (e *migration) item(token string) string {
	e.t.Helper()
	sum := sha256.Sum256([]byte(token))
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": avS("SCS#" + base64.RawURLEncoding.EncodeToString(sum[:])), "sk": avS("SCS"),
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if kind, ok := out.Item["kind"].(*types.AttributeValueMemberS); ok {
		return kind.Value
	}
	return ""
}

// inRedis reports whether the old store finds token.
func (e *migration) inRedis(token string) bool {
	e.t.Helper()
	_, found, err := e.redis.Find(token)
	if err != nil {
		e.t.Fatal(err)
	}
	return found
}

// oldSession puts a session of msg, made Lifetime (24 hours) ago by scs's
// clock, straight into the old store, and returns its token.
func (e *migration) oldSession(msg string) string {
	e.t.Helper()
	token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	deadline := time.Now().Add(24 * time.Hour)
	b, err := scs.GobCodec{}.Encode(deadline, map[string]any{"msg": msg})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.redis.Commit(token, b, deadline); err != nil {
		e.t.Fatal(err)
	}
	return token
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// A browser signed in on the old version keeps its session, data and all,
// through every phase forward, with Redis switched off at the end; and a
// session begun on the last phase keeps through every phase rolled back.
func TestMigrationKeepsSessionsThroughEveryPhase(t *testing.T) {
	t.Parallel()
	e := newMigration(t)
	b := newBrowser(t)
	first := e.instance(old)
	b.expect(first, "POST", "/put", msg("on old"), http.StatusNoContent, "")
	token := b.token(first)
	want := "on old"
	for _, phase := range []scsstore.Phase{dual, ddbFirst, ddbOnly} {
		in := e.instance(phase)
		b.expect(in, "GET", "/get", nil, http.StatusOK, want)
		want = "on " + string(phase)
		b.expect(in, "POST", "/put", msg(want), http.StatusNoContent, "")
		b.expect(in, "GET", "/get", nil, http.StatusOK, want)
		if got := b.token(in); got != token {
			t.Fatalf("%s: a new token: the browser was signed out", phase)
		}
		if phase == ddbFirst && e.inRedis(token) {
			t.Errorf("%s: the moved session is still in Redis", phase)
		}
	}
	if got := e.item(token); got != "scs-session" {
		t.Errorf("the table holds %q, want the session", got)
	}

	b = newBrowser(t)
	last := e.instance(ddbOnly)
	b.expect(last, "POST", "/put", msg("on dynamodb-only"), http.StatusNoContent, "")
	want = "on dynamodb-only"
	for _, phase := range []scsstore.Phase{ddbFirst, dual, old} {
		in := e.instance(phase)
		b.expect(in, "GET", "/get", nil, http.StatusOK, want)
		want = "back on " + string(phase)
		b.expect(in, "POST", "/put", msg(want), http.StatusNoContent, "")
	}
	b.expect(last, "GET", "/get", nil, http.StatusOK, "back on dual") // the old phase wrote Redis alone
}

// During each rolling deploy, two instances in adjacent phases serve one
// browser in turns (which is also a rollback, the later phase's sessions
// served by the earlier), and agree; a session destroyed on either side is
// refused on both, its token replayed. In dynamodb-first and later, no
// session is only in Redis: the one begun on the earlier phase moved.
func TestMigrationAdjacentPhasesAgree(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]scsstore.Phase{{old, dual}, {dual, ddbFirst}, {ddbFirst, ddbOnly}} {
		for destroyer := range 2 {
			t.Run(string(pair[0])+"+"+string(pair[1])+"/destroyed on "+string(pair[destroyer]), func(t *testing.T) {
				t.Parallel()
				e := newMigration(t)
				ins := [2]*instance{e.instance(pair[0]), e.instance(pair[1])}
				for start := range 2 {
					b := newBrowser(t)
					a, other := ins[start], ins[1-start]
					b.expect(a, "POST", "/put", msg("one"), http.StatusNoContent, "")
					b.expect(other, "GET", "/get", nil, http.StatusOK, "one")
					b.expect(other, "POST", "/put", msg("two"), http.StatusNoContent, "")
					b.expect(a, "GET", "/get", nil, http.StatusOK, "two")
					b.expect(other, "GET", "/get", nil, http.StatusOK, "two")
					if start == destroyer {
						continue
					}
					// The other browser is destroyed on destroyer, and
					// its token replayed on both.
					token := b.token(a)
					b.expect(ins[destroyer], "POST", "/destroy", nil, http.StatusNoContent, "")
					for _, in := range ins {
						b.setToken(in, token)
						b.expect(in, "GET", "/get", nil, http.StatusNotFound, "")
					}
					if e.inRedis(token) {
						t.Error("the destroyed session is in Redis")
					}
				}
			})
		}
	}
}

// An old session whose absolute expiry has passed by the instance's clock
// is refused, though Redis still holds it, and nothing of it is written to
// the table; nor of a token Redis never knew.
func TestMigrationDoesNotReviveExpiredSessions(t *testing.T) {
	t.Parallel()
	e := newMigration(t)
	token := e.oldSession("old")
	e.clock.Advance(24*time.Hour + time.Second)
	unknown := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	for _, phase := range []scsstore.Phase{dual, ddbFirst} {
		m, _, _ := e.store(phase)
		for _, tok := range []string{token, unknown} {
			if _, found, err := m.Find(tok); found || err != nil {
				t.Errorf("%s: Find: found %v, %v; want not found", phase, found, err)
			}
			if kind := e.item(tok); kind != "" {
				t.Errorf("%s: the table holds %q for a session Redis does not vouch for", phase, kind)
			}
		}
	}
}

// A destroy racing a move, paused at each of its points: the move's read
// of Redis is done and its write into the table not yet (the write fails
// on the tombstone), and the write made but Redis not yet emptied (the
// tombstone replaces the write; the request in flight commits nothing).
// The session stays destroyed on both phases.
func TestMigrationMoveRacingDestroy(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"before the move's write", "after the move's write"} {
		for _, destroyer := range []scsstore.Phase{dual, ddbFirst} {
			t.Run(point+"/"+string(destroyer), func(t *testing.T) {
				t.Parallel()
				e := newMigration(t)
				mover, _, p := e.store(ddbFirst)
				other, _, _ := e.store(destroyer)
				token := e.oldSession("old")

				paused, resume := make(chan struct{}), make(chan struct{})
				var once atomic.Bool
				hold := func(op string) {
					if op == "PutItem" && once.CompareAndSwap(false, true) {
						close(paused)
						<-resume
					}
				}
				if point == "before the move's write" {
					p.Before = func(_ context.Context, op string, _ any) { hold(op) }
				} else {
					p.After = func(_ context.Context, op string, _, _ any, err error) error { hold(op); return err }
				}
				type result struct {
					b     []byte
					found bool
					err   error
				}
				done := make(chan result)
				go func() {
					b, found, err := mover.Find(token)
					done <- result{b, found, err}
				}()
				<-paused
				if err := other.Delete(token); err != nil {
					t.Fatal(err)
				}
				close(resume)
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				if point == "before the move's write" && r.found {
					t.Error("the move found a session destroyed before its write")
				}
				if r.found { // the request in flight commits
					if err := mover.Commit(token, r.b, time.Now().Add(time.Hour)); err != nil {
						t.Fatal(err)
					}
				}
				for _, m := range []*scsstore.Migration{mover, other} {
					if _, found, err := m.Find(token); found || err != nil {
						t.Errorf("Find after the destroy: found %v, %v", found, err)
					}
				}
				if e.inRedis(token) || e.item(token) != "scs-destroyed" {
					t.Errorf("Redis has it: %v; the table holds %q, want a tombstone", e.inRedis(token), e.item(token))
				}
			})
		}
	}
}

// A dual commit of a request that loaded the session before a destroy
// began, on a dual instance or on an old one beside it (a logout there
// racing a dual request): after the whole destroy; with the destroy
// between the commit's write to Redis and its read of the table; and with
// the commit between the destroy's start and its tombstone. The session
// stays destroyed on every phase, the old one (Redis alone) too.
func TestMigrationDualCommitRacingDestroy(t *testing.T) {
	t.Parallel()
	for _, race := range []string{"after the destroy", "destroy between write and read", "commit before the tombstone"} {
		for _, phase := range []scsstore.Phase{dual, old} {
			t.Run(race+"/destroyed on "+string(phase), func(t *testing.T) {
				t.Parallel()
				dualCommitRacingDestroy(t, race, phase)
			})
		}
	}
}

// dualCommitRacingDestroy stages one race of TestMigrationDualCommitRacingDestroy.
func dualCommitRacingDestroy(t *testing.T, race string, phase scsstore.Phase) {
	e := newMigration(t)
	committer, _, p := e.store(dual)
	destroyer, _, pd := e.store(phase)
	oldOnly, _, _ := e.store(old)
	token := e.oldSession("old")
	b, found, err := committer.Find(token)
	if !found || err != nil {
		t.Fatalf("Find: %v, %v", found, err)
	}
	commit := func() {
		if err := committer.Commit(token, b, time.Now().Add(time.Hour)); err != nil {
			t.Error(err)
		}
	}
	switch race {
	case "after the destroy":
		if err := destroyer.Delete(token); err != nil {
			t.Fatal(err)
		}
		commit()
	case "destroy between write and read":
		var once atomic.Bool
		p.Before = func(_ context.Context, op string, _ any) {
			if op == "GetItem" && once.CompareAndSwap(false, true) {
				if !e.inRedis(token) {
					t.Error("the commit has not written Redis before its read")
				}
				if err := destroyer.Delete(token); err != nil {
					t.Error(err)
				}
			}
		}
		commit()
	case "commit before the tombstone":
		var once atomic.Bool
		pd.Before = func(_ context.Context, op string, _ any) {
			if op == "PutItem" && once.CompareAndSwap(false, true) {
				commit()
			}
		}
		if err := destroyer.Delete(token); err != nil {
			t.Fatal(err)
		}
		if !once.Load() {
			t.Fatal("the destroy wrote no tombstone")
		}
	}
	for _, m := range []*scsstore.Migration{committer, destroyer, oldOnly} {
		if _, found, err := m.Find(token); found || err != nil {
			t.Errorf("Find after the destroy: found %v, %v", found, err)
		}
	}
	if e.inRedis(token) {
		t.Error("Redis holds the destroyed session")
	}
}

// A session moved by a request that commits nothing (one that only loads
// it, a WebSocket upgrade, a panic) keeps the idle expiry: it moves with
// IdleTimeout from the move, or its absolute deadline if that is first,
// or the deadline alone without an IdleTimeout, as scs commits it.
func TestMigrationMoveKeepsIdleExpiry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		idle     time.Duration
		lifetime time.Duration // how far ahead the session's absolute deadline is
		want     time.Duration // how long it lives idle after the move
	}{
		{"idle first", 10 * time.Minute, 24 * time.Hour, 10 * time.Minute},
		{"deadline first", 2 * time.Hour, time.Hour, time.Hour},
		{"no IdleTimeout", 0, 24 * time.Hour, 24 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newMigration(t)
			first, _, _ := e.store(ddbFirst, func(cfg *scsstore.MigrationConfig) { cfg.IdleTimeout = c.idle })
			token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
			deadline := e.clock.Now().Add(c.lifetime)
			b, err := scs.GobCodec{}.Encode(deadline, map[string]any{"msg": "idle"})
			if err != nil {
				t.Fatal(err)
			}
			expiry := deadline // scs: min(deadline, now+IdleTimeout)
			if c.idle > 0 && c.idle < c.lifetime {
				expiry = e.clock.Now().Add(c.idle)
			}
			if err := e.redis.Commit(token, b, expiry); err != nil {
				t.Fatal(err)
			}
			if _, found, err := first.Find(token); !found || err != nil {
				t.Fatalf("the first touch: found %v, %v", found, err)
			}
			if e.inRedis(token) {
				t.Fatal("Redis still holds the moved session")
			}
			e.clock.Advance(c.want - time.Second)
			if _, found, err := first.Find(token); !found || err != nil {
				t.Errorf("%v idle after the move: found %v, %v; want it alive", c.want-time.Second, found, err)
			}
			e.clock.Advance(time.Second)
			if _, found, err := first.Find(token); found || err != nil {
				t.Errorf("%v idle after the move: found %v, %v; want it expired", c.want, found, err)
			}
		})
	}
}

// Two first touches at once, on two dynamodb-first instances: the one
// paused before its write finds the key taken by the other's move, and
// serves what the table holds. One session, in DynamoDB alone.
func TestMigrationConcurrentMoves(t *testing.T) {
	t.Parallel()
	e := newMigration(t)
	first, _, p := e.store(ddbFirst)
	second, _, _ := e.store(ddbFirst)
	token := e.oldSession("old")
	var once atomic.Bool
	var secondData []byte
	p.Before = func(_ context.Context, op string, _ any) {
		if op == "PutItem" && once.CompareAndSwap(false, true) {
			b, found, err := second.Find(token)
			if !found || err != nil {
				t.Errorf("the second move: %v, %v", found, err)
			}
			secondData = b
		}
	}
	b, found, err := first.Find(token)
	if !found || err != nil || string(b) != string(secondData) {
		t.Errorf("the first move, after the second: found %v, %v; the same data %v", found, err, string(b) == string(secondData))
	}
	if e.inRedis(token) || e.item(token) != "scs-session" {
		t.Errorf("Redis has it: %v; the table holds %q, want the session", e.inRedis(token), e.item(token))
	}
}

// A dual commit racing a move, with the move paused after it read Redis
// and before its write: the commit goes to Redis, the session's home when
// it read the table, and the move may carry the data it read before it,
// as one of two concurrent changes is lost in any scs store. Both phases
// see the session alive with the same data, and Redis no longer holds it.
func TestMigrationMoveRacingDualCommit(t *testing.T) {
	t.Parallel()
	e := newMigration(t)
	mover, _, p := e.store(ddbFirst)
	committer, _, _ := e.store(dual)
	token := e.oldSession("before")
	if _, found, err := committer.Find(token); !found || err != nil {
		t.Fatalf("dual Find: %v, %v", found, err)
	}
	changed, err := scs.GobCodec{}.Encode(time.Now().Add(time.Hour), map[string]any{"msg": "changed on dual"})
	if err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	p.Before = func(_ context.Context, op string, _ any) {
		if op == "PutItem" && once.CompareAndSwap(false, true) {
			if err := committer.Commit(token, changed, time.Now().Add(time.Hour)); err != nil {
				t.Error(err)
			}
		}
	}
	moved, found, err := mover.Find(token)
	if !found || err != nil {
		t.Fatalf("the move: %v, %v", found, err)
	}
	for _, m := range []*scsstore.Migration{mover, committer} {
		b, found, err := m.Find(token)
		if !found || err != nil || string(b) != string(moved) {
			t.Errorf("Find after the race: found %v, %v; the data the move served: %v", found, err, string(b) == string(moved))
		}
	}
	if e.inRedis(token) {
		t.Error("Redis still holds the moved session")
	}
}

// failingStore is the old store in an outage: each method fails with err
// where err is set for it, and otherwise goes to the real store.
type failingStore struct {
	scs.Store
	fail map[string]error
}

func (f failingStore) Find(token string) ([]byte, bool, error) {
	if err := f.fail["Find"]; err != nil {
		return nil, false, err
	}
	return f.Store.Find(token)
}

func (f failingStore) Commit(token string, b []byte, expiry time.Time) error {
	if err := f.fail["Commit"]; err != nil {
		return err
	}
	return f.Store.Commit(token, b, expiry)
}

func (f failingStore) Delete(token string) error {
	if err := f.fail["Delete"]; err != nil {
		return err
	}
	return f.Store.Delete(token)
}

// Failures fail closed: an error of either store is returned, never a
// session found for it; a DynamoDB failure never falls back to Redis; a
// session DynamoDB holds needs no Redis; and what a failed call leaves is
// agreed on by every phase.
func TestMigrationFailures(t *testing.T) {
	t.Parallel()
	errRedis := errors.New("injected Redis outage")
	e := newMigration(t)
	migrationOn := func(phase scsstore.Phase, fail map[string]error) (*scsstore.Migration, *ddbtest.Probe) {
		store, probe := newStore(t, e.client, e.table, func(c *scsstore.Config) { c.Now = e.clock.Now })
		m, err := scsstore.NewMigration(scsstore.MigrationConfig{Old: failingStore{e.redis, fail}, New: store, Phase: phase})
		if err != nil {
			t.Fatal(err)
		}
		return m, probe
	}
	healthy, _ := migrationOn(ddbFirst, nil)
	healthyDual, _ := migrationOn(dual, nil)
	agree := func(token string, want bool) {
		t.Helper()
		for _, m := range []*scsstore.Migration{healthy, healthyDual} {
			if _, found, err := m.Find(token); found != want || err != nil {
				t.Errorf("Find: found %v, %v; want %v", found, err, want)
			}
		}
	}

	t.Run("Redis down: a session still in it", func(t *testing.T) {
		token := e.oldSession("old")
		for _, phase := range []scsstore.Phase{dual, ddbFirst} {
			m, _ := migrationOn(phase, map[string]error{"Find": errRedis})
			if _, found, err := m.Find(token); found || !errors.Is(err, errRedis) {
				t.Errorf("%s: Find: found %v, %v; want the outage", phase, found, err)
			}
		}
		if e.item(token) != "" {
			t.Error("the table holds the session Redis could not be asked of")
		}
		agree(token, true)
	})
	t.Run("Redis down: a moved session", func(t *testing.T) {
		token := e.oldSession("old")
		agree(token, true) // the healthy instance moves it
		m, _ := migrationOn(ddbFirst, map[string]error{"Find": errRedis, "Commit": errRedis, "Delete": errRedis})
		b, found, err := m.Find(token)
		if !found || err != nil {
			t.Fatalf("Find: found %v, %v; want the session, without Redis", found, err)
		}
		if err := m.Commit(token, b, time.Now().Add(time.Hour)); err != nil {
			t.Errorf("Commit: %v", err)
		}
	})
	t.Run("Redis fails the move's delete", func(t *testing.T) {
		token := e.oldSession("old")
		m, _ := migrationOn(ddbFirst, map[string]error{"Delete": errRedis})
		if _, found, err := m.Find(token); found || !errors.Is(err, errRedis) {
			t.Errorf("Find: found %v, %v; want the outage", found, err)
		}
		agree(token, true) // moved: DynamoDB holds it, the copy in Redis is never read
	})
	t.Run("Redis fails a dual commit", func(t *testing.T) {
		token := e.oldSession("old")
		m, probe := migrationOn(dual, map[string]error{"Commit": errRedis})
		if err := m.Commit(token, []byte("changed"), time.Now().Add(time.Hour)); !errors.Is(err, errRedis) {
			t.Errorf("Commit: %v, want the outage", err)
		}
		if got := probe.Total(); got != 0 {
			t.Errorf("%d DynamoDB calls after Redis failed the commit", got)
		}
	})
	t.Run("Redis fails a destroy's delete", func(t *testing.T) {
		token := e.oldSession("old")
		m, _ := migrationOn(dual, map[string]error{"Delete": errRedis})
		if err := m.Delete(token); !errors.Is(err, errRedis) {
			t.Errorf("Delete: %v, want the outage", err)
		}
		agree(token, false) // the tombstone is down: refused by every phase but old
	})
	t.Run("DynamoDB down", func(t *testing.T) {
		token := e.oldSession("old")
		for _, phase := range []scsstore.Phase{dual, ddbFirst} {
			counter := &countingStore{Store: e.redis, calls: map[string]int{}}
			store, probe := newStore(t, e.client, e.table)
			failOps(probe, errOutage, errOutage, errOutage)
			m, err := scsstore.NewMigration(scsstore.MigrationConfig{Old: counter, New: store, Phase: phase})
			if err != nil {
				t.Fatal(err)
			}
			if _, found, err := m.Find(token); found || !errors.Is(err, errOutage) {
				t.Errorf("%s: Find: found %v, %v; want the outage", phase, found, err)
			}
			if err := m.Delete(token); !errors.Is(err, errOutage) {
				t.Errorf("%s: Delete: %v; want the outage", phase, err)
			}
			if counter.calls["Find"]+counter.calls["Delete"] != 0 {
				t.Errorf("%s: Redis asked %v while DynamoDB was down", phase, counter.calls)
			}
		}
		// The old phase finds Redis's sessions without DynamoDB, but its
		// destroy fails before Redis's delete: no session is left in Redis
		// without its tombstone.
		store, probe := newStore(t, e.client, e.table)
		failOps(probe, errOutage, errOutage, errOutage)
		m, err := scsstore.NewMigration(scsstore.MigrationConfig{Old: e.redis, New: store, Phase: old})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, err := m.Find(token); !found || err != nil {
			t.Errorf("old: Find: found %v, %v; want the session, from Redis", found, err)
		}
		if err := m.Delete(token); !errors.Is(err, errOutage) {
			t.Errorf("old: Delete: %v; want the outage", err)
		}
		agree(token, true)
	})
}

// countingStore counts the calls made to the old store through it, by
// method.
type countingStore struct {
	scs.Store
	calls map[string]int
}

func (c *countingStore) Find(token string) ([]byte, bool, error) {
	c.calls["Find"]++
	return c.Store.Find(token)
}

func (c *countingStore) Commit(token string, b []byte, expiry time.Time) error {
	c.calls["Commit"]++
	return c.Store.Commit(token, b, expiry)
}

func (c *countingStore) Delete(token string) error {
	c.calls["Delete"]++
	return c.Store.Delete(token)
}

// The calls each operation makes of each store, in each phase, as
// docs/migrate.md lists them: the old store is read only on a miss in the
// table, and a session the table holds costs nothing of it but a dual
// phase's commit.
func TestMigrationCosts(t *testing.T) {
	t.Parallel()
	type calls = map[string]int
	for _, c := range []struct {
		name       string
		phase      scsstore.Phase
		home       string // where the session is: "redis", "dynamodb", "" for nowhere
		op         string // Find, Commit or Delete
		table, old calls
		noNew      bool // MigrationConfig.New nil
	}{
		{"old: a request", old, "redis", "Find", calls{}, calls{"Find": 1}, false},
		{"old: its commit", old, "redis", "Commit", calls{}, calls{"Commit": 1}, false},
		{"old: a destroy", old, "redis", "Delete", calls{"PutItem": 1}, calls{"Delete": 1}, false},
		{"old without New: a request", old, "redis", "Find", calls{}, calls{"Find": 1}, true},
		{"old without New: its commit", old, "redis", "Commit", calls{}, calls{"Commit": 1}, true},
		{"old without New: a destroy", old, "redis", "Delete", calls{}, calls{"Delete": 1}, true},
		{"dual: a session in Redis", dual, "redis", "Find", calls{"GetItem": 1}, calls{"Find": 1}, false},
		{"dual: its commit", dual, "redis", "Commit", calls{"GetItem": 1}, calls{"Commit": 1}, false},
		{"dual: a session in DynamoDB", dual, "dynamodb", "Find", calls{"GetItem": 1}, calls{}, false},
		{"dual: its commit", dual, "dynamodb", "Commit", calls{"GetItem": 1, "PutItem": 1}, calls{"Commit": 1}, false},
		{"dual: a destroy", dual, "redis", "Delete", calls{"PutItem": 1}, calls{"Delete": 1}, false},
		{"dynamodb-first: the first touch, which moves it", ddbFirst, "redis", "Find", calls{"GetItem": 1, "PutItem": 1}, calls{"Find": 1, "Delete": 1}, false},
		{"dynamodb-first: a session in DynamoDB", ddbFirst, "dynamodb", "Find", calls{"GetItem": 1}, calls{}, false},
		{"dynamodb-first: its commit", ddbFirst, "dynamodb", "Commit", calls{"PutItem": 1}, calls{}, false},
		{"dynamodb-first: an unknown token", ddbFirst, "", "Find", calls{"GetItem": 1}, calls{"Find": 1}, false},
		{"dynamodb-first: a destroy", ddbFirst, "dynamodb", "Delete", calls{"PutItem": 1}, calls{"Delete": 1}, false},
		{"dynamodb-only: a request", ddbOnly, "dynamodb", "Find", calls{"GetItem": 1}, calls{}, false},
		{"dynamodb-only: its commit", ddbOnly, "dynamodb", "Commit", calls{"PutItem": 1}, calls{}, false},
		{"dynamodb-only: a destroy", ddbOnly, "dynamodb", "Delete", calls{"PutItem": 1}, calls{}, false},
	} {
		t.Run(c.name+"/"+c.op, func(t *testing.T) {
			t.Parallel()
			e := newMigration(t)
			token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
			data, err := scs.GobCodec{}.Encode(time.Now().Add(time.Hour), map[string]any{"msg": "changed"})
			if err != nil {
				t.Fatal(err)
			}
			switch c.home {
			case "redis":
				token = e.oldSession("old")
			case "dynamodb":
				m, _, _ := e.store(ddbOnly)
				if err := m.Commit(token, []byte("old"), time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			counter := &countingStore{Store: e.redis, calls: calls{}}
			store, probe := newStore(t, e.client, e.table, func(cfg *scsstore.Config) { cfg.Now = e.clock.Now })
			cfg := scsstore.MigrationConfig{Old: counter, New: store, Phase: c.phase}
			if c.phase == ddbOnly {
				cfg.Old = nil
			}
			if c.noNew {
				cfg.New = nil
			}
			m, err := scsstore.NewMigration(cfg)
			if err != nil {
				t.Fatal(err)
			}
			switch c.op {
			case "Find":
				_, found, err := m.Find(token)
				if err != nil || found != (c.home != "") {
					t.Fatalf("Find: found %v, %v", found, err)
				}
			case "Commit":
				err = m.Commit(token, data, time.Now().Add(time.Hour))
			case "Delete":
				err = m.Delete(token)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := probe.Take(); !maps.Equal(got, c.table) {
				t.Errorf("DynamoDB calls %v, want %v", got, c.table)
			}
			if !maps.Equal(counter.calls, c.old) {
				t.Errorf("old store calls %v, want %v", counter.calls, c.old)
			}
			if c.op == "Delete" && e.inRedis(token) {
				t.Error("Redis still holds the destroyed session")
			}
		})
	}
}

func TestNewMigrationRejects(t *testing.T) {
	t.Parallel()
	client, table := newTable(t, false)
	store, _ := newStore(t, client, table)
	mrec, _ := newStore(t, client, table, func(c *scsstore.Config) { c.Layout.MREC = true })
	const mrecWhy = "a move or commit in one Region can settle over a tombstone written in another; migrate on a table in one Region or on MRSC (docs/migrate.md)"
	for _, c := range []struct {
		name string
		cfg  scsstore.MigrationConfig
		want string
	}{
		{"no phase", scsstore.MigrationConfig{Old: scs.Store(nil), New: store}, `scsstore: MigrationConfig.Phase "": want "old", "dual", "dynamodb-first" or "dynamodb-only"`},
		{"no old store", scsstore.MigrationConfig{New: store, Phase: dual}, `scsstore: MigrationConfig.Old is nil in phase "dual"`},
		{"no new store", scsstore.MigrationConfig{Old: store, Phase: ddbOnly}, `scsstore: MigrationConfig.New is nil in phase "dynamodb-only"`},
		{"negative lifetime", scsstore.MigrationConfig{Old: store, New: store, Phase: dual, Lifetime: -1}, "scsstore: MigrationConfig.Lifetime -1ns: must not be negative"},
		{"negative idle timeout", scsstore.MigrationConfig{Old: store, New: store, Phase: dual, IdleTimeout: -1}, "scsstore: MigrationConfig.IdleTimeout -1ns: must not be negative"},
		{"MREC in dual", scsstore.MigrationConfig{Old: store, New: mrec, Phase: dual}, `scsstore: MigrationConfig.New has an MREC Layout in phase "dual": ` + mrecWhy},
		{"MREC in dynamodb-first", scsstore.MigrationConfig{Old: store, New: mrec, Phase: ddbFirst}, `scsstore: MigrationConfig.New has an MREC Layout in phase "dynamodb-first": ` + mrecWhy},
	} {
		if _, err := scsstore.NewMigration(c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// The phases that write the table alone, or Redis alone and only
	// tombstones to the table, hold on MREC as they do in one Region.
	for _, phase := range []scsstore.Phase{old, ddbOnly} {
		if _, err := scsstore.NewMigration(scsstore.MigrationConfig{Old: store, New: mrec, Phase: phase}); err != nil {
			t.Errorf("MREC in %s: %v", phase, err)
		}
	}
	if _, err := scsstore.NewMigration(scsstore.MigrationConfig{Old: store, Phase: old}); err != nil {
		t.Errorf("old without New: %v", err)
	}
}

// A request's Find in each phase, against the test engine and a local
// redis-server: what the move adds to a request once the session lives in
// DynamoDB (nothing but the phase switch), and what dual pays for a
// session still in Redis (the table's miss before Redis's hit).
func BenchmarkMigrationFind(b *testing.B) {
	client := ddbtest.Client(b)
	table := ddbtest.TableName(b, client)
	core, err := ddbsession.New(ddbsession.Config[testUser]{Client: client, Table: table, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := core.CreateTable(context.Background()); err != nil {
		b.Fatal(err)
	}
	addr := redistest.Start(b)
	pool := &redis.Pool{MaxIdle: 4, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
	b.Cleanup(func() { pool.Close() })
	oldStore := redisstore.New(pool)
	store, err := scsstore.New(scsstore.Config{Client: client, Table: table})
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Hour)
	data, _ := scs.GobCodec{}.Encode(deadline, map[string]any{"msg": "hello"})
	inRedis := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	inTable := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	if err := oldStore.Commit(inRedis, data, deadline); err != nil {
		b.Fatal(err)
	}
	if err := store.Commit(inTable, data, deadline); err != nil {
		b.Fatal(err)
	}
	migration := func(phase scsstore.Phase) scs.Store {
		m, err := scsstore.NewMigration(scsstore.MigrationConfig{Old: oldStore, New: store, Phase: phase})
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		name  string
		store scs.Store
		token string
	}{
		{"Store/in DynamoDB", store, inTable},
		{"old/in Redis", migration(old), inRedis},
		{"dual/in Redis", migration(dual), inRedis},
		{"dynamodb-first/in DynamoDB", migration(ddbFirst), inTable},
		{"dynamodb-only/in DynamoDB", migration(ddbOnly), inTable},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, found, err := c.store.Find(c.token); !found || err != nil {
					b.Fatalf("Find: %v, %v", found, err)
				}
			}
		})
	}
}
