package ddbsession_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
)

// withUser returns c with its value's user key replaced by key's.
func withUser(c *http.Cookie, key ddbsession.UserKey) *http.Cookie {
	token, _, _ := strings.Cut(c.Value, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	return &http.Cookie{Name: c.Name, Value: token + "." + b64([]byte(key.PK)) + "." + b64([]byte(key.SK))}
}

// tokenOnly returns c with the token alone, as releases before the
// one-round-trip read issued it.
func tokenOnly(c *http.Cookie) *http.Cookie {
	token, _, _ := strings.Cut(c.Value, ".")
	return &http.Cookie{Name: c.Name, Value: token}
}

// A valid token can never be paired with someone else's user: a cookie
// that carries alice's token with bob's key is refused, though both items
// exist, and it costs the one read.
func TestCookieUserMustBeTheSessions(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice, bob := e.putUser("alice"), e.putUser("bob")
	cookie := e.login(alice)
	e.login(bob)

	p.reset()
	w := e.get(e.m.RequireSession(whoami(e.m)), withUser(cookie, bob))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("alice's token with bob's key: status %d %q, want 401", w.Code, w.Body)
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if c := sessionCookie(t, w.Result(), e.m.CookieName()); c == nil || c.MaxAge >= 0 {
		t.Errorf("cookie not cleared: %v", c)
	}
	// Through Check, and through the two-read path (a custom loader), too.
	if _, _, err := e.m.Check(context.Background(), withUser(cookie, bob).Value); err != ddbsession.ErrNoSession {
		t.Errorf("Check of alice's token with bob's key = %v, want ErrNoSession", err)
	}
	cfg := e.cfg
	cfg.LoadUser = func(context.Context, ddbsession.UserKey) (User, time.Time, error) {
		return User{Name: "loaded"}, time.Time{}, nil
	}
	custom, err := ddbsession.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w := e.get(custom.RequireSession(whoami(custom)), withUser(cookie, bob)); w.Code != http.StatusUnauthorized {
		t.Errorf("with a custom loader: status %d, want 401", w.Code)
	}
	// And the cookie as issued still works.
	if got := e.status(cookie); got != http.StatusOK {
		t.Errorf("alice's own cookie: %d", got)
	}
}

// A well-formed but unknown credential costs one call at most, with a user
// key or without; a user item alone grants nothing.
func TestUnknownCredentialCostsOneCall(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	alice := e.putUser("alice")
	unknown := &http.Cookie{Name: e.m.CookieName(), Value: strings.Repeat("A", 26)}
	for _, c := range []*http.Cookie{unknown, withUser(unknown, alice), withUser(unknown, ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"})} {
		p.reset()
		if got := e.status(c); got != http.StatusUnauthorized {
			t.Errorf("%q: status %d, want 401", c.Value, got)
		}
		if p.total() != 1 {
			t.Errorf("%q: %d calls %v, want 1", c.Value, p.total(), p.calls)
		}
	}
}

// A session whose user item is gone is refused on the one-round-trip path.
func TestOneRoundTripUserGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	alice := e.putUser("alice")
	cookie := e.login(alice)
	e.deleteItem(userItemKey(alice))
	if got := e.status(cookie); got != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", got)
	}
}

// Rolling deploys: a Manager accepts cookies of both forms whatever its
// HideUserKey, and a refresh re-issues the cookie in the form its own
// setting asks for.
func TestCookieFormsAcrossReleases(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p)) // IdleTimeout 1h, RefreshInterval 10m
	alice := e.putUser("alice")
	cookie := e.login(alice)
	hiddenCfg := e.cfg
	hiddenCfg.HideUserKey = true
	hidden, err := ddbsession.New(hiddenCfg)
	if err != nil {
		t.Fatal(err)
	}
	old := tokenOnly(cookie) // as an earlier release, or a HideUserKey Manager, issued it

	for _, tc := range []struct {
		name   string
		m      *ddbsession.Manager[User]
		cookie *http.Cookie
		calls  map[string]int
	}{
		{"token-only cookie, default Manager", e.m, old, map[string]int{"GetItem": 2}},
		{"cookie with user key, default Manager", e.m, cookie, map[string]int{"BatchGetItem": 1}},
		{"token-only cookie, HideUserKey", hidden, old, map[string]int{"GetItem": 2}},
		{"cookie with user key, HideUserKey", hidden, cookie, map[string]int{"BatchGetItem": 1}},
	} {
		p.reset()
		if w := e.get(tc.m.RequireSession(whoami(tc.m)), tc.cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
			t.Errorf("%s: %d %q, want 200 user:alice", tc.name, w.Code, w.Body)
		}
		if diff := cmp.Diff(tc.calls, p.calls); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", tc.name, diff)
		}
	}

	// A refresh of the old cookie by the default Manager issues the new form...
	e.clock.Advance(15 * time.Minute)
	c := sessionCookie(t, e.get(e.m.RequireSession(whoami(e.m)), old).Result(), e.m.CookieName())
	if c == nil || c.Value != cookie.Value {
		t.Errorf("refresh of a token-only cookie sent %v, want the value %q", c, cookie.Value)
	}
	// ...and one by a HideUserKey Manager issues the token alone.
	e.clock.Advance(15 * time.Minute)
	c = sessionCookie(t, e.get(hidden.RequireSession(whoami(hidden)), cookie).Result(), hidden.CookieName())
	if c == nil || c.Value != old.Value {
		t.Errorf("HideUserKey refresh sent %v, want the token alone %q", c, old.Value)
	}
}

// A user key too long for a cookie is left out of it: the session works on
// the two-read path.
func TestLongUserKeyStaysOutOfCookie(t *testing.T) {
	t.Parallel()
	var p *probe
	e := newEnv(t, withProbe(&p))
	long := ddbsession.UserKey{PK: "USER#" + strings.Repeat("x", 1000), SK: "PROFILE" + strings.Repeat("y", 100)}
	e.putUserAt(long, "long")
	cookie := e.login(long)
	if strings.Contains(cookie.Value, ".") || len(cookie.Value) != 26 {
		t.Errorf("cookie for a %d-byte user key = %q, want the token alone", len(long.PK)+len(long.SK), cookie.Value)
	}
	p.reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:long" {
		t.Errorf("status %d %q", w.Code, w.Body)
	}
	if diff := cmp.Diff(map[string]int{"GetItem": 2}, p.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// Keys that DynamoDB leaves unprocessed are asked for again within the
// request's deadline.
func TestOneRoundTripRetriesUnprocessedKeys(t *testing.T) {
	t.Parallel()
	var p *probe
	var flaky *unprocessedOnce
	e := newEnv(t, func(c *ddbsession.Config[User]) {
		flaky = &unprocessedOnce{Client: c.Client}
		c.Client = flaky
	}, withProbe(&p))
	cookie := e.login(e.putUser("alice"))
	flaky.armed.Store(true)
	p.reset()
	if w := e.get(e.m.RequireSession(whoami(e.m)), cookie); w.Code != http.StatusOK || w.Body.String() != "user:alice" {
		t.Errorf("status %d %q, want 200 after the retry", w.Code, w.Body)
	}
	if got := p.count("BatchGetItem"); got != 2 {
		t.Errorf("%d BatchGetItems, want 2 (the first left its keys unprocessed)", got)
	}
}

// unprocessedOnce answers the first BatchGetItem after it is armed with all
// its keys unprocessed, as DynamoDB may under throttling, and passes every
// other call to the engine.
type unprocessedOnce struct {
	ddbsession.Client
	armed atomic.Bool
}

func (u *unprocessedOnce) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if u.armed.CompareAndSwap(true, false) {
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}
	return u.Client.BatchGetItem(ctx, in, o...)
}
