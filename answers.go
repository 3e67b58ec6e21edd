package ddbsession

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// This file holds the answers to requests that a guard does not let
// through (Config.Unauthorized and Config.StoreUnavailable, and their
// defaults), and the pair that sends a browser to log in and back
// (Config.LoginPath and ReturnPath).

// textHandler answers with a status code and a one-line plain-text body.
func textHandler(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, msg, code)
	})
}

// returnParam is the query parameter in which the redirect to
// Config.LoginPath passes the page the user was going to, for ReturnPath to
// read back.
const returnParam = "next"

// redirectTo answers with 303 See Other to path, passing the path and
// query of a GET or HEAD request in the "next" parameter, so that the
// login handler can send the user back with [ReturnPath]. Other methods
// carry no "next": their target is no page to return to. A request that
// carried a bearer token is no browser's: it gets 401, as without a path.
func redirectTo(path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		target := path
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if next := r.URL.RequestURI(); localPath(next) {
				target += "?" + url.Values{returnParam: {next}}.Encode()
			}
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	})
}

// redirectBack answers with 303 See Other to path, passing the page to come
// back to in the "next" parameter: a GET's or HEAD's own path and query,
// or, for a form's POST, the page that sent it, from a Referer of this
// origin. Config.StepUp's default with Config.ReauthPath. A request that
// carried a bearer token gets 401, as redirectTo gives it.
func redirectBack(path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "authenticate again to continue", http.StatusUnauthorized)
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
