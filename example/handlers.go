package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession"
)

// index is the only page: forms to sign up or log in for visitors, and the
// account with its sessions for a signed-in user.
func (a *app) index(w http.ResponseWriter, r *http.Request) {
	data := indexData{place: a.place, now: a.now()}
	if u, ok := a.sessions.User(r.Context()); ok {
		s, _ := a.sessions.Session(r.Context())
		data.device = a.sessions.DeviceOf(r, s.User)
		list, err := a.sessions.List(r.Context(), s.User)
		if err != nil {
			a.storeError(w, r, "list sessions", err)
			return
		}
		// The security history's newest page: the account's last events.
		history, _, err := a.sessions.History(r.Context(), s.User, "")
		if err != nil {
			a.storeError(w, r, "read the history", err)
			return
		}
		data.User, data.Sessions, data.History = &u, list, history
	}
	data.SSO = a.ssoName()
	a.render(w, http.StatusOK, indexTemplate, data)
}

// loginPage is where a page that needs a session sends a browser without
// one: the forms to log in or sign up, which send it back to the page it
// wanted, in its "next" parameter. A browser that is signed in already goes there
// at once.
func (a *app) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.sessions.User(r.Context()); ok {
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
		return
	}
	next := ddbsession.ReturnPath(r, "")
	a.render(w, http.StatusOK, indexTemplate, indexData{Next: next, LoginRequired: next != "", SSO: a.ssoName()})
}

func (a *app) signup(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	answer := a.formAnswer(r, "signup")
	username, userErr := normalizeUsername(r.PostFormValue("username"))
	if userErr == nil {
		userErr = newUsernameError(username)
	}
	password := r.PostFormValue("password")
	if err := errors.Join(userErr, newPasswordError("password", password, username)); err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	// A taken username is a failure for the client's address, so that
	// sign-up cannot probe which names exist faster than login can.
	at, ok := a.beginAttempt(w, r, answer)
	if !ok {
		return
	}
	defer at.end()
	key := userKey(username)
	slot, ok := a.hashSlot(w, r, answer)
	if !ok {
		return
	}
	hash := slot.hash(password)
	slot.release()
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	err := a.users.claimSkeleton(ctx, username)
	if errors.Is(err, errLookAlike) {
		at.fail(userBucket{})
		answer(w, http.StatusConflict, "That username looks like one that is taken: some letters look alike (such as l and 1, or i and ı). Choose another.")
		return
	}
	if err != nil {
		a.storeFailed(w, r, "reserve a username", err, answer)
		return
	}
	// CreateUser writes the item only if the key is free, so a sign-up
	// never overwrites a user, and gives it a sessions version of its
	// creation's time, so that the sessions of a deleted user of the same
	// name do not come back to life for this one.
	err = a.sessions.CreateUser(r.Context(), userItem{PK: key.PK, SK: key.SK, User: User{Username: username, PasswordHash: hash}})
	if errors.Is(err, ddbsession.ErrUserExists) {
		at.fail(userBucket{})
		answer(w, http.StatusConflict, "That username is taken.")
		return
	}
	if err != nil {
		a.storeFailed(w, r, "create user", err, answer)
		return
	}
	a.signInWith(w, r, key, hash, methodPassword)
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
	answer := a.formAnswer(r, "login")
	username, userErr := normalizeUsername(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	if err := errors.Join(userErr, validatePassword("password", password)); err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	twoStep := false
	signedIn := a.passwordLogin(w, r, username, password, "", loginCheck, answer, func(user ddbsession.UserKey, verify func(User) error) error {
		newDevice, err := a.secondFactorFor(r, user, true)
		if err != nil {
			return err
		}
		var checked passwordHash
		err = a.sessions.Login(w, r, user, func(u User) error {
			switch err := verify(u); {
			case err != nil:
				return err
			case u.TOTPEnrolled():
				checked = u.PasswordHash
				return errCodeNeeded // Login writes nothing
			case newDevice:
				return errNewDevice
			}
			return nil
		}, methodPassword)
		if !errors.Is(err, errCodeNeeded) {
			return err
		}
		// The first of two steps. The password was right for this hash:
		// BeginLogin's read of the user needs no second hashing, only the
		// same hash, and still one-time codes.
		twoStep = true
		return a.sessions.BeginLogin(w, r, user, func(u User) error {
			if subtle.ConstantTimeCompare([]byte(u.PasswordHash), []byte(checked)) != 1 || !u.TOTPEnrolled() {
				return errPasswordChanged
			}
			return nil
		}, methodPassword)
	})
	switch {
	case signedIn && twoStep:
		a.render(w, http.StatusOK, codeTemplate, codeData{Username: username, Next: ddbsession.ReturnPath(r, "")})
	case signedIn:
		// ReturnPath takes only a path on this site: no open redirect.
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
	}
}

// loginRequest is the body of POST /api/login. Code is the one-time code
// of a user who has them, in the same request: there is no two-step login
// for a client without cookies.
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Code     string `json:"code,omitempty"`
}

// tokenJSON is the answer of POST /api/login: the bearer token, the
// session's expiry, RFC 3339, and how the token is sent: "Bearer", or
// "DPoP" for a login that sent a DPoP proof, whose key the token is bound
// to. A request that moves the expiry forward says so in the
// Session-Expires header.
type tokenJSON struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	TokenType string    `json:"tokenType"`
}

// tokenType is the tokenType of a token that LoginBearer issued for r.
func tokenType(r *http.Request) string {
	if r.Header.Get("DPoP") != "" {
		return "DPoP"
	}
	return "Bearer"
}

// apiLogin is login for clients without cookies: the same checks, limits
// and hashing queue, but JSON in and out, and a bearer token instead of a
// cookie.
func (a *app) apiLogin(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if !decodeJSON(w, r, &req, `want one JSON object: {"username": ..., "password": ..., "code": ...}`) {
		return
	}
	username, userErr := normalizeUsername(req.Username)
	code, codeErr := optionalCode(req.Code)
	if err := errors.Join(userErr, validatePassword("password", req.Password), codeErr); err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	var token tokenJSON
	signedIn := a.passwordLogin(w, r, username, req.Password, code, loginCheck, jsonError, func(user ddbsession.UserKey, verify func(User) error) error {
		newDevice, err := a.secondFactorFor(r, user, false)
		if err != nil {
			return err
		}
		check := a.passwordAndCode(r, user, verify, code)
		token.Token, token.ExpiresAt, err = a.sessions.LoginBearer(r, user, func(u User) error {
			if err := check(u); err != nil {
				return err
			}
			if newDevice && !u.TOTPEnrolled() {
				return errNewDevice
			}
			return nil
		}, methodsFor(code)...)
		return err
	})
	if signedIn {
		token.ExpiresAt, token.TokenType = token.ExpiresAt.UTC(), tokenType(r)
		writeJSON(w, http.StatusOK, token)
	}
}

// decodeJSON reads r's body, which must be one JSON object that fits v and
// nothing else, into v. If it is not, it answers itself (415, 413 or 400
// with want, the shape it takes) and returns false.
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

// optionalCode is normalizeCode for a code that may be left out ("").
func optionalCode(code string) (string, error) {
	if code == "" {
		return "", nil
	}
	return normalizeCode(code)
}

// answerFunc answers a request that failed with code and a message for
// the user: errorPage or formAnswer for a browser, jsonError for an API
// client.
type answerFunc func(w http.ResponseWriter, code int, msg string)

// methodPassword is how a session whose user typed the password signed
// in, in Session.Methods.
const methodPassword = "password"

// passwordLogin checks username's password, under the failure limits of
// check (loginCheck, or reauthCheck for a signed-in user) and the hashing
// queue, and starts a session with signIn, which is ddbsession's Login for
// a browser and LoginBearer for an API client. signIn's verify may check
// code, the one-time code the request carries ("" for none), after the
// password (secondFactor): its failures count against the user's one
// budget of codes (codeCheck), which every request that sends a code
// shares, the browser's second step and the API's logins alike. It answers
// a failure itself, with answer, and returns false; on success it returns
// true and the caller answers.
func (a *app) passwordLogin(w http.ResponseWriter, r *http.Request, username, password, code, check string, answer answerFunc,
	signIn func(user ddbsession.UserKey, verify func(User) error) error) bool {
	wrong := "Wrong username or password."
	if check != loginCheck {
		wrong = "The password is wrong."
	}
	passwords, codes := userBucket{username, check}, userBucket{username, codeCheck}
	buckets := []userBucket{passwords}
	if code != "" {
		buckets = append(buckets, codes)
	}
	at, ok := a.beginAttempt(w, r, answer, buckets...)
	if !ok {
		return false
	}
	defer at.end()
	// The slot is taken before signIn, not inside verify: the wait for it
	// is bounded by the request's life, whereas Login's own store
	// deadline runs from before its read and must not be spent queueing.
	slot, ok := a.hashSlot(w, r, answer)
	if !ok {
		return false
	}
	defer slot.release()
	// Login (and LoginBearer) reads the user item and checks the
	// password against the hash it read, in the same call that writes the
	// session, and the session copies the versions of that read. A login
	// that checked the old password therefore always holds the credential
	// version from before a password change, which the new hash's write
	// changes, and ends with the other sessions, however the two
	// interleave (see changePassword).
	err := signIn(userKey(username), func(u User) error {
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
	case errors.Is(err, ddbsession.ErrInvalidDPoPProof):
		answer(w, http.StatusBadRequest, "invalid_dpop_proof") // RFC 9449 section 5
	case errors.Is(err, ddbsession.ErrUserNotFound):
		// The same hash work as a wrong password, so that timing does not
		// tell who has an account.
		slot.verify(a.dummyHash, password)
		at.fail(passwords)
		answer(w, http.StatusUnauthorized, wrong)
	case errors.Is(err, errWrongPassword):
		at.fail(passwords)
		answer(w, http.StatusUnauthorized, wrong)
	case errors.Is(err, errWrongCode) || errors.Is(err, errCodeTaken):
		at.fail(codes)
		code, msg, _ := codeMessage(err)
		answer(w, code, msg)
	case errors.Is(err, errCodeNeeded) || errors.Is(err, errNoTOTP):
		code, msg, _ := codeMessage(err)
		answer(w, code, msg)
	case errors.Is(err, errNewDevice):
		answer(w, http.StatusForbidden, newDeviceMessage)
	case errors.Is(err, errPasswordChanged):
		answer(w, http.StatusConflict, "The account was changed by another request meanwhile. Try again.")
	case errors.Is(err, errUnreadableHash):
		a.log.ErrorContext(r.Context(), "stored password hash is unreadable", "user", username, "err", err)
		answer(w, http.StatusInternalServerError, "Something went wrong.")
	case err != nil:
		a.storeFailed(w, r, "log in", err, answer)
	default:
		return true
	}
	return false
}

// signInWith starts a session for user, whose password hash the request
// has just written, with methods (what the request checked), and sends the
// browser home. If the hash has changed since (another request changed the
// password), it is refused with errPasswordChanged rather than signing in
// on a password this request does not know. Like every login, it rotates:
// any session the request already carries is ended first, so a token
// planted in this browser before sign-in is worthless.
func (a *app) signInWith(w http.ResponseWriter, r *http.Request, user ddbsession.UserKey, hash passwordHash, methods ...string) {
	if a.loginWith(w, r, user, hash, methods...) {
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
	}
}

// loginWith is signInWith's login: it reports whether the browser is
// signed in, and answers the request itself if not.
func (a *app) loginWith(w http.ResponseWriter, r *http.Request, user ddbsession.UserKey, hash passwordHash, methods ...string) bool {
	err := a.sessions.Login(w, r, user, func(u User) error {
		if subtle.ConstantTimeCompare([]byte(u.PasswordHash), []byte(hash)) != 1 {
			return errPasswordChanged
		}
		return nil
	}, methods...)
	if errors.Is(err, errPasswordChanged) || errors.Is(err, ddbsession.ErrUserNotFound) {
		a.errorPage(w, http.StatusConflict, "The account was changed by another request meanwhile. Log in again.")
		return false
	}
	if err != nil {
		a.storeError(w, r, "log in", err)
		return false
	}
	return true
}

func (a *app) logout(w http.ResponseWriter, r *http.Request) {
	if a.sso != nil {
		a.ssoLogout(w, r) // through the provider, for its sessions
		return
	}
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
	// The user, with the hash, was read by the session middleware in this
	// request, with a strongly consistent read.
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	if !u.HasPassword() {
		a.errorPage(w, http.StatusConflict, "This account signs in with single sign-on: it has no password here.")
		return
	}
	current, next := r.PostFormValue("current"), r.PostFormValue("new")
	// A user with one-time codes types one too: the change signs in
	// again, and counts as a re-authentication with both.
	code, codeErr := optionalCode(r.PostFormValue("code"))
	if err := errors.Join(validatePassword("current password", current), newPasswordError("new password", next, u.Username), codeErr); err != nil {
		a.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	// A stolen session must not be a way to guess the password either,
	// nor the code: its guesses count against the user's one budget of
	// codes, as a login's do.
	passwords, codes := userBucket{u.Username, passwordChangeCheck}, userBucket{u.Username, codeCheck}
	buckets := []userBucket{passwords}
	if code != "" {
		buckets = append(buckets, codes)
	}
	at, ok := a.beginAttempt(w, r, a.errorPage, buckets...)
	if !ok {
		return
	}
	defer at.end()
	slot, ok := a.hashSlot(w, r, a.errorPage)
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
		at.fail(passwords)
		a.errorPage(w, http.StatusUnauthorized, "The current password is wrong.")
		return
	}
	if err := a.secondFactor(r, s.User, u, code); err != nil {
		status, msg, ok := codeMessage(err)
		if !ok {
			a.storeError(w, r, "take a one-time code", err)
			return
		}
		if errors.Is(err, errWrongCode) || errors.Is(err, errCodeTaken) {
			at.fail(codes)
		}
		a.errorPageWith(w, status, "Wrong code", msg)
		return
	}
	newHash := slot.hash(next)
	slot.release()

	// The new password and a new credential version, in one write: every
	// session of the user ends with it, this one too, and so does a login
	// that checked the old password, whenever its session is written,
	// since it read the old credential version in the same item as the old
	// hash. A login that reads after the write sees the new hash and
	// fails.
	//
	// Once the new password is written the rest must follow, so from
	// here the work is not cut short by a client that hangs up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.storeTimeout)
	defer cancel()
	err = a.users.setPasswordHash(ctx, s.User, u.PasswordHash, newHash)
	if errors.Is(err, errPasswordChanged) {
		a.errorPage(w, http.StatusConflict, "Your password was just changed elsewhere. Go back to your account and try again.")
		return
	}
	if err != nil {
		a.storeError(w, r, "update password", err)
		return
	}
	// RevokeAll ends the sessions that carry no credential version, which
	// ddbsession holds to the sessions version alone: those that release
	// v0.1.0 made, until they expire. It comes after the write, never
	// before: a login that read the old password read the sessions version
	// from before RevokeAll with it, and ends too.
	revoked := a.sessions.RevokeAll(ctx, s.User)
	if revoked != nil {
		a.log.ErrorContext(r.Context(), "dynamodb request failed", "op", "revoke all sessions after a password change", "err", revoked)
	}
	// This browser signs in again with a fresh session, which copies the
	// new versions, on the password it has just set.
	if !a.loginWith(w, r, s.User, newHash, methodsFor(code)...) {
		return
	}
	if revoked != nil {
		a.errorPage(w, http.StatusServiceUnavailable, "Your password was changed, but some of your other sessions may not have been signed out. Use \"Log out everywhere\" to sign them out.")
		return
	}
	http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
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
	if errors.Is(err, ddbsession.ErrNoSession) {
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
	writeJSON(w, http.StatusOK, u)
}

// sessionJSON is one entry of GET /api/sessions. Times are RFC 3339.
type sessionJSON struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	UserAgent string    `json:"userAgent"`
	Current   bool      `json:"current"`
	// DeviceBound: the session is bound to a key on its device (DBSC).
	DeviceBound bool `json:"deviceBound"`
	// Methods is how the user signed in, or last re-authenticated, for the
	// session: "password", then "otp" for a one-time code.
	Methods []string `json:"methods"`
	// Address is the client's IP address at the sign-in, LastAddress at
	// the last refresh; absent where unknown.
	Address     string `json:"address,omitempty"`
	LastAddress string `json:"lastAddress,omitempty"`
}

func (a *app) listSessions(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	list, err := a.sessions.List(r.Context(), s.User)
	if err != nil {
		a.storeFailed(w, r, "list sessions", err, jsonError)
		return
	}
	out := make([]sessionJSON, 0, len(list)) // [] rather than null when empty
	for _, e := range list {
		out = append(out, sessionJSON{ID: e.ID, CreatedAt: e.CreatedAt, ExpiresAt: e.ExpiresAt, UserAgent: e.UserAgent, Current: e.Current, DeviceBound: e.DeviceBound,
			Methods: append([]string{}, e.Methods...), // [] rather than null
			Address: e.Address, LastAddress: e.LastAddress})
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// jsonError answers code with {"error": msg}, the API's one shape of an
// error.
func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{msg})
}

// apiAnswer is jsonError as a handler, for the answers of the session
// guard.
func apiAnswer(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { jsonError(w, code, msg) })
}

// apiOr answers requests for the API (paths under /api/) with api and the
// others with page: the session guard has one Unauthorized and one
// StoreUnavailable answer, for pages and the API alike.
func apiOr(api, page http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			api.ServeHTTP(w, r)
			return
		}
		page.ServeHTTP(w, r)
	})
}

// toLogin sends a browser to log in, and back to the page it asked for
// (a GET's path and query, or a form's same-site page), which the login
// handler reads back with ddbsession.ReturnPath.
var toLogin = ddbsession.Redirect("/login")

// pageAnswer is errorPage as a handler, for the answers of the session
// guard and of the cross-origin check.
func (a *app) pageAnswer(code int, msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.errorPage(w, code, msg) })
}

// routeErrors answers the requests that no route takes with the app's
// error page (JSON under /api/), where the mux would answer its own plain
// "404 page not found" or "Method Not Allowed". Its status and headers
// (Allow, for 405) are kept.
func (a *app) routeErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r) // a route of the app's, which answers for itself
			return
		}
		answer := a.errorPage
		if strings.HasPrefix(r.URL.Path, "/api/") {
			answer = jsonError
		}
		mux.ServeHTTP(&routeErrorWriter{ResponseWriter: w, answer: answer}, r)
	})
}

// routeMessages are routeErrors' messages.
var routeMessages = map[int]string{
	http.StatusNotFound:         "There is no page at this address.",
	http.StatusMethodNotAllowed: "This address does not take that kind of request.",
}

// routeErrorWriter writes answer's page instead of the mux's text, for
// the statuses of routeMessages; anything else (a redirect to a cleaned
// path) goes through as the mux writes it.
type routeErrorWriter struct {
	http.ResponseWriter
	answer   answerFunc
	replaced bool
}

func (w *routeErrorWriter) WriteHeader(code int) {
	msg, ok := routeMessages[code]
	if !ok {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	w.answer(w.ResponseWriter, code, msg)
}

func (w *routeErrorWriter) Write(p []byte) (int, error) {
	if w.replaced {
		return len(p), nil // the mux's text, which the page replaced
	}
	return w.ResponseWriter.Write(p)
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
// the hasher's queue is full it answers 503 itself, with answer; if the client has gone,
// there is no one to answer. Either way it returns false.
func (a *app) hashSlot(w http.ResponseWriter, r *http.Request, answer answerFunc) (*hashSlot, bool) {
	slot, err := a.hasher.acquire(r.Context())
	if err != nil {
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusServiceUnavailable, "Too many sign-ins at once. Try again in a moment.")
		return nil, false
	}
	return slot, true
}

// storeError answers 503 for a DynamoDB failure and logs it. The error
// never holds a session token: ddbsession keeps tokens out of its errors, and
// the app's own calls never see one.
func (a *app) storeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	a.storeFailed(w, r, op, err, a.errorPage)
}

// storeFailed is storeError with another answer than the error page.
func (a *app) storeFailed(w http.ResponseWriter, r *http.Request, op string, err error, answer answerFunc) {
	a.log.ErrorContext(r.Context(), "dynamodb request failed", "op", op, "err", err)
	answer(w, http.StatusServiceUnavailable, "The session store is unavailable. Try again in a moment.")
}
