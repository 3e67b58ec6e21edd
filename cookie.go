package ddbsession

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"time"
)

// A token is rand.Text's output: 26 characters of the RFC 4648 base32
// alphabet, 130 bits from crypto/rand. It travels only in the cookie. The
// table keys a session by the SHA-256 digest of the token, so whoever reads
// the table or a backup of it cannot lift a live session out of it.
const tokenLen = 26

func newToken() string { return rand.Text() }

// validToken reports whether s has the one length and alphabet that tokens
// have. Anything else is rejected before it can cost a DynamoDB call.
func validToken(s string) bool {
	if len(s) != tokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// sessionPK returns the partition key value of the session behind token.
func (m *Manager[U]) sessionPK(token string) string {
	sum := sha256.Sum256([]byte(token))
	return m.cfg.SessionPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// requestToken returns the first well-formed session token among the
// request's cookies of our name, and whether there was any such cookie at
// all. Several cookies may share a name; malformed ones are ignored.
func (m *Manager[U]) requestToken(r *http.Request) (token string, present bool) {
	for _, c := range r.CookiesNamed(m.cfg.CookieName) {
		present = true
		if validToken(c.Value) {
			return c.Value, true
		}
	}
	return "", present
}

// maxCarriedTokens bounds how many of a request's session cookies Login and
// Logout end. A browser sends one, or a few where cookies were tossed; a
// client that sends hundreds must not turn one request into hundreds of
// deletes.
const maxCarriedTokens = 4

// requestTokens returns the well-formed session tokens the request carries,
// for Login and Logout to end them.
func (m *Manager[U]) requestTokens(r *http.Request) []string {
	var tokens []string
	for _, c := range r.CookiesNamed(m.cfg.CookieName) {
		if validToken(c.Value) && len(tokens) < maxCarriedTokens {
			tokens = append(tokens, c.Value)
		}
	}
	return tokens
}

// setCookie sends the session cookie with a Max-Age that ends at expires.
func (m *Manager[U]) setCookie(w http.ResponseWriter, token string, now, expires time.Time) {
	maxAge := int(expires.Unix() - now.Unix())
	if maxAge < 1 {
		maxAge = 1
	}
	m.writeCookie(w, token, maxAge)
}

// clearCookie tells the browser to drop the session cookie.
func (m *Manager[U]) clearCookie(w http.ResponseWriter) { m.writeCookie(w, "", -1) }

// writeCookie sets the cookie with attributes that browsers enforce for the
// __Host- prefix: Secure, Path=/ and no Domain. HttpOnly keeps it from
// scripts; SameSite=Lax keeps it off cross-site subrequests and POSTs. A
// response that carries it must not be cached, or a shared cache could hand
// one user's cookie to another.
func (m *Manager[U]) writeCookie(w http.ResponseWriter, value string, maxAge int) {
	noStore(w)
	http.SetCookie(w, &http.Cookie{
		Name:     m.cfg.CookieName,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		Secure:   !m.cfg.InsecureDevMode,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	})
}

// noStore marks a response as personal: it varies with the cookie and no
// cache may keep it.
func noStore(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	addVaryCookie(h)
}

func addVaryCookie(h http.Header) {
	for _, v := range h.Values("Vary") {
		if v == "Cookie" {
			return
		}
	}
	h.Add("Vary", "Cookie")
}
