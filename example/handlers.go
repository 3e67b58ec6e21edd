package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
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
	// A taken username is a failure for the client's address, so that
	// sign-up cannot probe which names exist faster than login can.
	at, ok := a.beginAttempt(w, r, "")
	if !ok {
		return
	}
	defer at.end()
	key := userKey(username)
	slot, ok := a.hashSlot(w, r)
	if !ok {
		return
	}
	hash := slot.hash(password)
	slot.release()
	// CreateUser writes the item only if the key is free, so a sign-up
	// never overwrites a user, and stamps it with a sessions-valid-after
	// cutoff of now, so that the sessions of a deleted user of the same name
	// do not come back to life for this one.
	err := a.sessions.CreateUser(r.Context(), userItem{PK: key.PK, SK: key.SK, User: User{Username: username, PasswordHash: hash}})
	if errors.Is(err, ddbsession.ErrUserExists) {
		at.fail()
		a.errorPage(w, http.StatusConflict, "That username is taken.")
		return
	}
	if err != nil {
		a.storeError(w, r, "create user", err)
		return
	}
	a.signInWith(w, r, key, hash)
}

// errWrongPassword is what login's verify function refuses with.
var errWrongPassword = errors.New("wrong password")

// errUnreadableHash is a stored hash that hashSlot.verify cannot read: a bug
// or a tampered item, not a wrong password.
var errUnreadableHash = errors.New("stored password hash is unreadable")

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
	at, ok := a.beginAttempt(w, r, username)
	if !ok {
		return
	}
	defer at.end()
	// The slot is taken before LoginWith, not inside verify: the wait for
	// it is bounded by the request's life, whereas LoginWith's own store
	// deadline runs from before its read and must not be spent queueing.
	slot, ok := a.hashSlot(w, r)
	if !ok {
		return
	}
	defer slot.release()
	// LoginWith reads the user item and checks the password against the
	// hash it read, in the same call that writes the session, and stamps
	// the session with a time from before that read. A login that checked
	// the old password therefore always predates the cutoff of a password
	// change, however the two interleave (see changePassword).
	err := a.sessions.LoginWith(w, r, userKey(username), func(u User) error {
		match, err := slot.verify(u.PasswordHash, password)
		slot.release() // the session writes that follow need no core
		if err != nil {
			return fmt.Errorf("%w: %v", errUnreadableHash, err)
		}
		if !match {
			return errWrongPassword
		}
		return nil
	})
	switch {
	case errors.Is(err, ddbsession.ErrUserNotFound):
		// The same hash work as a wrong password, so that timing does not
		// tell who has an account.
		slot.verify(a.dummyHash, password)
		at.fail()
		a.errorPage(w, http.StatusUnauthorized, "Wrong username or password.")
	case errors.Is(err, errWrongPassword):
		at.fail()
		a.errorPage(w, http.StatusUnauthorized, "Wrong username or password.")
	case errors.Is(err, errUnreadableHash):
		a.log.ErrorContext(r.Context(), "stored password hash is unreadable", "user", username, "err", err)
		a.errorPage(w, http.StatusInternalServerError, "Something went wrong.")
	case err != nil:
		a.storeError(w, r, "log in", err)
	default:
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

// signInWith starts a session for user, whose password hash the request
// has just written, and sends the browser home. If the hash has changed
// since (another request changed the password), it is refused with
// errPasswordChanged rather than signing in on a password this request
// does not know. Like every login, it rotates: any session the request
// already carries is ended first, so a token planted in this browser before
// sign-in is worthless.
func (a *app) signInWith(w http.ResponseWriter, r *http.Request, user ddbsession.UserKey, hash passwordHash) {
	err := a.sessions.LoginWith(w, r, user, func(u User) error {
		if subtle.ConstantTimeCompare([]byte(u.PasswordHash), []byte(hash)) != 1 {
			return errPasswordChanged
		}
		return nil
	})
	if errors.Is(err, errPasswordChanged) || errors.Is(err, ddbsession.ErrUserNotFound) {
		a.errorPage(w, http.StatusConflict, "The account was changed by another request meanwhile. Log in again.")
		return
	}
	if err != nil {
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
	// The user, with the hash, was read by the session middleware in this
	// request, with a strongly consistent read.
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	// A stolen session must not be a way to guess the password either.
	// The change has a bucket of its own per user, so that someone failing
	// logins on this username cannot also keep its owner from changing it.
	at, ok := a.beginAttempt(w, r, passwordChangeKey(u.Username))
	if !ok {
		return
	}
	defer at.end()
	slot, ok := a.hashSlot(w, r)
	if !ok {
		return
	}
	defer slot.release()
	// Asking for the current password keeps a borrowed, unlocked browser
	// from taking the account over.
	match, err := slot.verify(u.PasswordHash, current)
	if err != nil {
		a.log.ErrorContext(r.Context(), "stored password hash is unreadable", "user", u.Username, "err", err)
		a.errorPage(w, http.StatusInternalServerError, "Something went wrong.")
		return
	}
	if !match {
		at.fail()
		a.errorPage(w, http.StatusUnauthorized, "The current password is wrong.")
		return
	}
	newHash := slot.hash(next)
	slot.release()

	// First the new password, then the cutoff. The other order leaves a
	// gap: a login that reads the old hash after the cutoff but before the
	// write creates a session after the cutoff, on the old password, and
	// it survives. In this order a login that read the old hash read it
	// before the write, so before the cutoff, and LoginWith stamps its
	// session before its read: it dies with the others. A login that reads
	// after the write sees the new hash and fails.
	//
	// Once the new password is written the cutoff must follow, so from
	// here the work is not cut short by a client that hangs up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.storeTimeout)
	defer cancel()
	err = a.users.setPasswordHash(ctx, s.User, u.PasswordHash, newHash)
	if errors.Is(err, errPasswordChanged) {
		a.errorPage(w, http.StatusConflict, "Your password was just changed elsewhere. Reload and try again.")
		return
	}
	if err != nil {
		a.storeError(w, r, "update password", err)
		return
	}
	if err := a.sessions.RevokeAll(ctx, s.User); err != nil {
		// The old password no longer logs in, but sessions that rest on it
		// live on until this browser logs out everywhere, which it still
		// can: its own session is one of them.
		a.log.ErrorContext(r.Context(), "dynamodb request failed", "op", "revoke all sessions after a password change", "err", err)
		a.errorPage(w, http.StatusServiceUnavailable, "Your password was changed, but your other sessions could not be signed out. Use \"Log out everywhere\" to sign them out.")
		return
	}
	// This browser signs in again with a fresh session, created after the
	// cutoff, on the password it has just set.
	a.signInWith(w, r, s.User, newHash)
}

// passwordChangeKey is username's key for failed password changes in the
// per-username limiter. No username holds a NUL, so it is never a login's.
func passwordChangeKey(username string) string { return "password change\x00" + username }

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
