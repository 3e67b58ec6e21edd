package main

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"strings"

	"github.com/pquerna/otp/totp"

	"github.com/ddbsession/ddbsession"
)

// A user with one-time codes (totp.go) logs in in two steps: POST /login
// checks the password with ddbsession's BeginLogin, which leaves a pending
// login in a cookie of its own, and answers with the code form; POST
// /login/code checks the code with CompleteLogin, and signs in with both
// methods. The account page sets codes up (a QR code, then a first code to
// confirm it) and removes them, both with a recent authentication.

// codeData is what the code form shows: whose login it completes, where
// it goes after, and the message of a refused code.
type codeData struct {
	Username string
	Next     string
	Message  string
}

// loginCode is the second step of a login: the code of the user whose
// password BeginLogin checked in this browser.
func (a *app) loginCode(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	// The username comes back from the code form. It only picks the
	// bucket that failed codes count against, the user's one budget of
	// codes, which the API's logins and the re-authentications share;
	// verify refuses a code for any other user than the pending login's,
	// so naming another buys no tries.
	username, userErr := normalizeUsername(r.PostFormValue("username"))
	answer := func(w http.ResponseWriter, code int, msg string) {
		a.render(w, code, codeTemplate, codeData{Username: username, Next: ddbsession.ReturnPath(r, ""), Message: msg})
	}
	code, codeErr := normalizeCode(r.PostFormValue("code"))
	if err := errors.Join(userErr, codeErr); err != nil {
		answer(w, http.StatusBadRequest, err.Error())
		return
	}
	codes := userBucket{username, codeCheck}
	at, ok := a.beginAttempt(w, r, answer, codes)
	if !ok {
		return
	}
	defer at.end()
	wrong := false
	err := a.sessions.CompleteLogin(w, r, func(u User) error {
		if u.Username != username {
			wrong = true
			return errWrongCode
		}
		err := a.secondFactor(r, userKey(username), u, code)
		wrong = errors.Is(err, errWrongCode) || errors.Is(err, errCodeTaken)
		return err
	}, methodOTP)
	if wrong {
		at.fail(codes) // the fifth wrong code too, which CompleteLogin answers with ErrNoSession
	}
	if status, msg, ok := codeMessage(err); ok && status == http.StatusUnauthorized {
		answer(w, status, msg)
		return
	}
	switch {
	case err == nil:
		http.Redirect(w, r, ddbsession.ReturnPath(r, "/"), http.StatusSeeOther)
	case errors.Is(err, ddbsession.ErrNoSession):
		a.formAnswer(r, "login")(w, http.StatusUnauthorized, "Log in again: the code was wrong too often, or it took too long.")
	case errors.Is(err, errNoTOTP):
		// Removed between the two steps.
		a.formAnswer(r, "login")(w, http.StatusConflict, "The account was changed by another request meanwhile. Log in again.")
	default:
		a.storeFailed(w, r, "complete a login", err, answer)
	}
}

// totpSetup is what the set-up page shows: the QR code of the pending
// secret, the secret itself to type in instead, grouped by four, and the
// message of a refused code.
type totpSetup struct {
	QR      template.URL
	Key     string
	Message string
}

// totpEnrol starts a set-up of one-time codes: a new secret, pending in
// the user item until a code confirms it.
func (a *app) totpEnrol(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	if u.TOTPEnrolled() {
		a.errorPage(w, http.StatusConflict, "One-time codes are on already. Turn them off first to set up another app.")
		return
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: totpIssuer, AccountName: u.Username, Period: totpPeriod})
	if err != nil {
		a.log.ErrorContext(r.Context(), "make a one-time-code secret", "err", err)
		a.errorPage(w, http.StatusInternalServerError, "Something went wrong.")
		return
	}
	secret := totpSecret(key.Secret())
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	err = a.users.startTOTP(ctx, s.User, secret)
	if errors.Is(err, errTOTPChanged) {
		a.errorPage(w, http.StatusConflict, "One-time codes were turned on by another request meanwhile.")
		return
	}
	if err != nil {
		a.storeError(w, r, "start a one-time-code set-up", err)
		return
	}
	a.renderSetup(w, r, http.StatusOK, u.Username, secret, "")
}

// renderSetup answers with the set-up page of secret.
func (a *app) renderSetup(w http.ResponseWriter, r *http.Request, code int, username string, secret totpSecret, msg string) {
	key, err := totpKey(username, secret)
	var qr template.URL
	if err == nil {
		qr, err = qrDataURL(key)
	}
	if err != nil {
		a.log.ErrorContext(r.Context(), "draw the one-time-code QR code", "err", err)
		a.errorPage(w, http.StatusInternalServerError, "Something went wrong.")
		return
	}
	// The QR code is a data: image, which this page alone allows.
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy+"; img-src data:")
	a.render(w, code, totpTemplate, totpSetup{QR: qr, Key: groupsOfFour(string(secret)), Message: msg})
}

// groupsOfFour spaces s out for typing: "ABCD EFGH IJ".
func groupsOfFour(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// totpConfirm ends a set-up: a right code from the app makes the pending
// secret the one that logins need.
func (a *app) totpConfirm(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	if u.TOTPPending == "" {
		a.errorPage(w, http.StatusConflict, "There is no set-up of one-time codes to confirm. Start it again from your account.")
		return
	}
	code, err := normalizeCode(r.PostFormValue("code"))
	if err != nil {
		a.renderSetup(w, r, http.StatusBadRequest, u.Username, u.TOTPPending, err.Error())
		return
	}
	step, ok := codeStep(u.TOTPPending, code, a.now())
	if !ok {
		a.renderSetup(w, r, http.StatusBadRequest, u.Username, u.TOTPPending, "The code is wrong. Check that the app's clock is right, and enter the code it shows now.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	err = a.users.confirmTOTP(ctx, s.User, u.TOTPPending, step)
	if errors.Is(err, errTOTPChanged) {
		a.errorPage(w, http.StatusConflict, "The set-up was changed by another request meanwhile. Start it again from your account.")
		return
	}
	if err != nil {
		a.storeError(w, r, "confirm a one-time-code set-up", err)
		return
	}
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}

// totpRemove turns one-time codes off: logins need the password alone.
func (a *app) totpRemove(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessions.Session(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	if err := a.users.removeTOTP(ctx, s.User); err != nil && !errors.Is(err, errTOTPChanged) {
		a.storeError(w, r, "remove one-time codes", err)
		return
	}
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}
