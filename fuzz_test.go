package ddbsession_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// FuzzRequireSessionCookie feeds arbitrary cookie values to the middleware.
// Whatever the value, a request without a well-formed token never reaches
// DynamoDB and is refused; a well-formed one reaches a store that is down
// and is refused too. Nothing lets a request through. It needs no engine.
func FuzzRequireSessionCookie(f *testing.F) {
	for _, seed := range []string{"", "AAAAAAAAAAAAAAAAAAAAAAAAAA", "aaaaaaaaaaaaaaaaaaaaaaaaaa", "A=B", "\"quoted\"", strings.Repeat("7", 27), "%00",
		"AAAAAAAAAAAAAAAAAAAAAAAAAA.VVNFUiNhbGljZQ.UFJPRklMRQ", "AAAAAAAAAAAAAAAAAAAAAAAAAA.VVNFUiNhbGljZQ", "AAAAAAAAAAAAAAAAAAAAAAAAAA..",
		"AAAAAAAAAAAAAAAAAAAAAAAAAA.U0VTU0lPTiN4.eA"} {
		f.Add(seed)
	}
	p := ddbtest.NewProbe(nil)
	p.Fail = func(context.Context, string, any) error { return errors.New("store down") }
	m, err := ddbsession.New(ddbsession.Config[User]{Client: p, Table: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	h := m.RequireSession(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("request let through")
	}))
	f.Fuzz(func(t *testing.T, value string) {
		p.Reset()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", cookieName+"="+value)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		// What the request carried after Go's own cookie parsing.
		var wellFormed bool
		for _, c := range r.CookiesNamed(cookieName) {
			wellFormed = wellFormed || wellFormedCookie(c.Value)
		}
		switch {
		case wellFormed && (w.Code != http.StatusServiceUnavailable || p.Total() != 1):
			t.Errorf("well-formed %q: status %d after %d calls, want 503 after 1", value, w.Code, p.Total())
		case !wellFormed && (w.Code != http.StatusUnauthorized || p.Total() != 0):
			t.Errorf("malformed %q: status %d after %d calls, want 401 after 0", value, w.Code, p.Total())
		}
	})
}

// The fuzz targets. FuzzRequireSessionCookie (cookie_test.go) feeds one
// cookie value to the middleware; the targets here widen it to whole
// requests, and to Login and Authenticate against the real engine:
//
//   - FuzzRequestHeaders: raw Cookie header lines and a User-Agent through
//     RequireSession and LoadSession, in front of a store that fails every
//     call (no engine: the property is that malformed input makes no call,
//     and that well-formed input is refused when the store is down).
//   - FuzzLogin: Login against the engine (one table for the target) with
//     arbitrary carried cookies, User-Agent and user key.
//   - FuzzAuthenticate: Authenticate against the engine (one table for the target) with
//     arbitrary values, spliced onto real, revoked and logged-out
//     credentials.
//
// Each has a committed corpus in testdata/fuzz/<name>; scripts/test runs
// each for a few seconds, and the README gives a long run's figures.

// credentialAlphabet is the documented credential's alphabet: base32
// token, dots, unpadded base64url.
var credentialAlphabet = regexp.MustCompile(`^[A-Za-z0-9_.~-]*$`)

// documentedCredential is the fuzz targets' oracle: wellFormedCookie, and
// nothing outside the documented alphabet. Go's base64 decoders skip '\r'
// and '\n' even in strict mode, so wellFormedCookie alone would take a
// user key with line breaks in it for a second form of the same key.
func documentedCredential(v string) bool {
	return credentialAlphabet.MatchString(v) && wellFormedCookie(v)
}

// FuzzRequestHeaders sends arbitrary Cookie header lines (split on "\n") and
// User-Agent through RequireSession and LoadSession, whose store fails every
// call. Oracle: Go's own cookie parsing and documentedCredential. A request
// whose cookies of our name hold a well-formed value costs exactly one call
// and is refused with 503, clearing nothing; any other request costs no
// call, and its cookie is cleared if, and only if, it carried one of our
// name. RequireSession never lets a request through; LoadSession lets
// through only anonymous requests.
func FuzzRequestHeaders(f *testing.F) {
	const token = "AAAAAAAAAAAAAAAAAAAAAAAAAA"
	const key = "VVNFUiNhbGljZQ.UFJPRklMRQ" // USER#alice, PROFILE
	for _, seed := range []struct {
		cookies, agent string
		load           bool
	}{
		{"", "", false},
		{"__Host-session=" + token, "Mozilla/5.0", false},
		{"__Host-session=" + token + "." + key, "Mozilla/5.0", true},
		{"a=b; __Host-session=" + token + "; c=d", "curl/8", false},
		{"__Host-session=junk; __Host-session=" + token, "", true},
		{"__Host-session=junk\n__Host-session=" + token, "", false},
		{"__Host-session=\"" + token + "\"", "", false},
		{"__Host-session=" + token + ".." + key, "", true},
		{"__host-session=" + token, "", false},
		{"session=" + token, "", true},
		{"__Host-session=" + strings.ToLower(token), "\u202e", false},
		{"__Host-session", "", true},
		{";;;__Host-session=;", "\x00\xff", false},
	} {
		f.Add(seed.cookies, seed.agent, seed.load)
	}
	p := ddbtest.NewProbe(nil)
	p.Fail = func(context.Context, string, any) error { return errors.New("store down") }
	m, err := ddbsession.New(ddbsession.Config[User]{Client: p, Table: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	var mu sync.Mutex // the handlers' record of the last request
	var through, withUser bool
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, withUser = m.User(r.Context())
		through = true
	})
	required, optional := m.RequireSession(next), m.LoadSession(next)

	f.Fuzz(func(t *testing.T, cookies, agent string, load bool) {
		p.Reset()
		mu.Lock()
		through, withUser = false, false
		mu.Unlock()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Cookie"] = strings.Split(cookies, "\n")
		r.Header.Set("User-Agent", agent)
		w := httptest.NewRecorder()
		h := required
		if load {
			h = optional
		}
		h.ServeHTTP(w, r)

		present, wellFormed := false, false
		for _, c := range r.CookiesNamed(cookieName) {
			present = true
			wellFormed = wellFormed || documentedCredential(c.Value)
		}
		set := w.Header().Values("Set-Cookie")
		mu.Lock()
		defer mu.Unlock()
		if withUser {
			t.Fatalf("cookies %q: the handler saw a user, with the store down", cookies)
		}
		if !slices.Contains(w.Header().Values("Vary"), "Cookie") {
			t.Errorf("cookies %q: no Vary: Cookie", cookies)
		}
		switch {
		case wellFormed:
			if w.Code != http.StatusServiceUnavailable || through || p.Total() != 1 || len(set) != 0 {
				t.Errorf("well-formed %q: status %d, through %v, %d calls, Set-Cookie %q; want 503, not through, 1 call, none",
					cookies, w.Code, through, p.Total(), set)
			}
		case p.Total() != 0:
			t.Errorf("malformed %q cost %d calls, want 0", cookies, p.Total())
		case !load && (w.Code != http.StatusUnauthorized || through):
			t.Errorf("malformed %q through RequireSession: status %d, through %v; want 401", cookies, w.Code, through)
		case load && (w.Code != http.StatusOK || !through):
			t.Errorf("malformed %q through LoadSession: status %d, through %v; want anonymous 200", cookies, w.Code, through)
		case present != (len(set) == 1 && strings.Contains(set[0], "Max-Age=0")):
			t.Errorf("malformed %q (a cookie of ours: %v): Set-Cookie %q; want it cleared exactly when present", cookies, present, set)
		}
	})
}

// FuzzLogin signs a user in against the engine with arbitrary carried
// cookies, User-Agent and user name (the user key is USER#<name>, PROFILE),
// optionally carrying a live session of the same browser. Whatever the
// input, Login succeeds for an existing user and:
//
//   - deletes exactly the sessions of the first four well-formed carried
//     cookies, in order, and touches no key derived from a malformed one;
//   - ends the carried live session (no fixation);
//   - issues one well-formed, valid cookie that Authenticate accepts as the
//     user's session, with a User-Agent that is valid UTF-8 without
//     control or format characters, at most 256 bytes, and the browser's
//     own as far as it fits.
//
// The table is created once for the target.
func FuzzLogin(f *testing.F) {
	for _, seed := range []struct {
		cookies, agent, name string
		carry                bool
	}{
		{"", "Mozilla/5.0", "alice", false},
		{"", "Mozilla/5.0", "alice", true},
		{"__Host-session=AAAAAAAAAAAAAAAAAAAAAAAAAA", "", "bob", true},
		{"__Host-session=AAAAAAAAAAAAAAAAAAAAAAAAAA; __Host-session=BBBBBBBBBBBBBBBBBBBBBBBBBB\n__Host-session=CCCCCCCCCCCCCCCCCCCCCCCCCC; __Host-session=DDDDDDDDDDDDDDDDDDDDDDDDDD", "x", "carol", true},
		{"__Host-session=junk; other=AAAAAAAAAAAAAAAAAAAAAAAAAA", "\u202eevil\u202c\x07", "dave", false},
		{"", strings.Repeat("é", 200), "émile", false},
		{"", strings.Repeat("a", 255) + "é", "x", false},
		{"", "\xff\xfe bad \x00 utf8", "ü ∑ 😀", false},
		{"", "", strings.Repeat("n", 1000), true},
	} {
		f.Add(seed.cookies, seed.agent, seed.name, seed.carry)
	}
	var p *ddbtest.Probe
	e := newEnv(f, withProbe(&p))
	var mu sync.Mutex
	// The partition keys of the session items read and deleted: Login
	// reads each carried credential's item (deleting needs its index key)
	// and deletes those it finds.
	var sessionReads, sessionDeletes []string
	p.Before = func(_ context.Context, op string, in any) {
		var key map[string]types.AttributeValue
		list := &sessionReads
		switch in := in.(type) {
		case *dynamodb.GetItemInput:
			key = in.Key
		case *dynamodb.DeleteItemInput:
			key, list = in.Key, &sessionDeletes
		default:
			return
		}
		if pk := key["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "SESSION#") {
			mu.Lock()
			*list = append(*list, pk)
			mu.Unlock()
		}
	}

	f.Fuzz(func(t *testing.T, cookies, agent, name string, carry bool) {
		if name == "" || len(name) > 1000 || !utf8.ValidString(name) {
			return // not a DynamoDB key: the app's user keys are UTF-8, at most 2048 bytes
		}
		ctx := context.Background()
		key := ddbsession.UserKey{PK: "USER#" + name, SK: "PROFILE"}
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: map[string]types.AttributeValue{
			"pk": attrS(key.PK), "sk": attrS(key.SK), "name": attrS(name), "sessionsVersion": newVersion(),
		}}); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/login", nil)
		var live string
		if carry {
			live = fuzzLogin(t, e.m, key, httptest.NewRequest("POST", "/login", nil))
			r.Header.Add("Cookie", cookieName+"="+live)
		}
		for _, line := range strings.Split(cookies, "\n") {
			r.Header.Add("Cookie", line)
		}
		r.Header.Set("User-Agent", agent)
		var want []string
		for _, c := range r.CookiesNamed(cookieName) {
			if documentedCredential(c.Value) && len(want) < 4 {
				want = append(want, "SESSION#"+tokenHash(c.Value))
			}
		}
		var wantDeletes []string // of the credentials read, only the live one is there
		if carry {
			wantDeletes = []string{"SESSION#" + tokenHash(live)}
		}
		mu.Lock()
		sessionReads, sessionDeletes = nil, nil
		mu.Unlock()

		value := fuzzLogin(t, e.m, key, r)

		mu.Lock()
		reads, deletes := sessionReads, sessionDeletes
		mu.Unlock()
		if diff := cmp.Diff(want, reads); diff != "" {
			t.Errorf("cookies %q: session items read (-want +got):\n%s", cookies, diff)
		}
		if diff := cmp.Diff(wantDeletes, deletes); diff != "" {
			t.Errorf("cookies %q: session items deleted (-want +got):\n%s", cookies, diff)
		}
		if carry {
			if _, _, err := e.m.Authenticate(ctx, live); !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("the carried session survived Login: Authenticate = %v", err)
			}
		}
		if !documentedCredential(value) {
			t.Errorf("Login issued a malformed cookie %q", value)
		}
		s, u, err := e.m.Authenticate(ctx, value)
		if err != nil {
			t.Fatalf("Authenticate of the new cookie: %v", err)
		}
		if s.User != key || u.Name != name {
			t.Errorf("new session is %+v of user %q, want %+v of %q", s.User, u.Name, key, name)
		}
		if !sessionIDFormat.MatchString(s.ID) {
			t.Errorf("session ID %q", s.ID)
		}
		if problem := storedAgentProblem(agent, s.UserAgent); problem != "" {
			t.Errorf("User-Agent %q stored as %q: %s", agent, s.UserAgent, problem)
		}
	})
}

// fuzzLogin runs Login for key on r and returns the new cookie's value.
func fuzzLogin(t *testing.T, m *ddbsession.Manager[User], key ddbsession.UserKey, r *http.Request) string {
	t.Helper()
	w := httptest.NewRecorder()
	if err := m.Login(w, r, key, nil); err != nil {
		t.Fatalf("Login(%+v): %v", key, err)
	}
	var values []string
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName {
			if err := c.Valid(); err != nil {
				t.Errorf("cookie not valid: %v", err)
			}
			values = append(values, c.Value)
		}
	}
	if len(values) != 1 || values[0] == "" {
		t.Fatalf("Login set cookies %q, want one", values)
	}
	return values[0]
}

// storedAgentProblem says what is wrong with stored as the kept form of
// the browser's User-Agent sent, or "". The rules, checked without the
// library's own code: valid UTF-8, no control (Cc) or format (Cf)
// characters, at most 256 bytes; apart from the U+FFFD that replaces
// invalid bytes, the characters kept are the sent ones in order, and all
// of them unless the 256 bytes ran out.
func storedAgentProblem(sent, stored string) string {
	switch {
	case !utf8.ValidString(stored):
		return "not UTF-8"
	case len(stored) > 256:
		return "longer than 256 bytes"
	case strings.IndexFunc(stored, func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf) }) >= 0:
		return "holds a control or format character"
	}
	kept := func(s string) string {
		var b strings.Builder
		for len(s) > 0 {
			r, n := utf8.DecodeRuneInString(s)
			s = s[n:]
			if r != utf8.RuneError && !unicode.In(r, unicode.Cc, unicode.Cf) {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	want, got := kept(sent), kept(stored)
	if !strings.HasPrefix(want, got) {
		return "not the sent characters in order"
	}
	if got != want && len(stored) <= 256-utf8.UTFMax {
		return "cut short before 256 bytes"
	}
	return ""
}

// FuzzAuthenticate checks arbitrary values against the engine, on their own or
// spliced onto real credentials: alice's and bob's live sessions, carol's
// revoked by RevokeAll, and dave's ended by Logout. Oracle: a value grants
// a session only if it is in the documented form (documentedCredential),
// its token is alice's or bob's, and it carries no user key or exactly
// that session's user's; then Authenticate returns that session and user. Every
// other value gets ErrNoSession, and a malformed one costs no call. Authenticate
// never writes. The table is created once for the target.
func FuzzAuthenticate(f *testing.F) {
	var p *ddbtest.Probe
	e := newEnv(f, withProbe(&p))
	ctx := context.Background()
	type holder struct {
		key   ddbsession.UserKey
		token string
		id    string
		live  bool
	}
	var holders []holder
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		key := e.putUser(name)
		c := e.login(key)
		token := c.Value[:26]
		holders = append(holders, holder{key: key, token: token, id: e.sessionFor(c).ID, live: true})
		switch name {
		case "carol":
			if err := e.m.RevokeAll(ctx, key); err != nil {
				f.Fatal(err)
			}
			holders[2].live = false
		case "dave":
			if err := e.m.Logout(httptest.NewRecorder(), newRequest(c)); err != nil {
				f.Fatal(err)
			}
			holders[3].live = false
		}
	}
	b64 := base64.RawURLEncoding.EncodeToString
	userPart := func(k ddbsession.UserKey) string { return b64([]byte(k.PK)) + "." + b64([]byte(k.SK)) }
	// Prefixes the fuzzer's value is appended to, by index.
	prefixes := []string{""}
	for _, h := range holders {
		prefixes = append(prefixes, h.token, h.token+".", h.token+"."+userPart(h.key))
	}
	for i := range prefixes {
		f.Add(uint8(i), "")
	}
	f.Add(uint8(1), "."+userPart(holders[1].key)) // alice's token, bob's key
	f.Add(uint8(2), userPart(holders[0].key)+".")
	f.Add(uint8(2), b64([]byte("USER#alice")))
	f.Add(uint8(0), "AAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Add(uint8(0), strings.ToLower(holders[0].token))
	f.Add(uint8(3), "x")

	f.Fuzz(func(t *testing.T, prefix uint8, value string) {
		cred := prefixes[int(prefix)%len(prefixes)] + value
		p.Reset()
		s, u, err := e.m.Authenticate(ctx, cred)
		calls := p.Total()
		writes := p.Count("PutItem") + p.Count("UpdateItem") + p.Count("DeleteItem")
		if writes != 0 {
			t.Errorf("Authenticate(%q) made %d writes", cred, writes)
		}
		if !documentedCredential(cred) {
			if !errors.Is(err, ddbsession.ErrNoSession) || calls != 0 {
				t.Errorf("malformed %q: Authenticate = %v after %d calls, want ErrNoSession after 0", cred, err, calls)
			}
			return
		}
		token, rest, withUser := strings.Cut(cred, ".")
		var grant *holder
		for i, h := range holders {
			if h.token == token && h.live && (!withUser || rest == userPart(h.key)) {
				grant = &holders[i]
			}
		}
		if grant == nil {
			if !errors.Is(err, ddbsession.ErrNoSession) {
				t.Errorf("%q grants no session: Authenticate = %+v, %v; want ErrNoSession", cred, s, err)
			}
			return
		}
		if err != nil || s.ID != grant.id || s.User != grant.key || u.PK != grant.key.PK {
			t.Errorf("%q is %s's credential: Authenticate = %+v of %+v, %v", cred, grant.key.PK, s, u, err)
		}
	})
}
