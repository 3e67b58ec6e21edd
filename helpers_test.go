package ddbsession_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// User is the app's user type in these tests, decoded from its item.
type User struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// clock is an injected, manually advanced time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
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
	clock  *clock
	logs   *syncBuffer
	cfg    ddbsession.Config[User]
	m      *ddbsession.Manager[User]
}

// start is the fake clock's starting time: a fixed, recent instant with a
// sub-second part, so that second and millisecond rounding both show.
var start = time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)

// newEnv creates a table for t and a Manager on it. mutate, if not nil,
// adjusts the config before New validates it.
func newEnv(t testing.TB, mutate func(*ddbsession.Config[User])) *env {
	t.Helper()
	client := ddbtest.Client(t)
	e := &env{t: t, client: client, table: ddbtest.TableName(t, client), clock: &clock{t: start}, logs: &syncBuffer{}}
	e.cfg = ddbsession.Config[User]{
		Client:          client,
		Table:           e.table,
		IdleTimeout:     time.Hour,
		RefreshInterval: 10 * time.Minute,
		Now:             e.clock.Now,
		Logger:          slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&e.cfg)
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

// putUser writes a user item for name and returns its key.
func (e *env) putUser(name string) ddbsession.UserKey {
	e.t.Helper()
	key := ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
	if e.cfg.HashOnly {
		key.SK = ""
	}
	item := map[string]types.AttributeValue{
		"pk":   &types.AttributeValueMemberS{Value: key.PK},
		"name": &types.AttributeValueMemberS{Value: name},
	}
	if key.SK != "" {
		item["sk"] = &types.AttributeValueMemberS{Value: key.SK}
	}
	if _, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.table, Item: item}); err != nil {
		e.t.Fatalf("put user: %v", err)
	}
	return key
}

// login signs key in through Login, carrying cookies from an earlier
// response if given, and returns the new session cookie.
func (e *env) login(key ddbsession.UserKey, carried ...*http.Cookie) *http.Cookie {
	e.t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "https://example.test/login", nil)
	r.Header.Set("User-Agent", "test-agent/1.0")
	for _, c := range carried {
		r.AddCookie(c)
	}
	if err := e.m.Login(w, r, key); err != nil {
		e.t.Fatalf("Login: %v", err)
	}
	c := sessionCookie(e.t, w.Result(), e.m.CookieName())
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
	return w
}

// scanAll returns every item in the env's table.
func (e *env) scanAll() []map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatalf("scan: %v", err)
	}
	return out.Items
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
