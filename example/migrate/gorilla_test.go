package main

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/sessions"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// gorillaKey is the old version's CookieStore hash key in the tests.
var gorillaKey = []byte("0123456789abcdef0123456789abcdef")

// gorillaSignIn gives b the cookie that the old version, a gorilla/sessions
// CookieStore keyed with key, set when name signed in.
func (b *browser) gorillaSignIn(base string, key []byte, name string) {
	b.t.Helper()
	store := sessions.NewCookieStore(key)
	r := httptest.NewRequest("POST", "/login", nil)
	w := httptest.NewRecorder()
	s, _ := store.New(r, gorillaCookie)
	s.Values[gorillaUser] = name
	if err := s.Save(r, w); err != nil {
		b.t.Fatal(err)
	}
	u, _ := url.Parse(base)
	b.client.Jar.SetCookies(u, w.Result().Cookies())
}

// cookies names the cookies that b holds for base.
func (b *browser) cookies(base string) []string {
	u, _ := url.Parse(base)
	var names []string
	for _, c := range b.client.Jar.Cookies(u) {
		names = append(names, c.Name)
	}
	return names
}

// A browser signed in on the gorilla/sessions version of a user the table
// knows is signed in on its first request to the ddbsession version, the
// old cookie cleared, its one session kept from then on; a tampered
// cookie, one signed with another key, one of an unknown user and one of a
// user revoked since make no session.
func TestFromGorilla(t *testing.T) {
	t.Parallel()
	client := ddbtest.Client(t)
	table := ddbtest.TableName(t, client)
	base := start(t, "-dev", "-table", table, "-from-gorilla", hex.EncodeToString(gorillaKey))
	m, err := ddbsession.New(ddbsession.Config[user]{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	sessionsOf := func(name string) int {
		t.Helper()
		list, err := m.List(context.Background(), userKey(name))
		if err != nil {
			t.Fatalf("List %s: %v", name, err)
		}
		return len(list)
	}
	// alice and carol are known: they signed in once on this version.
	for _, name := range []string{"alice", "carol"} {
		b := newBrowser(t)
		b.call(base, "POST", "/login", url.Values{"name": {name}}, http.StatusSeeOther, "")
		b.call(base, "POST", "/logout", nil, http.StatusSeeOther, "")
	}

	alice := newBrowser(t)
	alice.gorillaSignIn(base, gorillaKey, "alice")
	alice.call(base, "GET", "/me", nil, http.StatusOK, "alice")
	if got := strings.Join(alice.cookies(base), " "); got != "ddbsession" {
		t.Errorf("after the first request the browser holds the cookies %q, want ddbsession alone", got)
	}
	alice.call(base, "POST", "/note", url.Values{"text": {"moved"}}, http.StatusSeeOther, "")
	alice.signedIn("alice", "moved", base)
	if n := sessionsOf("alice"); n != 1 {
		t.Errorf("alice has %d sessions, want the adopted one", n)
	}

	if err := m.RevokeAll(context.Background(), userKey("carol")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user string
		key        []byte
		tamper     bool
	}{
		{"tampered", "alice", gorillaKey, true},
		{"another key", "alice", []byte("another key, 32 bytes long......"), false},
		{"unknown user", "mallory", gorillaKey, false},
		{"revoked user", "carol", gorillaKey, false},
	} {
		b := newBrowser(t)
		b.gorillaSignIn(base, tc.key, tc.user)
		if tc.tamper {
			u, _ := url.Parse(base)
			c := b.client.Jar.Cookies(u)[0]
			v := []byte(c.Value)
			v[len(v)/2] ^= 'A' ^ 'B' // one character of the signed value changed
			c.Value = string(v)
			b.client.Jar.SetCookies(u, []*http.Cookie{c})
		}
		b.call(base, "GET", "/me", nil, http.StatusUnauthorized, "")
		for _, name := range b.cookies(base) {
			if name == "ddbsession" {
				t.Errorf("%s: the browser got a session cookie", tc.name)
			}
		}
	}
	if n := sessionsOf("alice"); n != 1 {
		t.Errorf("alice has %d sessions after the refused cookies, want 1", n)
	}
	if n := sessionsOf("carol"); n != 0 {
		t.Errorf("carol, revoked, has %d live sessions, want none", n)
	}
	if n := sessionsOf("mallory"); n != 0 {
		t.Errorf("mallory, unknown, has %d sessions, want none", n)
	}
}
