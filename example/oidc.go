package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionoidc"
)

// Single sign-on: with -oidc-issuer, the app also signs users in through
// an OpenID Connect provider, with ddbsessionoidc: "Sign in with <name>"
// on the log-in page, the provider's back-channel logout, and a logout
// that goes through the provider's end-session endpoint. Without it none
// of these routes exist.

// oidcConfig is appConfig's single sign-on: the provider and the app's
// client there. Issuer "" turns it off.
type oidcConfig struct {
	Issuer       string // -oidc-issuer
	ClientID     string // -oidc-client-id
	ClientSecret string // $OIDC_CLIENT_SECRET
	RedirectURL  string // -oidc-redirect-url: this app's /oidc/callback, as registered at the provider
	Name         string // -oidc-name: "Sign in with <Name>"; default the issuer's host
	// HTTPClient reaches the provider; nil for ddbsessionoidc's default.
	// Tests trust their provider's certificate with it.
	HTTPClient *http.Client
}

// oidcSecretEnv holds the client secret. Not a flag: a process's
// arguments are visible to every user of the host (ps, /proc).
const oidcSecretEnv = "OIDC_CLIENT_SECRET"

// The routes of single sign-on (docs/oidc.md): the redirect URL and the
// back-channel logout URL are registered at the provider.
const (
	oidcSignInPath      = "/login/oidc"
	oidcReauthPath      = "/login/oidc/again"
	oidcCallbackPath    = "/oidc/callback"
	oidcBackChannelPath = "/oidc/backchannel-logout"
)

// methodOIDC is how a session signed in through the provider says so in
// Session.Methods: ddbsessionoidc's default Config.Method.
const methodOIDC = "oidc"

// methodOIDCFresh is ddbsessionoidc's default Config.FreshMethod: the
// provider made the user log in for this sign-in.
const methodOIDCFresh = methodOIDC + "-fresh"

// ssoUserPrefix starts the key of a user of the provider:
//
//	pk        "SSOUSER#<issuer>|<subject>": no password user ("USER#"),
//	          session, index, failure, name or ddbsessionoidc ("OIDC#")
//	          item starts so
//	sk        "PROFILE"
//	username  what the page shows: the verified email, or the provider's
//	          user name, or the subject, then " (<name>)"
//	issuer, subject
//
// An issuer is a URL, in which "|" is not allowed unescaped (RFC 3986), so
// the first "|" ends it. OpenID Connect bounds a subject to 255 ASCII
// characters, which keeps the key within the 1024 bytes that a session
// cookie carries (ddbsession's Cookie.HideUserKey): a longer one is
// refused rather than costing every request a second read.
const ssoUserPrefix = "SSOUSER#"

const maxSubject = 255

// ssoUserKey is the app's user for the provider's issuer and subject,
// which never change, unlike an email address, which may be given to
// someone else.
func ssoUserKey(issuer, subject string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: ssoUserPrefix + issuer + "|" + subject, SK: "PROFILE"}
}

// ssoUserItem is a user of the provider's item: a User without a
// password hash, so that no password signs it in (HasPassword), and the
// identity it is of.
type ssoUserItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	User
	Issuer  string `dynamodbav:"issuer"`
	Subject string `dynamodbav:"subject"`
}

// HasPassword reports whether the user signs in with a password, which
// a user of the provider has not: the page then shows no password change
// or one-time codes, which only a password login asks for, and a
// re-authentication goes through the provider.
func (u User) HasPassword() bool { return u.PasswordHash != "" }

// isSSOUser reports whether key is a user of the provider's (ssoUserPrefix).
func isSSOUser(key ddbsession.UserKey) bool { return strings.HasPrefix(key.PK, ssoUserPrefix) }

// sso is the app's single sign-on, nil when it is off.
type sso struct {
	provider *ddbsessionoidc.Provider[User]
	name     string
	// origin is the issuer's origin, which form-action allows (csp).
	origin string
}

// addOIDCFlags defines the single sign-on flags on flags, into c.
func addOIDCFlags(flags *flag.FlagSet, c *oidcConfig) {
	flags.StringVar(&c.Issuer, "oidc-issuer", "", "single sign-on: the OpenID Connect provider's issuer `URL` (https://accounts.google.com); its client secret comes from $"+oidcSecretEnv+"; off by default")
	flags.StringVar(&c.ClientID, "oidc-client-id", "", "with -oidc-issuer, the app's client ID at the provider")
	flags.StringVar(&c.RedirectURL, "oidc-redirect-url", "", "with -oidc-issuer, the absolute `URL` of this app's "+oidcCallbackPath+", as registered at the provider")
	flags.StringVar(&c.Name, "oidc-name", "", "with -oidc-issuer, the provider's name on the button \"Sign in with `NAME`\" (default the issuer's host)")
}

// check reads the client secret from the environment and checks how the
// flags go together; ddbsessionoidc.New checks their values.
func (c *oidcConfig) check() error {
	c.ClientSecret = os.Getenv(oidcSecretEnv)
	if c.Issuer == "" {
		if c.ClientID != "" || c.RedirectURL != "" || c.Name != "" {
			return errors.New("-oidc-client-id, -oidc-redirect-url and -oidc-name configure single sign-on: they need -oidc-issuer")
		}
		return nil
	}
	if c.ClientID == "" || c.RedirectURL == "" {
		return errors.New("-oidc-issuer needs -oidc-client-id and -oidc-redirect-url (and the client secret in $" + oidcSecretEnv + ")")
	}
	return nil
}

// newSSO reads the provider's discovery document and returns the app's
// single sign-on, or nil if cfg has none. An error stops the app: a
// provider that was asked for and cannot be reached is a start-up
// failure, not a button that fails later.
func newSSO(ctx context.Context, cfg appConfig, a *app) (*sso, error) {
	c := cfg.OIDC
	if c.Issuer == "" {
		return nil, nil
	}
	issuer, err := url.Parse(c.Issuer)
	if err != nil || issuer.Host == "" {
		return nil, fmt.Errorf("single sign-on: -oidc-issuer %q: want the provider's https URL", c.Issuer)
	}
	if c.ClientSecret == "" {
		a.log.Warn("single sign-on: $" + oidcSecretEnv + " is empty, so the app signs in as a public client (PKCE alone); most providers' web clients need the secret")
	}
	s := &sso{name: cmp.Or(c.Name, issuer.Host), origin: issuer.Scheme + "://" + issuer.Host}
	s.provider, err = ddbsessionoidc.New(ctx, ddbsessionoidc.Config[User]{
		Sessions:     a.sessions,
		Client:       cfg.Client,
		Table:        cfg.Table,
		Issuer:       c.Issuer,
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		RedirectURL:  c.RedirectURL,
		// The claims that name the user on the page (ssoUsername).
		Scopes: []string{"email", "profile"},
		User: func(ctx context.Context, id ddbsessionoidc.Identity) (ddbsession.UserKey, error) {
			return a.ssoUser(ctx, id, s.name)
		},
		SessionLifetime: cfg.AbsoluteLifetime, // 0: the module's default, the Manager's too
		InsecureDevMode: cfg.Dev,
		HTTPClient:      c.HTTPClient,
		Logger:          a.log,
		Now:             cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("single sign-on (-oidc-issuer, -oidc-client-id, -oidc-redirect-url, $%s): %w", oidcSecretEnv, err)
	}
	return s, nil
}

// errLongSubject refuses a subject over OpenID Connect's bound.
var errLongSubject = errors.New("the provider's subject is longer than 255 bytes")

// ssoUser is ddbsessionoidc's Config.User: the user item of the
// provider's user, created at the first sign-in. Its cost is one
// conditional PutItem per sign-in (CreateUser), which fails, as meant,
// once the item exists; the name it shows is the first sign-in's.
func (a *app) ssoUser(ctx context.Context, id ddbsessionoidc.Identity, provider string) (ddbsession.UserKey, error) {
	if len(id.Subject) > maxSubject {
		return ddbsession.UserKey{}, errLongSubject
	}
	key := ssoUserKey(id.Issuer, id.Subject)
	item := ssoUserItem{PK: key.PK, SK: key.SK, User: User{Username: ssoUsername(id, provider)}, Issuer: id.Issuer, Subject: id.Subject}
	if err := a.sessions.CreateUser(ctx, item); err != nil && !errors.Is(err, ddbsession.ErrUserExists) {
		return ddbsession.UserKey{}, err
	}
	return key, nil
}

// ssoUsername is what the page calls a user of the provider: the
// verified email, or else the provider's user name, or else the subject,
// with the provider's name after it. The space before the name keeps it
// apart from every password user's name, which normalizeUsername never
// lets hold one: the limits per username and userKey can never take a
// user of the provider for one of those.
func ssoUsername(id ddbsessionoidc.Identity, provider string) string {
	var claims struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
		Username      string `json:"preferred_username"`
	}
	id.IDToken.Claims(&claims) // a claim of another type is left out
	if !claims.EmailVerified {
		claims.Email = ""
	}
	return shown(cmp.Or(claims.Email, claims.Username, id.Subject)) + " (" + shown(provider) + ")"
}

// shown is s as the page may show a name of the provider's: valid UTF-8
// without control or format characters (bidi overrides would disguise
// it), at most maxUsername bytes.
func shown(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	for len(s) > maxUsername {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// ssoName is the provider's name for the log-in page's button, "" when
// single sign-on is off.
func (a *app) ssoName() string {
	if a.sso == nil {
		return ""
	}
	return a.sso.name
}

// ssoRoutes adds the routes of single sign-on to mux, if it is on.
// Logout is the app's own POST /logout (ssoLogout).
func (a *app) ssoRoutes(mux *http.ServeMux) {
	if a.sso == nil {
		return
	}
	p := a.sso.provider
	// A link: a GET, so that the redirect to the provider is a
	// navigation, which no CSP directive of the page governs (a form would
	// be: see csp).
	mux.HandleFunc("GET "+oidcSignInPath, p.SignIn)
	mux.HandleFunc("GET "+oidcReauthPath, p.Reauthenticate)
	mux.HandleFunc("GET "+oidcCallbackPath, p.Callback)
	mux.HandleFunc("POST "+oidcBackChannelPath, p.BackChannelLogout)
}

// exemptBackChannel lets the provider's back-channel logout past the
// cross-origin check, on exactly its route. The check keeps other sites'
// pages from making a browser send its cookie with a form; this request
// is the provider's server's, carries no cookie, and is authenticated by
// the logout token's signature alone, so the check protects nothing
// there, and would refuse a provider whose HTTP client sends an Origin
// header (TestOIDCBackChannelLogout sends one).
func (a *app) exemptBackChannel(cop *http.CrossOriginProtection) {
	if a.sso != nil {
		cop.AddInsecureBypassPattern("POST " + oidcBackChannelPath)
	}
}

// ssoLogout is logout with single sign-on on: ddbsessionoidc's Logout,
// inside LoadSession (routes), ends the session and, for a session that
// signed in through the provider, sends the browser to the provider's
// end-session endpoint to end the provider's session too; any other
// session goes home. Its costs are in docs/oidc.md.
func (a *app) ssoLogout(w http.ResponseWriter, r *http.Request) {
	if err := a.sso.provider.Logout(w, r); err != nil {
		a.storeError(w, r, "log out", err)
	}
}

// ssoReauth answers a re-authentication of a user without a password,
// and returns false for any other: a user of the provider signs in
// through it again, which makes a new session as a password's
// re-authentication does, and comes back to next. Reauthenticate, not
// SignIn: the provider must ask the user again, or a session it still
// holds would sign them in silently, which is no re-authentication.
func (a *app) ssoReauth(w http.ResponseWriter, r *http.Request, next string) bool {
	if u, _ := a.sessions.User(r.Context()); u.HasPassword() {
		return false
	}
	if a.sso == nil {
		a.errorPage(w, http.StatusConflict, "This account signs in with single sign-on, which is not set up on this server.")
		return true
	}
	http.Redirect(w, r, oidcReauthPath+"?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
	return true
}

// ssoRecent is recent, the sensitive actions' guard, for a session
// signed in through the provider: that one needs methodOIDCFresh too. Its
// AuthenticatedAt is the app's sign-in, which the provider may have
// answered from a session it held, with no login at all; only
// Reauthenticate, or a sign-in whose auth_time shows a login, proves one.
func (a *app) ssoRecent(recent func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	if a.sso == nil {
		return recent
	}
	fresh := a.sessions.RequireAuthentication(a.reauthWithin, methodOIDCFresh)
	return func(next http.Handler) http.Handler {
		other, sso := recent(next), fresh(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s, _ := a.sessions.Session(r.Context()); slices.Contains(s.Methods, methodOIDC) {
				sso.ServeHTTP(w, r)
				return
			}
			other.ServeHTTP(w, r)
		})
	}
}

// csp is the pages' Content-Security-Policy. With single sign-on, its
// form-action allows the issuer's origin too: the log-out form's answer
// is a 303 to the provider's end-session endpoint, and Chromium applies
// form-action to the redirects that follow a form's submission (CSP
// Level 3 leaves it open), so with 'self' alone it would block the
// redirect and the provider's session would live on. The provider's
// endpoint is on the issuer's origin for the providers that have one
// (Keycloak, Authentik, Okta, Auth0, Entra ID); on another origin,
// Chromium stops at the app's logout, which has ended the app's session
// all the same. The sign-in is a link, a navigation, which form-action
// does not govern.
func (a *app) csp() string {
	if a.sso == nil {
		return contentSecurityPolicy
	}
	return strings.Replace(contentSecurityPolicy, "form-action 'self'", "form-action 'self' "+a.sso.origin, 1)
}
