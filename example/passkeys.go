package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/ddbsession/ddbsession"
)

// Passkeys: a signed-in user registers passkeys on the account page (a
// recent authentication needed, as for one-time codes), signs in with one
// alone, naming no user (a discoverable credential, with user
// verification), and re-authenticates with one instead of the password
// and code. A passkey sign-in is ddbsession's Login with the method
// "passkey", whose verify checks the assertion against the passkeys of the
// user item it read (passkeystore.go has the items).
//
// Each ceremony is two requests, begin and finish. Begin writes the
// challenge into an item of its own, under the hash of a random ceremony
// ID that goes to the browser in the passkey cookie, and records the
// signed-in session that began it (none for a sign-in); finish takes it
// with a conditional delete, so it works once, from that session and that
// browser, until ceremonyLifetime by the app's clock. Neither the session's
// data nor the two-step pending login fits: a sign-in has no session and
// no user when it begins, and a challenge in the session item would ride
// along on every request's read.

// methodPasskey is how a session whose user signed in (or
// re-authenticated) with a passkey did, in Session.Methods.
const methodPasskey = "passkey"

const (
	// ceremonyLifetime is how long a begun ceremony waits for its finish:
	// the browser's dialog, and the user's fingerprint or PIN.
	ceremonyLifetime = 5 * time.Minute
	// maxPasskeys caps a user's passkeys, which the user item holds.
	maxPasskeys = 10
	// maxPasskeyName is the longest name of a passkey, in bytes.
	maxPasskeyName = 64
	// maxPasskeyRecord bounds a credential record (an RSA key and a long
	// credential ID fit), so that the user item stays small.
	maxPasskeyRecord = 2048
	// passkeyCookie is the ceremony cookie's name: "passkey" in dev mode.
	passkeyCookie = "__Host-passkey"
)

//go:embed passkeys.js
var passkeysJS []byte

// passkeyOrigin is the origin the passkeys' relying party takes when
// appConfig.PasskeyOrigin is empty.
func passkeyOrigin(dev bool) string {
	if dev {
		return "http://localhost"
	}
	return "https://localhost"
}

// newRelyingParty is the app's WebAuthn relying party, for origin, the
// address browsers open the app at: its host is the RP ID. go-webauthn's
// own expiry check is left off (Timeouts' Enforce): the ceremony item's
// time, by the app's clock, is the one that counts.
func newRelyingParty(origin string) (*webauthn.WebAuthn, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("passkey origin %q: want a scheme and a host, and nothing else (https://app.example.com)", origin)
	}
	timeout := webauthn.TimeoutConfig{Timeout: ceremonyLifetime, TimeoutUVD: ceremonyLifetime}
	return webauthn.New(&webauthn.Config{
		RPID:          u.Hostname(),
		RPDisplayName: totpIssuer,
		RPOrigins:     []string{u.Scheme + "://" + u.Host},
		Timeouts:      webauthn.TimeoutsConfig{Login: timeout, Registration: timeout},
	})
}

// passkeyUser is a User as go-webauthn sees it.
type passkeyUser struct {
	handle      []byte
	name        string
	credentials []webauthn.Credential
}

func (u passkeyUser) WebAuthnID() []byte                         { return u.handle }
func (u passkeyUser) WebAuthnName() string                       { return u.name }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.name }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.credentials }

// errBadRecord is a stored credential record that does not decode.
var errBadRecord = errors.New("stored passkey record is unreadable")

// passkeyUserOf is u with its passkeys decoded, and handle as the user
// handle if u has none yet.
func passkeyUserOf(u User, handle []byte) (passkeyUser, error) {
	pu := passkeyUser{handle: u.PasskeyHandle, name: u.Username}
	if len(pu.handle) == 0 {
		pu.handle = handle
	}
	for _, p := range u.Passkeys {
		var c webauthn.Credential
		if _, err := c.UnmarshalMsg(p.Record); err != nil {
			return pu, fmt.Errorf("%w: %v", errBadRecord, err)
		}
		pu.credentials = append(pu.credentials, c)
	}
	return pu, nil
}

// passkeyView is one line of the account page's list of passkeys.
type passkeyView struct {
	ID, Name            string
	CreatedAt, LastUsed time.Time // LastUsed zero: never
}

// PasskeyList is u's passkeys for the account page, oldest first.
func (u User) PasskeyList() []passkeyView {
	list := make([]passkeyView, 0, len(u.Passkeys))
	for id, p := range u.Passkeys {
		v := passkeyView{ID: id, Name: p.Name, CreatedAt: time.UnixMilli(p.CreatedAt).UTC()}
		if p.LastUsedAt != 0 {
			v.LastUsed = time.UnixMilli(p.LastUsedAt).UTC()
		}
		list = append(list, v)
	}
	slices.SortFunc(list, func(a, b passkeyView) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return list
}

// passkeyRoutes adds the passkey routes to mux: signedIn needs a session,
// sensitive a recent authentication too.
func (a *app) passkeyRoutes(mux *http.ServeMux, signedIn func(http.HandlerFunc) http.Handler, sensitive func(http.HandlerFunc) http.Handler) {
	mux.HandleFunc("GET /passkeys.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Write(passkeysJS)
	})
	// Adding a passkey adds a way in: a recent authentication, as for
	// one-time codes. Renaming one changes nothing that signs in.
	mux.Handle("POST /passkeys/register/begin", sensitive(a.passkeyRegisterBegin))
	mux.Handle("POST /passkeys/register/finish", sensitive(a.passkeyRegisterFinish))
	mux.Handle("POST /passkeys/rename", signedIn(a.passkeyRename))
	mux.Handle("GET /passkeys/remove", signedIn(a.confirmPasskeyRemove))
	mux.Handle("POST /passkeys/remove", sensitive(a.passkeyRemove))
	mux.HandleFunc("POST /passkeys/login/begin", a.passkeyLoginBegin)
	mux.HandleFunc("POST /passkeys/login/finish", a.passkeyLoginFinish)
	mux.Handle("POST /reauth/passkey/begin", signedIn(a.passkeyReauthBegin))
	mux.Handle("POST /reauth/passkey/finish", signedIn(a.passkeyReauthFinish))
}

// beginCeremony stores c under a new ceremony ID, which it sends in the
// passkey cookie, and answers with options, the browser's half.
func (a *app) beginCeremony(w http.ResponseWriter, r *http.Request, c ceremony, sd *webauthn.SessionData, options any) {
	data, err := json.Marshal(sd)
	if err != nil {
		a.log.ErrorContext(r.Context(), "encode a passkey ceremony", "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	c.Data, c.UntilMs = data, a.now().Add(ceremonyLifetime).UnixMilli()
	id := rand.Text()
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	if err := a.users.putCeremony(ctx, id, c); err != nil {
		a.storeFailed(w, r, "begin a passkey ceremony", err, jsonError)
		return
	}
	a.setCeremonyCookie(w, id, int(ceremonyLifetime/time.Second))
	writeJSON(w, http.StatusOK, options)
}

func (a *app) ceremonyCookieName() string {
	if a.dev {
		return strings.TrimPrefix(passkeyCookie, "__Host-")
	}
	return passkeyCookie
}

// setCeremonyCookie sends the ceremony ID, or with maxAge -1 drops it. It
// is Strict: only this site's pages finish a ceremony.
func (a *app) setCeremonyCookie(w http.ResponseWriter, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: a.ceremonyCookieName(), Value: id, Path: "/", MaxAge: maxAge,
		Secure: !a.dev, HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// finishRequest is what a finish step reads before it touches the table:
// the ceremony ID from the cookie, and the body, of at most maxBody bytes.
// It answers a bad one with 400 itself and returns false.
func (a *app) finishRequest(w http.ResponseWriter, r *http.Request) (id string, body []byte, ok bool) {
	c, err := r.Cookie(a.ceremonyCookieName())
	if err != nil || !ceremonyIDShape(c.Value) {
		jsonError(w, http.StatusBadRequest, "no passkey ceremony in this browser: start again")
		return "", nil, false
	}
	body, err = io.ReadAll(r.Body)
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		jsonError(w, http.StatusRequestEntityTooLarge, "the body is too large")
		return "", nil, false
	}
	if err != nil || len(body) == 0 {
		jsonError(w, http.StatusBadRequest, "want the passkey's answer, JSON")
		return "", nil, false
	}
	return c.Value, body, true
}

// ceremonyIDShape reports whether id is of the shape of rand.Text, the
// ceremony IDs beginCeremony makes: 26 characters of base32's upper case
// alphabet. Any other is refused before it reaches the table.
func ceremonyIDShape(id string) bool {
	return len(id) == 26 && !strings.ContainsFunc(id, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < '2' || r > '7') })
}

// takeCeremony takes the ceremony of id for kind and this request's
// session, drops the cookie, and checks the ceremony's time; it answers a
// refusal itself. The ceremony is spent whatever follows, a refused
// assertion too.
func (a *app) takeCeremony(w http.ResponseWriter, r *http.Request, id, kind, sessionID string) (webauthn.SessionData, ceremony, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	c, err := a.users.takeCeremony(ctx, id, kind, sessionID)
	a.setCeremonyCookie(w, "", -1)
	var sd webauthn.SessionData
	switch {
	case errors.Is(err, errNoCeremony):
		jsonError(w, http.StatusBadRequest, "this passkey ceremony is not this session's, or it was used already: start again")
		return sd, c, false
	case err != nil:
		a.storeFailed(w, r, "take a passkey ceremony", err, jsonError)
		return sd, c, false
	case !a.now().Before(time.UnixMilli(c.UntilMs)):
		jsonError(w, http.StatusBadRequest, "the passkey ceremony took too long: start again")
		return sd, c, false
	}
	if err := json.Unmarshal(c.Data, &sd); err != nil {
		a.log.ErrorContext(r.Context(), "decode a passkey ceremony", "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return sd, c, false
	}
	sd.Expires = time.Time{} // checked above, by the app's clock
	return sd, c, true
}

// passkeyRegisterBegin starts adding a passkey to the signed-in user.
func (a *app) passkeyRegisterBegin(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	if len(u.Passkeys) >= maxPasskeys {
		jsonError(w, http.StatusConflict, fmt.Sprintf("you have %d passkeys, the most there can be: remove one first", maxPasskeys))
		return
	}
	handle := u.PasskeyHandle
	if len(handle) == 0 {
		handle = make([]byte, 32)
		rand.Read(handle)
	}
	pu, err := passkeyUserOf(u, handle)
	if err != nil {
		a.log.ErrorContext(r.Context(), "read passkeys", "user", u.Username, "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	exclude := make([]protocol.CredentialDescriptor, len(pu.credentials))
	for i, c := range pu.credentials {
		exclude[i] = c.Descriptor()
	}
	creation, sd, err := a.passkeys.BeginRegistration(pu,
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementRequired,
			UserVerification: protocol.VerificationRequired,
		}),
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithConveyancePreference(protocol.PreferNoAttestation),
		webauthn.WithExclusions(exclude))
	if err != nil {
		a.log.ErrorContext(r.Context(), "begin a passkey registration", "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	a.beginCeremony(w, r, ceremony{Kind: ceremonyRegister, Session: s.ID, Handle: handle}, sd, creation)
}

// registerRequest is the body of POST /passkeys/register/finish.
type registerRequest struct {
	Name       string          `json:"name"`
	Credential json.RawMessage `json:"credential"`
}

// passkeyRegisterFinish checks the new passkey against the ceremony this
// session began, and adds it to the user.
func (a *app) passkeyRegisterFinish(w http.ResponseWriter, r *http.Request) {
	id, body, ok := a.finishRequest(w, r)
	if !ok {
		return
	}
	var req registerRequest
	if err := json.Unmarshal(body, &req); err != nil {
		jsonError(w, http.StatusBadRequest, `want {"name": ..., "credential": ...}`)
		return
	}
	name, err := passkeyName(req.Name)
	if err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(req.Credential)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "the passkey's answer could not be read")
		return
	}
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	sd, c, ok := a.takeCeremony(w, r, id, ceremonyRegister, s.ID)
	if !ok {
		return
	}
	if len(u.PasskeyHandle) > 0 && !bytes.Equal(u.PasskeyHandle, c.Handle) {
		jsonError(w, http.StatusConflict, "your passkeys were changed by another request meanwhile: try again")
		return
	}
	pu, err := passkeyUserOf(u, c.Handle)
	if err != nil {
		a.log.ErrorContext(r.Context(), "read passkeys", "user", u.Username, "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	cred, err := a.passkeys.CreateCredential(pu, sd, parsed)
	if err != nil {
		a.log.InfoContext(r.Context(), "passkey registration refused", "user", u.Username, "err", describe(err))
		jsonError(w, http.StatusBadRequest, "the passkey was refused: it must be made for this site, and check that it is you (a fingerprint, face or PIN)")
		return
	}
	record, err := cred.MarshalMsg(nil)
	if err == nil && len(record) > maxPasskeyRecord {
		err = fmt.Errorf("record of %d bytes", len(record))
	}
	if err != nil {
		a.log.InfoContext(r.Context(), "passkey registration refused", "user", u.Username, "err", err)
		jsonError(w, http.StatusBadRequest, "this passkey's credential is too large to keep")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	first := len(u.PasskeyHandle) == 0
	if first {
		// The handle's item first: a passkey never exists that a sign-in
		// cannot find. If the user item's write fails, the item maps a
		// handle that no passkey holds to its own user, which is harmless.
		if err := a.users.claimHandle(ctx, c.Handle, s.User); err != nil {
			a.storeFailed(w, r, "claim a passkey user handle", err, jsonError)
			return
		}
	}
	p := passkey{Name: name, Record: record, CreatedAt: a.now().UnixMilli()}
	err = a.users.addPasskey(ctx, s.User, passkeyID(cred.ID), p, c.Handle, u.Passkeys == nil)
	if errors.Is(err, errPasskeyChanged) {
		jsonError(w, http.StatusConflict, "your passkeys were changed by another request meanwhile, or this passkey is yours already: try again")
		return
	}
	if err != nil {
		a.storeFailed(w, r, "add a passkey", err, jsonError)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Next string `json:"next"`
	}{"/account"})
}

// describe is err as go-webauthn explains it, for the log.
func describe(err error) string {
	if perr, ok := errors.AsType[*protocol.Error](err); ok {
		return perr.Details + ": " + perr.DevInfo
	}
	return err.Error()
}

// passkeyName is a passkey's name as typed, trimmed; "Passkey" for none.
func passkeyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "Passkey", nil
	case len(name) > maxPasskeyName || !utf8.ValidString(name):
		return "", fmt.Errorf("a passkey's name is at most %d bytes of text", maxPasskeyName)
	}
	return name, nil
}

// passkeyLoginBegin starts a sign-in with a passkey, for whoever the
// authenticator says. It counts against the client's address as a failed
// login does, so that no client writes ceremonies faster than the address
// limit lets it guess passwords.
func (a *app) passkeyLoginBegin(w http.ResponseWriter, r *http.Request) {
	at, ok := a.beginAttempt(w, r, jsonError)
	if !ok {
		return
	}
	at.fail(userBucket{})
	at.end()
	assertion, sd, err := a.passkeys.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		a.log.ErrorContext(r.Context(), "begin a passkey sign-in", "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	a.beginCeremony(w, r, ceremony{Kind: ceremonyLogin}, sd, assertion)
}

// errPasskeyRefused is an assertion that does not verify: another site's,
// another user's, a wrong signature, no user verification, a sign counter
// that went back.
var errPasskeyRefused = errors.New("passkey assertion refused")

// passkeyCheck is a login's verify function for the assertion parsed, of
// the ceremony sd: it checks it against the passkeys of u as the login
// read it (any of them that holds handle for a sign-in, discoverable; one
// of the user's for a step-up), and records the use, which fails with
// errPasskeyChanged if a racing request recorded one first.
func (a *app) passkeyCheck(r *http.Request, user ddbsession.UserKey, sd webauthn.SessionData, parsed *protocol.ParsedCredentialAssertionData, discoverable bool) func(User) error {
	return func(u User) error {
		if len(u.PasskeyHandle) == 0 {
			return errPasskeyRefused
		}
		pu, err := passkeyUserOf(u, nil)
		if err != nil {
			return err
		}
		var cred *webauthn.Credential
		if discoverable {
			cred, err = a.passkeys.ValidateDiscoverableLogin(func(_, handle []byte) (webauthn.User, error) {
				if !bytes.Equal(handle, pu.handle) {
					return nil, errPasskeyRefused
				}
				return pu, nil
			}, sd, parsed)
		} else {
			cred, err = a.passkeys.ValidateLogin(pu, sd, parsed)
		}
		if err != nil {
			a.log.InfoContext(r.Context(), "passkey assertion refused", "user", u.Username, "err", describe(err))
			return errPasskeyRefused
		}
		// A counter that did not go forward, where the authenticator keeps
		// one (synced passkeys send 0): two copies of the key exist.
		if cred.Authenticator.CloneWarning || !parsed.Response.AuthenticatorData.Flags.HasUserVerified() {
			a.log.WarnContext(r.Context(), "passkey assertion refused: sign counter went back, or no user verification", "user", u.Username)
			return errPasskeyRefused
		}
		id := passkeyID(cred.ID)
		record, err := cred.MarshalMsg(nil)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.storeTimeout)
		defer cancel()
		return a.users.usePasskey(ctx, user, id, u.Passkeys[id].Record, record, a.now().UnixMilli())
	}
}

// parseAssertion reads a browser's assertion, or answers 400 itself.
func parseAssertion(w http.ResponseWriter, body []byte) (*protocol.ParsedCredentialAssertionData, bool) {
	parsed, err := protocol.ParseCredentialRequestResponseBytes(body)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "the passkey's answer could not be read")
		return nil, false
	}
	return parsed, true
}

// passkeyLoginFinish signs in the user whose passkey made the assertion.
func (a *app) passkeyLoginFinish(w http.ResponseWriter, r *http.Request) {
	id, body, ok := a.finishRequest(w, r)
	if !ok {
		return
	}
	parsed, ok := parseAssertion(w, body)
	if !ok {
		return
	}
	handle := parsed.Response.UserHandle
	if len(handle) == 0 || len(handle) > 64 {
		jsonError(w, http.StatusBadRequest, "the passkey named no account: use a passkey made for signing in")
		return
	}
	sd, _, ok := a.takeCeremony(w, r, id, ceremonyLogin, "")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	user, found, err := a.users.handleUser(ctx, handle)
	cancel()
	if err != nil {
		a.storeFailed(w, r, "find a passkey's user", err, jsonError)
		return
	}
	if !found {
		jsonError(w, http.StatusUnauthorized, "this passkey is not one of this site's accounts' (it may have been removed)")
		return
	}
	err = a.sessions.Login(w, r, user, a.passkeyCheck(r, user, sd, parsed, true), methodPasskey)
	if a.passkeyRefused(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Next string `json:"next"`
	}{ddbsession.ReturnPath(r, "/")})
}

// passkeyRefused answers a passkey Login's error, if it is one, and
// reports whether it was.
func (a *app) passkeyRefused(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, errPasskeyRefused), errors.Is(err, ddbsession.ErrUserNotFound):
		jsonError(w, http.StatusUnauthorized, "the passkey was refused")
	case errors.Is(err, errPasskeyChanged):
		jsonError(w, http.StatusConflict, "the passkey was used or changed by another request meanwhile: try again")
	case errors.Is(err, errBadRecord):
		a.log.ErrorContext(r.Context(), "stored passkey record is unreadable", "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
	default:
		a.storeFailed(w, r, "sign in with a passkey", err, jsonError)
	}
	return true
}

// passkeyReauthBegin starts a re-authentication with one of the signed-in
// user's passkeys.
func (a *app) passkeyReauthBegin(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	if len(u.Passkeys) == 0 {
		jsonError(w, http.StatusConflict, "you have no passkey: use your password")
		return
	}
	pu, err := passkeyUserOf(u, nil)
	if err != nil {
		a.log.ErrorContext(r.Context(), "read passkeys", "user", u.Username, "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	assertion, sd, err := a.passkeys.BeginLogin(pu, webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		a.log.ErrorContext(r.Context(), "begin a passkey re-authentication", "err", err)
		jsonError(w, http.StatusInternalServerError, "something went wrong")
		return
	}
	a.beginCeremony(w, r, ceremony{Kind: ceremonyReauth, Session: s.ID}, sd, assertion)
}

// passkeyReauthFinish re-authenticates the signed-in user with one of
// their passkeys: a new session, as /reauth's password does, and the page
// to go back to, from the query's next.
func (a *app) passkeyReauthFinish(w http.ResponseWriter, r *http.Request) {
	id, body, ok := a.finishRequest(w, r)
	if !ok {
		return
	}
	parsed, ok := parseAssertion(w, body)
	if !ok {
		return
	}
	s, _ := a.sessions.Session(r.Context())
	sd, _, ok := a.takeCeremony(w, r, id, ceremonyReauth, s.ID)
	if !ok {
		return
	}
	err := a.sessions.Login(w, r, s.User, a.passkeyCheck(r, s.User, sd, parsed, false), methodPasskey)
	if a.passkeyRefused(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Next string `json:"next"`
	}{ddbsession.ReturnPath(r, "/account")})
}

// passkeyRename renames one of the signed-in user's passkeys.
func (a *app) passkeyRename(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	name, err := passkeyName(r.PostFormValue("name"))
	if err != nil {
		a.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	id := r.PostFormValue("id")
	if _, ok := u.Passkeys[id]; !ok {
		a.errorPage(w, http.StatusNotFound, "No such passkey: it may have been removed.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
	defer cancel()
	err = a.users.renamePasskey(ctx, s.User, id, name)
	if errors.Is(err, errPasskeyChanged) {
		a.errorPage(w, http.StatusNotFound, "No such passkey: it was removed meanwhile.")
		return
	}
	if err != nil {
		a.storeError(w, r, "rename a passkey", err)
		return
	}
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}

// passkeyRemovalRefused says why u may not remove passkey id, or nil: it
// must be there, and it must not be the user's last way in. A password is
// another; so is single sign-on (viaSSO: it is on, and u is a user of the
// provider). removePasskey's condition backs the check against racing
// removals.
func passkeyRemovalRefused(u User, id string, viaSSO bool) error {
	if _, ok := u.Passkeys[id]; !ok {
		return errPasskeyChanged
	}
	if !u.HasPassword() && !viaSSO && len(u.Passkeys) == 1 {
		return errLastPasskey
	}
	return nil
}

// confirmPasskeyRemove is the confirm page of removing one passkey, where a
// re-authentication for it comes back to.
func (a *app) confirmPasskeyRemove(w http.ResponseWriter, r *http.Request) {
	u, _ := a.sessions.User(r.Context())
	id := r.URL.Query().Get("id")
	p, ok := u.Passkeys[id]
	if !ok {
		a.errorPage(w, http.StatusNotFound, "No such passkey: it may have been removed already.")
		return
	}
	a.render(w, http.StatusOK, confirmTemplate, confirmData{
		Title: "Remove a passkey", Action: "/passkeys/remove", Fields: map[string]string{"id": id}, Button: "Remove", Danger: true,
		Text: "This removes the passkey " + quoted(p.Name) + ": it no longer signs you in, and every session of yours ends, this one too, so that none it signed in outlives it. You sign in again after.",
	})
}

// quoted is name in quotation marks, for a sentence.
func quoted(name string) string { return "“" + name + "”" }

// passkeyRemove removes one of the signed-in user's passkeys, with a new
// credential version, which ends every session of the user (see
// removePasskey), this browser's too: it is signed out here, and sent to
// sign in again. This request proves nothing that a new session could
// rest on: its session may be one that the removed passkey signed in.
func (a *app) passkeyRemove(w http.ResponseWriter, r *http.Request) {
	if !a.parseForm(w, r) {
		return
	}
	u, _ := a.sessions.User(r.Context())
	s, _ := a.sessions.Session(r.Context())
	id := r.PostFormValue("id")
	viaSSO := a.sso != nil && isSSOUser(s.User)
	err := passkeyRemovalRefused(u, id, viaSSO)
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), a.storeTimeout)
		defer cancel()
		err = a.users.removePasskey(ctx, s.User, id, viaSSO)
	}
	switch {
	case errors.Is(err, errLastPasskey):
		a.errorPage(w, http.StatusConflict, "This is your only passkey and your account has no password: add another passkey first, or you could not sign in.")
	case errors.Is(err, errPasskeyChanged):
		a.errorPage(w, http.StatusConflict, "No such passkey, or your passkeys were changed by another request meanwhile. Go back to your account and try again.")
	case err != nil:
		a.storeError(w, r, "remove a passkey", err)
	default:
		// Its session ended with the write: Logout clears the cookie and
		// deletes the session's items. The app's own Logout, not the
		// logout route's, which would end a single sign-on user's session
		// at the provider too, and that session rests on no passkey.
		if err := a.sessions.Logout(w, r); err != nil {
			a.storeError(w, r, "log out after removing a passkey", err)
			return
		}
		http.Redirect(w, r, "/login?next=%2Faccount", http.StatusSeeOther)
	}
}

// defaultPasskeyOrigin is -origin's default for -addr: localhost on the
// port of a loopback address, where browsers allow passkeys over plain
// HTTP too (and never on an IP address); "" for any other address, whose
// public name the app cannot know.
func defaultPasskeyOrigin(addr string, https bool) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" {
		return ""
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return ""
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	return scheme + "://localhost:" + port
}
