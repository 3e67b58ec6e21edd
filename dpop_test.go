package ddbsession_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// dpopClient is a CLI's side of DPoP (RFC 9449), written from the RFC and
// not from the server's code: its key, the nonce the server last gave it,
// and proofs that crypto/ecdsa signs (dbsctest.Device).
type dpopClient struct {
	key   *dbsctest.Device
	nonce string
	clock *ddbtest.Clock
}

func newDPoPClient(clock *ddbtest.Clock) *dpopClient {
	return &dpopClient{key: dbsctest.NewES256(), clock: clock}
}

// proof is a proof for method on url, for token ("" at a login), with
// change, if any, applied to its header and claims before it is signed.
func (c *dpopClient) proof(method, url, token string, change ...func(header, claims map[string]any)) string {
	header := map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": c.key.JWK()}
	claims := map[string]any{"jti": rand.Text(), "htm": method, "htu": url, "iat": c.clock.Now().Unix()}
	if token != "" {
		claims["ath"] = ath(token)
	}
	if c.nonce != "" {
		claims["nonce"] = c.nonce
	}
	for _, f := range change {
		f(header, claims)
	}
	return c.key.Sign(header, claims)
}

func ath(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

const dpopURL = "https://example.test/api/me"

// dpopLogin signs key in on m with a DPoP proof and returns the token.
func (c *dpopClient) login(t testing.TB, m *ddbsession.Manager[User], key ddbsession.UserKey) string {
	t.Helper()
	r := httptest.NewRequest("POST", "https://example.test/api/login", nil)
	r.Header.Set("DPoP", c.proof("POST", "https://example.test/api/login", ""))
	token, _, err := m.LoginBearer(r, key, nil)
	if err != nil {
		t.Fatalf("LoginBearer with a DPoP proof: %v", err)
	}
	return token
}

// dpopGet sends GET dpopURL through m's RequireSession with "Authorization:
// <scheme> <token>" and the DPoP headers proofs.
func dpopGet(m *ddbsession.Manager[User], scheme, token string, proofs ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", dpopURL, nil)
	r.Header.Set("Authorization", scheme+" "+token)
	for _, p := range proofs {
		r.Header.Add("DPoP", p)
	}
	w := httptest.NewRecorder()
	m.RequireSession(whoami(m)).ServeHTTP(w, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Wait(ctx)
	return w
}

// get sends a request with a fresh proof and, if told use_dpop_nonce,
// takes the nonce and sends it again, as a client does.
func (c *dpopClient) get(m *ddbsession.Manager[User], token string) *httptest.ResponseRecorder {
	w := dpopGet(m, "DPoP", token, c.proof("GET", dpopURL, token))
	if n := w.Header().Get("DPoP-Nonce"); n != "" {
		c.nonce = n
	}
	if w.Code == http.StatusUnauthorized && strings.Contains(w.Header().Get("WWW-Authenticate"), `error="use_dpop_nonce"`) {
		w = dpopGet(m, "DPoP", token, c.proof("GET", dpopURL, token))
	}
	return w
}

var nonceKey = []byte("0123456789abcdef0123456789abcdef")

func withDPoP(c *ddbsession.Config[User]) {
	c.BearerTokens = true
	c.DeviceBinding.DPoPNonceKeys = [][]byte{nonceKey}
}

var challengeError = regexp.MustCompile(`^DPoP error="([a-z_]+)"`)

// TestDPoPBoundToken: a token bound at login works with proofs on two
// instances of one table, and each way of sending it without its key is
// refused with 401, a DPoP challenge of the right error, and no DynamoDB
// call beyond the session read (none at all for a bad proof).
func TestDPoPBoundToken(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withDPoP)
	other := primed(t, e.cfg) // a second instance
	alice := e.putUser("alice")
	client := newDPoPClient(e.clock)
	token := client.login(t, e.m, alice)

	// The first request has no nonce yet: use_dpop_nonce, and one to use.
	p.Reset()
	w := dpopGet(e.m, "DPoP", token, client.proof("GET", dpopURL, token))
	if m := challengeError.FindStringSubmatch(w.Header().Get("WWW-Authenticate")); w.Code != 401 || m == nil || m[1] != "use_dpop_nonce" || w.Header().Get("DPoP-Nonce") == "" {
		t.Fatalf("without a nonce: %d %q nonce %q", w.Code, w.Header().Get("WWW-Authenticate"), w.Header().Get("DPoP-Nonce"))
	}
	if n := p.Total(); n != 0 {
		t.Errorf("the nonce challenge made %d calls", n)
	}
	client.nonce = w.Header().Get("DPoP-Nonce")
	for name, m := range map[string]*ddbsession.Manager[User]{"this instance": e.m, "another instance": other} {
		p.Reset()
		if w := dpopGet(m, "DPoP", token, client.proof("GET", dpopURL, token)); w.Code != 200 || w.Body.String() != "user:alice" {
			t.Errorf("%s: %d %q, want 200 user:alice", name, w.Code, w.Body)
		}
		if diff := cmp.Diff(map[string]int{"BatchGetItem": 1}, p.Calls()); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", name, diff)
		}
	}
	// The query is not part of htu, and RFC 3986's normalisation holds.
	r := httptest.NewRequest("GET", "https://Example.test:443/api/%6De?x=1", nil)
	r.Header.Set("Authorization", "DPoP "+token)
	r.Header.Set("DPoP", client.proof("GET", "HTTPS://example.TEST/api/me", token))
	w = httptest.NewRecorder()
	e.m.RequireSession(whoami(e.m)).ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("a normalised htu: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	// An app on a sub-path: the proof names the URL the client sent.
	r = httptest.NewRequest("GET", "https://example.test/app/api/me", nil)
	r.Header.Set("Authorization", "DPoP "+token)
	r.Header.Set("DPoP", client.proof("GET", "https://example.test/app/api/me", token))
	w = httptest.NewRecorder()
	http.StripPrefix("/app", e.m.RequireSession(whoami(e.m))).ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("behind http.StripPrefix: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}

	thief := newDPoPClient(e.clock)
	thief.nonce = client.nonce
	// A nonce of this window's form, but no key of the server's made it.
	forged := make([]byte, 24)
	binary.BigEndian.PutUint64(forged, uint64(e.clock.Now().Unix()/60))
	rand.Read(forged[8:])
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"dpop+jwt","alg":"none","jwk":`+mustJSON(t, client.key.JWK())+`}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"jti":"j","htm":"GET","htu":"`+dpopURL+`","iat":`+itoa(e.clock.Now().Unix())+`,"ath":"`+ath(token)+`","nonce":"`+client.nonce+`"}`)) + "."
	hs256 := func() string {
		head := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"dpop+jwt","alg":"HS256"}`))
		body := base64.RawURLEncoding.EncodeToString([]byte(`{"jti":"j2","htm":"GET","htu":"` + dpopURL + `","iat":` + itoa(e.clock.Now().Unix()) + `,"ath":"` + ath(token) + `","nonce":"` + client.nonce + `"}`))
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte(head + "." + body))
		return head + "." + body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}()
	set := func(k string, v any) func(h, c map[string]any) { return func(_, c map[string]any) { c[k] = v } }
	replayed := client.proof("GET", dpopURL, token)
	if w := dpopGet(e.m, "DPoP", token, replayed); w.Code != 200 {
		t.Fatalf("the proof to replay: %d", w.Code)
	}
	type refusal struct {
		name    string
		scheme  string
		proofs  []string
		want    string // the challenge's error
		readsOK bool   // refused after the session read, not before
	}
	refusals := []refusal{
		{"plain Bearer", "Bearer", nil, "invalid_token", true},
		{"plain Bearer with a proof", "Bearer", []string{client.proof("GET", dpopURL, token)}, "invalid_token", true},
		{"no proof", "DPoP", nil, "invalid_dpop_proof", false},
		{"two proofs", "DPoP", []string{client.proof("GET", dpopURL, token), client.proof("GET", dpopURL, token)}, "invalid_dpop_proof", false},
		{"another key", "DPoP", []string{thief.proof("GET", dpopURL, token)}, "invalid_dpop_proof", true},
		{"wrong htm", "DPoP", []string{client.proof("POST", dpopURL, token)}, "invalid_dpop_proof", false},
		{"wrong htu path", "DPoP", []string{client.proof("GET", "https://example.test/api/admin", token)}, "invalid_dpop_proof", false},
		{"wrong htu host", "DPoP", []string{client.proof("GET", "https://evil.test/api/me", token)}, "invalid_dpop_proof", false},
		{"wrong htu scheme", "DPoP", []string{client.proof("GET", "http://example.test/api/me", token)}, "invalid_dpop_proof", false},
		{"wrong ath", "DPoP", []string{client.proof("GET", dpopURL, token, set("ath", ath("another token")))}, "invalid_dpop_proof", false},
		{"no ath", "DPoP", []string{client.proof("GET", dpopURL, token, func(_, c map[string]any) { delete(c, "ath") })}, "invalid_dpop_proof", false},
		{"stale iat", "DPoP", []string{client.proof("GET", dpopURL, token, set("iat", e.clock.Now().Add(-3*time.Minute).Unix()))}, "invalid_dpop_proof", false},
		{"iat ahead", "DPoP", []string{client.proof("GET", dpopURL, token, set("iat", e.clock.Now().Add(2*time.Minute).Unix()))}, "invalid_dpop_proof", false},
		{"no nonce", "DPoP", []string{client.proof("GET", dpopURL, token, func(_, c map[string]any) { delete(c, "nonce") })}, "use_dpop_nonce", false},
		{"a nonce of another key", "DPoP", []string{client.proof("GET", dpopURL, token, set("nonce", base64.RawURLEncoding.EncodeToString(forged)))}, "use_dpop_nonce", false},
		{"alg none", "DPoP", []string{none}, "invalid_dpop_proof", false},
		{"alg HS256, keyed with the token", "DPoP", []string{hs256}, "invalid_dpop_proof", false},
		{"a private key in jwk", "DPoP", []string{client.proof("GET", dpopURL, token, func(h, _ map[string]any) { h["jwk"] = client.key.PrivateJWK() })}, "invalid_dpop_proof", false},
		{"typ jwt", "DPoP", []string{client.proof("GET", dpopURL, token, func(h, _ map[string]any) { h["typ"] = "jwt" })}, "invalid_dpop_proof", false},
	}
	// Each instance refuses each, and the one that saw a proof its copy.
	for name, m := range map[string]*ddbsession.Manager[User]{"this instance": e.m, "another instance": other} {
		cases := refusals
		if m == e.m {
			cases = append(cases, refusal{"a replayed proof, on the instance that saw it", "DPoP", []string{replayed}, "invalid_dpop_proof", true})
		}
		for _, tc := range cases {
			p.Reset()
			w := dpopGet(m, tc.scheme, token, tc.proofs...)
			challenge := w.Header().Get("WWW-Authenticate")
			if m := challengeError.FindStringSubmatch(challenge); w.Code != 401 || m == nil || m[1] != tc.want {
				t.Errorf("%s, %s: %d WWW-Authenticate %q, want 401 DPoP error=%q", name, tc.name, w.Code, challenge, tc.want)
			}
			want := map[string]int{}
			if tc.readsOK {
				want["BatchGetItem"] = 1
			}
			if diff := cmp.Diff(want, p.Calls()); diff != "" {
				t.Errorf("%s, %s: calls (-want +got):\n%s", name, tc.name, diff)
			}
			if tc.want == "use_dpop_nonce" && w.Header().Get("DPoP-Nonce") == "" {
				t.Errorf("%s, %s: no DPoP-Nonce", name, tc.name)
			}
		}
	}

	// The token in a cookie is no way round the binding.
	r = httptest.NewRequest("GET", dpopURL, nil)
	r.AddCookie(&http.Cookie{Name: cookieName, Value: token})
	w = httptest.NewRecorder()
	e.m.RequireSession(whoami(e.m)).ServeHTTP(w, r)
	if w.Code != 401 {
		t.Errorf("the bound token as a cookie: %d", w.Code)
	}
	// Nor is Authenticate, which sees no proof.
	if _, _, err := e.m.Authenticate(context.Background(), token); !errors.Is(err, ddbsession.ErrNoSession) {
		t.Errorf("Authenticate of a bound token = %v, want ErrNoSession", err)
	}
	// And the key still works after all of that.
	if w := client.get(e.m, token); w.Code != 200 {
		t.Errorf("the client after the refusals: %d", w.Code)
	}
}

// TestDPoPReplay: a proof copied with its token is refused on the instance
// that saw it; another instance takes it once, the documented bound, and
// no instance takes it once its nonce has expired: at most two nonce
// windows (2 minutes) after the nonce was issued.
func TestDPoPReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDPoP)
	other := primed(t, e.cfg)
	third := primed(t, e.cfg)
	alice := e.putUser("alice")
	client := newDPoPClient(e.clock)
	token := client.login(t, e.m, alice)
	if w := client.get(e.m, token); w.Code != 200 {
		t.Fatalf("first request: %d", w.Code)
	}
	proof := client.proof("GET", dpopURL, token)
	for i, step := range []struct {
		m    *ddbsession.Manager[User]
		want int
	}{{e.m, 200}, {e.m, 401}, {other, 200}, {other, 401}, {e.m, 401}} {
		if w := dpopGet(step.m, "DPoP", token, proof); w.Code != step.want {
			t.Errorf("step %d: %d, want %d", i, w.Code, step.want)
		}
	}
	// The nonce lasts the window it was issued in and the next: a third
	// instance, which never saw the proof, refuses it once both are over.
	issued := e.clock.Now()
	e.clock.Set(issued.Truncate(time.Minute).Add(2 * time.Minute))
	w := dpopGet(third, "DPoP", token, proof)
	if m := challengeError.FindStringSubmatch(w.Header().Get("WWW-Authenticate")); w.Code != 401 || m == nil || m[1] != "use_dpop_nonce" {
		t.Errorf("the copy two nonce windows on: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	// Whereas the client, with its key, renews its nonce and goes on.
	if w := client.get(third, token); w.Code != 200 {
		t.Errorf("the client after the nonce expired: %d", w.Code)
	}
	// A nonce of the last window works, and brings the current one.
	e.clock.Advance(time.Minute)
	w = dpopGet(e.m, "DPoP", token, client.proof("GET", dpopURL, token))
	if w.Code != 200 || w.Header().Get("DPoP-Nonce") == "" || w.Header().Get("DPoP-Nonce") == client.nonce {
		t.Errorf("a nonce of the last window: %d, DPoP-Nonce %q", w.Code, w.Header().Get("DPoP-Nonce"))
	}
}

// TestDPoPSessionLifecycle: a bound session refreshes, is listed and
// revoked like any bearer session, and stays bound through its refresh at
// no write per request in between.
func TestDPoPSessionLifecycle(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withDPoP)
	alice := e.putUser("alice")
	client := newDPoPClient(e.clock)
	token := client.login(t, e.m, alice)
	list := e.mustList(alice)
	if len(list) != 1 || !list[0].DeviceBound {
		t.Fatalf("List = %+v, want one device-bound session", list)
	}
	client.get(e.m, token)
	p.Reset()
	for range 3 {
		e.clock.Advance(time.Minute)
		if w := client.get(e.m, token); w.Code != 200 {
			t.Fatalf("request: %d", w.Code)
		}
	}
	if diff := cmp.Diff(map[string]int{"BatchGetItem": 3}, p.Calls()); diff != "" {
		t.Errorf("three requests between refreshes: calls (-want +got):\n%s", diff)
	}
	e.clock.Advance(10 * time.Minute)
	w := client.get(e.m, token)
	if w.Code != 200 || w.Header().Get("Session-Expires") == "" {
		t.Errorf("the refreshing request: %d, Session-Expires %q", w.Code, w.Header().Get("Session-Expires"))
	}
	if w := dpopGet(e.m, "Bearer", token); w.Code != 401 {
		t.Errorf("plain Bearer after the refresh: %d", w.Code)
	}
	if w := client.get(e.m, token); w.Code != 200 {
		t.Errorf("after the refresh: %d", w.Code)
	}
	// Past the expiry the login set: the refresh's write landed, and left
	// the session bound.
	e.clock.Advance(55 * time.Minute)
	if w := client.get(e.m, token); w.Code != 200 {
		t.Errorf("past the login's expiry: %d", w.Code)
	}
	if w := dpopGet(e.m, "Bearer", token); w.Code != 401 {
		t.Errorf("plain Bearer past the login's expiry: %d", w.Code)
	}
	// A step-up guard answers in the request's scheme.
	guarded := e.m.RequireSession(e.m.RequireAuthentication(time.Minute)(whoami(e.m)))
	r := httptest.NewRequest("GET", dpopURL, nil)
	r.Header.Set("Authorization", "DPoP "+token)
	r.Header.Set("DPoP", client.proof("GET", dpopURL, token))
	w = httptest.NewRecorder()
	guarded.ServeHTTP(w, r)
	if got := w.Header().Get("WWW-Authenticate"); w.Code != 401 || !strings.HasPrefix(got, `DPoP error="insufficient_user_authentication"`) {
		t.Errorf("a step-up guard: %d %q", w.Code, got)
	}
	if err := e.m.RevokeAll(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	w = client.get(e.m, token)
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != `DPoP error="invalid_token", algs="ES256 RS256"` {
		t.Errorf("after RevokeAll: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if list := e.mustList(alice); len(list) != 0 {
		t.Errorf("List after RevokeAll = %+v", list)
	}
}

// TestDPoPLogin: a login's proof is checked like a request's, without a
// nonce or ath; RequireDPoP refuses a login without one, at no call; a
// copy of a login's proof signs nobody in on the instance that saw it; and
// a token of a login without a proof is a plain bearer token, which a
// proof does not turn into a DPoP one.
func TestDPoPLogin(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withProbe(&p), withDPoP, func(c *ddbsession.Config[User]) { c.DeviceBinding.RequireDPoP = true })
	alice := e.putUser("alice")
	client := newDPoPClient(e.clock)
	const loginURL = "https://example.test/api/login"
	login := func(proofs ...string) error {
		r := httptest.NewRequest("POST", loginURL, nil)
		for _, pr := range proofs {
			r.Header.Add("DPoP", pr)
		}
		_, _, err := e.m.LoginBearer(r, alice, nil)
		return err
	}
	p.Reset()
	for name, proofs := range map[string][]string{
		"none":      nil,
		"wrong htm": {client.proof("GET", loginURL, "")},
		"wrong htu": {client.proof("POST", dpopURL, "")},
		"stale":     {client.proof("POST", loginURL, "", func(_, c map[string]any) { c["iat"] = e.clock.Now().Add(-time.Hour).Unix() })},
	} {
		if err := login(proofs...); !errors.Is(err, ddbsession.ErrInvalidDPoPProof) {
			t.Errorf("login, proof %s: %v, want ErrInvalidDPoPProof", name, err)
		}
	}
	if n := p.Total(); n != 0 {
		t.Errorf("the refused logins made %d calls", n)
	}
	proof := client.proof("POST", loginURL, "")
	if err := login(proof); err != nil {
		t.Fatal(err)
	}
	if err := login(proof); !errors.Is(err, ddbsession.ErrInvalidDPoPProof) {
		t.Errorf("a login proof used again: %v, want ErrInvalidDPoPProof", err)
	}

	// A re-authentication: LoginBearer behind RequireSession, one proof
	// for both, binds the new session to the same key.
	token := client.login(t, e.m, alice)
	client.get(e.m, token)
	var fresh string
	reauth := e.m.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		if fresh, _, err = e.m.LoginBearer(r, alice, nil); err != nil {
			t.Errorf("re-authentication: %v", err)
		}
	}))
	r := httptest.NewRequest("POST", "https://example.test/api/reauth", nil)
	r.Header.Set("Authorization", "DPoP "+token)
	r.Header.Set("DPoP", client.proof("POST", "https://example.test/api/reauth", token))
	reauth.ServeHTTP(httptest.NewRecorder(), r)
	if w := client.get(e.m, fresh); w.Code != 200 {
		t.Errorf("the re-authenticated token: %d", w.Code)
	}
	if w := dpopGet(e.m, "Bearer", fresh); w.Code != 401 {
		t.Errorf("the re-authenticated token as Bearer: %d", w.Code)
	}
	if w := client.get(e.m, token); w.Code != 401 {
		t.Errorf("the token before the re-authentication: %d", w.Code)
	}

	// Without RequireDPoP, a login without a proof makes a plain token.
	plain := newEnv(t, withDPoP)
	bob := plain.putUser("bob")
	tok := plain.bearerLogin(bob)
	if w := dpopGet(plain.m, "Bearer", tok.Token); w.Code != 200 {
		t.Errorf("a plain token as Bearer: %d", w.Code)
	}
	w := dpopGet(plain.m, "DPoP", tok.Token, client.proof("GET", dpopURL, tok.Token))
	if m := challengeError.FindStringSubmatch(w.Header().Get("WWW-Authenticate")); w.Code != 401 || m == nil {
		t.Errorf("a plain token as DPoP: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
}

// TestDPoPNonceKeys: a Manager's own random key serves one instance; a
// shared key, two; a key rotated in keeps the old one's nonces working, and
// answers them with a nonce of the new key.
func TestDPoPNonceKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ddbsession.Config[User]) { c.BearerTokens = true })
	other := primed(t, e.cfg)
	alice := e.putUser("alice")
	client := newDPoPClient(e.clock)
	token := client.login(t, e.m, alice)
	if w := client.get(e.m, token); w.Code != 200 {
		t.Fatalf("on the instance: %d", w.Code)
	}
	w := dpopGet(other, "DPoP", token, client.proof("GET", dpopURL, token))
	if m := challengeError.FindStringSubmatch(w.Header().Get("WWW-Authenticate")); w.Code != 401 || m == nil || m[1] != "use_dpop_nonce" {
		t.Errorf("another instance's nonce, without shared keys: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}

	rotated := e.cfg
	rotated.BearerTokens = true
	rotated.DeviceBinding.DPoPNonceKeys = [][]byte{[]byte("a new key, of 32 bytes or more!!"), nonceKey}
	old := e.cfg
	old.DeviceBinding.DPoPNonceKeys = [][]byte{nonceKey}
	before, after := primed(t, old), primed(t, rotated)
	client.nonce = ""
	client.get(before, token)
	w = dpopGet(after, "DPoP", token, client.proof("GET", dpopURL, token))
	if w.Code != 200 || w.Header().Get("DPoP-Nonce") == "" {
		t.Errorf("the old key's nonce after a rotation: %d, DPoP-Nonce %q", w.Code, w.Header().Get("DPoP-Nonce"))
	}

	for _, key := range [][]byte{nil, []byte("short")} {
		cfg := e.cfg
		cfg.DeviceBinding.DPoPNonceKeys = [][]byte{key}
		if _, err := ddbsession.New(cfg); err == nil || !strings.Contains(err.Error(), "DPoPNonceKeys[0]") {
			t.Errorf("a key of %d bytes: New = %v", len(key), err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A login's proof is remembered before its credential is checked, so
// anyone can send them: they fill a cache of their own, and a full one
// refuses only logins with a proof, never a signed-in client's requests.
func TestDPoPLoginProofsCannotFillTheRequestsCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withDPoP)
	alice := e.putUser("alice")
	client := newDPoPClient(e.clock)
	token := client.login(t, e.m, alice)
	if w := client.get(e.m, token); w.Code != http.StatusOK {
		t.Fatalf("alice's first request: %d", w.Code)
	}
	const loginURL = "https://example.test/api/login"
	failedLogin := func() error {
		mallory := newDPoPClient(e.clock) // a fresh key, no account
		r := httptest.NewRequest("POST", loginURL, nil)
		r.Header.Set("DPoP", mallory.proof("POST", loginURL, "", func(_, c map[string]any) {
			c["iat"] = e.clock.Now().Add(time.Minute).Unix() // the longest-lived entry
		}))
		_, _, err := e.m.LoginBearer(r, ddbsession.UserKey{PK: "USER#nobody", SK: "PROFILE"}, nil)
		return err
	}
	requests, _ := ddbsession.DPoPCacheLens(e.m)
	if err := failedLogin(); !errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Fatalf("a login of no user: %v, want ErrUserNotFound", err)
	}
	if after, logins := ddbsession.DPoPCacheLens(e.m); after != requests || logins == 0 {
		t.Errorf("a failed login's proof: the requests' cache went from %d to %d, the logins' holds %d; want it in the logins'", requests, after, logins)
	}

	// The logins' cache full, as a flood of such logins leaves it.
	ddbsession.FillDPoPLoginCache(e.m, e.clock.Now().Add(3*time.Minute))
	if err := failedLogin(); err == nil || errors.Is(err, ddbsession.ErrInvalidDPoPProof) || errors.Is(err, ddbsession.ErrUserNotFound) {
		t.Errorf("a login with a proof once the logins' cache is full: %v, want refused, and not as the client's fault", err)
	}
	e.clock.Advance(time.Second)
	if w := client.get(e.m, token); w.Code != http.StatusOK {
		t.Errorf("alice's request with the logins' cache full: %d, want 200", w.Code)
	}
}
