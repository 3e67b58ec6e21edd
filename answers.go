package ddbsession

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// This file holds the answers to requests that a middleware does not let
// through: for browsers, a redirect to a login page that remembers where
// the user was going; for API clients, JSON.

// Answers are how a middleware answers the requests it does not let
// through. A nil field takes the Config's answer.
type Answers struct {
	// Unauthorized answers a request without a valid session; the cookie
	// has been cleared already.
	Unauthorized http.Handler
	// StoreUnavailable answers a request whose session could not be
	// checked. The request is never let through.
	StoreUnavailable http.Handler
}

// RequireSessionWith is [Manager.RequireSession] with other answers, so that
// one Manager guards pages and an API differently:
//
//	pages := sessions.RequireSessionWith(ddbsession.Answers{Unauthorized: ddbsession.RedirectToLogin("/login")})
//	api := sessions.RequireSessionWith(ddbsession.APIAnswers())
//	mux.Handle("GET /account", pages(account))
//	mux.Handle("GET /api/me", api(me))
func (m *Manager[U]) RequireSessionWith(a Answers) func(http.Handler) http.Handler {
	if a.Unauthorized == nil {
		a.Unauthorized = m.cfg.Unauthorized
	}
	if a.StoreUnavailable == nil {
		a.StoreUnavailable = m.cfg.StoreUnavailable
	}
	return func(next http.Handler) http.Handler { return m.middleware(next, true, a) }
}

// APIAnswers are JSON answers for API clients: 401 {"error":"unauthorized"}
// and 503 {"error":"session store unavailable, try again"}.
func APIAnswers() Answers {
	return Answers{
		Unauthorized:     JSONError(http.StatusUnauthorized, "unauthorized"),
		StoreUnavailable: JSONError(http.StatusServiceUnavailable, "session store unavailable, try again"),
	}
}

// JSONError answers with status and the body {"error": msg}.
func JSONError(status int, msg string) http.Handler {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		w.Write(append(body, '\n'))
	})
}

// Negotiate answers with api for requests that prefer JSON (an Accept
// header whose first type is application/json or ends in +json, or a
// bearer token) and with browser for the others, for a route that serves
// both.
func Negotiate(browser, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept")
		if _, bearer := bearerToken(r); bearer || prefersJSON(r.Header.Get("Accept")) {
			api.ServeHTTP(w, r)
			return
		}
		browser.ServeHTTP(w, r)
	})
}

func prefersJSON(accept string) bool {
	first, _, _ := strings.Cut(accept, ",")
	media, _, err := mime.ParseMediaType(first)
	return err == nil && (media == "application/json" || strings.HasSuffix(media, "+json"))
}

// ReturnParam is the query parameter in which [RedirectToLogin] passes the
// page the user was going to, for [ReturnPath] to read back.
const ReturnParam = "next"

// RedirectToLogin answers with 303 See Other to loginPath, passing the
// path and query of a GET or HEAD request in the "next" parameter, so that
// the login handler can send the user back with [ReturnPath]. Other methods
// carry no "next": their target is no page to return to.
func RedirectToLogin(loginPath string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := loginPath
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if next := r.URL.RequestURI(); localPath(next) {
				target += "?" + url.Values{ReturnParam: {next}}.Encode()
			}
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	})
}

// ReturnPath returns the page a login should send the user back to: r's
// "next" parameter if it is a path on this site, and fallback otherwise.
// Absolute URLs, scheme-relative ones ("//evil.example"), backslashes
// ("/\evil.example", which browsers read as "//"), control characters and
// percent-encoded forms of any of them are refused: no open redirect.
func ReturnPath(r *http.Request, fallback string) string {
	if next := r.URL.Query().Get(ReturnParam); localPath(next) {
		return next
	}
	return fallback
}

// localPath reports whether s is a path on this site, in every decoding a
// browser or a proxy might apply to it.
func localPath(s string) bool {
	for range 3 {
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\") ||
			strings.ContainsFunc(s, unicode.IsControl) {
			return false
		}
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
			return false
		}
		decoded, err := url.PathUnescape(s)
		if err != nil {
			return false
		}
		if decoded == s {
			return true
		}
		s = decoded
	}
	return false // encoded three times over: no page needs that
}
