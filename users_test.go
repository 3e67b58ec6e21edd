package ddbsession_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

// A service whose users live elsewhere plugs in its own loader: its user is
// what the handler sees, and its cutoff decides.
func TestCustomLoadUser(t *testing.T) {
	t.Parallel()
	directory := map[string]struct {
		user    User
		version int64
	}{
		"EXT#carol": {User{Name: "carol from the directory"}, 7},
		"EXT#dave":  {User{Name: "dave"}, 8}, // revoked after login, below
	}
	var p *probe
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

	p.reset()
	if w := e.get(h, carol); w.Code != http.StatusOK || w.Body.String() != "user:carol from the directory" {
		t.Errorf("carol: %d %q", w.Code, w.Body)
	}
	// The table is read for the session only; the user comes from the loader.
	if diff := cmp.Diff(map[string]int{"GetItem": 1}, p.calls); diff != "" {
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
