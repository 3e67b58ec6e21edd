package ddbsession_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/dbsc/dbsctest"
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
	if err := e.m.Login(w, r, key); err != nil {
		e.t.Fatalf("Login: %v", err)
	}
	offer, err := dbsctest.ParseOffer(w.Header().Get("Secure-Session-Registration"))
	if err != nil {
		e.t.Fatalf("Login's offer: %v", err)
	}
	return &boundBrowser{e: e, device: device, session: sessionCookie(e.t, w.Result(), e.m.CookieName())}, offer
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
