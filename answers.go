package ddbsession

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// This file holds the answers to requests that a guard does not let
// through: the defaults of Config.Unauthorized, StepUp and
// StoreUnavailable, and the pair that sends a browser to log in and back
// (Redirect and ReturnPath).

// textHandler answers with a status code and a one-line plain-text body.
func textHandler(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, msg, code)
	})
}

// returnParam is the query parameter in which [Redirect] passes the page
// to come back to, for ReturnPath to read back.
const returnParam = "next"

// Redirect returns a handler that sends a browser with 303 See Other to
// path, a page on this site, passing the page to come back to in "next",
// which the page's handler reads with [ReturnPath]: a GET's or HEAD's own
// URL, or, for a form's POST, the same-origin page that sent it. It is
// [Config.Unauthorized] for a site with a login page, [Config.StepUp] for
// one with a re-authentication page. A bearer request gets 401. Redirect
// panics, at the app's start, if path is not on this site.
func Redirect(path string) http.Handler {
	if !localPath(path) {
		panic(fmt.Sprintf("ddbsession: Redirect(%q): not a path on this site", path))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, bearer := bearerToken(r); bearer {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next := r.URL.RequestURI()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			next = ""
			if ref, err := url.Parse(r.Referer()); err == nil && ref.Host == r.Host {
				next = ref.RequestURI()
			}
		}
		target := path
		if localPath(next) {
			target += "?" + url.Values{returnParam: {next}}.Encode()
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
	if next := r.URL.Query().Get(returnParam); localPath(next) {
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
