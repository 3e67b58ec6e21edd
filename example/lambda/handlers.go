package main

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/ddbsession/ddbsession"
)

// index is the account with its sessions, signed in, and the forms to sign
// up or log in, signed out.
func (a *app) index(w http.ResponseWriter, r *http.Request) {
	var data pageData
	if u, ok := a.sessions.User(r.Context()); ok {
		s, _ := a.sessions.Session(r.Context())
		list, err := a.sessions.List(r.Context(), s.User)
		if err != nil {
			a.storeFailed(w, r, "list sessions", err, errorPage)
			return
		}
		data.User, data.Sessions = &u, list
	}
	render(w, http.StatusOK, "index", data)
}

// loginPage is where a page that needs a session sends a browser without
// one, to come back to in "next".
func (a *app) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.sessions.User(r.Context()); ok {
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
		return
	}
	next := ddbsession.ReturnPath(r, "")
	render(w, http.StatusOK, "index", pageData{Next: next, LoginRequired: next != ""})
}

// formAnswer answers a failed form with the forms again and the message.
func formAnswer(r *http.Request) answerFunc {
	return func(w http.ResponseWriter, code int, msg string) {
		render(w, code, "index", pageData{Next: ddbsession.ReturnPath(r, ""), Message: msg})
	}
}

func (a *app) signup(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	answer := formAnswer(r)
	username, err := normalizeUsername(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	if err == nil {
		err = newPasswordError(password, username)
	}
	if err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	key := userKey(username)
	hash := hashPassword(password)
	// CreateUser writes the item only if the key is free, with a sessions
	// version of its own: no session of a deleted namesake comes back.
	err = a.sessions.CreateUser(r.Context(), userItem{PK: key.PK, SK: key.SK, User: User{Username: username, PasswordHash: hash}})
	switch {
	case errors.Is(err, ddbsession.ErrUserExists):
		answer(w, http.StatusConflict, "That username is taken.")
		return
	case err != nil:
		a.storeFailed(w, r, "create user", err, answer)
		return
	}
	err = a.sessions.Login(w, r, key, func(u User) error {
		if subtle.ConstantTimeCompare([]byte(u.PasswordHash), []byte(hash)) != 1 {
			return errPasswordChanged
		}
		return nil
	}, methodPassword)
	switch {
	case errors.Is(err, errPasswordChanged), errors.Is(err, ddbsession.ErrUserNotFound):
		answer(w, http.StatusConflict, "The account was changed by another request meanwhile. Log in again.")
	case err != nil:
		a.storeFailed(w, r, "log in", err, answer)
	default:
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
	}
}

func (a *app) login(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	answer := formAnswer(r)
	username, err := normalizeUsername(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	if err == nil {
		err = validatePassword(password)
	}
	if err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.passwordLogin(w, r, username, password, loginCheck, answer, func(key ddbsession.UserKey, verify func(User) error) error {
		return a.sessions.Login(w, r, key, verify, methodPassword)
	}) {
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
	}
}

// methodPassword is how a session whose user typed the password signed
// in, in Session.Methods.
const methodPassword = "password"

// passwordLogin checks username's password under the failure limit of
// check, and signs in with signIn (Login for a browser, LoginBearer for an
// API client), whose verify checks the password against the hash that
// ddbsession reads in the same call that writes the session. It answers a
// failure itself and returns false.
func (a *app) passwordLogin(w http.ResponseWriter, r *http.Request, username, password, check string, answer answerFunc,
	signIn func(key ddbsession.UserKey, verify func(User) error) error) bool {
	wrong := "Wrong username or password."
	if check != loginCheck {
		wrong = "The password is wrong."
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	bucket := failureBucket{username, check}
	ok, retry, err := a.failures.take(ctx, bucket, a.now())
	if err != nil {
		a.storeFailed(w, r, "count failed logins", err, answer)
		return false
	}
	if !ok {
		w.Header().Set("Retry-After", retryAfter(retry))
		answer(w, http.StatusTooManyRequests, "Too many failed attempts. Try again later.")
		return false
	}
	err = signIn(userKey(username), func(u User) error {
		if u.TOTPSecret != "" {
			return errCodesNeeded
		}
		if !verifyPassword(u.PasswordHash, password) {
			return errWrongPassword
		}
		return nil
	})
	switch {
	case errors.Is(err, ddbsession.ErrUserNotFound):
		verifyPassword(dummyHash, password) // as long as a wrong password for a real user
		answer(w, http.StatusUnauthorized, wrong)
	case errors.Is(err, errWrongPassword):
		answer(w, http.StatusUnauthorized, wrong)
	case errors.Is(err, errCodesNeeded):
		a.failures.giveBack(ctx, bucket)
		answer(w, http.StatusForbidden, "This account uses one-time codes, which this function does not take: log in on the example server.")
	case err != nil:
		a.storeFailed(w, r, "log in", err, answer)
	default:
		if err := a.failures.giveBack(ctx, bucket); err != nil {
			a.log.WarnContext(r.Context(), "give back a failure token", "err", err)
		}
		return true
	}
	return false
}

var (
	errWrongPassword   = errors.New("wrong password")
	errPasswordChanged = errors.New("password was changed by another request")
	errCodesNeeded     = errors.New("the account needs one-time codes")
)

func (a *app) logout(w http.ResponseWriter, r *http.Request) {
	// Logout clears the cookie even when the delete fails; then the session
	// lives on elsewhere, and the user must hear so.
	if err := a.sessions.Logout(w, r); err != nil {
		a.storeFailed(w, r, "log out", err, errorPage)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *app) logoutEverywhere(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	if err := a.sessions.RevokeAll(r.Context(), s.User); err != nil {
		a.storeFailed(w, r, "revoke all sessions", err, errorPage)
		return
	}
	a.logout(w, r)
}

func (a *app) revokeSession(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	s, _ := a.sessions.Session(r.Context())
	// The user comes from the session, never from the form: an ID of
	// another user's session is not found.
	err := a.sessions.Revoke(r.Context(), s.User, r.PostFormValue("id"))
	switch {
	case errors.Is(err, ddbsession.ErrNoSession):
		errorPage(w, http.StatusNotFound, "No such session.")
	case err != nil:
		a.storeFailed(w, r, "revoke session", err, errorPage)
	default:
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

func (a *app) reauthPage(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	render(w, http.StatusOK, "reauth", pageData{User: &u, Next: ddbsession.ReturnPath(r, "/account")})
}

// reauthenticate checks the signed-in user's password again and signs this
// browser in anew (a Login on the user's own session), then sends it back.
func (a *app) reauthenticate(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	u, _ := a.sessions.User(r.Context())
	next := formReturnPath(r, "/account")
	answer := func(w http.ResponseWriter, code int, msg string) {
		render(w, code, "reauth", pageData{User: &u, Next: next, Message: msg})
	}
	password := r.PostFormValue("password")
	if err := validatePassword(password); err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.passwordLogin(w, r, u.Username, password, reauthCheck, answer, func(key ddbsession.UserKey, verify func(User) error) error {
		return a.sessions.Login(w, r, key, verify, methodPassword)
	}) {
		http.Redirect(w, r, next, http.StatusSeeOther)
	}
}

// loginRequest is the body of POST /api/login.
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// tokenJSON answers POST /api/login and /api/reauth: the bearer token and
// its session's expiry, RFC 3339. A request that moves the expiry forward
// says so in the Session-Expires header.
type tokenJSON struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

func (a *app) apiLogin(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if !decodeJSON(w, r, &req, `want one JSON object: {"username": ..., "password": ...}`) {
		return
	}
	username, err := normalizeUsername(req.Username)
	if err == nil {
		err = validatePassword(req.Password)
	}
	if err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.bearerLogin(w, r, username, req.Password, loginCheck)
}

func (a *app) apiReauthenticate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Password string `json:"password"`
	}
	if !decodeJSON(w, r, &req, `want one JSON object: {"password": ...}`) {
		return
	}
	if err := validatePassword(req.Password); err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	u, _ := a.sessions.User(r.Context())
	a.bearerLogin(w, r, u.Username, req.Password, reauthCheck)
}

// bearerLogin signs username in with a bearer token; on the user's own
// token, a re-authentication that ends it.
func (a *app) bearerLogin(w http.ResponseWriter, r *http.Request, username, password, check string) {
	var token tokenJSON
	if a.passwordLogin(w, r, username, password, check, jsonError, func(key ddbsession.UserKey, verify func(User) error) error {
		var err error
		token.Token, token.ExpiresAt, err = a.sessions.LoginBearer(r, key, verify, methodPassword)
		return err
	}) {
		token.ExpiresAt = token.ExpiresAt.UTC()
		writeJSON(w, http.StatusOK, token)
	}
}

func (a *app) me(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	writeJSON(w, http.StatusOK, u)
}

// sessionJSON is one entry of GET /api/sessions. Times are RFC 3339.
type sessionJSON struct {
	ID          string    `json:"id"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	UserAgent   string    `json:"userAgent"`
	Current     bool      `json:"current"`
	DeviceBound bool      `json:"deviceBound"`
	Methods     []string  `json:"methods"`
}

func (a *app) listSessions(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	list, err := a.sessions.List(r.Context(), s.User)
	if err != nil {
		a.storeFailed(w, r, "list sessions", err, jsonError)
		return
	}
	out := make([]sessionJSON, 0, len(list))
	for _, e := range list {
		out = append(out, sessionJSON{ID: e.ID, CreatedAt: e.CreatedAt, ExpiresAt: e.ExpiresAt, UserAgent: e.UserAgent,
			Current: e.Current, DeviceBound: e.DeviceBound, Methods: append([]string{}, e.Methods...)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *app) apiRevokeSession(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	err := a.sessions.Revoke(r.Context(), s.User, r.PathValue("id"))
	switch {
	case errors.Is(err, ddbsession.ErrNoSession):
		jsonError(w, http.StatusNotFound, "no such session")
	case err != nil:
		a.storeFailed(w, r, "revoke session", err, jsonError)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// decodeJSON reads r's body, one JSON object that fits v, into v, or
// answers 415, 413 or 400 with want itself and returns false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, want string) bool {
	if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType != "application/json" {
		jsonError(w, http.StatusUnsupportedMediaType, "send the credentials as application/json")
		return false
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		jsonError(w, http.StatusRequestEntityTooLarge, "the body is too large")
		return false
	}
	if err != nil {
		jsonError(w, http.StatusBadRequest, want)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// jsonError answers code with {"error": msg}, the API's one shape of an
// error.
func jsonError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}

// apiAnswer is jsonError as a handler, for the session guard's answers.
func apiAnswer(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { jsonError(w, code, msg) })
}

// parseForm reads the POST body, or answers 413 or 400 and returns false.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		errorPage(w, http.StatusRequestEntityTooLarge, "The form is too large.")
		return false
	}
	if err != nil {
		errorPage(w, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
}

// formReturnPath is ddbsession.ReturnPath for a "next" in the form (or the
// query): a path on this site, or fallback.
func formReturnPath(r *http.Request, fallback string) string {
	q := &http.Request{URL: &url.URL{RawQuery: url.Values{"next": {r.FormValue("next")}}.Encode()}}
	return ddbsession.ReturnPath(q, fallback)
}
