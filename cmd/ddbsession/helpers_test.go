package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// testUser is the app's user item in the tests.
type testUser struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// fixture is a table that a test prepares with the library, and the
// command run against it in-process.
type fixture struct {
	t      *testing.T
	engine *dynamodb.Client
	probe  *ddbtest.Probe // the client the command gets
	table  string
	app    *ddbsession.Manager[testUser]
	layout ddbsession.Layout // the app's

	// What the command's env gets.
	stdin    string
	terminal bool
	clock    *sleeper          // nil: the real clock
	environ  map[string]string // the environment's variables
}

// newFixture creates a table with the library's CreateTable and a Manager
// on it.
func newFixture(t *testing.T, mutate ...func(*ddbsession.Config[testUser])) *fixture {
	t.Helper()
	engine := ddbtest.Client(t)
	f := &fixture{t: t, engine: engine, table: ddbtest.TableName(t, engine)}
	f.probe = ddbtest.NewProbe(engine)
	cfg := ddbsession.Config[testUser]{Client: engine, Table: f.table, Limits: ddbsession.Limits{StoreTimeout: time.Minute}, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mutate {
		m(&cfg)
	}
	app, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.app, f.layout = app, cfg.Layout
	if err := app.CreateTable(context.Background()); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return f
}

// run runs the command with args and -table, and returns its exit code,
// stdout and stderr.
func (f *fixture) run(args ...string) (int, string, string) {
	f.t.Helper()
	return f.runBare(append(args, "-table", f.table)...)
}

// runBare runs the command with args alone.
func (f *fixture) runBare(args ...string) (int, string, string) {
	f.t.Helper()
	var stdout, stderr bytes.Buffer
	stdin := strings.NewReader(f.stdin)
	e := newEnv(stdin, &stdout, &stderr)
	e.isTerminal = func(s any) bool { return f.terminal && (s == stdin || s == &stderr || s == &stdout) }
	if f.clock != nil {
		e.now, e.sleep = f.clock.Now, f.clock.sleep
	}
	e.connect = func(context.Context, *options) (Client, error) { return f.probe, nil }
	e.getenv = func(key string) string { return f.environ[key] }
	code := e.run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

// wantCode fails the test unless code is want, showing the output.
func wantCode(t *testing.T, code, want int, stdout, stderr string) {
	t.Helper()
	if code != want {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
}

// decode decodes the command's JSON output into v, strictly.
func decode(t *testing.T, stdout string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode the JSON output: %v\n%s", err, stdout)
	}
}

// user creates a user item for name and returns its key.
func (f *fixture) user(name string) ddbsession.UserKey {
	f.t.Helper()
	key := ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
	if err := f.app.CreateUser(context.Background(), testUser{PK: key.PK, SK: key.SK, Name: name}); err != nil {
		f.t.Fatalf("CreateUser %s: %v", name, err)
	}
	return key
}

// login signs user in from a browser of agent, having proved themselves
// by methods, and returns the cookie.
func (f *fixture) login(user ddbsession.UserKey, agent string, methods ...string) *http.Cookie {
	f.t.Helper()
	return f.loginOn(f.app, user, agent, methods...)
}

// loginOn is login on the app's instance m.
func (f *fixture) loginOn(m *ddbsession.Manager[testUser], user ddbsession.UserKey, agent string, methods ...string) *http.Cookie {
	f.t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "https://app.test/login", nil)
	r.Header.Set("User-Agent", agent)
	if err := m.Login(w, r, user, nil, methods...); err != nil {
		f.t.Fatalf("Login: %v", err)
	}
	for _, c := range w.Result().Cookies() {
		if c.Value != "" {
			return c
		}
	}
	f.t.Fatal("Login set no cookie")
	return nil
}

// beginLogin starts a two-step login of user, as the app's first step
// does, which leaves a pending session item (version 3) and no index item,
// and returns the pending cookie.
func (f *fixture) beginLogin(user ddbsession.UserKey) *http.Cookie {
	f.t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "https://app.test/login", nil)
	r.Header.Set("User-Agent", firefox)
	if err := f.app.BeginLogin(w, r, user, nil, "password"); err != nil {
		f.t.Fatalf("BeginLogin: %v", err)
	}
	for _, c := range w.Result().Cookies() {
		if c.Value != "" {
			return c
		}
	}
	f.t.Fatal("BeginLogin set no cookie")
	return nil
}

// failSecondFactor makes one try of the pending login of cookie whose
// second factor is wrong, which leaves the try's record.
func (f *fixture) failSecondFactor(pending *http.Cookie) {
	f.t.Helper()
	r := httptest.NewRequest("POST", "https://app.test/login/otp", nil)
	r.AddCookie(pending)
	wrong := errors.New("wrong code")
	if err := f.app.CompleteLogin(httptest.NewRecorder(), r, func(testUser) error { return wrong }, "otp"); !errors.Is(err, wrong) {
		f.t.Fatalf("CompleteLogin with a wrong code: %v, want the verifier's error", err)
	}
}

// valid reports whether the cookie's session is accepted, by a Manager of
// the app that starts afresh (and so reads the global generation anew).
func (f *fixture) valid(c *http.Cookie) bool {
	f.t.Helper()
	_, _, err := f.instance().Authenticate(context.Background(), c.Value)
	switch {
	case errors.Is(err, ddbsession.ErrNoSession):
		return false
	case err != nil:
		f.t.Fatalf("Authenticate: %v", err)
	}
	return true
}

// instance starts another instance of the app, which has read nothing yet.
func (f *fixture) instance() *ddbsession.Manager[testUser] {
	f.t.Helper()
	m, err := ddbsession.New(ddbsession.Config[testUser]{Client: f.engine, Table: f.table, Layout: f.layout, Limits: ddbsession.Limits{StoreTimeout: time.Minute}})
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// put writes av to the table as it is.
func (f *fixture) put(av map[string]types.AttributeValue) {
	f.t.Helper()
	if _, err := f.engine.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &f.table, Item: av}); err != nil {
		f.t.Fatalf("PutItem: %v", err)
	}
}

// delete deletes the item under key.
func (f *fixture) delete(key map[string]types.AttributeValue) {
	f.t.Helper()
	if _, err := f.engine.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &f.table, Key: key}); err != nil {
		f.t.Fatalf("DeleteItem: %v", err)
	}
}

// item reads the item under key, strongly consistently; nil if none.
func (f *fixture) item(key map[string]types.AttributeValue) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.engine.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &f.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		f.t.Fatalf("GetItem: %v", err)
	}
	return out.Item
}

// keys returns the keys of every item in the table, as "pk|sk", sorted.
func (f *fixture) keys() []string {
	f.t.Helper()
	var keys []string
	pages := dynamodb.NewScanPaginator(f.engine, &dynamodb.ScanInput{TableName: &f.table, ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			f.t.Fatalf("Scan: %v", err)
		}
		for _, av := range page.Items {
			keys = append(keys, keyString(av))
		}
	}
	slices.Sort(keys)
	return keys
}

func keyString(av map[string]types.AttributeValue) string {
	pk, _ := av["pk"].(*types.AttributeValueMemberS)
	sk, _ := av["sk"].(*types.AttributeValueMemberS)
	s := ""
	if pk != nil {
		s = pk.Value
	}
	if sk != nil {
		s += "|" + sk.Value
	}
	return s
}

// layout is the tests' layout: the default.
var layout = func() item.Layout {
	l, err := item.Layout{}.WithDefaults()
	if err != nil {
		panic(err)
	}
	return l
}()

// expiredSession writes, through the library's encoder, a session of user
// that expired at expires, with its index item, and returns their keys.
func (f *fixture) expiredSession(user ddbsession.UserKey, expires time.Time, agent string) []string {
	f.t.Helper()
	created := expires.Add(-24 * time.Hour).Truncate(time.Millisecond)
	s := item.Session{
		ID: item.NewID(created), UserPK: user.PK, UserSK: user.SK,
		CreatedAt: created, RefreshedAt: created, AuthAt: created, ExpiresAt: time.Unix(expires.Unix(), 0), UserAgent: agent,
	}
	pk := layout.SessionPK(item.NewToken())
	session, index := layout.EncodeSession(pk, s), layout.EncodeIndex(pk, s)
	f.put(session)
	f.put(index)
	return []string{keyString(session), keyString(index)}
}

// legacySession writes a session of user in release v0.1.0's format,
// which copied the version gen and the global generation 0, with its index
// item, and returns its cookie.
func (f *fixture) legacySession(user ddbsession.UserKey, gen int64) *http.Cookie {
	f.t.Helper()
	now := time.Now().Truncate(time.Millisecond)
	s := item.Session{
		ID: item.NewID(now), UserPK: user.PK, UserSK: user.SK, CreatedAt: now, RefreshedAt: now, AuthAt: now,
		ExpiresAt: time.Unix(now.Add(time.Hour).Unix(), 0), UserAgent: "v0.1.0", Stamp: item.Stamp{Revocation: gen}, Legacy: true,
	}
	token := item.NewToken()
	pk := layout.SessionPK(token)
	f.put(layout.EncodeSession(pk, s))
	f.put(layout.EncodeIndex(pk, s))
	return &http.Cookie{Name: "session", Value: layout.Credential(token, user.PK, user.SK, true, new(item.CookieKeys))}
}

// The client the command gets is a ddbtest.Probe before the engine; the
// helpers below give it what an engine other than the test's has, or
// record what the engine answers.

// withoutTTL makes p an engine without TTL, whatever the engine has:
// UpdateTimeToLive is an UnknownOperationException, and DescribeTimeToLive
// says DISABLED, as dynalite answers them.
func withoutTTL(p *ddbtest.Probe) *ddbtest.Probe {
	p.Fail = func(_ context.Context, op string, _ any) error {
		if op != "UpdateTimeToLive" {
			return nil
		}
		return &smithy.OperationError{ServiceID: dynamodb.ServiceID, OperationName: "UpdateTimeToLive",
			Err: &smithy.GenericAPIError{Code: "UnknownOperationException", Fault: smithy.FaultClient}}
	}
	answerTTL(p, &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled})
	return p
}

// answerTTL makes ttl every DescribeTimeToLive's answer: DynamoDB's, for
// a table the engine cannot make (a global table's).
func answerTTL(p *ddbtest.Probe, ttl *types.TimeToLiveDescription) {
	p.Answer = func(_ context.Context, op string, _ any) (any, bool) {
		if op != "DescribeTimeToLive" {
			return nil, false
		}
		return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: ttl}, true
	}
}

// describeAs runs describe on the description of each DescribeTable's
// answer, which it may change: a table the engine cannot make.
func describeAs(p *ddbtest.Probe, describe func(*types.TableDescription)) {
	p.After = func(_ context.Context, op string, _, out any, err error) error {
		if op == "DescribeTable" && err == nil {
			describe(out.(*dynamodb.DescribeTableOutput).Table)
		}
		return nil
	}
}

// reportedUnits are the capacity units the engine reported for each
// DeleteItem and each Scan page through a probe, which the command paces
// itself on.
type reportedUnits struct {
	mu      sync.Mutex
	deleted []float64 // each DeleteItem's reported write units
	scanned []float64 // each Scan page's reported read units
}

// recordUnits records the units that p's engine reports. With bill, each
// DeleteItem reports the write units DynamoDB bills for it, from the
// deleted item's size, in place of the engine's figure: for engines that
// report a fixed one (moto).
func recordUnits(p *ddbtest.Probe, bill bool) *reportedUnits {
	u := &reportedUnits{}
	var sizes sync.Map // a DeleteItem's input: the size of the item it deletes
	if bill {
		p.Before = func(ctx context.Context, _ string, in any) {
			if del, ok := in.(*dynamodb.DeleteItemInput); ok {
				sizes.Store(del, itemSize(ctx, p.Engine(), del.TableName, del.Key))
			}
		}
	}
	p.After = func(_ context.Context, _ string, in, out any, err error) error {
		if err != nil {
			return nil
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		switch out := out.(type) {
		case *dynamodb.DeleteItemOutput:
			size, billed := sizes.LoadAndDelete(in)
			if out.ConsumedCapacity != nil && billed {
				out.ConsumedCapacity.CapacityUnits = aws.Float64(writeUnits(size.(int)))
			}
			if out.ConsumedCapacity != nil {
				u.deleted = append(u.deleted, aws.ToFloat64(out.ConsumedCapacity.CapacityUnits))
			}
		case *dynamodb.ScanOutput:
			if out.ConsumedCapacity != nil {
				u.scanned = append(u.scanned, aws.ToFloat64(out.ConsumedCapacity.CapacityUnits))
			}
		}
		return nil
	}
	return u
}

func (u *reportedUnits) deletes() []float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.deleted)
}

func (u *reportedUnits) scans() []float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.scanned)
}

// itemSize is the size of the item under key as DynamoDB counts it, read
// strongly consistently past the probe, uncounted; 0 if there is none.
func itemSize(ctx context.Context, engine ddbtest.Engine, table *string, key map[string]types.AttributeValue) int {
	out, err := engine.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0
	}
	return ddbtest.ItemSize(out.Item)
}

// writeUnits is what DynamoDB bills a write of an item of size bytes: a
// unit per KB, rounded up, and at least one, a delete of nothing included
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).
func writeUnits(size int) float64 { return max(1, math.Ceil(float64(size)/1024)) }

// billsBySize reports whether the engine reports the write units of a
// write as DynamoDB bills them, by the item's size, and not a fixed
// figure per call (moto reports 1 for any). It measures a known write on
// f's table, and removes what it wrote: a put and a delete of an item of
// 1.5 KB, which DynamoDB bills 2 units each.
func (f *fixture) billsBySize() bool {
	f.t.Helper()
	ctx := context.Background()
	key := layout.Key("PROBE#capacity", "PROBE")
	av := maps.Clone(key)
	av["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", 1536-ddbtest.ItemSize(key)-len("pad"))}
	if size := ddbtest.ItemSize(av); size != 1536 {
		f.t.Fatalf("the probe's item is %d bytes, want 1536", size)
	}
	put, err := f.engine.PutItem(ctx, &dynamodb.PutItemInput{TableName: &f.table, Item: av, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		f.t.Fatal(err)
	}
	del, err := f.engine.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &f.table, Key: key, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		f.t.Fatal(err)
	}
	units := func(cc *types.ConsumedCapacity) float64 {
		if cc == nil {
			return 0
		}
		return aws.ToFloat64(cc.CapacityUnits)
	}
	f.t.Logf("the engine reports %v units for a put of 1.5 KB, %v for its delete; DynamoDB bills 2 and 2", units(put.ConsumedCapacity), units(del.ConsumedCapacity))
	return units(put.ConsumedCapacity) == 2 && units(del.ConsumedCapacity) == 2
}

// engineHasTTL reports whether the engine implements UpdateTimeToLive
// itself (moto does, dynalite not).
func engineHasTTL(t *testing.T) bool {
	t.Helper()
	supported, err := ddbtest.SupportsTTL(context.Background(), ddbtest.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	return supported
}

// sleeper is the command's sleep in tests, on a ddbtest.Clock: each sleep
// moves the clock on by its length at once, and is recorded.
type sleeper struct {
	*ddbtest.Clock

	mu     sync.Mutex
	sleeps []time.Duration
}

func newSleeper(t time.Time) *sleeper { return &sleeper{Clock: ddbtest.NewClock(t)} }

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sleeps = append(s.sleeps, d)
	s.Advance(d)
	return ctx.Err()
}

func (s *sleeper) slept() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sleeps)
}
