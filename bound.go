package ddbsession

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds what device binding (DBSC) adds to a request: the bound
// cookie that a bound session needs besides its session cookie, and the
// offer to bind that a cookie login makes. The endpoints where the browser
// registers its key and refreshes the bound cookie are in dbsc.go.

// boundCookieValid reports whether r carries a bound cookie of session s
// that is valid at now. It costs no DynamoDB call: the session item, read
// anyway, holds the digests of the session's two latest bound cookies and
// their expiries. A thief with copies of both cookies is let in until the
// bound cookie's expiry, which the table, not the cookie's Max-Age, sets.
func (m *Manager[U]) boundCookieValid(r *http.Request, s item.Session, now time.Time) bool {
	for _, c := range r.CookiesNamed(m.cfg.DeviceBinding.CookieName) {
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

// newBoundCookie returns a fresh bound cookie's value and what the table
// keeps of it.
func (m *Manager[U]) newBoundCookie(now time.Time) (string, item.BoundCookie) {
	value := item.NewToken()
	expires := time.Unix(now.Add(m.cfg.DeviceBinding.CookieLifetime).Unix(), 0)
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

// writeBoundCookie sends a bound cookie, with the attributes that the
// session configuration names (see boundCookieAttributes), or clears it
// (maxAge -1). It is always Secure: device binding needs HTTPS.
func (m *Manager[U]) writeBoundCookie(w http.ResponseWriter, value string, maxAge int) {
	writeCookie(w, m.cfg.DeviceBinding.CookieName, value, maxAge, true)
}

// boundCookieAttributes are writeBoundCookie's attributes other than
// Max-Age, as the session configuration tells them to the browser, which
// checks that the cookie it gets is the one it was told of.
const boundCookieAttributes = "Path=/; Secure; HttpOnly; SameSite=Lax"

// newChallenge returns a challenge for the device to sign at its next
// refresh, valid for a bound cookie's lifetime and a minute more: a browser
// keeps the one that came with a bound cookie until shortly before that
// cookie expires.
func (m *Manager[U]) newChallenge(now time.Time) item.Challenge {
	return challengeFor(now, m.cfg.DeviceBinding.CookieLifetime+time.Minute)
}

// registrationChallengeLifetime bounds the challenge of a login's offer.
// A browser registers at once; the challenge and the session cookie both
// travel in the login's response, so a copy of that response (a HAR file)
// can register a key of its own only while the challenge is open.
const registrationChallengeLifetime = 2 * time.Minute

func challengeFor(now time.Time, lifetime time.Duration) item.Challenge {
	return item.Challenge{Value: item.NewToken(), Expires: time.Unix(now.Add(lifetime).Unix(), 0)}
}

// offerBinding asks the browser, in a login's response, to bind session s
// to a device key: it names the algorithms the server verifies, where to
// register, and the challenge to sign, which s already holds.
func (m *Manager[U]) offerBinding(w http.ResponseWriter, s item.Session) {
	w.Header().Set(headerRegistration, fmt.Sprintf("(ES256 RS256);path=%q;challenge=%q",
		m.cfg.DeviceBinding.RegistrationPath, s.Challenge.Value))
}
