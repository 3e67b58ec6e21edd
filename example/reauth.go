package main

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession"
)

// Re-authentication: the sensitive actions (routes' "sensitive") need a
// session whose user proved themselves within appConfig.Reauth. An older
// one is sent here by ddbsession's RequireAuthentication, through the
// Config's StepUp: a browser to GET /reauth (stepUp), an API client to a
// 401 with RFC 9470's challenge, and either signs in again on the session
// it holds. ddbsession's Login (or LoginBearer) on a request that carries
// the user's own session is a re-authentication: a new token with a fresh
// AuthenticatedAt, the old one ended, the user's other sessions left
// alone.
//
// The browser comes back to what it asked for: a sensitive action is a
// POST, which no redirect can repeat, so its re-authentication returns to
// the action's confirm page, the GET of the same path, which asks for it
// again, one press away (and behind the same CrossOriginProtection as
// every form). A GET comes back to itself.

// reauthPath is the re-authentication page, where StepUp sends browsers.
const reauthPath = "/reauth"

// resumable are the sensitive actions, by the path of their POST, that
// a browser sent to re-authenticate comes back to, at the GET of the same
// path, with the form fields of the POST that the confirm page takes back.
// routes serves each of those pages; TestEveryStepUpResumes walks them.
var resumable = map[string][]string{
	"/logout-everywhere": nil,
	"/sessions/revoke":   {"id"},
	"/totp/enrol":        nil,
	"/totp/confirm":      nil, // not the code: it is spent or stale by then
	"/totp/remove":       nil,
	"/passkeys/remove":   {"id"},
}

// stepUp is Config.StepUp's answer for the pages: 303 to the
// re-authentication page, with next the page to come back to: a sensitive
// POST's confirm page (resumable), a GET's own address, or the account.
func stepUp(w http.ResponseWriter, r *http.Request) {
	next := "/account"
	if fields, ok := resumable[r.URL.Path]; ok && r.Method == http.MethodPost {
		next = r.URL.Path
		kept := url.Values{}
		for _, name := range fields {
			if v := r.PostFormValue(name); v != "" && len(v) <= maxKeptField {
				kept.Set(name, v)
			}
		}
		if len(kept) > 0 {
			next += "?" + kept.Encode()
		}
	} else if r.Method == http.MethodGet || r.Method == http.MethodHead {
		next = r.URL.RequestURI()
	}
	http.Redirect(w, r, reauthPath+"?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
}

// maxKeptField bounds a form field that stepUp carries into next: a
// session ID is 32 characters, and anything much longer is no ID.
const maxKeptField = 64

// confirmData is what a confirm page shows: the action in a heading and a
// sentence, and the button that sends it, with its form's hidden fields.
type confirmData struct {
	Title, Text string
	Action      string // the path of the action's POST
	Fields      map[string]string
	Button      string
	Danger      bool // the button is red: the action signs someone out
}

// confirmPage is the confirm page of an action that needs nothing but a
// press.
func (a *app) confirmPage(data confirmData) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a.render(w, http.StatusOK, confirmTemplate, data)
	}
}

// Confirm pages of the actions without a form field.
var (
	confirmLogoutEverywhere = confirmData{
		Title: "Log out everywhere", Action: "/logout-everywhere", Button: "Log out everywhere", Danger: true,
		Text: "This ends every one of your sessions, on every device, this one too.",
	}
	confirmTOTPEnrol = confirmData{
		Title: "Set up one-time codes", Action: "/totp/enrol", Button: "Set up one-time codes",
		Text: "The next page shows a QR code for your authenticator app.",
	}
	confirmTOTPRemove = confirmData{
		Title: "Turn off one-time codes", Action: "/totp/remove", Button: "Turn off one-time codes", Danger: true,
		Text: "Logging in will ask for your password alone.",
	}
)

// confirmRevoke is the confirm page of revoking one session: the one of
// id, if it is one of the signed-in user's.
func (a *app) confirmRevoke(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	s, _ := a.sessions.Session(r.Context())
	list, err := a.sessions.List(r.Context(), s.User)
	if err != nil {
		a.storeError(w, r, "list sessions", err)
		return
	}
	i := slices.IndexFunc(list, func(e ddbsession.Session) bool { return e.ID == id })
	if id == "" || i < 0 {
		a.errorPage(w, http.StatusNotFound, "No such session: it may have ended already.")
		return
	}
	which := deviceName(list[i].UserAgent) + ", signed in " + list[i].CreatedAt.UTC().Format("Jan 2 15:04 UTC")
	if list[i].Current {
		which += ": this browser"
	}
	a.render(w, http.StatusOK, confirmTemplate, confirmData{
		Title: "Revoke a session", Action: "/sessions/revoke", Fields: map[string]string{"id": id}, Button: "Revoke", Danger: true,
		Text: "This ends the session of " + which + ".",
	})
}

// totpSetupPage is the confirm page of a set-up's confirmation: the
// pending set-up again, its QR code and the code form. It shows the
// pending secret, so it needs a recent authentication itself (routes).
func (a *app) totpSetupPage(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	if u.TOTPPending == "" {
		a.errorPage(w, http.StatusConflict, "There is no set-up of one-time codes to confirm. Start it again from your account.")
		return
	}
	a.renderSetup(w, r, http.StatusOK, u.Username, u.TOTPPending, "")
}

// reauthData is what the re-authentication page shows: whose session it
// is, whether it asks for a one-time code too, for how long a password
// counts, the page to go back to, and the message of a refused try.
type reauthData struct {
	Username string
	Code     bool
	Within   string
	Next     string
	Message  string
	Passkey  bool // the user has a passkey, which the page offers instead
}

func (a *app) reauthPage(w http.ResponseWriter, r *http.Request) {
	next := ddbsession.ReturnPath(r, "/account")
	if a.ssoReauth(w, r, next) {
		return
	}
	a.render(w, http.StatusOK, reauthTemplate, a.reauthData(r, next))
}

func (a *app) reauthData(r *http.Request, next string) reauthData {
	u, _ := a.sessions.User(r.Context())
	return reauthData{Username: u.Username, Code: u.TOTPEnrolled(), Within: inWords(a.reauthWithin), Next: next, Passkey: len(u.Passkeys) > 0}
}

// reauthenticate checks the signed-in user's password again, and the
// one-time code of a user who has them, and on success signs this browser
// in anew and sends it back to next.
func (a *app) reauthenticate(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	next := formReturnPath(r, "/account")
	if a.ssoReauth(w, r, next) {
		return
	}
	answer := func(w http.ResponseWriter, code int, msg string) {
		data := a.reauthData(r, next)
		data.Message = msg
		a.render(w, code, reauthTemplate, data)
	}
	password := r.PostFormValue("password")
	code, codeErr := optionalCode(r.PostFormValue("code"))
	if err := errors.Join(validatePassword("password", password), codeErr); err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	u, _ := a.sessions.User(r.Context())
	signedIn := a.passwordLogin(w, r, u.Username, password, code, reauthCheck, answer, func(user ddbsession.UserKey, verify func(User) error) error {
		return a.sessions.Login(w, r, user, a.passwordAndCode(r, user, verify, code), methodsFor(code)...)
	})
	if signedIn {
		http.Redirect(w, r, next, http.StatusSeeOther)
	}
}

// formReturnPath is ddbsession.ReturnPath for a "next" that comes in the
// form (or the query) rather than the query alone: the page to go back to,
// if it is a path on this site, and fallback otherwise.
func formReturnPath(r *http.Request, fallback string) string {
	q := &http.Request{URL: &url.URL{RawQuery: url.Values{"next": {r.FormValue("next")}}.Encode()}}
	return ddbsession.ReturnPath(q, fallback)
}

// reauthRequest is the body of POST /api/reauth. Code is the one-time code
// of a user who has them.
type reauthRequest struct {
	Password string `json:"password"`
	Code     string `json:"code,omitempty"`
}

// apiReauthenticate is reauthenticate for a bearer token: the client gets
// a new token, and the one it sent is dead.
func (a *app) apiReauthenticate(w http.ResponseWriter, r *http.Request) {
	if scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " "); scheme != "Bearer" && scheme != "DPoP" {
		// A cookie's session would stay as it is, and a new bearer token
		// come beside it: not what this route promises.
		jsonError(w, http.StatusBadRequest, "POST /api/reauth renews the bearer token the request carries; a browser re-authenticates at /reauth")
		return
	}
	var req reauthRequest
	if !decodeJSON(w, r, &req, `want one JSON object: {"password": ..., "code": ...}`) {
		return
	}
	code, codeErr := optionalCode(req.Code)
	if err := errors.Join(validatePassword("password", req.Password), codeErr); err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	u, _ := a.sessions.User(r.Context())
	var token tokenJSON
	signedIn := a.passwordLogin(w, r, u.Username, req.Password, code, reauthCheck, jsonError, func(user ddbsession.UserKey, verify func(User) error) error {
		var err error
		token.Token, token.ExpiresAt, err = a.sessions.LoginBearer(r, user, a.passwordAndCode(r, user, verify, code), methodsFor(code)...)
		return err
	})
	if signedIn {
		token.ExpiresAt, token.TokenType = token.ExpiresAt.UTC(), tokenType(r)
		writeJSON(w, http.StatusOK, token)
	}
}

// apiRevokeSession ends one of the signed-in user's sessions, by its ID
// in GET /api/sessions: 204, or 404 for an ID that is none of the user's.
func (a *app) apiRevokeSession(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	err := a.sessions.Revoke(r.Context(), s.User, r.PathValue("id"))
	if errors.Is(err, ddbsession.ErrNoSession) {
		jsonError(w, http.StatusNotFound, "no such session")
		return
	}
	if err != nil {
		a.storeFailed(w, r, "revoke session", err, jsonError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// inWords says d the way the page does: "10 minutes", "90 seconds".
func inWords(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	}
	return plural(int((d+time.Second-1)/time.Second), "second")
}
