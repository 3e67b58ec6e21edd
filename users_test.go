package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A service whose users live elsewhere plugs in its own loader: its user is
// what the handler sees, and its version decides.
func TestCustomLoadUser(t *testing.T) {
	t.Parallel()
	directory := map[string]struct {
		user    User
		version int64
	}{
		"EXT#carol": {User{Name: "carol from the directory"}, 7},
		"EXT#dave":  {User{Name: "dave"}, 8}, // revoked after login, below
	}
	var p *ddbtest.Probe
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		withProbe(&p)(c)
		c.LoadUser = func(_ context.Context, key ddbsession.UserKey) (User, int64, error) {
			d, ok := directory[key.PK]
			if !ok {
				return User{}, 0, ddbsession.ErrUserNotFound
			}
			return d.user, d.version, nil
		}
	})
	carol := e.login(ddbsession.UserKey{PK: "EXT#carol", SK: "-"})
	dave := e.login(ddbsession.UserKey{PK: "EXT#dave", SK: "-"})
	directory["EXT#dave"] = struct {
		user    User
		version int64
	}{User{Name: "dave"}, 9}
	// Login asks the loader too: a user it does not know gets no session.
	w := newRecorder()
	if err := e.m.Login(w, newRequest(), ddbsession.UserKey{PK: "EXT#erin", SK: "-"}, nil); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("Login of a user unknown to the loader = %v, want ErrUserNotFound", err)
	}
	if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("refused Login sent Set-Cookie %q", c)
	}
	// A token that was never issued: carol's with its last character changed
	// (rand.Text ends in "A" one time in 32, so "A" alone would sometimes be carol's).
	last := "A"
	if strings.HasSuffix(carol.Value, last) {
		last = "B"
	}
	erin := &http.Cookie{Name: cookieName, Value: carol.Value[:25] + last}
	h := e.m.RequireSession(whoami(e.m))

	p.Reset()
	if w := e.get(h, carol); w.Code != http.StatusOK || w.Body.String() != "user:carol from the directory" {
		t.Errorf("carol: %d %q", w.Code, w.Body)
	}
	// The table is read for the session only; the user comes from the loader.
	if diff := cmp.Diff(map[string]int{"GetItem": 1}, p.Calls()); diff != "" {
		t.Errorf("calls with a custom loader (-want +got):\n%s", diff)
	}
	if w := e.get(h, dave); w.Code != http.StatusUnauthorized {
		t.Errorf("dave, whose version changed since his login: %d, want 401", w.Code)
	}
	if w := e.get(h, erin); w.Code != http.StatusUnauthorized {
		t.Errorf("erin, unknown to the loader: %d, want 401", w.Code)
	}
}

// A user item that does not decode into the app's type is the app's bug:
// the request fails closed with 500, not 503, and the log names the type
// and the attribute.
func TestUserItemThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: userItemKey(alice),
		UpdateExpression:          ptr("SET #n = :n"),
		ExpressionAttributeNames:  map[string]string{"#n": "name"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberBOOL{Value: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range readPaths {
		cfg := e.cfg
		if path.mutate != nil {
			path.mutate(&cfg)
		}
		m, err := ddbsession.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		called := false
		w := e.get(m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })), cookie)
		if w.Code != http.StatusInternalServerError || called {
			t.Errorf("%s: status %d, handler called %v; want 500, not called", path.name, w.Code, called)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `\"name\"`) || !strings.Contains(logs, "ddbsession_test.User") {
		t.Errorf("log does not name the attribute and the type:\n%s", logs)
	}
	// Every read of the user item decodes it: a Login issues no session
	// that every request would then refuse, and List says why it fails.
	if err := e.m.Login(newRecorder(), newRequest(), alice, nil); err == nil || !strings.Contains(err.Error(), `"name"`) {
		t.Errorf("Login of a user whose item does not decode = %v, want an error naming the attribute", err)
	}
	if _, err := e.m.List(context.Background(), alice); err == nil || !strings.Contains(err.Error(), `"name"`) {
		t.Errorf("List of a user whose item does not decode = %v, want an error naming the attribute", err)
	}
}

// A user item that the app wrote without a sessions version is refused at
// Login, loudly: an error that names the attribute and says what to write,
// in the log too (an app may show the error as a wrong password), and
// nothing written. Nothing would tell that item from one made anew under
// its key, whose sessions would then be the new user's.
func TestLoginRefusesAUserItemWithoutAVersion(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withBearer)
	alice := e.putUnversionedUser("alice")
	p.Reset()
	w := newRecorder()
	err := e.m.Login(w, newRequest(), alice, nil)
	if err == nil || errors.Is(err, ddbsession.ErrUserNotFound) || !strings.Contains(err.Error(), "sessionsVersion") || !strings.Contains(err.Error(), "item-format.md#user-items") {
		t.Errorf("Login of a user item without a version = %v, want an error naming sessionsVersion and the docs", err)
	}
	if _, _, err := e.m.LoginBearer(newRequest(), alice, nil); err == nil {
		t.Error("LoginBearer of a user item without a version succeeded")
	}
	if c := w.Header().Values("Set-Cookie"); len(c) != 0 || p.Count("PutItem") != 0 {
		t.Errorf("the refused Login sent Set-Cookie %q and made %d PutItems", c, p.Count("PutItem"))
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "sessionsVersion") {
		t.Errorf("the refusal is not in the log at Error:\n%s", logs)
	}
}

// A user deleted and made anew under the same key never inherits a
// session: made anew by CreateUser, by the app's own PutItem with a fresh
// version (as docs/item-format.md#user-items says), or without one (which
// then no login accepts, and no earlier session either).
func TestRecreatedUserInheritsNoSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		recreate func(e *env, key ddbsession.UserKey)
		loginOK  bool // a login of the new user item succeeds
	}{
		{"by CreateUser", func(e *env, key ddbsession.UserKey) {
			if err := e.m.CreateUser(context.Background(), User{PK: key.PK, SK: key.SK, Name: "another"}); err != nil {
				e.t.Fatal(err)
			}
		}, true},
		{"by the app, with a fresh version", func(e *env, key ddbsession.UserKey) { e.putUserAt(key, "another") }, true},
		{"by the app, without a version", func(e *env, key ddbsession.UserKey) {
			e.putItem(map[string]types.AttributeValue{"pk": attrS(key.PK), "sk": attrS(key.SK), "name": attrS("another")})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			alice := e.putUser("alice")
			old := e.login(alice)
			e.deleteItem(userItemKey(alice))
			tc.recreate(e, alice)
			if got := e.status(old); got != http.StatusUnauthorized {
				t.Errorf("the deleted user's session on the user item made anew: %d, want 401", got)
			}
			err := e.m.Login(newRecorder(), newRequest(), alice, nil)
			if (err == nil) != tc.loginOK {
				t.Errorf("a login of the user item made anew: %v, want success %v", err, tc.loginOK)
			}
		})
	}
}

// A LoadUser that returns version 0 is refused loudly at Login, and the
// sessions of a user it returns 0 for are refused; a RevokeAll of a user
// the table has no item of, with LoadUser, says where the version lives
// rather than "user not found".
func TestLoadUserWithoutAVersion(t *testing.T) {
	t.Parallel()
	var version atomic.Int64
	version.Store(7)
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		c.LoadUser = func(_ context.Context, key ddbsession.UserKey) (User, int64, error) {
			return User{PK: key.PK, SK: key.SK, Name: "carol"}, version.Load(), nil
		}
	})
	carol := ddbsession.UserKey{PK: "EXT#carol", SK: "-"}
	c := e.login(carol)
	version.Store(0)
	if got := e.status(c); got != http.StatusUnauthorized {
		t.Errorf("a session of a user whose LoadUser version is now 0: %d, want 401", got)
	}
	err := e.m.Login(newRecorder(), newRequest(), carol, nil)
	if err == nil || !strings.Contains(err.Error(), "LoadUser returned version 0") {
		t.Errorf("Login with a LoadUser version of 0 = %v, want an error that says so", err)
	}
	err = e.m.RevokeAll(context.Background(), carol)
	if err == nil || errors.Is(err, ddbsession.ErrUserNotFound) || !strings.Contains(err.Error(), "LoadUser") {
		t.Errorf("RevokeAll of a user of LoadUser = %v, want an error that says to change the version LoadUser returns", err)
	}
}

// RevokeAll of a user of Config.LoadUser ends their sessions when the
// version the loader returns changes with its write, and otherwise fails,
// saying so, rather than report success. A loader over the table's user
// item that returns its sessionsVersion sees RevokeAll's write outside
// MREC, but not in MREC, where the write is the revocation item's; one
// that returns ddbitem.User.Version sees it in both.
func TestRevokeAllThroughLoadUser(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		mrec     bool
		ddbitem  bool // the loader returns ddbitem.User.Version, not sessionsVersion
		wantEnds bool
	}{
		{"sessionsVersion", false, false, true},
		{"sessionsVersion, MREC", true, false, false},
		{"ddbitem.User.Version", false, true, true},
		{"ddbitem.User.Version, MREC", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var e *env
			var reader *ddbitem.Reader
			e = newEnv(t, func(c *ddbsession.Config[User]) {
				c.Layout.MREC = tc.mrec
				c.LoadUser = func(ctx context.Context, key ddbsession.UserKey) (User, int64, error) {
					if tc.ddbitem {
						u, err := reader.User(ctx, key)
						if err != nil {
							return User{}, 0, err
						}
						if u.Item() == nil {
							return User{}, 0, ddbsession.ErrUserNotFound
						}
						return User{Name: "alice"}, u.Version(), nil
					}
					av := rawItem(t, e, userItemKey(key))
					if av == nil {
						return User{}, 0, ddbsession.ErrUserNotFound
					}
					version, err := strconv.ParseInt(strings.TrimPrefix(attrText(av["sessionsVersion"]), "N:"), 10, 64)
					return User{Name: "alice"}, version, err
				}
			})
			var err error
			reader, err = ddbitem.NewReader(ddbitem.ReaderConfig{Client: e.client, Table: e.table, Layout: e.cfg.Layout})
			if err != nil {
				t.Fatal(err)
			}
			alice := e.putUser("alice")
			c := e.login(alice)
			err = e.m.RevokeAll(context.Background(), alice)
			switch {
			case tc.wantEnds && err != nil:
				t.Fatalf("RevokeAll: %v", err)
			case tc.wantEnds:
				if got := e.status(c); got != http.StatusUnauthorized {
					t.Errorf("the session after RevokeAll: status %d, want 401", got)
				}
			case err == nil || !strings.Contains(err.Error(), "Config.LoadUser still returns version") || !strings.Contains(err.Error(), "ddbitem.User.Version"):
				t.Errorf("RevokeAll that the loader does not see = %v, want an error that says so", err)
			}
		})
	}
}
