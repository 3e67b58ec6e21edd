package ddbsession

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds what device binding (DBSC) adds to a request: its
// configuration, the bound cookie that a bound session needs besides its
// session cookie, and the offer to bind that a cookie login makes. The
// endpoints where the browser registers its key and refreshes the bound
// cookie are in dbsc.go.

// DeviceBinding binds sessions to a key that never leaves the device. With
// Enabled, browsers do with DBSC (W3C webappsec-dbsc): they prove the key,
// through [Manager.DeviceBindingHandler], for each short-lived bound
// cookie, and a copy of the cookies dies with it (docs/device-binding.md).
// A bearer login with a DPoP proof (RFC 9449) binds its session to the
// proof's key, which each request then proves (docs/dpop.md).
type DeviceBinding struct {
	// Enabled offers binding on cookie logins. Sessions bound while it was
	// on stay bound when it is turned off: they then end at their bound
	// cookie's expiry, for want of a handler to refresh it.
	Enabled bool

	// RegistrationPath and RefreshPath are the URL paths at which the
	// handler answers, where the app mounts it. Defaults "/dbsc/register"
	// and "/dbsc/refresh".
	RegistrationPath string
	RefreshPath      string

	// CookieName names the bound cookie ("__Host-" added): "__Host-bound".
	CookieName string

	// CookieLifetime is how long a bound cookie, and so a stolen copy of
	// the cookies, is valid: default 10 minutes; 10 seconds to an hour
	// (under 5 minutes, Chromium's signing limit starves busy pages).
	CookieLifetime time.Duration

	// RequireDPoP makes LoginBearer refuse a login without a DPoP proof.
	RequireDPoP bool

	// DPoPNonceKeys (32 random bytes or more each) make DPoP nonces, with
	// the first, and check them, with each; instances behind one name
	// need the same. Unset, each Manager makes its own (docs/dpop.md).
	DPoPNonceKeys [][]byte
}

// The protocol's headers (W3C webappsec-dbsc, as Chromium sends them).
const (
	headerRegistration = "Secure-Session-Registration" // the offer, on a login's response
	headerResponse     = "Secure-Session-Response"     // the browser's signed JWT
	headerChallenge    = "Secure-Session-Challenge"    // a challenge for the next proof
	headerSessionID    = "Sec-Secure-Session-Id"       // the session a refresh is for
)

// minNonceKey is the shortest DeviceBinding.DPoPNonceKeys entry.
const minNonceKey = 32

func (d *DeviceBinding) withDefaults(insecure bool, sessionCookie string) error {
	setDefault(&d.RegistrationPath, "/dbsc/register")
	setDefault(&d.RefreshPath, "/dbsc/refresh")
	for _, p := range []string{d.RegistrationPath, d.RefreshPath} {
		if !validBindingPath(p) {
			return fmt.Errorf("ddbsession: Config.DeviceBinding path %q: must start with / and hold only letters, digits and -._~/!$&'()*+=:@%%", p)
		}
	}
	if d.RegistrationPath == d.RefreshPath {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.RegistrationPath and RefreshPath are both %q", d.RefreshPath)
	}
	setDefault(&d.CookieName, hostPrefix+"bound")
	d.CookieName = cookieName(d.CookieName, false, "/")
	if err := (&http.Cookie{Name: d.CookieName, Value: "x"}).Valid(); err != nil {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.CookieName %q: %w", d.CookieName, err)
	}
	if d.CookieName == sessionCookie || d.CookieName == hostPrefix+sessionCookie {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.CookieName %q is the session cookie's name", d.CookieName)
	}
	if d.CookieLifetime == 0 {
		d.CookieLifetime = 10 * time.Minute
	}
	if d.CookieLifetime < 10*time.Second || d.CookieLifetime > time.Hour {
		return fmt.Errorf("ddbsession: Config.DeviceBinding.CookieLifetime %v: must be between 10s and 1h: a stolen copy of the cookies works that long", d.CookieLifetime)
	}
	for i, k := range d.DPoPNonceKeys {
		if len(k) < minNonceKey {
			return fmt.Errorf("ddbsession: Config.DeviceBinding.DPoPNonceKeys[%d]: %d bytes; want at least %d random bytes", i, len(k), minNonceKey)
		}
	}
	if d.Enabled && insecure {
		// Browsers bind sessions only on secure origins, and a bound
		// cookie in clear text would be as easy to copy as the other.
		return errors.New("ddbsession: Config.DeviceBinding.Enabled needs HTTPS; it cannot be combined with InsecureDevMode")
	}
	return nil
}

// validBindingPath reports whether p is an absolute URL path of ASCII
// path characters (RFC 3986 pchar and "/"), without query or fragment: it
// goes into a structured-field string of the offer, which Chromium drops,
// silently, if it is not one.
func validBindingPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-._~/!$&'()*+=:@%", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validCookie reports whether r carries a bound cookie of session s that is
// valid at now. It costs no DynamoDB call: the session item, read anyway,
// holds the digests of the session's two latest bound cookies and their
// expiries. A thief with copies of both cookies is let in until the bound
// cookie's expiry, which the table, not the cookie's Max-Age, sets.
func (d *DeviceBinding) validCookie(r *http.Request, s item.Session, now time.Time) bool {
	for _, c := range r.CookiesNamed(d.CookieName) {
		if !item.ValidToken(c.Value) {
			continue
		}
		digest := []byte(item.Digest(c.Value))
		for _, bound := range s.Binding.Cookies {
			if bound.Digest != "" && now.Unix() < bound.Expires.Unix() &&
				subtle.ConstantTimeCompare(digest, []byte(bound.Digest)) == 1 {
				return true
			}
		}
	}
	return false
}

// newCookie returns a fresh bound cookie's value and what the table keeps
// of it.
func (d *DeviceBinding) newCookie(now time.Time) (string, item.BoundCookie) {
	value := item.NewToken()
	expires := time.Unix(now.Add(d.CookieLifetime).Unix(), 0)
	return value, item.BoundCookie{Digest: item.Digest(value), Expires: expires}
}

// boundCookieSlack is how much sooner than the table the browser is told
// that a bound cookie expires. The browser refreshes a cookie only once it
// has expired or is about to, and counts Max-Age from when the answer
// reaches it; the table's expiry is rounded down to the second. Without
// the slack, a request sent with a cookie in its last second could arrive
// after the table's expiry and be refused as a copy's.
const boundCookieSlack = 5 * time.Second

// boundMaxAge is the Max-Age, in seconds, of bound cookie c sent at now:
// boundCookieSlack short of its expiry in the table, and at least 1.
func boundMaxAge(c item.BoundCookie, now time.Time) int {
	return max(int(c.Expires.Sub(now.Add(boundCookieSlack))/time.Second), 1)
}

// writeCookie sends a bound cookie, with the attributes that the session
// configuration names (see boundCookieAttributes), or clears it (maxAge
// -1). It is always Secure: device binding needs HTTPS.
func (d *DeviceBinding) writeCookie(w http.ResponseWriter, value string, maxAge int) {
	writeCookie(w, d.CookieName, value, "/", maxAge, true)
}

// boundCookieAttributes are the bound cookie's attributes other than
// Max-Age, as the session configuration tells them to the browser, which
// checks that the cookie it gets is the one it was told of.
const boundCookieAttributes = "Path=/; Secure; HttpOnly; SameSite=Lax"

// newChallenge returns a challenge for the device to sign at its next
// refresh, valid for a bound cookie's lifetime and a minute more: a browser
// keeps the one that came with a bound cookie until shortly before that
// cookie expires.
func (d *DeviceBinding) newChallenge(now time.Time) item.Challenge {
	return challengeFor(now, d.CookieLifetime+time.Minute)
}

// registrationChallengeLifetime bounds the challenge of a login's offer.
// A browser registers at once; the challenge and the session cookie both
// travel in the login's response, so a copy of that response (a HAR file)
// can register a key of its own only while the challenge is open.
const registrationChallengeLifetime = 2 * time.Minute

func challengeFor(now time.Time, lifetime time.Duration) item.Challenge {
	return item.Challenge{Value: item.NewToken(), Expires: time.Unix(now.Add(lifetime).Unix(), 0)}
}

// offer asks the browser, in a login's response, to bind session s to a
// device key: it names the algorithms the server verifies, where to
// register, and the challenge to sign, which s already holds.
func (d *DeviceBinding) offer(w http.ResponseWriter, s item.Session) {
	w.Header().Set(headerRegistration, fmt.Sprintf("(ES256 RS256);path=%q;challenge=%q", d.RegistrationPath, s.Challenge.Value))
}
