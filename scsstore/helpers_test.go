package scsstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/scsstore"
)

func TestMain(m *testing.M) { os.Exit(ddbtest.Main(m)) }

// newTable creates a table of the core's layout, as an app would, through
// ddbsession's Manager.
func newTable(t *testing.T, hashOnly bool) (*dynamodb.Client, string) {
	t.Helper()
	client, table, _ := newTableWith(t, ddbsession.Layout{HashOnly: hashOnly})
	return client, table
}

// newTableWith creates a table of layout through ddbsession's Manager, and
// returns that Manager too, for the tests' users and revocations.
func newTableWith(t *testing.T, layout ddbsession.Layout) (*dynamodb.Client, string, *ddbsession.Manager[testUser]) {
	t.Helper()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	m, err := ddbsession.New(ddbsession.Config[testUser]{
		Client: client, Table: table, Layout: layout,
		Logger: slog.New(slog.DiscardHandler), // dynalite has no TTL; the warning is expected
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return client, table, m
}

// testUser is the tests' user item, in the sessions' table.
type testUser struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// newStore returns a Store on table through a probe that records its
// reads.
func newStore(t *testing.T, client *dynamodb.Client, table string, edit ...func(*scsstore.Config)) (*scsstore.Store, *ddbtest.Probe) {
	t.Helper()
	return newStoreOn(t, client, table, nil, edit...)
}

// newStoreOn is newStore with the Store's copy of the global revocation
// generation aged on mono, the test's monotonic clock (nil for the
// machine's).
func newStoreOn(t *testing.T, client *dynamodb.Client, table string, mono func() int64, edit ...func(*scsstore.Config)) (*scsstore.Store, *ddbtest.Probe) {
	t.Helper()
	probe := ddbtest.NewProbe(client)
	probe.RecordReads = true
	cfg := scsstore.Config{Client: probe, Table: table}
	for _, e := range edit {
		e(&cfg)
	}
	store, err := scsstore.NewWithMonotonicClock(cfg, mono)
	if mono == nil {
		store, err = scsstore.New(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return store, probe
}

// counts are the store's calls of each operation through a probe.
type counts struct{ gets, puts, updates, batchGets int }

func countsOf(p *ddbtest.Probe) counts {
	return counts{p.Count("GetItem"), p.Count("PutItem"), p.Count("UpdateItem"), p.Count("BatchGetItem")}
}

// failOps makes the store's reads (GetItem and BatchGetItem), PutItems
// and UpdateItems fail with get, put and update, where not nil.
func failOps(p *ddbtest.Probe, get, put, update error) {
	p.Fail = func(_ context.Context, op string, _ any) error {
		switch op {
		case "GetItem", "BatchGetItem":
			return get
		case "PutItem":
			return put
		case "UpdateItem":
			return update
		}
		return nil
	}
}

var errOutage = errors.New("injected DynamoDB outage")

// instance is one app server on scs and a Store: the routes of example/scs.
type instance struct {
	sessions *scs.SessionManager
	srv      *httptest.Server
	errs     chan error // what reached ErrorFunc
	// hold, if set, runs in GET /get and POST /put once the session is
	// loaded.
	hold func()
	// verify, if set, runs as POST /login's credential check, after the
	// user was read.
	verify atomic.Pointer[func() error]
}

func newInstance(t *testing.T, store *scsstore.Store, idle time.Duration) *instance {
	t.Helper()
	return newInstanceOn(t, store, store, idle)
}

// newInstanceOn is newInstance with sessions in sessions (a Migration),
// and users signed in through store.
func newInstanceOn(t *testing.T, sessions scs.Store, store *scsstore.Store, idle time.Duration) *instance {
	t.Helper()
	in := &instance{sessions: scs.New(), errs: make(chan error, 10)}
	in.sessions.Store = sessions
	in.sessions.IdleTimeout = idle
	in.sessions.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		in.errs <- err
		http.Error(w, "session store unavailable", http.StatusInternalServerError)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /put", func(w http.ResponseWriter, r *http.Request) {
		if in.hold != nil {
			in.hold()
		}
		in.sessions.Put(r.Context(), "msg", r.PostFormValue("msg"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /put2", func(w http.ResponseWriter, r *http.Request) {
		// Several keys: gob encodes the map in a random order.
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			in.sessions.Put(r.Context(), k, k+"-value")
		}
		in.sessions.Put(r.Context(), "since", int64(1796040000))
		in.sessions.Put(r.Context(), "roles", []string{"reader", "writer"})
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /get", func(w http.ResponseWriter, r *http.Request) {
		if in.hold != nil {
			in.hold()
		}
		if !in.sessions.Exists(r.Context(), "msg") {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, in.sessions.GetString(r.Context(), "msg"))
	})
	mux.HandleFunc("POST /renew", func(w http.ResponseWriter, r *http.Request) {
		if err := in.sessions.RenewToken(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /destroy", func(w http.ResponseWriter, r *http.Request) {
		if err := in.sessions.Destroy(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// POST /login signs in the user whose key the form's pk and sk are.
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		var u testUser
		key := ddbsession.UserKey{PK: r.PostFormValue("pk"), SK: r.PostFormValue("sk")}
		var verify func() error
		if v := in.verify.Load(); v != nil {
			verify = *v
		}
		err := store.Login(r.Context(), in.sessions, key, &u, verify)
		switch {
		case errors.Is(err, ddbsession.ErrUserNotFound):
			http.Error(w, "no such user", http.StatusUnauthorized)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	// POST /record writes the form's v where Login records who signed
	// in, as an older release's Login would have.
	mux.HandleFunc("POST /record", func(w http.ResponseWriter, r *http.Request) {
		in.sessions.Put(r.Context(), "scsstore.user", r.PostFormValue("v"))
		w.WriteHeader(http.StatusNoContent)
	})
	// GET /me answers with the signed-in user's name and key.
	mux.HandleFunc("GET /me", func(w http.ResponseWriter, r *http.Request) {
		var u testUser
		key, ok, err := store.LoadUser(r.Context(), in.sessions, &u)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case !ok:
			http.Error(w, "log in", http.StatusUnauthorized)
		default:
			io.WriteString(w, u.Name+" "+key.PK)
		}
	})
	in.srv = httptest.NewServer(in.sessions.LoadAndSave(mux))
	t.Cleanup(in.srv.Close)
	return in
}

// browser is a client with a cookie jar. Cookies do not depend on the
// port, so one browser carries its session to every instance.
type browser struct {
	t      *testing.T
	client *http.Client
	jar    *cookiejar.Jar
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar}, jar: jar}
}

// do sends method path to in (a form for POST), and returns the status and
// body.
func (b *browser) do(in *instance, method, path string, form url.Values) (int, string) {
	b.t.Helper()
	var res *http.Response
	var err error
	if method == http.MethodPost {
		res, err = b.client.PostForm(in.srv.URL+path, form)
	} else {
		res, err = b.client.Get(in.srv.URL + path)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(body))
}

// expect fails the test unless method path answers want (and, for 200,
// wantBody).
func (b *browser) expect(in *instance, method, path string, form url.Values, want int, wantBody string) {
	b.t.Helper()
	status, body := b.do(in, method, path, form)
	if status != want || (want == http.StatusOK && body != wantBody) {
		b.t.Errorf("%s %s: %d %q, want %d %q", method, path, status, body, want, wantBody)
	}
}

// token returns the session cookie's value.
func (b *browser) token(in *instance) string {
	b.t.Helper()
	u, _ := url.Parse(in.srv.URL)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == in.sessions.Cookie.Name {
			return c.Value
		}
	}
	return ""
}

// setToken replaces the session cookie, as an attacker with a stolen token
// would.
func (b *browser) setToken(in *instance, token string) {
	u, _ := url.Parse(in.srv.URL)
	b.jar.SetCookies(u, []*http.Cookie{{Name: in.sessions.Cookie.Name, Value: token, Path: "/"}})
}

func msg(s string) url.Values { return url.Values{"msg": {s}} }

// login is POST /login's form for user.
func login(user ddbsession.UserKey) url.Values { return url.Values{"pk": {user.PK}, "sk": {user.SK}} }

// avS and avN are attribute values, written as the item format documents
// them.
func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// number reads the integer Number attribute name of av.
func number(t *testing.T, av map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	v, ok := av[name].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("attribute %q is %#v, want a Number", name, av[name])
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		t.Fatalf("attribute %q: %v", name, err)
	}
	return n
}
