package ddbsession

import (
	"net/http"
	"strings"
)

// This file holds the response headers that keep a session's answers out
// of shared caches.

// addVary says that the response depends on the request's header name, if
// it does not say so already.
func addVary(h http.Header, name string) {
	for _, v := range h.Values("Vary") {
		for field := range strings.SplitSeq(v, ",") {
			if f := strings.TrimSpace(field); f == "*" || strings.EqualFold(f, name) {
				return
			}
		}
	}
	h.Add("Vary", name)
}

// private marks a response that a session let through as the user's own:
// no shared cache may keep it, since some ignore Vary: Cookie, and none
// should keep what a bearer token was shown for (OWASP ASVS 5.0 14.3.2). A
// handler that sets a Cache-Control of its own replaces it.
func private(h http.Header) {
	if _, set := h["Cache-Control"]; !set {
		h["Cache-Control"] = []string{"private, no-store"}
	}
}
