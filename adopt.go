package ddbsession

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
)

// This file moves browsers from another session store (gorilla/sessions,
// an app's own) to this one on their first request: Adopt.

// An Adoption is what an old store vouches for (zero AuthenticatedAt: unknown).
type Adoption struct {
	User            UserKey
	Methods         []string
	AuthenticatedAt time.Time
}

// Adopt returns middleware, outside RequireSession, that signs a request
// with the old store's cookie old (its Name, and the Path and Domain where
// it is cleared) and none of ours in as from vouches (false: not; an
// error fails it closed): a Login with no credential and methods Methods
// and "migrated", never recent for RequireAuthentication. It sets the
// cookie, clears old, and goes on. Only a same-site navigation (GET or
// HEAD) is adopted, never a cross-site request or a page's fetch. A user
// without an item, or revoked at or after AuthenticatedAt, is not
// adopted. See docs/migrate.md.
func (m *Manager[U]) Adopt(old http.Cookie, from func(*http.Request) (Adoption, bool, error)) func(http.Handler) http.Handler {
	oldCookie := old.Name
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.CookiesNamed(oldCookie)) == 0 || len(r.CookiesNamed(m.cookies.name)) > 0 || m.carriesBearer(r) || !navigation(r) {
				next.ServeHTTP(w, r)
				return
			}
			a, ok, err := from(r)
			if err == nil && ok {
				var u U
				var out signedIn
				out, err = m.signInBrowser(w, r, signIn{user: a.User, out: &u, end: endAll, adoptedAt: &a.AuthenticatedAt,
					methods: append(slices.DeleteFunc(slices.Clone(a.Methods), func(s string) bool { return s == methodMigrated }), methodMigrated)})
				switch {
				case err == nil:
					r = withCookie(r, oldCookie, m.cookies.name, m.cookies.value(out.token, out.session))
					m.events.emit(r.Context(), Event{Kind: EventAdopted, SessionID: out.session.ID, User: a.User})
				case errors.Is(err, ErrUserNotFound):
					m.events.emit(r.Context(), Event{Kind: EventRejected, Reason: ReasonUserMissing, User: a.User})
					err = nil
				case errors.Is(err, ErrNoSession):
					m.events.emit(r.Context(), Event{Kind: EventRejected, Reason: reasonOf(err), User: a.User})
					err = nil
				}
				if err == nil {
					clearOld(w, old, m.cookies.secure)
				}
			}
			if err != nil {
				m.refuse(w, r, false, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// navigation reports whether r is a same-site navigation, or a request of
// a client that does not say (no Sec-Fetch headers): the requests a
// SameSite=Lax cookie of ours would go with, and that change nothing, so
// that a cross-site form cannot act as the old store's user, and a page's
// burst of fetches before its first answer does not make one session each.
func navigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	site, mode := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Sec-Fetch-Mode")
	return site != "cross-site" && (mode == "" || mode == "navigate")
}

// clearOld clears the old store's cookie where it was set. A __Host- or
// __Secure- name, or an HTTPS site, clears with Secure, without which a
// browser ignores the clearing of a prefixed cookie.
func clearOld(w http.ResponseWriter, old http.Cookie, secure bool) {
	path := old.Path
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{
		Name: old.Name, Path: path, Domain: old.Domain, MaxAge: -1, HttpOnly: true,
		Secure: secure || strings.HasPrefix(old.Name, hostPrefix) || strings.HasPrefix(old.Name, securePrefix),
	})
}

// withCookie is r carrying the cookie name=value instead of those named
// old.
func withCookie(r *http.Request, old, name, value string) *http.Request {
	r = r.Clone(r.Context())
	var kept []string
	for _, c := range r.Cookies() {
		if c.Name != old {
			kept = append(kept, c.String())
		}
	}
	r.Header.Set("Cookie", strings.Join(append(kept, (&http.Cookie{Name: name, Value: value}).String()), "; "))
	return r
}
