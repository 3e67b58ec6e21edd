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
// with the old store's cookie oldCookie and none of ours in as from vouches
// (false: not; an error fails it closed): a Login with no credential and
// methods Methods and "migrated", never recent for RequireAuthentication.
// It sets the cookie, clears oldCookie, and goes on. A user without an
// item, or revoked at or after AuthenticatedAt, is not adopted. See
// docs/migrate.md.
func (m *Manager[U]) Adopt(oldCookie string, from func(*http.Request) (Adoption, bool, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.CookiesNamed(oldCookie)) == 0 || len(r.CookiesNamed(m.cookies.name)) > 0 || m.carriesBearer(r) {
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
					writeCookie(w, oldCookie, "", "/", -1, false)
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
