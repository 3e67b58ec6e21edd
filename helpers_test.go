package ddbsession_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestMain runs the tests against the test engine, then checks that they
// left no goroutine behind: refresh writes run off the request path and
// must all have ended. The HTTP client's idle keep-alive connections are
// not the library's.
func TestMain(m *testing.M) {
	code := ddbtest.Main(m)
	if cli.path != "" {
		os.RemoveAll(filepath.Dir(cli.path)) // buildCLI's directory
	}
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// User is the app's user type in these tests, decoded from its item.
type User struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// syncBuffer collects log output from concurrent requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Reset forgets what was written.
func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is one test's manager, on a table of its own, with a fake clock and
// captured logs.
type env struct {
	t      testing.TB
	client *dynamodb.Client
	table  string
	clock  *ddbtest.Clock
	logs   *syncBuffer
	cfg    ddbsession.Config[User]
	m      *ddbsession.Manager[User]
}

// start is the fake clock's starting time: a fixed, recent instant with a
// sub-second part, so that second and millisecond rounding both show.
var start = time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)

// newEnv creates a table for t and a Manager on it. Each mutate that is not
// nil adjusts the config, in order, before New validates it.
func newEnv(t testing.TB, mutate ...func(*ddbsession.Config[User])) *env {
	t.Helper()
	client := ddbtest.Client(t)
	e := &env{t: t, client: client, table: ddbtest.TableName(t, client), clock: ddbtest.NewClock(start), logs: &syncBuffer{}}
	e.cfg = ddbsession.Config[User]{
		Client: client,
		Table:  e.table,
		Limits: ddbsession.Limits{
			IdleTimeout:     time.Hour,
			RefreshInterval: 10 * time.Minute,
			// A call that a busy test machine delays past the 2s default is
			// no store fault; tests of the bound set a short StoreTimeout of
			// their own, and TestFaultMatrix proves it.
			StoreTimeout: time.Minute,
		},
		Now:    e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range mutate {
		if f != nil {
			f(&e.cfg)
		}
	}
	m, err := ddbsession.New(e.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.m = m
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return e
}

// primed returns a Manager of cfg that has read the table's global
// revocation generation, as CreateTable and CheckTable make it read at an
// app's start: without, its first request reads it too, with its session.
func primed[U any](t testing.TB, cfg ddbsession.Config[U]) *ddbsession.Manager[U] {
	t.Helper()
	m, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(context.Background()); err != nil { // the table exists: it checks it
		t.Fatal(err)
	}
	return m
}

// Config options and injected faults.

// withProbe installs a probe in front of the engine and stores it in *p.
func withProbe(p **ddbtest.Probe) func(*ddbsession.Config[User]) {
	return func(c *ddbsession.Config[User]) {
		engine, _ := c.Client.(ddbtest.Engine) // nil for nil: a probe never called
		*p = ddbtest.NewProbe(engine)
		c.Client = *p
	}
}

func withExpiryIndex(c *ddbsession.Config[User]) { c.Layout.ExpiryIndex = "expiry" }

// failOn makes the probe answer op with err, and leaves the rest alone.
func failOn(p *ddbtest.Probe, op string, err error) {
	p.Fail = func(_ context.Context, o string, _ any) error {
		if o == op {
			return err
		}
		return nil
	}
}

// failNth makes the probe answer the nth call of op from now on with err,
// and lets every other call through: a fault in the middle of a flow, such
// as the second of Login's two PutItems.
func failNth(p *ddbtest.Probe, op string, n int, err error) {
	var mu sync.Mutex
	seen := 0
	p.Fail = func(_ context.Context, o string, _ any) error {
		if o != op {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen == n {
			return err
		}
		return nil
	}
}

// Items written behind the Manager's back: the app's users, hand-made
// sessions, and deletions as TTL makes them.

// putUser writes a user item for name under the usual key, USER#<name>
// and PROFILE (no sort key in a hash-only table), and returns the key.
func (e *env) putUser(name string) ddbsession.UserKey {
	e.t.Helper()
	key := ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
	if e.cfg.Layout.HashOnly {
		key.SK = ""
	}
	e.putUserAt(key, name)
	return key
}

// putUserAt writes a user item for name under an arbitrary key, as an
// app that writes its own user items does (docs/item-format.md#user-items):
// with a random sessions version.
func (e *env) putUserAt(key ddbsession.UserKey, name string) {
	e.t.Helper()
	user := map[string]types.AttributeValue{"pk": attrS(key.PK), "name": attrS(name), e.versionAttribute(): newVersion()}
	if key.SK != "" {
		user["sk"] = attrS(key.SK)
	}
	e.putItem(user)
}

// putUnversionedUser writes a user item for name without a sessions
// version, as an app that does not follow docs/item-format.md#user-items
// does, and returns its key.
func (e *env) putUnversionedUser(name string) ddbsession.UserKey {
	e.t.Helper()
	key := e.putUser(name)
	e.putItem(map[string]types.AttributeValue{"pk": attrS(key.PK), "sk": attrS(key.SK), "name": attrS(name)})
	return key
}

// versionAttribute is the user items' sessions version attribute.
func (e *env) versionAttribute() string {
	if v := e.cfg.Layout.VersionAttribute; v != "" {
		return v
	}
	return "sessionsVersion"
}

// newVersion is a first sessions version, as an app writes one: random and
// non-zero.
func newVersion() types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(1+rand.Int64N(1<<62), 10)}
}

// putItem writes a raw item, behind the Manager's back.
func (e *env) putItem(item map[string]types.AttributeValue) {
	e.t.Helper()
	if _, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.table, Item: item}); err != nil {
		e.t.Fatalf("PutItem: %v", err)
	}
}

// deleteItem deletes the item under key behind the Manager's back, as TTL
// does.
func (e *env) deleteItem(key map[string]types.AttributeValue) {
	e.t.Helper()
	if _, err := e.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.table, Key: key}); err != nil {
		e.t.Fatalf("DeleteItem: %v", err)
	}
}

// Requests.

// cookieName is the session cookie's name under the default Config.
const cookieName = "__Host-session"

// testAgent is the User-Agent that e.login sends.
const testAgent = "test-agent/1.0"

// testAddr is the client address of httptest's requests, as sessions
// record it.
const testAddr = "192.0.2.1"

// login signs key in through Login, carrying cookies from an earlier
// response if given, and returns the new session cookie.
func (e *env) login(key ddbsession.UserKey, carried ...*http.Cookie) *http.Cookie {
	e.t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "https://example.test/login", nil)
	r.Header.Set("User-Agent", testAgent)
	for _, c := range carried {
		r.AddCookie(c)
	}
	if err := e.m.Login(w, r, key, nil); err != nil {
		e.t.Fatalf("Login: %v", err)
	}
	c := sessionCookie(e.t, w.Result(), cookieName)
	if c == nil || c.Value == "" {
		e.t.Fatalf("Login set no session cookie; headers %v", w.Header())
	}
	return c
}

// get sends a GET through h with the given cookies.
func (e *env) get(h http.Handler, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest("GET", "https://example.test/", nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	e.settle()
	return w
}

// settle waits for the env Manager's refresh writes, which run off the
// request path, so that a test sees the table as the request left it.
func (e *env) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.m.Wait(ctx); err != nil {
		e.t.Errorf("refresh writes still pending: %v", err)
	}
}

// status returns the status of a request through RequireSession with c.
func (e *env) status(c *http.Cookie) int {
	e.t.Helper()
	return e.get(e.m.RequireSession(whoami(e.m)), c).Code
}

// inRequest runs one request carrying c through RequireSession and calls fn
// inside the handler with the request's context. It fails unless the request
// got through.
func (e *env) inRequest(c *http.Cookie, fn func(ctx context.Context)) {
	e.t.Helper()
	called := false
	h := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		fn(r.Context())
	}))
	if w := e.get(h, c); w.Code != http.StatusOK || !called {
		e.t.Fatalf("request with the session cookie: status %d, handler called %v", w.Code, called)
	}
}

// whoami is a protected handler that reports the user in its context.
func whoami(m *ddbsession.Manager[User]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := m.User(r.Context())
		if !ok {
			http.Error(w, "anonymous", http.StatusOK)
			return
		}
		w.Write([]byte("user:" + u.Name))
	})
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// newRequest returns a POST carrying the given cookies.
func newRequest(cookies ...*http.Cookie) *http.Request {
	r := httptest.NewRequest("POST", "https://example.test/", nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return r
}

// sessionCookie returns the response's Set-Cookie for name, or nil.
func sessionCookie(t testing.TB, res *http.Response, name string) *http.Cookie {
	t.Helper()
	var found *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == name {
			if found != nil {
				t.Fatalf("response sets cookie %q twice", name)
			}
			found = c
		}
	}
	return found
}

// assertPersonal checks that a response which sets or clears the cookie
// cannot be cached or served to another cookie.
func assertPersonal(t *testing.T, h http.Header) {
	t.Helper()
	if got := h.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	if got := h.Values("Vary"); !cmp.Equal(got, []string{"Cookie"}) {
		t.Errorf("Vary = %q, want [Cookie]", got)
	}
}

// Sessions as the package API shows them.

// sessionFor returns the session behind cookie c without refreshing it.
func (e *env) sessionFor(c *http.Cookie) ddbsession.Session {
	e.t.Helper()
	s, _, err := e.m.Authenticate(context.Background(), c.Value)
	if err != nil {
		e.t.Fatalf("Authenticate: %v", err)
	}
	return s
}

// loggedIn is the session that e.login creates at time at, as the package
// documents it: createdAt and refreshedAt in milliseconds, expiry in whole
// seconds idle after the login.
func loggedIn(id string, user ddbsession.UserKey, at time.Time, idle time.Duration) ddbsession.Session {
	ms := time.UnixMilli(at.UnixMilli())
	return ddbsession.Session{
		ID:          id,
		User:        user,
		CreatedAt:   ms,
		RefreshedAt: ms,
		ExpiresAt:   time.Unix(at.Add(idle).Unix(), 0),
		UserAgent:   testAgent,
		Address:     testAddr,
		LastAddress: testAddr,

		AuthenticatedAt: ms,
	}
}

// listIn calls List for user inside a request that carries c, so that the
// session of c is the current one.
func (e *env) listIn(c *http.Cookie, user ddbsession.UserKey) []ddbsession.Session {
	e.t.Helper()
	var (
		list []ddbsession.Session
		err  error
	)
	e.inRequest(c, func(ctx context.Context) { list, err = e.m.List(ctx, user) })
	if err != nil {
		e.t.Fatalf("List(%+v): %v", user, err)
	}
	return list
}

// mustList calls List for user outside any request.
func (e *env) mustList(user ddbsession.UserKey) []ddbsession.Session {
	e.t.Helper()
	list, err := e.m.List(context.Background(), user)
	if err != nil {
		e.t.Fatalf("List(%+v): %v", user, err)
	}
	return list
}

// current is s as List shows the session of the request it serves.
func current(s ddbsession.Session) ddbsession.Session {
	s.Current = true
	return s
}

// listIDs returns the IDs of a list, in its order.
func listIDs(list []ddbsession.Session) []string {
	ids := []string{}
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

// Raw items, in the documented item format.

// The documented formats of a token, a public session ID and an expiry
// bucket ("<yyyymmddhh>#<shard>").
const tokenLen = 26

var (
	tokenFormat        = regexp.MustCompile(`^[A-Z2-7]{26}$`)
	sessionIDFormat    = regexp.MustCompile(`^[0-9a-f]{32}$`)
	expiryBucketFormat = regexp.MustCompile(`^([0-9]{10})#([0-9]+)$`)
)

// wellFormedCookie is the documented shape of a session cookie's value, in
// a table with a sort key: the token alone, the token followed by
// "~<b64(sealed user key)>" (unpadded base64url of 34 to 1082 bytes), or
// by ".<b64(userPK)>.<b64(userSK)>" (unpadded base64url of non-empty UTF-8,
// at most 1024 bytes together, the partition key not under a session or
// index prefix).
func wellFormedCookie(v string) bool {
	if token, sealed, ok := strings.Cut(v, "~"); ok {
		b, err := base64.RawURLEncoding.Strict().DecodeString(sealed)
		return tokenFormat.MatchString(token) && err == nil && len(b) >= 34 && len(b) <= 1082 && !strings.ContainsAny(sealed, "\r\n")
	}
	token, user, withUser := strings.Cut(v, ".")
	if !tokenFormat.MatchString(token) {
		return false
	}
	if !withUser {
		return true
	}
	parts := strings.Split(user, ".")
	if len(parts) != 2 {
		return false
	}
	var key []string
	for _, part := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(part)
		if err != nil || len(b) == 0 || !utf8.Valid(b) {
			return false
		}
		key = append(key, string(b))
	}
	return len(key[0])+len(key[1]) <= 1024 &&
		!strings.HasPrefix(key[0], "SESSION#") && !strings.HasPrefix(key[0], "USERSESSIONS#")
}

// The documented values of the kind attribute.
const (
	kindSession = "session"
	kindIndex   = "session-index"
)

func attrS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func attrN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// attrText renders an attribute value as "S:value" or "N:value".
func attrText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	}
	return fmt.Sprintf("%T", v)
}

// itemText renders a raw item as its attributes, sorted by name, for
// failure messages and for comparing items.
func itemText(item map[string]types.AttributeValue) string {
	var attrs []string
	for name, v := range item {
		attrs = append(attrs, name+"="+attrText(v))
	}
	slices.Sort(attrs)
	return "{" + strings.Join(attrs, " ") + "}"
}

// itemsText renders raw items with itemText, sorted, so that two scans of
// the same table compare equal.
func itemsText(items []map[string]types.AttributeValue) []string {
	texts := []string{}
	for _, item := range items {
		texts = append(texts, itemText(item))
	}
	slices.Sort(texts)
	return texts
}

// tokenHash is base64url(SHA-256(token)), the documented table key of a
// session without its prefix.
func tokenHash(cookieValue string) string {
	token := cookieValue[:26] // the documented credential: the token comes first
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// sessionItemKey is the documented primary key of token's session item.
func sessionItemKey(token string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": attrS("SESSION#" + tokenHash(token)), "sk": attrS("SESSION")}
}

// endItemKey is the primary key of the end record (MREC) of the session
// of token, in a table with the default layout.
func endItemKey(token string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": attrS("SESSION#" + tokenHash(token)), "sk": attrS("ENDED")}
}

// userItemKey is the primary key of the user item under key, in a table
// with the default key names and a sort key.
func userItemKey(key ddbsession.UserKey) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": attrS(key.PK), "sk": attrS(key.SK)}
}

// scanAll returns every item in the env's table but its layout record,
// which CreateTable wrote when the env began, and the users' histories
// and devices, which history_test.go and devices_test.go read.
func (e *env) scanAll() []map[string]types.AttributeValue {
	e.t.Helper()
	return slices.DeleteFunc(e.scanWithHistory(), func(av map[string]types.AttributeValue) bool {
		k := attrText(av["kind"])
		return k == "S:session-history" || k == "S:session-device"
	})
}

// scanWithHistory is scanAll with the users' histories.
func (e *env) scanWithHistory() []map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatalf("scan: %v", err)
	}
	return slices.DeleteFunc(out.Items, func(av map[string]types.AttributeValue) bool {
		k, _ := av["kind"].(*types.AttributeValueMemberS)
		return k != nil && k.Value == "ddbsession-layout"
	})
}

// itemsWithSID returns the raw items that carry session ID id.
func itemsWithSID(items []map[string]types.AttributeValue, id string) []map[string]types.AttributeValue {
	var found []map[string]types.AttributeValue
	for _, item := range items {
		if s, ok := item["sid"].(*types.AttributeValueMemberS); ok && s.Value == id {
			found = append(found, item)
		}
	}
	return found
}

// itemsOf returns the table's raw items of kind (kindSession or kindIndex):
// all of them, or those of session id if id is not empty.
func (e *env) itemsOf(kind, id string) []map[string]types.AttributeValue {
	e.t.Helper()
	items := e.scanAll()
	if id != "" {
		items = itemsWithSID(items, id)
	}
	var found []map[string]types.AttributeValue
	for _, item := range items {
		if attrText(item["kind"]) == "S:"+kind {
			found = append(found, item)
		}
	}
	return found
}

// itemOf returns the one raw item of kind of session id, or the table's
// only item of kind if id is empty, and fails unless there is exactly one.
func (e *env) itemOf(kind, id string) map[string]types.AttributeValue {
	e.t.Helper()
	found := e.itemsOf(kind, id)
	if len(found) != 1 {
		e.t.Fatalf("%d items of kind %q with sid %q, want 1: %v", len(found), kind, id, itemsText(found))
	}
	return found[0]
}

// itemExpiry returns a raw item's expiresAt, and fails unless it is a
// Number of epoch seconds.
func itemExpiry(t testing.TB, item map[string]types.AttributeValue) time.Time {
	t.Helper()
	n, ok := item["expiresAt"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("expiresAt is %T, want a Number", item["expiresAt"])
	}
	sec, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatalf("expiresAt %q: %v", n.Value, err)
	}
	return time.Unix(sec, 0)
}

// bucketParts splits a session item's expiryBucket into its hour and shard,
// and fails unless it has the documented format.
func bucketParts(t testing.TB, item map[string]types.AttributeValue) (hour string, shard int) {
	t.Helper()
	b, ok := item["expiryBucket"].(*types.AttributeValueMemberS)
	if !ok {
		t.Fatalf("expiryBucket is %T, want a String", item["expiryBucket"])
	}
	m := expiryBucketFormat.FindStringSubmatch(b.Value)
	if m == nil {
		t.Fatalf("expiryBucket %q is not <yyyymmddhh>#<shard>", b.Value)
	}
	shard, _ = strconv.Atoi(m[2])
	return m[1], shard
}

// updateKey returns the partition key an UpdateItem input addresses.
func updateKey(in any) string {
	s, _ := in.(*dynamodb.UpdateItemInput).Key["pk"].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

func ptr[T any](v T) *T { return &v }

// needsSortKey reports whether err is List's or Revoke's refusal in a
// hash-only table, which says what it needs.
func needsSortKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "need a table with a sort key")
}

// errLost is the error of an applied write whose answer was lost.
var errLost = errors.New("InternalServerError: the answer was lost")

// loseAnswer makes the probe lose the answer of the calls of op that match
// says, once the engine has applied them: for the n-th matching call only,
// or every one for n 0. It returns how many it lost so far.
func loseAnswer(p *ddbtest.Probe, op string, n int, match func(in any) bool) func() int {
	return answerApplied(p, op, n, match, errLost)
}

// answerApplied is loseAnswer with the answer the caller gets instead:
// errLost, or ConditionalCheckFailed where the SDK's retry of a lost
// answer meets its own write.
func answerApplied(p *ddbtest.Probe, op string, n int, match func(in any) bool, answer error) func() int {
	var mu sync.Mutex
	seen, lost := 0, 0
	p.After = func(_ context.Context, o string, in, _ any, err error) error {
		if o != op || err != nil || (match != nil && !match(in)) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; n != 0 && seen != n {
			return nil
		}
		lost++
		return answer
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return lost
	}
}

// unprocessedKeys makes the probe answer BatchGetItems with all their keys
// unprocessed, as DynamoDB may under throttling: the next one only, if
// once, or every one.
func unprocessedKeys(p *ddbtest.Probe, once bool) {
	var done atomic.Bool
	p.Answer = func(_ context.Context, op string, in any) (any, bool) {
		if op != "BatchGetItem" || (once && !done.CompareAndSwap(false, true)) {
			return nil, false
		}
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.(*dynamodb.BatchGetItemInput).RequestItems}, true
	}
}

// queriesRead makes the probe add up the items that Queries read
// (ScannedCount, which is what DynamoDB bills), before any filter. The
// function it returns gives the items and Queries since its last call.
func queriesRead(p *ddbtest.Probe) func() (items int32, queries int) {
	var (
		mu      sync.Mutex
		scanned int32
		n       int
	)
	p.After = func(_ context.Context, op string, _, out any, err error) error {
		if op == "Query" && err == nil {
			mu.Lock()
			scanned += out.(*dynamodb.QueryOutput).ScannedCount
			n++
			mu.Unlock()
		}
		return nil
	}
	return func() (int32, int) {
		mu.Lock()
		defer mu.Unlock()
		items, queries := scanned, n
		scanned, n = 0, 0
		return items, queries
	}
}

// Device binding's races, made deterministic: the probe pauses one side
// just before a write reaches the engine and runs the other side to the
// end there, so that the paused write meets the table the other left.

// pauseBefore runs other, once, when the first UpdateItem of an item whose
// partition key starts with prefix is about to reach the engine.
func pauseBefore(p *ddbtest.Probe, prefix string, other func()) *atomic.Bool {
	var fired atomic.Bool
	p.Before = func(_ context.Context, op string, in any) {
		if op == "UpdateItem" && strings.HasPrefix(updateKey(in), prefix) && fired.CompareAndSwap(false, true) {
			other()
		}
	}
	return &fired
}
