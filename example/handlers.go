package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/ddbsession/ddbsession"
)

// index is the only page: forms to sign up or log in for visitors, and the
// account with its sessions for a signed-in user.
func (a *app) index(w http.ResponseWriter, r *http.Request) {
	var data indexData
	if u, ok := a.sessions.User(r.Context()); ok {
		s, _ := a.sessions.Session(r.Context())
		list, err := a.sessions.List(r.Context(), s.User)
		if err != nil {
			a.storeError(w, r, "list sessions", err)
			return
		}
		data.User, data.Sessions = &u, list
	}
	a.render(w, http.StatusOK, indexTemplate, data)
}

func (a *app) signup(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	username, userErr := normalizeUsername(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	if err := errors.Join(userErr, validatePassword("password", password)); err != nil {
		a.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	slot, ok := a.hashSlot(w, r)
	if !ok {
		return
	}
	hash := slot.hash(password)
	slot.release()
	err := a.users.create(r.Context(), username, hash)
	if errors.Is(err, errUsernameTaken) {
		a.errorPage(w, http.StatusConflict, "That username is taken.")
		return
	}
	if err != nil {
		a.storeError(w, r, "create user", err)
		return
	}
	a.signIn(w, r, userKey(username))
}

func (a *app) login(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	username, userErr := normalizeUsername(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	if err := errors.Join(userErr, validatePassword("password", password)); err != nil {
		a.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	slot, ok := a.hashSlot(w, r)
	if !ok {
		return
	}
	defer slot.release()
	hash, err := a.users.passwordHash(r.Context(), username)
	known := err == nil
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		hash = a.dummyHash // same work, so timing does not reveal who exists
	} else if err != nil {
		a.storeError(w, r, "read user", err)
		return
	}
	match, err := slot.verify(hash, password)
	if err != nil {
		a.log.ErrorContext(r.Context(), "stored password hash is unreadable", "user", username, "err", err)
		a.errorPage(w, http.StatusInternalServerError, "Something went wrong.")
		return
	}
	if !known || !match {
		a.errorPage(w, http.StatusUnauthorized, "Wrong username or password.")
		return
	}
	a.signIn(w, r, userKey(username))
}

// signIn starts a session for user and sends the browser home. Login
// rotates: any session the request already carries is ended first, so a
// token planted in this browser before sign-in is worthless.
func (a *app) signIn(w http.ResponseWriter, r *http.Request, user ddbsession.UserKey) {
	if err := a.sessions.Login(w, r, user); err != nil {
		a.storeError(w, r, "log in", err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *app) logout(w http.ResponseWriter, r *http.Request) {
	// Logout clears the cookie even when the delete fails, but then the
	// session lives on elsewhere, so the user must hear about it.
	if err := a.sessions.Logout(w, r); err != nil {
		a.storeError(w, r, "log out", err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *app) logoutEverywhere(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	// RevokeAll ends every session of the user, this one included, on
	// their next request; Logout also clears this browser's cookie now.
	if err := a.sessions.RevokeAll(r.Context(), s.User); err != nil {
		a.storeError(w, r, "revoke all sessions", err)
		return
	}
	a.logout(w, r)
}

func (a *app) changePassword(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	current, next := r.PostFormValue("current"), r.PostFormValue("new")
	if err := errors.Join(validatePassword("current password", current), validatePassword("new password", next)); err != nil {
		a.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	slot, ok := a.hashSlot(w, r)
	if !ok {
		return
	}
	defer slot.release()
	hash, err := a.users.passwordHash(r.Context(), u.Username)
	if err != nil {
		a.storeError(w, r, "read user", err)
		return
	}
	// Asking for the current password keeps a borrowed, unlocked browser
	// from taking the account over.
	match, err := slot.verify(hash, current)
	if err != nil {
		a.log.ErrorContext(r.Context(), "stored password hash is unreadable", "user", u.Username, "err", err)
		a.errorPage(w, http.StatusInternalServerError, "Something went wrong.")
		return
	}
	if !match {
		a.errorPage(w, http.StatusUnauthorized, "The current password is wrong.")
		return
	}
	// A changed password should lock out whoever knew the old one, so every
	// session ends first: if the password write then fails, the user is
	// signed out everywhere with the old password, never left with a new
	// password and a thief's session still live.
	if err := a.sessions.RevokeAll(r.Context(), s.User); err != nil {
		a.storeError(w, r, "revoke all sessions", err)
		return
	}
	newHash := slot.hash(next)
	slot.release()
	err = a.users.setPasswordHash(r.Context(), u.Username, hash, newHash)
	if errors.Is(err, errPasswordChanged) {
		a.errorPage(w, http.StatusConflict, "Your password was just changed elsewhere. Reload and try again.")
		return
	}
	if err != nil {
		a.storeError(w, r, "update password", err)
		return
	}
	// This browser signs in again; its new session is created at or after
	// RevokeAll's cutoff, so it is valid.
	a.signIn(w, r, s.User)
}

func (a *app) revokeSession(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	id := r.PostFormValue("id")
	if id == "" {
		a.errorPage(w, http.StatusBadRequest, "id is required")
		return
	}
	// The user key comes from the signed-in session, never from the form,
	// so an ID of someone else's session is simply not found.
	s, _ := a.sessions.Session(r.Context())
	err := a.sessions.Revoke(r.Context(), s.User, id)
	if errors.Is(err, ddbsession.ErrSessionNotFound) {
		a.errorPage(w, http.StatusNotFound, "No such session.")
		return
	}
	if err != nil {
		a.storeError(w, r, "revoke session", err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *app) me(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	writeJSON(w, u)
}

// sessionJSON is one entry of GET /api/sessions. Times are RFC 3339.
type sessionJSON struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	UserAgent string    `json:"userAgent"`
	Current   bool      `json:"current"`
}

func (a *app) listSessions(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	list, err := a.sessions.List(r.Context(), s.User)
	if err != nil {
		a.log.ErrorContext(r.Context(), "dynamodb request failed", "op", "list sessions", "err", err)
		http.Error(w, "session store unavailable, try again", http.StatusServiceUnavailable)
		return
	}
	out := make([]sessionJSON, 0, len(list)) // [] rather than null when empty
	for _, e := range list {
		out = append(out, sessionJSON{ID: e.ID, CreatedAt: e.CreatedAt, ExpiresAt: e.ExpiresAt, UserAgent: e.UserAgent, Current: e.Current})
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// parseForm reads the POST body, or answers 413 or 400 itself and returns
// false.
func (a *app) parseForm(w http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		a.errorPage(w, http.StatusRequestEntityTooLarge, "The form is too large.")
		return false
	}
	if err != nil {
		a.errorPage(w, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
}

// hashSlot waits for a password hashing slot while the request lives. If
// the hasher's queue is full it answers 503 itself; if the client has gone,
// there is no one to answer. Either way it returns false.
func (a *app) hashSlot(w http.ResponseWriter, r *http.Request) (*hashSlot, bool) {
	slot, err := a.hasher.acquire(r.Context())
	if err != nil {
		w.Header().Set("Retry-After", "1")
		a.errorPage(w, http.StatusServiceUnavailable, "Too many sign-ins at once. Try again in a moment.")
		return nil, false
	}
	return slot, true
}

// storeError answers 503 for a DynamoDB failure and logs it. The error
// never holds a session token: ddbsession keeps tokens out of its errors, and
// the app's own calls never see one.
func (a *app) storeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	a.log.ErrorContext(r.Context(), "dynamodb request failed", "op", op, "err", err)
	a.errorPage(w, http.StatusServiceUnavailable, "The session store is unavailable. Try again in a moment.")
}
