package ddbsession

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file reads a request's session credential, from its cookie or, for
// clients without cookies, its bearer token, and writes the session cookie.
// The bound cookie of device binding is written here too, and checked in
// bound.go. A credential's form is internal/item's.

// Cookie configures the session cookie.
type Cookie struct {
	// Name is the cookie's name, "session" by default, behind the prefix
	// that Path allows, which browsers enforce: "__Host-" or "__Secure-".
	Name string

	// Path is where the app lives, "/" by default; an app on a sub-path
	// ("/app", behind http.StripPrefix or a proxy that strips it) sets it.
	// The cookie is then "__Secure-" (browsers allow "__Host-" on Path=/
	// alone), and [Redirect] keeps the prefix.
	Path string

	// InsecureDevMode drops Secure and the prefix, for plain-HTTP localhost.
	// Never in production (clear text); no environment variable sets it.
	InsecureDevMode bool

	// HideUserKey keeps even the sealed user key out of the cookie: each
	// request then reads the session and the user in turn. New refuses it
	// with LoadUser, whose users are never in the cookie.
	HideUserKey bool

	// KeepSignedIn, if set, decides per login whether the cookie outlives
	// the browser (true, as unset) or ends with it, for a "keep me" box:
	//
	//	KeepSignedIn: func(r *http.Request) bool { return r.PostFormValue("remember") == "on" },
	KeepSignedIn func(r *http.Request) bool

	// ClearSiteData, if set, is Logout's Clear-Site-Data header (OWASP ASVS
	// 5.0 14.3.1): "cache", "cookies", "storage", "executionContexts", "*".
	// Off by default: browsers clear the whole registrable domain.
	ClearSiteData []string

	// RememberDevices sends a device cookie (no session's secret) for
	// [EventNewDevice] and [Manager.KnownDevice] (docs/security.md).
	RememberDevices bool
}

// withDefaults fills in and checks the cookie's settings; custom says that
// users come from Config.LoadUser.
func (c *Cookie) withDefaults(custom bool) error {
	setDefault(&c.Path, "/")
	if !localPath(c.Path) || strings.ContainsAny(c.Path, ";?#") || c.Path != "/" && strings.HasSuffix(c.Path, "/") {
		return fmt.Errorf("ddbsession: Config.Cookie.Path %q: not a path such as / or /app", c.Path)
	}
	setDefault(&c.Name, hostPrefix+"session")
	c.Name = cookieName(c.Name, c.InsecureDevMode, c.Path)
	if err := (&http.Cookie{Name: c.Name, Value: "x"}).Valid(); err != nil {
		return fmt.Errorf("ddbsession: Config.Cookie.Name %q: %w", c.Name, err)
	}
	if c.HideUserKey && custom {
		return errors.New("ddbsession: Config.Cookie.HideUserKey is set with a LoadUser, whose users' keys are never in the cookie: drop it")
	}
	for _, d := range c.ClearSiteData {
		if !slices.Contains([]string{"cache", "cookies", "storage", "executionContexts", "*"}, d) {
			return fmt.Errorf("ddbsession: Config.Cookie.ClearSiteData %q: not a Clear-Site-Data directive (cache, cookies, storage, executionContexts, *)", d)
		}
		if c.RememberDevices && (d == "cookies" || d == "*") {
			// Every login would then be from a new device.
			return fmt.Errorf("ddbsession: Config.Cookie.ClearSiteData %q erases the device cookie of RememberDevices at each logout: leave it out (Logout clears the session's own cookies)", d)
		}
	}
	return nil
}

// setDefault sets an unset setting (a cookie's name, a path) to value.
func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

// cookies reads the session credential of a request, from its cookie or
// its bearer token, and writes the session cookie.
type cookies struct {
	name   string // Cookie.Name, prefix and all
	path   string // Cookie.Path
	secure bool   // not Cookie.InsecureDevMode
	// withUser says whether the cookie carries the user's key next to the
	// token: when users live in the table and HideUserKey is not set.
	withUser bool
	bearer   bool // Config.BearerTokens
	layout   *item.Layout
	// keys returns the table's cookie keys, which seal the user's key:
	// nil until a read of the table's layout record has found them.
	keys func() *item.CookieKeys
	// warnPlain warns, once, that a cookie carries the user's key in the
	// plain: the table's layout record has no cookie key.
	warnPlain func()
	// pending is the name of the cookie of a two-step login that waits for
	// its second step: the session cookie's, and pendingSuffix. A cookie of
	// its own, so that a signed-in browser that re-authenticates with two
	// factors stays signed in meanwhile.
	pending string
	// device is the device cookie's name (devices.go), "" without
	// Cookie.RememberDevices.
	device string
}

// pendingSuffix follows the session cookie's name in the pending cookie's.
const pendingSuffix = "-pending"

// deviceCookie is the device cookie's name under cfg: the session cookie's
// and "-device"; "" without RememberDevices.
func deviceCookie(cfg Cookie) string {
	if !cfg.RememberDevices {
		return ""
	}
	return cfg.Name + "-device"
}

// The cookie name prefixes that make browsers enforce a cookie's
// attributes: Secure for both, and host-only on Path=/ for hostPrefix.
const hostPrefix, securePrefix = "__Host-", "__Secure-"

// sessionExpiresHeader is the response header that tells a client with a
// bearer token the session's new expiry, in RFC 3339, when a request moved
// it forward: such a client has no cookie for the server to re-send.
const sessionExpiresHeader = "Session-Expires"

// errBothCredentials is a request with a session cookie and a bearer token:
// refused, never guessed at.
var errBothCredentials = errors.New("a session cookie and a bearer token")

// credential returns the request's credential: the first well-formed one
// among its cookies of our name or, with Config.BearerTokens, its bearer
// token. present says whether there was a cookie of our name or a bearer
// token at all, well-formed or not, and bearer which of the two it was.
func (c *cookies) credential(r *http.Request) (cred item.Credential, bearer, present bool, err error) {
	cred, present = c.fromCookie(r)
	if !c.bearer {
		return cred, false, present, nil
	}
	token, _, ok := bearerToken(r)
	switch {
	case !ok:
		return cred, false, present, nil
	case present:
		return item.Credential{}, true, true, errBothCredentials
	}
	cred, _ = c.layout.ParseCredential(token)
	return cred, true, true, nil
}

// fromCookie returns the first well-formed credential among the request's
// cookies of our name, and whether there was any such cookie at all.
// Several cookies may share a name; malformed ones are ignored.
func (c *cookies) fromCookie(r *http.Request) (cred item.Credential, present bool) {
	for _, ck := range r.CookiesNamed(c.name) {
		present = true
		if cred, ok := c.layout.ParseCredential(ck.Value); ok {
			return cred, true
		}
	}
	return item.Credential{}, present
}

// bearerToken returns the token of an "Authorization: Bearer" or "DPoP"
// header (schemes are case-insensitive, RFC 9110), whether it was DPoP's,
// and whether there was one.
func bearerToken(r *http.Request) (token string, dpop, ok bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case !ok:
		return "", false, false
	case strings.EqualFold(scheme, "DPoP"):
		return token, true, true
	case strings.EqualFold(scheme, "Bearer"):
		return token, false, true
	}
	return "", false, false
}

// maxCarriedTokens bounds how many of a request's session cookies Login and
// Logout end. A browser sends one, or a few where cookies were tossed; a
// client that sends hundreds must not turn one request into hundreds of
// deletes.
const maxCarriedTokens = 4

// tokens returns the well-formed session tokens the request carries in
// cookies, if withCookies, and, with Config.BearerTokens, as a bearer
// token, for Login and Logout to end them.
func (c *cookies) tokens(r *http.Request, withCookies bool) []string {
	var values, tokens []string
	if withCookies {
		for _, ck := range r.CookiesNamed(c.name) {
			values = append(values, ck.Value)
		}
	}
	if token, _, ok := bearerToken(r); ok && c.bearer {
		values = append(values, token)
	}
	for _, v := range values {
		if cred, ok := c.layout.ParseCredential(v); ok && len(tokens) < maxCarriedTokens {
			tokens = append(tokens, cred.Token)
		}
	}
	return tokens
}

// value is what a client presents for session s: the token, and the
// user's key, sealed, where cookies carry it.
func (c *cookies) value(token string, s item.Session) string {
	keys := c.keys()
	v := c.layout.Credential(token, s.UserPK, s.UserSK, c.withUser, keys)
	if keys != nil && !keys.Any() && v != token {
		c.warnPlain()
	}
	return v
}

// set sends the cookie of session s with a Max-Age that ends at its
// expiry, or none for a session that KeepSignedIn kept to the browser's.
func (c *cookies) set(w http.ResponseWriter, token string, s item.Session, now time.Time) {
	maxAge := max(int(s.ExpiresAt.Unix()-now.Unix()), 1)
	if s.BrowserOnly {
		maxAge = 0 // no Max-Age: the cookie ends with the browser
	}
	writeCookie(w, c.name, c.value(token, s), c.path, maxAge, c.secure)
}

// clear tells the browser to drop the session cookie.
func (c *cookies) clear(w http.ResponseWriter) { writeCookie(w, c.name, "", c.path, -1, c.secure) }

// setPending sends the pending cookie of a two-step login, for lifetime.
func (c *cookies) setPending(w http.ResponseWriter, token string, lifetime time.Duration) {
	writeCookie(w, c.pending, token, c.path, int(lifetime/time.Second), c.secure)
}

// clearPending tells the browser to drop the pending cookie.
func (c *cookies) clearPending(w http.ResponseWriter) {
	writeCookie(w, c.pending, "", c.path, -1, c.secure)
}

// pendingToken returns the token of r's pending cookie, if well-formed;
// present says whether there was such a cookie at all.
func (c *cookies) pendingToken(r *http.Request) (token string, present bool) {
	ck, err := r.Cookie(c.pending)
	if err != nil {
		return "", false
	}
	if !item.ValidToken(ck.Value) {
		return "", true
	}
	return ck.Value, true
}

// writeCookie sets cookie name on path with the attributes that browsers
// enforce for its prefix: Secure, and for __Host- Path=/ and no Domain
// (which it never has). HttpOnly keeps it from scripts; SameSite=Lax keeps it off cross-site subrequests and POSTs.
// A response that carries it must not be cached, or a shared cache could
// hand one user's cookie to another. The session cookie and the bound
// cookie share it.
func writeCookie(w http.ResponseWriter, name, value, path string, maxAge int, secure bool) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	addVary(h, "Cookie")
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     path,
		MaxAge:   maxAge,
		Secure:   secure,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	})
}

// cookieName is a configured cookie name as sent on path: with the
// "__Host-" prefix on Path=/, "__Secure-" on a sub-path, none in dev mode.
func cookieName(name string, insecure bool, path string) string {
	name = strings.TrimPrefix(strings.TrimPrefix(name, hostPrefix), securePrefix)
	switch {
	case insecure:
		return name
	case path != "/":
		return securePrefix + name
	}
	return hostPrefix + name
}
