package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/scsstore"
)

// variants are the ways of serving an authenticated request that the
// benchmark compares, in the order of its rounds and of the report. Adding
// a peer is one more entry here (and its expected calls in the smoke
// test).
var variants = []variant{
	{name: "ddbsession, one round trip", role: roleOneRoundTrip, signIn: signInDDBSession(ddbsessionSetup{})},
	{name: "ddbsession, one round trip, v0.2.0's cookie (user key in the plain)", role: rolePlainKey, signIn: signInDDBSession(ddbsessionSetup{plainKey: true})},
	{name: "ddbsession, one round trip, refresh due on every request", role: roleRefreshDue, signIn: signInDDBSession(ddbsessionSetup{refreshEvery: 1})},
	{name: "ddbsession, one round trip, refresh due on 1 in 10", role: roleRefreshMix, splitByCookie: true, signIn: signInDDBSession(ddbsessionSetup{refreshEvery: 10})},
	{name: "ddbsession, two reads (HideUserKey)", role: roleTwoReads, signIn: signInDDBSession(ddbsessionSetup{hideUserKey: true})},
	{name: "scs v2.9.0, plain DynamoDB store, IdleTimeout", signIn: signInSCS(newPlainStore)},
	{name: "scs v2.9.0, this project's scsstore, IdleTimeout", signIn: signInSCS(func(c ddbsession.Client, table string) (scs.Store, error) {
		return scsstore.New(scsstore.Config{Client: c, Table: table})
	})},
	{name: "floor: 2 GetItems in turn (bare SDK)", role: roleFloorTwoGets, signIn: signInFloor(false)},
	{name: "floor: 1 BatchGetItem (bare SDK)", role: roleFloorBatch, signIn: signInFloor(true)},
}

// A variant serves authenticated requests one way.
type variant struct {
	name string
	role role // for the report's checks; zero for a peer
	// splitByCookie reports the requests that sent a cookie (for
	// ddbsession, those that started a refresh) apart from the others.
	splitByCookie bool
	// signIn creates n users, each signed in with one session of its own,
	// and returns a builder of targets that serve their requests.
	signIn func(ctx context.Context, e *env, n int) (builder, error)
}

// role marks the variants that the targets compare.
type role int

const (
	rolePeer role = iota
	roleOneRoundTrip
	roleRefreshDue
	roleRefreshMix
	roleTwoReads
	roleFloorTwoGets
	roleFloorBatch
	rolePlainKey
)

// builder returns a target that makes its DynamoDB calls through c: the
// proxy, the engine itself, or a replay. Each call builds it anew, with no
// state left from an earlier target but what is in the table.
type builder func(c ddbsession.Client) (*target, error)

// target serves the authenticated requests of one variant's sessions.
type target struct {
	// serve makes the request of session i (modulo the number of
	// sessions), writing the response to w, and returns an error unless
	// it was served as signed in.
	serve func(ctx context.Context, i int, w *recorder) error
	// wait waits for work that requests left running after their
	// responses (ddbsession's refresh writes).
	wait func(ctx context.Context) error
}

// env is what variants sign their users in with.
type env struct {
	client *dynamodb.Client // the engine, directly
	table  string
	logger *slog.Logger
	users  atomic.Int64
	// revokeEveryoneWithin is options.revokeEveryoneWithin.
	revokeEveryoneWithin time.Duration
}

// The benchmark's table: the layout ddbsession creates by default, which
// every variant shares.
const (
	tablePK = "pk"
	tableSK = "sk"
)

// User is the app's user item: a small profile, as a sign-in app keeps,
// with the sessions version that ddbsession needs of a user item the app
// writes itself (docs/item-format.md#user-items).
type User struct {
	PK              string `dynamodbav:"pk"`
	SK              string `dynamodbav:"sk"`
	Name            string `dynamodbav:"name"`
	Email           string `dynamodbav:"email"`
	Role            string `dynamodbav:"role"`
	SessionsVersion int64  `dynamodbav:"sessionsVersion"`
}

// putUsers writes n user items, each with a random non-zero sessions
// version, as an app that creates its own user items must.
func (e *env) putUsers(ctx context.Context, n int) ([]User, error) {
	users := make([]User, n)
	for i := range users {
		id := strconv.FormatInt(e.users.Add(1), 10)
		users[i] = User{PK: "USER#user" + id, SK: "PROFILE", Name: "User " + id, Email: "user" + id + "@example.com", Role: "member",
			SessionsVersion: rand.Int64N(1<<62) + 1}
		av, err := attributevalue.MarshalMap(users[i])
		if err != nil {
			return nil, err
		}
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: av}); err != nil {
			return nil, fmt.Errorf("put user: %w", err)
		}
	}
	return users, nil
}

// hello is the app's page: it greets the signed-in user.
func hello(user func(context.Context) (User, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := user(r.Context())
		if !ok {
			http.Error(w, "no user in the request context", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "hello, "+u.Name)
	})
}

// httpTarget serves requests, one per session cookie, through h.
func httpTarget(h http.Handler, cookies []*http.Cookie, wait func(context.Context) error) *target {
	requests := make([]*http.Request, len(cookies))
	for i, c := range cookies {
		requests[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		requests[i].AddCookie(c)
	}
	return &target{
		serve: func(ctx context.Context, i int, w *recorder) error {
			h.ServeHTTP(w, requests[i%len(requests)])
			if code := w.status(); code != http.StatusOK {
				return fmt.Errorf("status %d", code)
			}
			return nil
		},
		wait: wait,
	}
}

func noWait(context.Context) error { return nil }

type ddbsessionSetup struct {
	hideUserKey bool
	// plainKey sends the cookies as v0.2.0 issued them, the user key in
	// the plain, beside which the default's sealed key is measured.
	plainKey bool
	// refreshEvery, if not zero, makes a session due for a refresh on
	// every refreshEvery-th request it serves: see refreshClock.
	refreshEvery int
}

func signInDDBSession(s ddbsessionSetup) func(ctx context.Context, e *env, n int) (builder, error) {
	return func(ctx context.Context, e *env, n int) (builder, error) {
		cfg := ddbsession.Config[User]{
			Client: e.client, Table: e.table, Logger: e.logger,
			Cookie: ddbsession.Cookie{HideUserKey: s.hideUserKey},
			// An engine overloaded on a small machine shows as latency, as
			// it does for the peers, which have no timeout: not as 503s
			// that would end the run.
			Limits: ddbsession.Limits{StoreTimeout: time.Minute, RevokeEveryoneWithin: e.revokeEveryoneWithin},
		}
		var beforeLogin func(i int)
		var clock *refreshClock
		if s.refreshEvery > 0 {
			clock = newRefreshClock(n, s.refreshEvery)
			cfg.Now, cfg.Limits.RefreshInterval, beforeLogin = clock.Now, clock.interval(), clock.beforeLogin
			defer clock.signedIn()
		}
		cookies, err := loginAll(ctx, e, cfg, n, beforeLogin)
		if err != nil {
			return nil, err
		}
		for i, c := range cookies {
			if !s.plainKey {
				break
			}
			token, pk, sk, err := userOfCookie(ctx, e, c)
			if err != nil {
				return nil, err
			}
			b64 := base64.RawURLEncoding.EncodeToString
			cookies[i] = &http.Cookie{Name: c.Name, Value: token + "." + b64([]byte(pk)) + "." + b64([]byte(sk))}
		}
		return func(c ddbsession.Client) (*target, error) {
			cfg := cfg
			cfg.Client = c
			if r, ok := c.(*replay); ok && r.isReplaying() && clock != nil {
				// A replay answers writes without making them: the
				// sessions that a target on it refreshes keep their old
				// expiry in the table. Were it to move the shared clock,
				// they would fall a visit behind their schedule and
				// bunch up with the sessions due after them (one more
				// run of adjacent sessions per replayed round), so it
				// reads a copy.
				cfg.Now = clock.copy().Now
			}
			m, err := ddbsession.New(cfg)
			if err != nil {
				return nil, err
			}
			return httpTarget(m.RequireSession(hello(m.User)), cookies, m.Wait), nil
		}, nil
	}
}

// loginAll signs in n new users through a Manager of cfg and returns
// their session cookies. beforeLogin, if not nil, runs before each.
func loginAll(ctx context.Context, e *env, cfg ddbsession.Config[User], n int, beforeLogin func(i int)) ([]*http.Cookie, error) {
	m, err := ddbsession.New(cfg)
	if err != nil {
		return nil, err
	}
	users, err := e.putUsers(ctx, n)
	if err != nil {
		return nil, err
	}
	cookies := make([]*http.Cookie, n)
	for i, u := range users {
		if beforeLogin != nil {
			beforeLogin(i)
		}
		w := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/login", nil)
		if err := m.Login(w, r, ddbsession.UserKey{PK: u.PK, SK: u.SK}, nil); err != nil {
			return nil, err
		}
		for _, c := range w.Result().Cookies() {
			if c.Name == "__Host-session" { // the default Config.Cookie.Name
				cookies[i] = &http.Cookie{Name: c.Name, Value: c.Value}
			}
		}
		if cookies[i] == nil {
			return nil, errors.New("login sent no session cookie")
		}
	}
	return cookies, nil
}

// refreshClock makes each of a variant's sessions due for a refresh on
// every k-th of its requests (k is every), as steady traffic does with a
// real clock, but within a run of seconds: it moves one second at every
// reading, and ddbsession reads it once per request.
//
// Requests go round the n sessions in turn, so a session is seen again n
// readings after its last request, and with a refresh interval of (k-1/2)*n
// seconds it is due on every k-th visit; the half visit of slack absorbs
// the jitter of concurrent requests. Sessions are created at times
// staggered so that session i is first due on its phase(i)-th visit: a k-th
// of the sessions on each visit, from the first round on. The phases are
// shuffled, not i mod k, so that the requests that refresh are spread among
// the others without a period: whether a request refreshes says nothing of
// whether the one before it did. With a period of k, the request just after
// each refresh, whose read meets that refresh's writes at the engine, would
// never be one that refreshes itself, and the refreshing requests would be
// timed more kindly than the others. A request that finds its session's last
// refresh still being written does not refresh again; the report counts
// those that did, which send the cookie. No session expires meanwhile:
// ddbsession's default IdleTimeout, a day, is far longer than k*n seconds.
type refreshClock struct {
	start           time.Time
	sessions, every int
	phases          []int        // by session: the visit on which it is first due
	now             atomic.Int64 // milliseconds after start
}

func newRefreshClock(sessions, every int) *refreshClock {
	c := &refreshClock{start: time.Now(), sessions: sessions, every: every}
	// A fixed seed: the same schedule on every run.
	for _, i := range rand.New(rand.NewPCG(1, uint64(every))).Perm(sessions) {
		c.phases = append(c.phases, i%every)
	}
	return c
}

// copy returns a clock that starts where c is and moves on its own.
func (c *refreshClock) copy() *refreshClock {
	d := &refreshClock{start: c.start, sessions: c.sessions, every: c.every, phases: c.phases}
	d.now.Store(c.now.Load())
	return d
}

func (c *refreshClock) Now() time.Time {
	return c.start.Add(time.Duration(c.now.Add(1000)) * time.Millisecond)
}

func (c *refreshClock) interval() time.Duration {
	return time.Duration(2*c.every-1) * time.Duration(c.sessions) * 500 * time.Millisecond
}

// firstVisit is when the first request after sign-in reads the clock.
func (c *refreshClock) firstVisit() int64 { return int64(c.every*c.sessions+1) * 1000 }

// beforeLogin sets the clock so that session i is created
// (k-1/2-phase(i))*n seconds before its first visit.
func (c *refreshClock) beforeLogin(i int) {
	created := c.firstVisit() + int64(i)*1000 - int64(2*c.every-1-2*c.phases[i])*int64(c.sessions)*500
	c.now.Store(created - 1000)
}

// signedIn sets the clock for the first visit.
func (c *refreshClock) signedIn() { c.now.Store(c.firstVisit() - 1000) }

// signInSCS sets up scs as its documentation does, with an idle timeout,
// so that every request commits the session, and the store that newStore
// makes: scs's own LoadAndSave, the session holding the user's key, and the
// app's handler reading the user item, which scs knows nothing of.
func signInSCS(newStore func(c ddbsession.Client, table string) (scs.Store, error)) func(ctx context.Context, e *env, n int) (builder, error) {
	return func(ctx context.Context, e *env, n int) (builder, error) {
		newManager := func(c ddbsession.Client) (*scs.SessionManager, error) {
			store, err := newStore(c, e.table)
			if err != nil {
				return nil, err
			}
			sm := scs.New()
			sm.Store = store
			sm.Lifetime = 30 * 24 * time.Hour // as ddbsession's AbsoluteLifetime
			sm.IdleTimeout = 24 * time.Hour   // as ddbsession's IdleTimeout
			return sm, nil
		}
		signer, err := newManager(e.client)
		if err != nil {
			return nil, err
		}
		users, err := e.putUsers(ctx, n)
		if err != nil {
			return nil, err
		}
		cookies := make([]*http.Cookie, n)
		for i, u := range users {
			sctx, err := signer.Load(ctx, "")
			if err != nil {
				return nil, err
			}
			signer.Put(sctx, "userPK", u.PK)
			signer.Put(sctx, "userSK", u.SK)
			token, _, err := signer.Commit(sctx)
			if err != nil {
				return nil, err
			}
			cookies[i] = &http.Cookie{Name: signer.Cookie.Name, Value: token}
		}
		return func(c ddbsession.Client) (*target, error) {
			sm, err := newManager(c)
			if err != nil {
				return nil, err
			}
			loadUser := func(ctx context.Context) (User, bool) {
				pk, sk := sm.GetString(ctx, "userPK"), sm.GetString(ctx, "userSK")
				if pk == "" {
					return User{}, false
				}
				out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
					TableName:      &e.table,
					Key:            userKey(pk, sk),
					ConsistentRead: aws.Bool(true),
				})
				var u User
				if err != nil || out.Item == nil || attributevalue.UnmarshalMap(out.Item, &u) != nil {
					return User{}, false
				}
				return u, true
			}
			return httpTarget(sm.LoadAndSave(hello(loadUser)), cookies, noWait), nil
		}, nil
	}
}

func userKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		tablePK: &types.AttributeValueMemberS{Value: pk},
		tableSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// userOfCookie returns the token of session cookie c and its user's key,
// which the session item names: the cookie's is sealed.
func userOfCookie(ctx context.Context, e *env, c *http.Cookie) (token, pk, sk string, err error) {
	cred, ok := item.Default.ParseCredential(c.Value)
	if !ok {
		return "", "", "", errors.New("not a credential")
	}
	key := item.Default.SessionKey(item.Default.SessionPK(cred.Token))
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		return "", "", "", fmt.Errorf("its session: %v", err)
	}
	s, err := item.Default.Decode(out.Item, item.KindSession)
	if err != nil {
		return "", "", "", fmt.Errorf("its session: %w", err)
	}
	return cred.Token, s.UserPK, s.UserSK, nil
}

// signInFloor signs users in with ddbsession and then reads the same two
// items a request needs with bare SDK calls, strongly consistent, and
// nothing else: no cookie, no decoding, no HTTP handler. It is the least a
// request that reads a session and its user can cost.
func signInFloor(batch bool) func(ctx context.Context, e *env, n int) (builder, error) {
	return func(ctx context.Context, e *env, n int) (builder, error) {
		cookies, err := loginAll(ctx, e, ddbsession.Config[User]{Client: e.client, Table: e.table, Logger: e.logger}, n, nil)
		if err != nil {
			return nil, err
		}
		type keys struct {
			session, user map[string]types.AttributeValue
		}
		items := make([]keys, n)
		for i, c := range cookies {
			token, pk, sk, err := userOfCookie(ctx, e, c)
			if err != nil {
				return nil, fmt.Errorf("floor: cookie %d: %w", i, err)
			}
			items[i] = keys{item.Default.SessionKey(item.Default.SessionPK(token)), userKey(pk, sk)}
		}
		return func(c ddbsession.Client) (*target, error) {
			serve := func(ctx context.Context, i int, _ *recorder) error {
				k := items[i%len(items)]
				for _, key := range []map[string]types.AttributeValue{k.session, k.user} {
					out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: key, ConsistentRead: aws.Bool(true)})
					if err != nil {
						return err
					}
					if out.Item == nil {
						return errors.New("floor: item not found")
					}
				}
				return nil
			}
			if batch {
				serve = func(ctx context.Context, i int, _ *recorder) error {
					k := items[i%len(items)]
					out, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
						RequestItems: map[string]types.KeysAndAttributes{e.table: {
							Keys:           []map[string]types.AttributeValue{k.session, k.user},
							ConsistentRead: aws.Bool(true),
						}},
					})
					if err != nil {
						return err
					}
					if len(out.Responses[e.table]) != 2 {
						return fmt.Errorf("floor: %d items read, want 2", len(out.Responses[e.table]))
					}
					return nil
				}
			}
			return &target{serve: serve, wait: noWait}, nil
		}, nil
	}
}

// recorder is a reusable http.ResponseWriter, one per worker, so that the
// harness allocates nothing per request itself.
type recorder struct {
	header http.Header
	code   int
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (w *recorder) reset() {
	clear(w.header)
	w.code = 0
}

func (w *recorder) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// setCookie reports whether the response sent a cookie: a refresh, or a
// commit that re-sends it.
func (w *recorder) setCookie() bool { return len(w.header["Set-Cookie"]) > 0 }
