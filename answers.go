package ddbsession

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// This file holds the answers to requests that a guard does not let
// through: the defaults of Config.Unauthorized, StepUp and
// StoreUnavailable, and the pair that sends a browser to log in and back
// (Redirect and ReturnPath).

// refusal answers with a status code and a one-line message: as JSON,
// {"error": msg}, to a program (see fromProgram), as plain text otherwise.
func refusal(code int, msg string) http.Handler {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromProgram(w, r) {
			http.Error(w, msg, code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		w.Write(append(body, '\n'))
	})
}

// fromProgram reports whether r is a program's call (fetch, a CLI, another
// service) rather than a browser's navigation, which a login page can
// answer: a browser says which in Sec-Fetch-Mode; without it, an
// Authorization header or an Accept that prefers JSON to HTML tells. The
// answer to r varies with them, and w's Vary says so to caches.
func fromProgram(w http.ResponseWriter, r *http.Request) bool {
	for _, h := range []string{"Sec-Fetch-Mode", "Authorization", "Accept"} {
		addVary(w.Header(), h)
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return mode != "navigate"
	}
	if r.Header.Get("Authorization") != "" {
		return true
	}
	var jsonQ, htmlQ float64 // the best q of each
	for _, accept := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(accept, ",") {
			mediaType, params, err := mime.ParseMediaType(part)
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(v, 64); err != nil {
					continue
				}
			}
			switch {
			case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
				jsonQ = max(jsonQ, q)
			case mediaType == "text/html" || mediaType == "application/xhtml+xml":
				htmlQ = max(htmlQ, q)
			}
		}
	}
	return jsonQ > htmlQ
}

// returnParam is the query parameter in which [Redirect] passes the page
// to come back to, for ReturnPath to read back.
const returnParam = "next"

// Redirect returns a handler, for [Config.Unauthorized] or [Config.StepUp],
// that sends a browser with 303 See Other to path, a login page as the
// browser sees it, with the page to come back to in "next" for [ReturnPath]:
// a GET's URL ([Cookie.Path] in front if stripped), or a POST's same-origin
// Referer. A program's call (fetch, an Authorization, an Accept preferring
// JSON) gets 401 {"error":"unauthorized"}. It panics if path is off-site.
func Redirect(path string) http.Handler {
	if !localPath(path) {
		panic(fmt.Sprintf("ddbsession: Redirect(%q): not a path on this site", path))
	}
	return redirect{path: path}
}

// redirect is Redirect's handler; New gives it the app's prefix, Cookie.Path.
type redirect struct{ path, prefix string }

func (rd redirect) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if fromProgram(w, r) {
		unauthorized.ServeHTTP(w, r)
		return
	}
	next := r.URL.RequestURI()
	if p := rd.prefix; p != "" && p != "/" && r.URL.Path != p && !strings.HasPrefix(r.URL.Path, p+"/") {
		next = p + next
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		next = ""
		if ref, err := url.Parse(r.Referer()); err == nil && ref.Host == r.Host {
			next = ref.RequestURI()
		}
	}
	target := rd.path
	if localPath(next) {
		target += "?" + url.Values{returnParam: {next}}.Encode()
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// withPrefix is h with the app's prefix, if h is Redirect's.
func withPrefix(h http.Handler, prefix string) http.Handler {
	if rd, ok := h.(redirect); ok {
		rd.prefix = prefix
		return rd
	}
	return h
}

// unauthorized is Config.Unauthorized's default, and Redirect's answer to
// a program.
var unauthorized = refusal(http.StatusUnauthorized, "unauthorized")

// ReturnPath returns the page a login should send the user back to: r's
// "next" if it is a path on this site, else fallback. Absolute and
// scheme-relative URLs, backslashes, control characters and their
// percent-encodings are refused: no open redirect.
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
