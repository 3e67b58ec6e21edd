package ddbsession_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// withDeviceBinding turns device binding on, with a bound cookie of
// lifetime.
func withDeviceBinding(lifetime time.Duration) func(*ddbsession.Config[User]) {
	return func(c *ddbsession.Config[User]) {
		c.DeviceBinding = ddbsession.DeviceBinding{Enabled: true, CookieLifetime: lifetime}
	}
}

// boundBrowser is a browser with a device key: its cookies, and the
// challenge it keeps for its next refresh.
type boundBrowser struct {
	e         *env
	device    *dbsctest.Device
	session   *http.Cookie
	bound     *http.Cookie
	id        string // the DBSC session identifier
	challenge string // cached for the next refresh
}

// loginOffered signs key in and returns the browser with its session
// cookie and the registration offer of the login's response.
func (e *env) loginOffered(device *dbsctest.Device, key ddbsession.UserKey) (*boundBrowser, dbsctest.Offer) {
	e.t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "https://example.test/login", nil)
	if err := e.m.Login(w, r, key, nil); err != nil {
		e.t.Fatalf("Login: %v", err)
	}
	offer, err := dbsctest.ParseOffer(w.Header().Get("Secure-Session-Registration"))
	if err != nil {
		e.t.Fatalf("Login's offer: %v", err)
	}
	return &boundBrowser{e: e, device: device, session: sessionCookie(e.t, w.Result(), cookieName)}, offer
}

// post sends a DBSC request with the browser's cookies and headers.
func (b *boundBrowser) post(path string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "https://example.test"+path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	for _, c := range []*http.Cookie{b.session, b.bound} {
		if c != nil {
			r.AddCookie(c)
		}
	}
	w := httptest.NewRecorder()
	b.e.m.DeviceBindingHandler().ServeHTTP(w, r)
	return w
}

// take keeps what a successful registration or refresh sent: the bound
// cookie, the session identifier and the next challenge.
func (b *boundBrowser) take(w *httptest.ResponseRecorder) sessionConfig {
	b.e.t.Helper()
	if w.Code != http.StatusOK {
		b.e.t.Fatalf("status %d, body %q", w.Code, w.Body)
	}
	var cfg sessionConfig
	if err := json.Unmarshal(w.Body.Bytes(), &cfg); err != nil {
		b.e.t.Fatalf("session config %q: %v", w.Body, err)
	}
	if c := sessionCookie(b.e.t, w.Result(), "__Host-bound"); c != nil {
		b.bound = c
	}
	challenge, id, err := dbsctest.ParseChallenge(w.Header().Get("Secure-Session-Challenge"))
	if err != nil {
		b.e.t.Fatal(err)
	}
	b.id, b.challenge = cfg.SessionIdentifier, challenge
	if id != b.id {
		b.e.t.Fatalf("challenge for %q, session %q", id, b.id)
	}
	return cfg
}

// register answers offer with the device key.
func (b *boundBrowser) register(offer dbsctest.Offer) sessionConfig {
	b.e.t.Helper()
	return b.take(b.post(offer.Path, http.Header{"Secure-Session-Response": {b.device.Registration(offer.Challenge)}}))
}

// refresh refreshes the bound cookie as Chromium does: with the cached
// challenge signed, and once more with the one a 403 sends.
func (b *boundBrowser) refresh() {
	b.e.t.Helper()
	h := http.Header{"Sec-Secure-Session-Id": {b.id}}
	if b.challenge != "" {
		h.Set("Secure-Session-Response", b.device.Refresh(b.challenge))
	}
	w := b.post("/dbsc/refresh", h)
	if w.Code == http.StatusForbidden {
		challenge, _, err := dbsctest.ParseChallenge(w.Header().Get("Secure-Session-Challenge"))
		if err != nil {
			b.e.t.Fatal(err)
		}
		h.Set("Secure-Session-Response", b.device.Refresh(challenge))
		w = b.post("/dbsc/refresh", h)
	}
	b.take(w)
}

// status is a protected request's status with the browser's cookies.
func (b *boundBrowser) status() int {
	b.e.t.Helper()
	cookies := []*http.Cookie{b.session}
	if b.bound != nil {
		cookies = append(cookies, b.bound)
	}
	return b.e.get(b.e.m.RequireSession(whoami(b.e.m)), cookies...).Code
}

// sessionConfig is DBSC's session configuration as a browser reads it.
type sessionConfig struct {
	SessionIdentifier string `json:"session_identifier"`
	Continue          *bool  `json:"continue"`
	RefreshURL        string `json:"refresh_url"`
	Scope             *struct {
		IncludeSite *bool `json:"include_site"`
	} `json:"scope"`
	Credentials []struct {
		Type       string `json:"type"`
		Name       string `json:"name"`
		Attributes string `json:"attributes"`
	} `json:"credentials"`
}

func TestDeviceBindingLifecycle(t *testing.T) {
	for _, device := range []*dbsctest.Device{dbsctest.NewES256(), dbsctest.NewRS256()} {
		t.Run(device.Alg, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withDeviceBinding(10*time.Minute))
			key := e.putUser("alice")
			b, offer := e.loginOffered(device, key)
			if offer.Algs != "ES256 RS256" || offer.Path != "/dbsc/register" {
				t.Fatalf("offer %+v", offer)
			}
			if got := b.status(); got != http.StatusOK {
				t.Fatalf("before registration: status %d", got)
			}

			cfg := b.register(offer)
			if cfg.RefreshURL != "/dbsc/refresh" || cfg.Scope == nil || cfg.Scope.IncludeSite == nil || *cfg.Scope.IncludeSite ||
				len(cfg.Credentials) != 1 || cfg.Credentials[0].Name != "__Host-bound" || cfg.Credentials[0].Type != "cookie" ||
				cfg.Credentials[0].Attributes != "Path=/; Secure; HttpOnly; SameSite=Lax" {
				t.Fatalf("session config %+v", cfg)
			}
			if cfg.SessionIdentifier != e.mustList(key)[0].ID {
				t.Fatalf("session_identifier %q is not the session's ID", cfg.SessionIdentifier)
			}
			// The table keeps the cookie until 12:10:00 (10 minutes from
			// 12:00:00.25, in whole seconds); the browser is told to drop
			// it 5 s sooner, so that it refreshes before the table would
			// refuse it: 12:10:00 - 12:00:05.25, in whole seconds.
			if b.bound == nil || b.bound.MaxAge != 594 || !b.bound.Secure || !b.bound.HttpOnly || b.bound.Path != "/" || b.bound.SameSite != http.SameSiteLaxMode {
				t.Fatalf("bound cookie %+v", b.bound)
			}
			if got := b.status(); got != http.StatusOK {
				t.Fatalf("bound, with both cookies: status %d", got)
			}
			if list := e.mustList(key); len(list) != 1 || !list[0].DeviceBound {
				t.Fatalf("List: %+v", list)
			}

			// The session cookie alone is a copy: refused, and not cleared.
			w := e.get(e.m.RequireSession(whoami(e.m)), b.session)
			if w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
				t.Fatalf("session cookie alone: status %d, cookies %v", w.Code, w.Result().Cookies())
			}

			// A request the browser sends as its cookie runs out, and
			// that takes 4 s to arrive, is still let in.
			lastMoment := time.Duration(b.bound.MaxAge)*time.Second + 4*time.Second
			e.clock.Advance(lastMoment)
			if got := b.status(); got != http.StatusOK {
				t.Fatalf("a request sent as the browser's bound cookie ran out: status %d", got)
			}
			// Past the bound cookie's expiry both cookies are refused,
			// until a refresh proves the device again.
			e.clock.Advance(10*time.Minute - lastMoment)
			if got := b.status(); got != http.StatusUnauthorized {
				t.Fatalf("bound cookie expired: status %d", got)
			}
			b.refresh()
			if got := b.status(); got != http.StatusOK {
				t.Fatalf("after refresh: status %d", got)
			}
			// Without a cached challenge: 403, then the signed one.
			b.challenge = ""
			b.refresh()
			if got := b.status(); got != http.StatusOK {
				t.Fatalf("after the second refresh: status %d", got)
			}

			// Logout ends the session; its next refresh ends the binding.
			lw := httptest.NewRecorder()
			lr := httptest.NewRequest("POST", "https://example.test/logout", nil)
			lr.AddCookie(b.session)
			lr.AddCookie(b.bound)
			if err := e.m.Logout(lw, lr); err != nil {
				t.Fatal(err)
			}
			if c := sessionCookie(t, lw.Result(), "__Host-bound"); c == nil || c.MaxAge >= 0 {
				t.Fatalf("Logout left the bound cookie: %v", lw.Result().Cookies())
			}
			rw := b.post("/dbsc/refresh", http.Header{"Sec-Secure-Session-Id": {b.id}, "Secure-Session-Response": {b.device.Refresh(b.challenge)}})
			var end sessionConfig
			if err := json.Unmarshal(rw.Body.Bytes(), &end); rw.Code != http.StatusOK || err != nil || end.Continue == nil || *end.Continue || end.SessionIdentifier != b.id {
				t.Fatalf("refresh after Logout: status %d, body %q", rw.Code, rw.Body)
			}
		})
	}
}

// The protocol's edge cases, with a Go client that plays the browser: what
// a device (or a thief, or a confused browser) may send to the registration
// and refresh endpoints, and what the middleware does with bound sessions.
// Each refusal is checked three ways: its status, that no bound cookie was
// issued, and that the table is exactly as it was (a scan before and after),
// and where the design promises it, how many DynamoDB calls it cost.

// algs are DBSC's two algorithms; the protocol tests run for both.
var algs = []string{"ES256", "RS256"}

// eachAlg runs test as a parallel subtest for each of algs.
func eachAlg(t *testing.T, test func(t *testing.T, alg string)) {
	t.Helper()
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			test(t, alg)
		})
	}
}

// deviceKeys holds three device keys per algorithm, made once: an RSA key
// takes a while to generate, and the tests need distinct keys, not fresh
// ones (each test has a table of its own).
var deviceKeys = sync.OnceValue(func() map[string][3]*dbsctest.Device {
	keys := map[string][3]*dbsctest.Device{}
	for _, alg := range algs {
		var d [3]*dbsctest.Device
		for i := range d {
			if alg == "RS256" {
				d[i] = dbsctest.NewRS256()
			} else {
				d[i] = dbsctest.NewES256()
			}
		}
		keys[alg] = d
	}
	return keys
})

// devicesOf returns three distinct device keys of alg.
func devicesOf(alg string) [3]*dbsctest.Device { return deviceKeys()[alg] }

// otherAlg is the algorithm that is not alg.
func otherAlg(alg string) string {
	if alg == "ES256" {
		return "RS256"
	}
	return "ES256"
}

// newBoundEnv is an env with device binding on (bound cookies of 10
// minutes, sessions idle for an hour) and a probe that counts its calls.
// The store is patient: the tests time nothing.
func newBoundEnv(t *testing.T, mutate ...func(*ddbsession.Config[User])) (*env, *ddbtest.Probe) {
	t.Helper()
	var p *ddbtest.Probe
	e := newEnv(t, append([]func(*ddbsession.Config[User]){withProbe(&p), withDeviceBinding(10 * time.Minute)}, mutate...)...)
	return e, p
}

// bound signs key in on a browser with device and registers it: a bound
// session, with its bound cookie and the challenge for its next refresh.
func (e *env) bound(device *dbsctest.Device, key ddbsession.UserKey) *boundBrowser {
	e.t.Helper()
	b, offer := e.loginOffered(device, key)
	b.register(offer)
	if b.bound == nil || b.id == "" || b.challenge == "" {
		e.t.Fatalf("registration left the browser with bound cookie %v, id %q, challenge %q", b.bound, b.id, b.challenge)
	}
	return b
}

// use makes t, a subtest run in sequence, the test that the env's helpers
// report to until t ends.
func (e *env) use(t testing.TB) {
	parent := e.t
	e.t = t
	t.Cleanup(func() { e.t = parent })
}

// snapshot is the whole table, item by item, for comparing before and
// after a request that must change nothing.
func (e *env) snapshot() []string {
	e.t.Helper()
	return itemsText(e.scanAll())
}

// assertUnchanged fails the test if the table differs from before.
func (e *env) assertUnchanged(before []string, what string) {
	e.t.Helper()
	if diff := cmp.Diff(before, e.snapshot()); diff != "" {
		e.t.Errorf("%s changed the table (-before +after):\n%s", what, diff)
	}
}

// boundSetCookies returns the bound cookies a response sets or clears.
func boundSetCookies(w *httptest.ResponseRecorder) []*http.Cookie {
	var found []*http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == "__Host-bound" {
			found = append(found, c)
		}
	}
	return found
}

// assertNoBoundCookie fails unless w neither sets nor clears a bound
// cookie.
func assertNoBoundCookie(t *testing.T, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	if c := boundSetCookies(w); len(c) != 0 {
		t.Errorf("%s: the response sets bound cookies %v", what, c)
	}
}

// assertEnded checks that w ends the browser's binding of session id:
// 200 with {"session_identifier": id, "continue": false}.
func assertEnded(t *testing.T, w *httptest.ResponseRecorder, id, what string) {
	t.Helper()
	var cfg sessionConfig
	if err := json.Unmarshal(w.Body.Bytes(), &cfg); w.Code != http.StatusOK || err != nil ||
		cfg.SessionIdentifier != id || cfg.Continue == nil || *cfg.Continue {
		t.Errorf("%s: status %d, body %q; want 200 and {\"session_identifier\":%q,\"continue\":false}", what, w.Code, w.Body, id)
	}
	for _, c := range boundSetCookies(w) {
		if c.Value != "" {
			t.Errorf("%s: the answer that ends the binding sets a bound cookie %v", what, c)
		}
	}
}

// challengeOf returns the challenge of a 403's Secure-Session-Challenge,
// and fails unless it is for session id.
func challengeOf(t *testing.T, w *httptest.ResponseRecorder, id string) string {
	t.Helper()
	challenge, forID, err := dbsctest.ParseChallenge(w.Header().Get("Secure-Session-Challenge"))
	if err != nil {
		t.Fatalf("status %d: %v", w.Code, err)
	}
	if forID != id {
		t.Fatalf("a challenge for session %q, want %q", forID, id)
	}
	return challenge
}

// refreshWith posts a refresh of b's session, with jwt in
// Secure-Session-Response unless it is empty.
func (b *boundBrowser) refreshWith(jwt string) *httptest.ResponseRecorder {
	h := http.Header{"Sec-Secure-Session-Id": {b.id}}
	if jwt != "" {
		h.Set("Secure-Session-Response", jwt)
	}
	return b.post("/dbsc/refresh", h)
}

// registerWith posts a registration with jwt in Secure-Session-Response
// unless it is empty.
func (b *boundBrowser) registerWith(jwt string) *httptest.ResponseRecorder {
	h := http.Header{}
	if jwt != "" {
		h.Set("Secure-Session-Response", jwt)
	}
	return b.post("/dbsc/register", h)
}

// chromiumRefresh refreshes as Chromium does, without failing on the
// outcome: the cached challenge signed, if any, and after a 403 the new
// one. It returns the last answer.
func (b *boundBrowser) chromiumRefresh() *httptest.ResponseRecorder {
	b.e.t.Helper()
	var jwt string
	if b.challenge != "" {
		jwt = b.device.Refresh(b.challenge)
	}
	w := b.refreshWith(jwt)
	if w.Code == http.StatusForbidden {
		challenge, _, err := dbsctest.ParseChallenge(w.Header().Get("Secure-Session-Challenge"))
		if err != nil {
			b.e.t.Fatalf("403 without a challenge: %v", err)
		}
		w = b.refreshWith(b.device.Refresh(challenge))
	}
	return w
}

// statusWith is a protected request's status with the given cookies.
func (e *env) statusWith(cookies ...*http.Cookie) int {
	e.t.Helper()
	return e.get(e.m.RequireSession(whoami(e.m)), cookies...).Code
}

// jwtParts splits a compact JWS; rawJWT joins one.
func jwtParts(jwt string) (header, payload, sig string) {
	parts := strings.Split(jwt, ".")
	return parts[0], parts[1], parts[2]
}

func rawJWT(header, payload string, sig []byte) string {
	return b64(header) + "." + b64(payload) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// flipSignatureBit changes one bit in the middle of a token's signature,
// which stays well-formed base64url of the right length.
func flipSignatureBit(t *testing.T, jwt string) string {
	t.Helper()
	h, p, s := jwtParts(jwt)
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)/2] ^= 0x10
	return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// withJWK returns device's JWK with changes applied to a copy.
func withJWK(device *dbsctest.Device, change func(jwk map[string]string)) map[string]string {
	jwk := device.JWK()
	change(jwk)
	return jwk
}

// registrationRefusal is a registration that must be refused: what it
// sends in Secure-Session-Response (built from the browser, its offer, and
// a second key), with or without the session cookie, and what it costs.
type registrationRefusal struct {
	name     string
	jwt      func(t *testing.T, b *boundBrowser, offer dbsctest.Offer, other *dbsctest.Device) string
	noCookie bool
	status   int
	reads    int // BatchGetItem calls; no other call is allowed
}

func registrationRefusals(alg string) []registrationRefusal {
	sign := func(b *boundBrowser, header, payload map[string]any) string { return b.device.Sign(header, payload) }
	regHeader := func(b *boundBrowser) map[string]any {
		return map[string]any{"alg": b.device.Alg, "typ": "dbsc+jwt", "jwk": b.device.JWK()}
	}
	cases := []registrationRefusal{
		{name: "bad signature", status: 400, jwt: func(t *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			return flipSignatureBit(t, b.device.Registration(o.Challenge))
		}},
		{name: "signed by another key than its jwk", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, other *dbsctest.Device) string {
			return other.Sign(regHeader(b), map[string]any{"jti": o.Challenge})
		}},
		{name: "alg none, no signature", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			jwk, _ := json.Marshal(b.device.JWK())
			return rawJWT(`{"alg":"none","jwk":`+string(jwk)+`,"typ":"dbsc+jwt"}`, `{"jti":"`+o.Challenge+`"}`, nil)
		}},
		{name: "alg none, signed", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["alg"] = "none"
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "alg HS256", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["alg"] = "HS256"
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "alg of the other key type (" + otherAlg(alg) + ")", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["alg"] = otherAlg(alg)
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "alg in lower case", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["alg"] = strings.ToLower(alg)
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "typ missing", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			delete(h, "typ")
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "typ jwt", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["typ"] = "jwt"
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "no jti", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			return sign(b, regHeader(b), map[string]any{"authorization": o.Challenge})
		}},
		{name: "empty jti", status: 400, jwt: func(_ *testing.T, b *boundBrowser, _ dbsctest.Offer, _ *dbsctest.Device) string {
			return sign(b, regHeader(b), map[string]any{"jti": ""})
		}},
		{name: "jti not a string", status: 400, jwt: func(_ *testing.T, b *boundBrowser, _ dbsctest.Offer, _ *dbsctest.Device) string {
			return sign(b, regHeader(b), map[string]any{"jti": 42})
		}},
		{name: "no jwk (a refresh JWT)", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			return b.device.Refresh(o.Challenge)
		}},
		{name: "a private key in the jwk", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["jwk"] = withJWK(b.device, func(jwk map[string]string) { jwk["d"] = b64("not really a private key") })
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "crit header", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h := regHeader(b)
			h["crit"] = []string{"exp"}
			return sign(b, h, map[string]any{"jti": o.Challenge})
		}},
		{name: "oversized (over 8 KiB)", status: 400, jwt: func(t *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			jwt := sign(b, regHeader(b), map[string]any{"jti": o.Challenge, "pad": strings.Repeat("x", 8<<10)})
			if len(jwt) <= 8<<10 {
				t.Fatalf("the oversized JWT has %d bytes", len(jwt))
			}
			return jwt
		}},
		{name: "malformed base64 header", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			_, p, s := jwtParts(b.device.Registration(o.Challenge))
			return "ey!J." + p + "." + s
		}},
		{name: "padded base64 payload", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h, _, s := jwtParts(b.device.Registration(o.Challenge))
			return h + "." + base64.URLEncoding.EncodeToString([]byte(`{"jti":"`+o.Challenge+`"}x`)) + "." + s
		}},
		{name: "malformed JSON payload", status: 400, jwt: func(_ *testing.T, b *boundBrowser, _ dbsctest.Offer, _ *dbsctest.Device) string {
			header, _ := json.Marshal(regHeader(b))
			return b.device.SignRaw(header, []byte(`{"jti":`))
		}},
		{name: "malformed JSON header", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			return b.device.SignRaw([]byte(`{"alg":"`+alg+`",`), []byte(`{"jti":"`+o.Challenge+`"}`))
		}},
		{name: "two parts", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			h, p, _ := jwtParts(b.device.Registration(o.Challenge))
			return h + "." + p
		}},
		{name: "four parts", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			return b.device.Registration(o.Challenge) + ".e30"
		}},
		{name: "no JWT", status: 400, jwt: func(*testing.T, *boundBrowser, dbsctest.Offer, *dbsctest.Device) string { return "" }},
		{name: "no session cookie", status: 401, noCookie: true, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
			return b.device.Registration(o.Challenge)
		}},
		// The JWT is sound; the session, read once, refuses it.
		{name: "jti not the session's challenge", status: 400, reads: 1, jwt: func(_ *testing.T, b *boundBrowser, _ dbsctest.Offer, _ *dbsctest.Device) string {
			return b.device.Registration("AAAAAAAAAAAAAAAAAAAAAAAAAA")
		}},
		{name: "jti another session's challenge", status: 400, reads: 1, jwt: func(_ *testing.T, b *boundBrowser, _ dbsctest.Offer, _ *dbsctest.Device) string {
			_, other := b.e.loginOffered(b.device, b.e.putUser("bob"))
			return b.device.Registration(other.Challenge)
		}},
	}
	if alg == "ES256" {
		cases = append(cases,
			registrationRefusal{name: "EC point not on the curve", status: 400, jwt: func(t *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
				h := regHeader(b)
				h["jwk"] = withJWK(b.device, func(jwk map[string]string) {
					y, err := base64.RawURLEncoding.DecodeString(jwk["y"])
					if err != nil {
						t.Fatal(err)
					}
					y[len(y)-1] ^= 1
					jwk["y"] = base64.RawURLEncoding.EncodeToString(y)
				})
				return sign(b, h, map[string]any{"jti": o.Challenge})
			}},
			registrationRefusal{name: "curve P-384 named", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
				h := regHeader(b)
				h["jwk"] = withJWK(b.device, func(jwk map[string]string) { jwk["crv"] = "P-384" })
				return sign(b, h, map[string]any{"jti": o.Challenge})
			}},
			registrationRefusal{name: "x longer than 32 bytes", status: 400, jwt: func(t *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
				h := regHeader(b)
				h["jwk"] = withJWK(b.device, func(jwk map[string]string) {
					x, err := base64.RawURLEncoding.DecodeString(jwk["x"])
					if err != nil {
						t.Fatal(err)
					}
					jwk["x"] = base64.RawURLEncoding.EncodeToString(append([]byte{0}, x...))
				})
				return sign(b, h, map[string]any{"jti": o.Challenge})
			}},
		)
	} else {
		cases = append(cases,
			registrationRefusal{name: "RSA key of 1024 bits", status: 400, jwt: func(t *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
				return rsa1024().Registration(o.Challenge)
			}},
			registrationRefusal{name: "RSA exponent 1", status: 400, jwt: func(_ *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
				h := regHeader(b)
				h["jwk"] = withJWK(b.device, func(jwk map[string]string) { jwk["e"] = "AQ" })
				return sign(b, h, map[string]any{"jti": o.Challenge})
			}},
			registrationRefusal{name: "RSA modulus with a leading zero byte", status: 400, jwt: func(t *testing.T, b *boundBrowser, o dbsctest.Offer, _ *dbsctest.Device) string {
				h := regHeader(b)
				h["jwk"] = withJWK(b.device, func(jwk map[string]string) {
					n, err := base64.RawURLEncoding.DecodeString(jwk["n"])
					if err != nil {
						t.Fatal(err)
					}
					jwk["n"] = base64.RawURLEncoding.EncodeToString(append([]byte{0}, n...))
				})
				return sign(b, h, map[string]any{"jti": o.Challenge})
			}},
		)
	}
	return cases
}

// rsa1024 is a device with a 1024-bit RSA key, which DBSC's servers must
// refuse as weak; made once.
var rsa1024 = sync.OnceValue(func() *dbsctest.Device {
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	return dbsctest.New(key)
})

// TestDeviceRegistrationRefused sends registrations that a server must
// refuse: each gets its status, issues no bound cookie, changes nothing in
// the table (the session stays unbound and keeps its challenge, so the
// real device can still register), and costs no DynamoDB call unless the
// JWT is sound and only the session can tell.
func TestDeviceRegistrationRefused(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		alice := e.putUser("alice")
		device, other := devicesOf(alg)[0], devicesOf(alg)[1]
		for _, c := range registrationRefusals(alg) {
			t.Run(c.name, func(t *testing.T) {
				e.use(t)
				b, offer := e.loginOffered(device, alice)
				jwt := c.jwt(t, b, offer, other)
				if c.noCookie {
					b.session = nil
				}
				before := e.snapshot()
				p.Reset()
				w := b.registerWith(jwt)
				if w.Code != c.status {
					t.Errorf("status %d (%q), want %d", w.Code, strings.TrimSpace(w.Body.String()), c.status)
				}
				if got := p.Total(); got != c.reads || p.Count("BatchGetItem") != c.reads {
					t.Errorf("%d DynamoDB calls (%d BatchGetItem), want %d BatchGetItem only", got, p.Count("BatchGetItem"), c.reads)
				}
				assertNoBoundCookie(t, w, "refused registration")
				if w.Header().Get("Secure-Session-Challenge") != "" {
					t.Errorf("refused registration sends a challenge: %q", w.Header().Get("Secure-Session-Challenge"))
				}
				e.assertUnchanged(before, "refused registration")
				// The offer still stands for the real device.
				if !c.noCookie {
					if got := b.status(); got != http.StatusOK {
						t.Errorf("the unbound session after the refusal: status %d", got)
					}
					b.register(offer)
				}
			})
		}
	})
}

// TestDeviceRegistrationChallengeExpired: the login's challenge lives for
// a bound cookie's lifetime and a minute; a registration after that is
// refused and changes nothing, though the session is live.
func TestDeviceRegistrationChallengeExpired(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		b, offer := e.loginOffered(devicesOf(alg)[0], e.putUser("alice"))
		jwt := b.device.Registration(offer.Challenge)
		e.clock.Advance(11 * time.Minute)
		before := e.snapshot()
		p.Reset()
		w := b.registerWith(jwt)
		if w.Code != http.StatusBadRequest || p.Total() != 1 {
			t.Errorf("status %d after %d DynamoDB calls, want 400 after 1", w.Code, p.Total())
		}
		assertNoBoundCookie(t, w, "registration with an expired challenge")
		e.assertUnchanged(before, "registration with an expired challenge")
		if got := b.status(); got != http.StatusOK {
			t.Errorf("the session itself: status %d, want 200", got)
		}
	})
}

// TestDeviceRegistrationOnce: a session binds once. The same JWT sent again
// (a replay) and a registration with another key for the bound session are
// refused with 409; the session stays bound to the first key, which still
// refreshes, and the second key does not.
func TestDeviceRegistrationOnce(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		alice := e.putUser("alice")
		first, second := devicesOf(alg)[0], devicesOf(alg)[1]
		b, offer := e.loginOffered(first, alice)
		jwt := first.Registration(offer.Challenge)
		p.Reset()
		b.take(b.registerWith(jwt))
		if p.Count("BatchGetItem") != 1 || p.Count("UpdateItem") != 1 || p.Total() != 2 {
			t.Errorf("registration: %d calls (%d BatchGetItem, %d UpdateItem), want one read and one write", p.Total(), p.Count("BatchGetItem"), p.Count("UpdateItem"))
		}
		stored := attrText(e.itemOf(kindSession, b.id)["boundKey"])

		for _, again := range []struct{ name, jwt string }{
			{"the same JWT again", jwt},
			{"another key over the same challenge", second.Registration(offer.Challenge)},
			{"another key over the next challenge", second.Registration(b.challenge)},
			{"the first key over the next challenge", first.Registration(b.challenge)},
		} {
			before := e.snapshot()
			w := b.registerWith(again.jwt)
			if w.Code != http.StatusConflict {
				t.Errorf("%s: status %d, want 409", again.name, w.Code)
			}
			assertNoBoundCookie(t, w, again.name)
			e.assertUnchanged(before, again.name)
		}
		if got := attrText(e.itemOf(kindSession, b.id)["boundKey"]); got != stored {
			t.Errorf("boundKey %s, want the first key's %s", got, stored)
		}
		thief := *b
		thief.device = second
		if w := thief.chromiumRefresh(); w.Code != http.StatusBadRequest || len(boundSetCookies(w)) != 0 {
			t.Errorf("refresh with the second key: status %d, cookies %v; want 400 and none", w.Code, w.Result().Cookies())
		}
		b.refresh()
		if got := b.status(); got != http.StatusOK {
			t.Errorf("the first key's refreshed cookie: status %d", got)
		}
	})
}

// TestDeviceRegistrationForEndedSession: a registration whose session was
// revoked, revoked with all of the user's, or signed out, is refused with
// 401, and writes nothing.
func TestDeviceRegistrationForEndedSession(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, end := range sessionEnders {
			t.Run(alg+"/"+end.name, func(t *testing.T) {
				t.Parallel()
				e, _ := newBoundEnv(t)
				alice := e.putUser("alice")
				b, offer := e.loginOffered(devicesOf(alg)[0], alice)
				end.run(t, e, alice, b, e.mustList(alice)[0].ID)
				before := e.snapshot()
				w := b.registerWith(b.device.Registration(offer.Challenge))
				if w.Code != http.StatusUnauthorized {
					t.Errorf("status %d, want 401", w.Code)
				}
				assertNoBoundCookie(t, w, "registration for an ended session")
				e.assertUnchanged(before, "registration for an ended session")
			})
		}
	}
}

// sessionEnders end a browser's session in the three ways an app can.
var sessionEnders = []struct {
	name string
	run  func(t *testing.T, e *env, user ddbsession.UserKey, b *boundBrowser, id string)
}{
	{"Logout", func(t *testing.T, e *env, _ ddbsession.UserKey, b *boundBrowser, _ string) {
		cookies := []*http.Cookie{b.session}
		if b.bound != nil {
			cookies = append(cookies, b.bound)
		}
		if err := e.m.Logout(newRecorder(), newRequest(cookies...)); err != nil {
			t.Errorf("Logout: %v", err)
		}
	}},
	{"Revoke", func(t *testing.T, e *env, user ddbsession.UserKey, _ *boundBrowser, id string) {
		if err := e.m.Revoke(context.Background(), user, id); err != nil {
			t.Errorf("Revoke: %v", err)
		}
	}},
	{"RevokeAll", func(t *testing.T, e *env, user ddbsession.UserKey, _ *boundBrowser, _ string) {
		e.clock.Advance(time.Millisecond)
		if err := e.m.RevokeAll(context.Background(), user); err != nil {
			t.Errorf("RevokeAll: %v", err)
		}
	}},
}

// TestDeviceRegistrationAccepted: the forms a browser may send that must
// work: the JWT as a bare value (Chromium) or a structured-field string in
// quotes (the spec), and an EC key whose x or y lost its leading zero byte
// (older Chromium), which is padded back.
func TestDeviceRegistrationAccepted(t *testing.T) {
	t.Parallel()
	t.Run("quoted", func(t *testing.T) {
		for _, alg := range algs {
			t.Run(alg, func(t *testing.T) {
				t.Parallel()
				e, _ := newBoundEnv(t)
				b, offer := e.loginOffered(devicesOf(alg)[0], e.putUser("alice"))
				b.take(b.registerWith(`"` + b.device.Registration(offer.Challenge) + `"`))
				if got := b.status(); got != http.StatusOK {
					t.Fatalf("bound: status %d", got)
				}
				// A refresh with a quoted session ID and a quoted JWT.
				w := b.post("/dbsc/refresh", http.Header{
					"Sec-Secure-Session-Id":   {`"` + b.id + `"`},
					"Secure-Session-Response": {`"` + b.device.Refresh(b.challenge) + `"`},
				})
				b.take(w)
				if len(boundSetCookies(w)) != 1 {
					t.Errorf("quoted refresh: cookies %v", w.Result().Cookies())
				}
			})
		}
	})
	for _, coordinate := range []string{"x", "y"} {
		t.Run("EC "+coordinate+" of 31 bytes", func(t *testing.T) {
			t.Parallel()
			device := ecDeviceWithLeadingZero(t, coordinate)
			e, _ := newBoundEnv(t)
			b, offer := e.loginOffered(device, e.putUser("alice"))
			jwk := withJWK(device, func(jwk map[string]string) {
				v, _ := base64.RawURLEncoding.DecodeString(jwk[coordinate])
				jwk[coordinate] = base64.RawURLEncoding.EncodeToString(v[1:])
			})
			b.take(b.registerWith(device.Sign(map[string]any{"alg": "ES256", "typ": "dbsc+jwt", "jwk": jwk}, map[string]any{"jti": offer.Challenge})))
			// The stored key is the padded one: the device refreshes with it.
			if diff := cmp.Diff(device.JWK(), e.storedKey(b.id)); diff != "" {
				t.Errorf("stored key (-padded +stored):\n%s", diff)
			}
			e.clock.Advance(10 * time.Minute)
			b.refresh()
			if got := b.status(); got != http.StatusOK {
				t.Errorf("refreshed: status %d", got)
			}
		})
	}
}

// ecDeviceWithLeadingZero returns an ES256 device whose public point's
// coordinate ("x" or "y") starts with a zero byte: one key in 256.
func ecDeviceWithLeadingZero(t *testing.T, coordinate string) *dbsctest.Device {
	t.Helper()
	for range 100_000 {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		point, err := key.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if (coordinate == "x" && point[1] == 0) || (coordinate == "y" && point[33] == 0) {
			return dbsctest.New(key)
		}
	}
	t.Fatal("no key with a leading zero byte")
	return nil
}

// TestDeviceRefreshChallenge: a refresh without a JWT gets 403 and a
// challenge for the session, and no cookie. While the session awaits an
// unused, unexpired challenge, that one is sent again, and nothing is
// written (a copy of the session cookie must not make the device's
// challenge stale); otherwise a new one is written, with one write and no
// read.
func TestDeviceRefreshChallenge(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		b := e.bound(devicesOf(alg)[0], e.putUser("alice"))

		// The challenge that came with the bound cookie is open.
		before := e.snapshot()
		p.Reset()
		w := b.refreshWith("")
		if w.Code != http.StatusForbidden {
			t.Fatalf("status %d, want 403", w.Code)
		}
		if got := challengeOf(t, w, b.id); got != b.challenge {
			t.Errorf("the 403 sent %q, not the open challenge %q", got, b.challenge)
		}
		if p.Count("GetItem") != 1 || p.Total() != 2 {
			t.Errorf("%d DynamoDB calls (%d GetItem), want the failed conditional write and one read", p.Total(), p.Count("GetItem"))
		}
		e.assertUnchanged(before, "403 with a challenge open")

		// Once it has expired, a new one is written.
		e.clock.Advance(e.cfg.DeviceBinding.CookieLifetime + time.Minute)
		p.Reset()
		w = b.refreshWith("")
		if w.Code != http.StatusForbidden {
			t.Fatalf("status %d, want 403", w.Code)
		}
		if got := w.Header().Get("Secure-Session-Challenge"); !strings.HasPrefix(got, `"`) || !strings.HasSuffix(got, `";id="`+b.id+`"`) {
			t.Errorf("Secure-Session-Challenge %q, want \"<challenge>\";id=%q", got, b.id)
		}
		challenge := challengeOf(t, w, b.id)
		if p.Count("UpdateItem") != 1 || p.Total() != 1 {
			t.Errorf("%d DynamoDB calls (%d UpdateItem), want one write", p.Total(), p.Count("UpdateItem"))
		}
		if got := w.Header().Get("Secure-Session-Challenge"); !strings.HasPrefix(got, `"`) || !strings.HasSuffix(got, `";id="`+b.id+`"`) {
			t.Errorf("Secure-Session-Challenge %q, want \"<challenge>\";id=%q", got, b.id)
		}
		if len(w.Result().Cookies()) != 0 {
			t.Errorf("a 403 sets cookies %v", w.Result().Cookies())
		}
		if got := attrText(e.itemOf(kindSession, b.id)["challenge"]); got != "S:"+challenge {
			t.Errorf("stored challenge %s, want the one sent, %q", got, challenge)
		}
		if challenge == b.challenge {
			t.Errorf("the 403 re-sent the cached challenge")
		}
		// The signed answer costs one read and one write.
		p.Reset()
		b.take(b.refreshWith(b.device.Refresh(challenge)))
		if p.Count("BatchGetItem") != 1 || p.Count("UpdateItem") != 1 || p.Total() != 2 {
			t.Errorf("signed refresh: %d DynamoDB calls (%d BatchGetItem, %d UpdateItem), want one read and one write",
				p.Total(), p.Count("BatchGetItem"), p.Count("UpdateItem"))
		}
	})
}

// TestDeviceRefreshRefused: refreshes that must not yield a bound cookie.
// A bad proof is 400 and writes nothing; a proof of a challenge the
// session no longer awaits (answered already, or expired) gets 403 with a
// new one, which is the only write.
func TestDeviceRefreshRefused(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		alice := e.putUser("alice")
		devices := devicesOf(alg)
		b := e.bound(devices[0], alice)
		unchanged := []struct {
			name   string
			header http.Header
			status int
			reads  int
		}{
			{"signed with another key of " + alg, http.Header{"Secure-Session-Response": {devices[1].Refresh(b.challenge)}}, 400, 1},
			{"signed with a key of " + otherAlg(alg), http.Header{"Secure-Session-Response": {devicesOf(otherAlg(alg))[0].Refresh(b.challenge)}}, 400, 1},
			{"bad signature", http.Header{"Secure-Session-Response": {flipSignatureBit(t, b.device.Refresh(b.challenge))}}, 400, 1},
			{"a jwk in the refresh JWT", http.Header{"Secure-Session-Response": {b.device.Registration(b.challenge)}}, 400, 0},
			{"alg none", http.Header{"Secure-Session-Response": {rawJWT(`{"alg":"none","typ":"dbsc+jwt"}`, `{"jti":"`+b.challenge+`"}`, nil)}}, 400, 0},
			{"no jti", http.Header{"Secure-Session-Response": {b.device.Sign(map[string]any{"alg": alg, "typ": "dbsc+jwt"}, map[string]any{})}}, 400, 0},
			{"malformed JWT", http.Header{"Secure-Session-Response": {"a.b.c"}}, 400, 0},
			{"oversized JWT", http.Header{"Secure-Session-Response": {b.device.Sign(map[string]any{"alg": alg, "typ": "dbsc+jwt"}, map[string]any{"jti": b.challenge, "pad": strings.Repeat("x", 8<<10)})}}, 400, 0},
			{"malformed session ID", http.Header{"Sec-Secure-Session-Id": {"not-a-session-id"}, "Secure-Session-Response": {b.device.Refresh(b.challenge)}}, 400, 0},
			{"no session ID", http.Header{"Sec-Secure-Session-Id": {""}, "Secure-Session-Response": {b.device.Refresh(b.challenge)}}, 400, 0},
			{"no session ID nor JWT", http.Header{"Sec-Secure-Session-Id": {""}}, 400, 0},
		}
		for _, c := range unchanged {
			t.Run(c.name, func(t *testing.T) {
				e.use(t)
				h := http.Header{"Sec-Secure-Session-Id": {b.id}}
				for k, v := range c.header {
					h[k] = v
				}
				before := e.snapshot()
				p.Reset()
				w := b.post("/dbsc/refresh", h)
				if w.Code != c.status {
					t.Errorf("status %d (%q), want %d", w.Code, strings.TrimSpace(w.Body.String()), c.status)
				}
				if p.Total() != c.reads || p.Count("BatchGetItem") != c.reads {
					t.Errorf("%d DynamoDB calls (%d BatchGetItem), want %d BatchGetItem only", p.Total(), p.Count("BatchGetItem"), c.reads)
				}
				assertNoBoundCookie(t, w, c.name)
				e.assertUnchanged(before, c.name)
			})
		}
		if got := b.status(); got != http.StatusOK {
			t.Fatalf("the device's own cookies after the refusals: status %d", got)
		}

		// Bound cookies as they are, for the 403 cases: only the
		// challenge may change.
		boundAttrs := func() string {
			item := e.itemOf(kindSession, b.id)
			return itemText(map[string]types.AttributeValue{"boundKey": item["boundKey"], "boundCookie": item["boundCookie"],
				"boundExpires": item["boundExpires"], "boundPrev": item["boundPrev"], "boundPrevExpires": item["boundPrevExpires"], "v": item["v"]})
		}
		t.Run("replayed challenge", func(t *testing.T) {
			e.use(t)
			jwt := b.device.Refresh(b.challenge)
			b.take(b.refreshWith(jwt))
			cookies := boundAttrs()
			w := b.refreshWith(jwt)
			if w.Code != http.StatusForbidden {
				t.Fatalf("the same proof again: status %d, want 403", w.Code)
			}
			// The session awaits the challenge that came with the
			// cookie the first answer sent: that one, not a new one.
			if next := challengeOf(t, w, b.id); next != b.challenge {
				t.Errorf("the 403 sent %q, not the open challenge %q", next, b.challenge)
			}
			assertNoBoundCookie(t, w, "replayed challenge")
			if got := boundAttrs(); got != cookies {
				t.Errorf("bound cookies changed: %s, were %s", got, cookies)
			}
			// Chromium then signs the new challenge: that works.
			b.take(b.refreshWith(b.device.Refresh(challengeOf(t, w, b.id))))
		})
		t.Run("expired challenge", func(t *testing.T) {
			e.use(t)
			jwt := b.device.Refresh(b.challenge)
			e.clock.Advance(11 * time.Minute) // the challenge's lifetime: the cookie's and a minute
			cookies := boundAttrs()
			w := b.refreshWith(jwt)
			if w.Code != http.StatusForbidden {
				t.Fatalf("status %d, want 403", w.Code)
			}
			assertNoBoundCookie(t, w, "expired challenge")
			if got := boundAttrs(); got != cookies {
				t.Errorf("bound cookies changed: %s, were %s", got, cookies)
			}
			b.take(b.refreshWith(b.device.Refresh(challengeOf(t, w, b.id))))
			if got := b.status(); got != http.StatusOK {
				t.Errorf("after the new challenge: status %d", got)
			}
		})
	})
}

// TestDeviceRefreshPreviousCookie: a refresh keeps the bound cookie before
// it valid until its own expiry, for requests already on their way with
// it; the one before that is dropped at once, expired or not.
func TestDeviceRefreshPreviousCookie(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, _ := newBoundEnv(t)
		b := e.bound(devicesOf(alg)[0], e.putUser("alice")) // c0, until 10m
		c0 := b.bound
		e.clock.Advance(5 * time.Minute)
		b.refresh() // c1, until 15m
		c1 := b.bound
		if c1.Value == c0.Value {
			t.Fatal("the refresh re-sent the same bound cookie")
		}
		if got := e.statusWith(b.session, c0); got != http.StatusOK {
			t.Errorf("the previous bound cookie, unexpired: status %d, want 200", got)
		}
		e.clock.Advance(5 * time.Minute) // 10m: c0's expiry
		if got := e.statusWith(b.session, c0); got != http.StatusUnauthorized {
			t.Errorf("the previous bound cookie at its expiry: status %d, want 401", got)
		}
		if got := e.statusWith(b.session, c1); got != http.StatusOK {
			t.Errorf("the current bound cookie: status %d, want 200", got)
		}
		b.refresh() // c2, until 20m; c1 is the previous one
		c2 := b.bound
		if got := e.statusWith(b.session, c1); got != http.StatusOK {
			t.Errorf("the previous bound cookie after a refresh: status %d, want 200", got)
		}
		b.refresh() // c3; c2 is the previous one, c1 is dropped
		if got := e.statusWith(b.session, c1); got != http.StatusUnauthorized {
			t.Errorf("the bound cookie two refreshes back, unexpired: status %d, want 401", got)
		}
		for _, c := range []*http.Cookie{c2, b.bound} {
			if got := e.statusWith(b.session, c); got != http.StatusOK {
				t.Errorf("bound cookie %s: status %d, want 200", c.Value, got)
			}
		}
	})
}

// TestDeviceRefreshOtherSession: a refresh that names a session other than
// its session cookie's, in Sec-Secure-Session-Id (an ID that does not
// exist, or that of an earlier session of this browser, whose cookie a
// later login replaced), ends that binding in the browser, and leaves the
// cookies alone: the bound cookie the browser holds is the current
// session's. Nothing in the table changes.
func TestDeviceRefreshOtherSession(t *testing.T) {
	t.Parallel()
	eachAlg(t, func(t *testing.T, alg string) {
		e, _ := newBoundEnv(t)
		alice := e.putUser("alice")
		earlier := e.bound(devicesOf(alg)[0], alice)
		current := e.bound(devicesOf(alg)[1], alice)
		unknown := "0000000000000000000000000000beef"
		for _, c := range []struct {
			name, id string
			signer   *boundBrowser
		}{
			{"an earlier session's ID, with its proof", earlier.id, earlier},
			{"an earlier session's ID, no proof", earlier.id, nil},
			{"an unknown ID, with a proof", unknown, current},
			{"an unknown ID, no proof", unknown, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				e.use(t)
				h := http.Header{"Sec-Secure-Session-Id": {c.id}}
				if c.signer != nil {
					h.Set("Secure-Session-Response", c.signer.device.Refresh(c.signer.challenge))
				}
				before := e.snapshot()
				w := current.post("/dbsc/refresh", h) // current's session and bound cookies
				assertEnded(t, w, c.id, c.name)
				if got := boundSetCookies(w); len(got) != 0 {
					t.Errorf("the answer touches the current session's bound cookie: %v", got)
				}
				if sessionCookie(t, w.Result(), cookieName) != nil {
					t.Errorf("the answer touches the session cookie: %v", w.Result().Cookies())
				}
				e.assertUnchanged(before, c.name)
				if got := current.status(); got != http.StatusOK {
					t.Errorf("the current session afterwards: status %d", got)
				}
			})
		}
	})
}

// TestDeviceRefreshEndedSession: a refresh of a session that was signed
// out, revoked, or revoked with all the user's, or that comes without a
// session cookie, ends the binding in the browser, with no bound cookie,
// whether the browser had a challenge cached or not.
func TestDeviceRefreshEndedSession(t *testing.T) {
	t.Parallel()
	for _, alg := range algs {
		for _, end := range sessionEnders {
			for _, cached := range []bool{true, false} {
				name := alg + "/" + end.name + "/challenge cached"
				if !cached {
					name = alg + "/" + end.name + "/no challenge cached"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					e, _ := newBoundEnv(t)
					alice := e.putUser("alice")
					b := e.bound(devicesOf(alg)[0], alice)
					end.run(t, e, alice, b, b.id)
					if !cached {
						b.challenge = ""
					}
					w := b.chromiumRefresh()
					assertEnded(t, w, b.id, "refresh after "+end.name)
					if got := b.status(); got != http.StatusUnauthorized {
						t.Errorf("the session after the refresh: status %d, want 401", got)
					}
					if end.name != "RevokeAll" {
						if items := e.scanAll(); len(itemsWithSID(items, b.id)) != 0 {
							t.Errorf("items of the ended session: %v", itemsText(itemsWithSID(items, b.id)))
						}
					}
				})
			}
		}
		t.Run(alg+"/no session cookie", func(t *testing.T) {
			t.Parallel()
			e, p := newBoundEnv(t)
			b := e.bound(devicesOf(alg)[0], e.putUser("alice"))
			b.session = nil
			for _, jwt := range []string{b.device.Refresh(b.challenge), ""} {
				before := e.snapshot()
				p.Reset()
				w := b.refreshWith(jwt)
				assertEnded(t, w, b.id, "refresh without a session cookie")
				if p.Total() != 0 {
					t.Errorf("%d DynamoDB calls, want 0", p.Total())
				}
				e.assertUnchanged(before, "refresh without a session cookie")
			}
		})
	}
}

// TestDeviceBindingStoreFailure: when DynamoDB fails, registration and
// refresh answer 503 (the browser keeps its binding and retries later),
// issue nothing, and leave the table as it was.
func TestDeviceBindingStoreFailure(t *testing.T) {
	t.Parallel()
	down := errors.New("InternalServerError: down")
	eachAlg(t, func(t *testing.T, alg string) {
		e, p := newBoundEnv(t)
		alice := e.putUser("alice")
		b := e.bound(devicesOf(alg)[0], alice)
		fresh, offer := e.loginOffered(devicesOf(alg)[1], alice)
		for _, c := range []struct {
			name string
			op   string
			send func() *httptest.ResponseRecorder
		}{
			{"refresh, the read fails", "BatchGetItem", func() *httptest.ResponseRecorder { return b.refreshWith(b.device.Refresh(b.challenge)) }},
			{"refresh, the write fails", "UpdateItem", func() *httptest.ResponseRecorder { return b.refreshWith(b.device.Refresh(b.challenge)) }},
			{"challenge, the write fails", "UpdateItem", func() *httptest.ResponseRecorder { return b.refreshWith("") }},
			{"registration, the read fails", "BatchGetItem", func() *httptest.ResponseRecorder {
				return fresh.registerWith(fresh.device.Registration(offer.Challenge))
			}},
			{"registration, the write fails", "UpdateItem", func() *httptest.ResponseRecorder {
				return fresh.registerWith(fresh.device.Registration(offer.Challenge))
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				e.use(t)
				before := e.snapshot()
				failOn(p, c.op, down)
				w := c.send()
				p.Fail = nil
				if w.Code != http.StatusServiceUnavailable {
					t.Errorf("status %d, want 503", w.Code)
				}
				assertNoBoundCookie(t, w, c.name)
				if got := w.Header().Get("Secure-Session-Challenge"); got != "" {
					t.Errorf("a failed request sends a challenge: %q", got)
				}
				e.assertUnchanged(before, c.name)
			})
		}
		// Once the store is back, both go through.
		b.refresh()
		fresh.register(offer)
		for _, x := range []*boundBrowser{b, fresh} {
			if got := x.status(); got != http.StatusOK {
				t.Errorf("after the outage: status %d", got)
			}
		}
	})
}

// These tests come from an adversarial review of device binding: each
// failed before the fix it names.

// updateSets matches the UpdateItems whose expression sets what sets says:
// one kind of DBSC write (the session item's binding or bound cookie), told
// apart by an attribute it sets.
func updateSets(sets string) func(in any) bool {
	return func(in any) bool { return strings.Contains(*in.(*dynamodb.UpdateItemInput).UpdateExpression, sets) }
}

// A registration whose write is applied but whose answer is lost must
// still answer with the bound cookie: Chromium does not retry a failed
// registration, and a session bound to a key whose browser gave up would
// refuse every request. A refresh likewise.
func TestDeviceBindingWriteWhoseAnswerIsLost(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withDeviceBinding(10*time.Minute), withProbe(&p))
	alice := e.putUser("alice")
	b, offer := e.loginOffered(dbsctest.NewES256(), alice)

	lost := loseAnswer(p, "UpdateItem", 0, updateSets("#key = :key")) // bind's write
	b.register(offer)
	if n := lost(); n != 1 {
		t.Fatalf("%d registration answers lost, want 1", n)
	}
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("after a registration whose answer was lost: status %d", got)
	}
	if list := e.mustList(alice); len(list) != 1 || !list[0].DeviceBound {
		t.Fatalf("List: %+v", list)
	}

	lost = loseAnswer(p, "UpdateItem", 0, updateSets("#prev = :prev")) // rebind's write, once there is a cookie to keep
	e.clock.Advance(10 * time.Minute)
	b.refresh()
	if n := lost(); n != 1 {
		t.Fatalf("%d refresh answers lost, want 1", n)
	}
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("after a refresh whose answer was lost: status %d", got)
	}
}

// retryOnce makes the probe apply the first UpdateItem that match accepts,
// lose its answer, and send it again, as the SDK's retryer does after a 500
// or a connection reset: the caller sees the retry's answer,
// ConditionalCheckFailed, since its own write landed already. It returns
// the number of such retries so far.
func retryOnce(p *ddbtest.Probe, match func(in any) bool) func() int {
	var hits atomic.Int32
	var done atomic.Bool
	p.After = func(ctx context.Context, op string, in, _ any, err error) error {
		if op != "UpdateItem" || err != nil || !match(in) || !done.CompareAndSwap(false, true) {
			return nil
		}
		hits.Add(1)
		_, err = p.Engine().UpdateItem(ctx, in.(*dynamodb.UpdateItemInput))
		return err
	}
	return func() int { return int(hits.Load()) }
}

// A registration or refresh whose write landed, and whose retry then met
// its own spent condition, still answers with the bound cookie: Chromium
// does not retry a registration, and a refused one would leave the
// session bound to a key whose browser gave up.
func TestDeviceBindingWriteRetriedAfterItLanded(t *testing.T) {
	t.Parallel()
	var p *ddbtest.Probe
	e := newEnv(t, withDeviceBinding(10*time.Minute), withProbe(&p))
	alice := e.putUser("alice")
	b, offer := e.loginOffered(dbsctest.NewES256(), alice)
	retries := retryOnce(p, updateSets("#key = :key")) // bind's write
	b.register(offer)
	if got, n := b.status(), retries(); got != http.StatusOK || n != 1 {
		t.Fatalf("after a registration retried once it landed: status %d, %d retries", got, n)
	}
	if list := e.mustList(alice); len(list) != 1 || !list[0].DeviceBound {
		t.Fatalf("List: %+v", list)
	}

	retries = retryOnce(p, updateSets("#prev = :prev")) // rebind's write
	e.clock.Advance(9 * time.Minute)
	w := b.refreshWith(b.device.Refresh(b.challenge))
	if n := retries(); w.Code != http.StatusOK || n != 1 {
		t.Fatalf("a refresh retried once it landed: status %d, %d retries; want 200 (a 403 costs the browser a signature)", w.Code, n)
	}
	b.take(w)
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("after the refresh: status %d", got)
	}
}

// A thief with the session cookie and the session ID, but neither the
// bound cookie nor the key, cannot make the device's challenge stale:
// Chromium gives a session up after 5 challenges in a row.
func TestDeviceChallengeNotRotatedByCopies(t *testing.T) {
	t.Parallel()
	e, _ := newBoundEnv(t)
	b := e.bound(devicesOf("ES256")[0], e.putUser("alice"))
	thief := &boundBrowser{e: e, session: b.session, id: b.id}
	e.clock.Advance(9 * time.Minute)
	for range 5 {
		w := thief.refreshWith("")
		if w.Code != http.StatusForbidden {
			t.Fatalf("thief: status %d, want 403", w.Code)
		}
		if got := challengeOf(t, w, b.id); got != b.challenge {
			t.Fatalf("the thief's 403 carried %q, not the challenge the device holds", got)
		}
	}
	b.take(b.refreshWith(b.device.Refresh(b.challenge)))
	if got := b.status(); got != http.StatusOK {
		t.Fatalf("the device after the thief's tries: status %d", got)
	}
}

// The challenge of a login's offer travels with the session cookie in the
// login's response; a copy of it (a HAR file) must not bind the session to
// another key once the browser had its chance: it expires in 2 minutes.
func TestRegistrationChallengeIsShortLived(t *testing.T) {
	t.Parallel()
	e, _ := newBoundEnv(t)
	alice := e.putUser("alice")
	victim, offer := e.loginOffered(nil, alice) // a browser without DBSC
	thief := &boundBrowser{e: e, device: devicesOf("ES256")[1], session: victim.session}

	e.clock.Advance(2 * time.Minute)
	w := thief.post(offer.Path, http.Header{"Secure-Session-Response": {thief.device.Registration(offer.Challenge)}})
	if w.Code != http.StatusBadRequest {
		t.Fatalf("registration 2 minutes after login: status %d, want 400", w.Code)
	}
	if got := victim.status(); got != http.StatusOK {
		t.Fatalf("the victim: status %d", got)
	}

	// Within the 2 minutes the browser registers, as Chromium does at once.
	e2, _ := newBoundEnv(t)
	b, offer2 := e2.loginOffered(devicesOf("ES256")[0], e2.putUser("bob"))
	e2.clock.Advance(2*time.Minute - time.Second)
	b.register(offer2)
}
