package main

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/chromedp/chromedp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/crypto"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// The example's single sign-on, against a real OpenID provider in the
// test: zitadel/oidc's op package with its example's storage and login
// page, the provider ddbsessionoidc's own tests run against.

const (
	testClientID     = "example-app"
	testClientSecret = "example-secret"
	testProviderName = "Test IdP"
)

// testProvider is the OpenID provider, served over TLS.
type testProvider struct {
	*storage.Storage
	t      *testing.T
	server *httptest.Server
	client *postLogoutClient
	// endSessions counts the requests to the end-session endpoint.
	endSessions atomic.Int32
	// silent makes the ID tokens' auth_time an hour before the code's
	// exchange: a provider that answered from a session of its own.
	silent atomic.Bool
}

// AuthRequestByCode is the storage's, with the auth_time of the code's
// exchange (an hour before it, silent): the login as late as it can be.
// Not the login page's time, which the storage keeps: the real time from
// the login page to the exchange, which a busy machine stretches, counts
// in the login's age, but in the attempt's only where the app runs on the
// real clock (a test's clock stands still meanwhile), so ddbsessionoidc's
// freshness rule (the login's age within the attempt's and a few seconds)
// would turn that delay into a flake.
func (p *testProvider) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := p.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return r, err
	}
	at := time.Now()
	if p.silent.Load() {
		at = at.Add(-time.Hour)
	}
	return authTimeOf{r, at}, nil
}

type authTimeOf struct {
	op.AuthRequest
	at time.Time
}

func (a authTimeOf) GetAuthTime() time.Time { return a.at }

// postLogoutClient is the app's client at the provider, with the
// post-logout redirect URI that the example storage's clients lack, and
// the user's claims (email) in the ID token, as Google and Keycloak put
// them.
type postLogoutClient struct {
	*storage.Client
	postLogout []string
}

func (c *postLogoutClient) PostLogoutRedirectURIs() []string { return c.postLogout }

func (c *postLogoutClient) IDTokenUserinfoClaimsAssertion() bool { return true }

func newTestProvider(t *testing.T, redirectURI, postLogout string) *testProvider {
	t.Helper()
	p := &testProvider{t: t, server: httptest.NewUnstartedServer(nil)}
	p.server.StartTLS()
	t.Cleanup(p.server.Close)
	p.client = &postLogoutClient{Client: storage.WebClient(testClientID, testClientSecret, redirectURI), postLogout: []string{postLogout}}
	p.Storage = storage.NewStorageWithClients(storage.NewUserStore(p.server.URL), map[string]*storage.Client{testClientID: p.client.Client})
	router := exampleop.SetupServer(p.server.URL, p, slog.New(slog.DiscardHandler), false)
	p.server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/end_session" {
			p.endSessions.Add(1)
		}
		router.ServeHTTP(w, r)
	})
	return p
}

func (p *testProvider) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id == testClientID {
		return p.client, nil
	}
	return p.Storage.GetClientByClientID(ctx, id)
}

// logoutToken is a logout token for subject, issued now, signed with the
// provider's own key through its API, as it signs its ID tokens.
func (p *testProvider) logoutToken(subject string) string {
	p.t.Helper()
	claims := zoidc.NewLogoutTokenClaims(p.server.URL, subject, zoidc.Audience{testClientID}, time.Now().Add(2*time.Minute), rand.Text(), "", 0)
	key, err := p.Storage.SigningKey(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	signer, err := op.SignerFromKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	token, err := crypto.Sign(claims, signer)
	if err != nil {
		p.t.Fatal(err)
	}
	return token
}

// newSSOApp starts the app with single sign-on through a new test
// provider. The app's address is known before it starts, for the
// provider's redirect URI.
func newSSOApp(t *testing.T, options ...func(*appConfig)) (*testApp, *testProvider) {
	t.Helper()
	client := ddbtest.Client(t)
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := newTestProvider(t, srv.URL+oidcCallbackPath, srv.URL+"/")
	ta := &testApp{t: t, client: client, table: ddbtest.TableName(t, client), logs: &syncBuffer{}, srv: srv}
	ta.api = ddbtest.NewProbe(client)
	ta.faults = newFaults(ta.api)
	cfg := appConfig{
		Client: ta.api, Table: ta.table, Logger: slog.New(slog.NewTextHandler(ta.logs, nil)), StoreTimeout: 15 * time.Second,
		HashCost: testCost,
		OIDC: oidcConfig{
			Issuer: p.server.URL, ClientID: testClientID, ClientSecret: testClientSecret,
			RedirectURL: srv.URL + oidcCallbackPath, Name: testProviderName,
			HTTPClient: p.server.Client(), // trusts the test servers' certificate
		},
	}
	for _, o := range options {
		o(&cfg)
	}
	a, err := newApp(context.Background(), cfg)
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	ta.app = a
	srv.Config.Handler = a
	return ta, p
}

// visit sends method to target, absolute, and follows redirects as a
// browser does, until a page that is no redirect, or one whose address
// starts with stop. It returns the last response and its address.
func (b *browser) visit(method, target string, form url.Values, stop string) (response, string) {
	b.t.Helper()
	for range 20 {
		var body *strings.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		} else {
			body = strings.NewReader("")
		}
		r, err := http.NewRequest(method, target, body)
		if err != nil {
			b.t.Fatal(err)
		}
		if form != nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res := b.do(r)
		loc := res.header.Get("Location")
		if res.code/100 != 3 || loc == "" {
			return res, target
		}
		next, err := r.URL.Parse(loc)
		if err != nil {
			b.t.Fatal(err)
		}
		target, method, form = next.String(), http.MethodGet, nil
		if stop != "" && strings.HasPrefix(target, stop) {
			return res, target
		}
	}
	b.t.Fatalf("more than 20 redirects from %s", target)
	return response{}, ""
}

// ssoSignIn signs b in through the provider as username, from the
// log-in page's link, and returns the page it lands on and its address.
func (b *browser) ssoSignIn(p *testProvider, username, next string) (response, string) {
	b.t.Helper()
	return b.ssoSignInFrom(p, username, b.app.srv.URL+oidcSignInPath+"?"+url.Values{"next": {next}}.Encode())
}

// ssoSignInFrom is ssoSignIn from a page of the app's that sends the
// browser to the provider.
func (b *browser) ssoSignInFrom(p *testProvider, username, start string) (response, string) {
	b.t.Helper()
	page, at := b.visit(http.MethodGet, start, nil, "")
	u, _ := url.Parse(at)
	if page.code != http.StatusOK || !strings.HasPrefix(at, p.server.URL) || u.Path != "/login/username" {
		b.t.Fatalf("the sign-in ended with %d at %s, not the provider's login page", page.code, at)
	}
	form := url.Values{"username": {username}, "password": {"verysecure"}, "id": {u.Query().Get("authRequestID")}}
	return b.visit(http.MethodPost, p.server.URL+"/login/username", form, "")
}

// The app started with the provider's settings shows "Sign in with
// <name>"; a sign-in through the provider's login page lands on the page
// asked for, signed in as the provider's user, whose item the first
// sign-in creates and the second reuses. The page offers no password
// change or one-time codes to a user without a password, and the
// re-authentication of a sensitive action goes through the provider.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	ta, p := newSSOApp(t)
	b := ta.browser("sso/1.0")
	if page := b.get("/login"); !strings.Contains(page.body, `id="oidc-signin"`) || !strings.Contains(page.body, "Sign in with "+testProviderName) {
		t.Fatalf("the log-in page has no \"Sign in with %s\": %s", testProviderName, page.body)
	}
	if page := b.get("/login?next=/account"); !strings.Contains(page.body, `href="/login/oidc?next=%2faccount"`) {
		t.Errorf("the link does not carry next: %s", page.body)
	}

	before := ta.api.Total()
	page, at := b.ssoSignIn(p, "test-user2", "/account")
	if page.code != http.StatusOK || at != ta.srv.URL+"/account" {
		t.Fatalf("the sign-in ended with %d at %s: %s", page.code, at, page.body)
	}
	// The sign-in's DynamoDB calls, as docs/oidc.md counts them:
	// ddbsessionoidc's SignIn (1) and Callback (9), the app's CreateUser
	// (2: its PutItem, and its Query for a former user's history), the new
	// device's read and write (the app's RememberDevices, 2), and the
	// account page (its session's read, List, and History's Query); and,
	// the Provider's first call, its check of the table's layout record
	// (1).
	if got := ta.api.Total() - before; got != 1+9+2+2+3+1 {
		t.Errorf("a first sign-in and the account page made %d DynamoDB calls, want 18", got)
	}
	if want := "Signed in as <strong>test-user2@zitadel.ch (" + testProviderName + ")</strong>"; !strings.Contains(page.body, want) {
		t.Errorf("the account page does not say %q: %s", want, page.body)
	}
	for _, absent := range []string{`id="password-form"`, `id="totp-enrol"`} {
		if strings.Contains(page.body, absent) {
			t.Errorf("the account page of a user without a password has %s", absent)
		}
	}
	if !strings.Contains(page.body, `id="sso-status"`) {
		t.Errorf("the account page does not say the user signs in with single sign-on")
	}
	list := b.sessions()
	// The provider's login page made the user log in: ddbsessionoidc's
	// FreshMethod says so beside the provider's method.
	if len(list) != 1 || !slices.Equal(list[0].Methods, []string{methodOIDC, methodOIDC + "-fresh"}) {
		t.Fatalf("sessions %+v: want one, signed in with %q and %q", list, methodOIDC, methodOIDC+"-fresh")
	}
	if !strings.Contains(page.body, "single sign-on") {
		t.Errorf("the sessions list does not say how the session signed in")
	}
	key := ssoUserKey(p.server.URL, "id2")
	item, err := ta.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &ta.table, Key: dynamoKey(key), ConsistentRead: new(true)})
	if err != nil || item.Item == nil {
		t.Fatalf("the user item %v: %v, %v", key, item, err)
	}
	if h, _ := item.Item["passwordHash"].(*types.AttributeValueMemberS); h != nil && h.Value != "" {
		t.Errorf("the provider's user has a password hash")
	}
	if s, _ := item.Item["subject"].(*types.AttributeValueMemberS); s == nil || s.Value != "id2" {
		t.Errorf("the user item's subject %v, want id2", item.Item["subject"])
	}

	// A second browser of the same user: the same user item, a second
	// session.
	other := ta.browser("sso-other/1.0")
	if page, at := other.ssoSignIn(p, "test-user2", "/"); page.code != http.StatusOK || at != ta.srv.URL+"/" {
		t.Fatalf("the second sign-in ended with %d at %s: %s", page.code, at, page.body)
	}
	if n := len(other.sessions()); n != 2 {
		t.Errorf("%d sessions after the second sign-in, want 2", n)
	}

	// No password to change, and a re-authentication through the
	// provider, which comes back to the page of the action.
	if res := b.post("/password", url.Values{"current": {"x"}, "new": {"correct horse battery"}}); res.code != http.StatusConflict {
		t.Errorf("POST /password of a user without one: %d, want 409", res.code)
	}
	res := b.get("/reauth?next=/logout-everywhere")
	if loc := res.header.Get("Location"); res.code != http.StatusSeeOther || loc != oidcReauthPath+"?next=%2Flogout-everywhere" {
		t.Errorf("GET /reauth of a user of the provider: %d to %q, want 303 to the provider's re-authentication", res.code, loc)
	}
	if page, at := b.ssoSignInFrom(p, "test-user2", ta.srv.URL+"/reauth?next=/logout-everywhere"); page.code != http.StatusOK || at != ta.srv.URL+"/logout-everywhere" {
		t.Errorf("the re-authentication through the provider ended with %d at %s", page.code, at)
	}
}

// A back-channel logout from the provider, sent as a provider's server
// sends it (with an Origin header, which the cross-origin check would
// refuse on any other route), ends the subject's sessions: their next
// request is signed out. A password user's session lives.
func TestOIDCBackChannelLogout(t *testing.T) {
	t.Parallel()
	ta, p := newSSOApp(t)
	b := ta.browser("sso/1.0")
	if page, _ := b.ssoSignIn(p, "test-user2", "/account"); page.code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", page.code, page.body)
	}
	pw := ta.browser("password/1.0")
	pw.signup("alice", "correct horse battery")
	if b.meStatus() != http.StatusOK || pw.meStatus() != http.StatusOK {
		t.Fatal("not signed in before the logout")
	}
	send := func(token string) response {
		t.Helper()
		r, err := http.NewRequest(http.MethodPost, ta.srv.URL+oidcBackChannelPath, strings.NewReader(url.Values{"logout_token": {token}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", p.server.URL)
		provider := ta.browser("provider/1.0") // no cookies
		return provider.do(r)
	}
	token := p.logoutToken("id2")
	if res := send(token); res.code != http.StatusOK || res.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("back-channel logout: %d %q %s", res.code, res.header.Get("Cache-Control"), res.body)
	}
	if got := b.meStatus(); got != http.StatusUnauthorized {
		t.Errorf("after the back-channel logout, the provider's session answers %d, want 401", got)
	}
	if res := b.get("/account"); res.code != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/login") {
		t.Errorf("after the back-channel logout, /account: %d to %q, want 303 to /login", res.code, res.header.Get("Location"))
	}
	if pw.meStatus() != http.StatusOK {
		t.Errorf("the back-channel logout ended a password user's session")
	}
	if res := send(token); res.code != http.StatusBadRequest {
		t.Errorf("a replayed logout token: %d, want 400", res.code)
	}
	// The exemption is the back-channel route's alone: a cross-origin
	// form elsewhere is still refused.
	if res := pw.post("/logout-everywhere", nil, "Origin", p.server.URL); res.code != http.StatusForbidden {
		t.Errorf("a cross-origin POST /logout-everywhere: %d, want 403", res.code)
	}
}

// Logging out a session of the provider ends it here and sends the
// browser to the provider's end-session endpoint with the ID token as
// id_token_hint, which the provider accepts and sends back home; the
// CSP's form-action allows that redirect. A password session's logout
// goes home directly.
func TestOIDCLogout(t *testing.T) {
	t.Parallel()
	ta, p := newSSOApp(t)
	b := ta.browser("sso/1.0")
	if page, _ := b.ssoSignIn(p, "test-user2", "/account"); page.code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", page.code, page.body)
	}
	before := ta.api.Total()
	res := b.post("/logout", nil)
	// LoadSession's read, and ddbsessionoidc's Logout: the record's
	// GetItem, the Manager's 2 DeleteItem and history event, the record's
	// DeleteItem.
	if got := ta.api.Total() - before; got != 1+5 {
		t.Errorf("the logout made %d DynamoDB calls, want 6", got)
	}
	loc, err := url.Parse(res.header.Get("Location"))
	if err != nil || res.code != http.StatusSeeOther || !strings.HasPrefix(loc.String(), p.server.URL+"/") || loc.Query().Get("id_token_hint") == "" {
		t.Fatalf("POST /logout: %d to %q, want 303 to the provider's end-session endpoint with id_token_hint", res.code, loc)
	}
	if csp := res.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+p.server.URL+";") {
		t.Errorf("the logout's CSP %q does not allow the provider as a form's redirect", csp)
	}
	if b.meStatus() != http.StatusUnauthorized {
		t.Errorf("the session outlives the logout")
	}
	if page, at := b.visit(http.MethodGet, loc.String(), nil, ""); page.code != http.StatusOK || at != ta.srv.URL+"/" {
		t.Errorf("the provider's end-session ended with %d at %s, not back home: %s", page.code, at, page.body)
	}

	pw := ta.browser("password/1.0")
	pw.signup("alice", "correct horse battery")
	if res := pw.post("/logout", nil); res.code != http.StatusSeeOther || res.header.Get("Location") != ta.srv.URL+"/" {
		t.Errorf("a password session's logout: %d to %q, want 303 home", res.code, res.header.Get("Location"))
	}
	if pw.meStatus() != http.StatusUnauthorized {
		t.Errorf("the password session outlives its logout")
	}
}

// Without the provider's settings there is no button, and none of the
// routes of single sign-on; the CSP is the app's own.
func TestOIDCOff(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	b := ta.browser("visitor/1.0")
	page := b.get("/login")
	if strings.Contains(page.body, `id="oidc-signin"`) || strings.Contains(page.body, oidcSignInPath) {
		t.Errorf("the log-in page offers single sign-on: %s", page.body)
	}
	if csp := page.header.Get("Content-Security-Policy"); csp != contentSecurityPolicy {
		t.Errorf("CSP %q, want %q", csp, contentSecurityPolicy)
	}
	for _, r := range []struct{ method, path string }{{"GET", oidcSignInPath}, {"GET", oidcCallbackPath}, {"POST", oidcBackChannelPath}} {
		var res response
		if r.method == "GET" {
			res = b.get(r.path)
		} else {
			res = b.post(r.path, url.Values{"logout_token": {"x"}})
		}
		if res.code != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", r.method, r.path, res.code)
		}
	}
}

// A provider that cannot be read at start stops the app, with a message
// that names the settings.
func TestOIDCProviderUnreachable(t *testing.T) {
	t.Parallel()
	gone := httptest.NewTLSServer(http.NotFoundHandler())
	gone.Close()
	client := ddbtest.Client(t)
	_, err := newApp(context.Background(), appConfig{
		Client: client, Table: ddbtest.TableName(t, client), Logger: slog.New(slog.DiscardHandler),
		OIDC: oidcConfig{Issuer: gone.URL, ClientID: "app", RedirectURL: "https://app.example/oidc/callback"},
	})
	if err == nil || !strings.Contains(err.Error(), "single sign-on (-oidc-issuer") || !strings.Contains(err.Error(), gone.URL) {
		t.Errorf("newApp with an unreachable provider: %v, want an error that names -oidc-issuer and %s", err, gone.URL)
	}
}

// The flags of single sign-on, the secret from the environment, and how
// they go together. Not parallel: it sets the environment.
func TestOIDCFlags(t *testing.T) {
	t.Setenv(oidcSecretEnv, "s3cret")
	opts, err := parseFlags([]string{"-oidc-issuer", "https://idp.example/realms/acme", "-oidc-client-id", "app",
		"-oidc-redirect-url", "https://app.example/oidc/callback", "-oidc-name", "Keycloak"}, &strings.Builder{})
	want := oidcConfig{Issuer: "https://idp.example/realms/acme", ClientID: "app", ClientSecret: "s3cret", RedirectURL: "https://app.example/oidc/callback", Name: "Keycloak"}
	if err != nil || opts.app.OIDC != want {
		t.Errorf("parseFlags: %+v, %v; want %+v", opts.app.OIDC, err, want)
	}
	var usage strings.Builder
	parseFlags([]string{"-h"}, &usage)
	if strings.Contains(usage.String(), "secret\"") || strings.Contains(usage.String(), "-oidc-client-secret") {
		t.Errorf("a flag takes the client secret: %s", usage.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-oidc-issuer", "https://idp.example"}, "-oidc-issuer needs -oidc-client-id and -oidc-redirect-url"},
		{[]string{"-oidc-issuer", "https://idp.example", "-oidc-client-id", "app"}, "-oidc-issuer needs"},
		{[]string{"-oidc-client-id", "app"}, "they need -oidc-issuer"},
		{[]string{"-oidc-name", "Google"}, "they need -oidc-issuer"},
	} {
		if _, err := parseFlags(tc.args, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q): %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// The user's key and name: the subject's bound, and a name that no
// password user's name can be.
func TestOIDCUserNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"alice@example.com", "alice@example.com"},
		{"a\u202eb\x00c", "abc"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32)},
	} {
		if got := shown(tc.in); got != tc.want {
			t.Errorf("shown(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if _, err := normalizeUsername("alice (Google)"); err == nil {
		t.Error("a name of the provider's users is a valid username too")
	}
	key := ssoUserKey("https://accounts.google.com", strings.Repeat("9", maxSubject))
	if n := len(key.PK) + len(key.SK); n > 1024 {
		t.Errorf("a key of the longest subject is %d bytes, over a cookie's 1024", n)
	}
}

// TestOIDCBrowser signs in through the provider and out in headless
// Chromium: the button on the log-in page, the provider's login page, the
// account page; and the log-out form, whose 303 to the provider's
// end-session endpoint Chromium follows only because the CSP's
// form-action allows the issuer's origin (with 'self' alone it stops at
// the app's logout: Chromium applies form-action to a form's redirects).
// The pages fit at 1280, 390 and 320 px.
func TestOIDCBrowser(t *testing.T) {
	t.Parallel()
	ta, p := newSSOApp(t)
	tab := startChromium(t, ta.srv.URL+"/login")
	do(t, tab, "the log-in page", chromedp.WaitVisible("#oidc-signin"))
	checkWidths(t, tab, "sso-login")
	do(t, tab, "sign in with the provider",
		chromedp.Click("#oidc-signin"),
		chromedp.WaitVisible("#username"),
		chromedp.SendKeys("#username", "test-user2"),
		chromedp.SendKeys("#password", "verysecure"),
		chromedp.Click("button[type=submit]"),
		chromedp.WaitVisible("#whoami"),
	)
	if got := value(t, tab, "read who am I", chromedp.Text("#whoami")); got != "Signed in as test-user2@zitadel.ch ("+testProviderName+")" {
		t.Errorf("after the sign-in the page says %q", got)
	}
	checkWidths(t, tab, "sso-account")
	do(t, tab, "log out", chromedp.Click("#logout"), chromedp.WaitVisible("#signup-form"))
	if at := value(t, tab, "read the address", chromedp.Location()); at != ta.srv.URL+"/" {
		t.Errorf("the logout ended at %s, want home", at)
	}
	if n := p.endSessions.Load(); n != 1 {
		t.Errorf("the provider's end-session endpoint was reached %d times, want 1", n)
	}
}

// A user of the provider registers a passkey and signs in with it alone
// in another browser: the passkey's handle leads to the provider's user,
// whose key is no password user's.
func TestOIDCUserPasskey(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta, p := newSSOApp(t, passkeyApp(clock))
	b := ta.browser("sso/1.0")
	if page, _ := b.ssoSignIn(p, "test-user2", "/account"); page.code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", page.code, page.body)
	}
	key := newSoftKey(t, testRPID, testOrigin)
	b.register(key, "laptop")
	other := ta.browser("sso-passkey/1.0")
	other.passkeySignIn(key)
	list, err := ta.app.sessions.List(t.Context(), ssoUserKey(p.server.URL, "id2"))
	if err != nil || len(list) != 2 {
		t.Errorf("the provider's user's sessions: %d, %v; want the provider's sign-in and the passkey's", len(list), err)
	}
	// The provider is a way in too: the user, who has no password, may
	// remove their only passkey.
	if page := b.get("/account"); !strings.Contains(page.body, passkeyID(key.credID)) {
		t.Fatalf("the account page does not list the passkey")
	}
	b.mustPost(http.StatusSeeOther, "/passkeys/remove", url.Values{"id": {passkeyID(key.credID)}})
	if page := b.get("/account"); strings.Contains(page.body, passkeyID(key.credID)) {
		t.Errorf("the provider's user's only passkey is still listed after its removal")
	}
}

// A sign-in that the provider answered from a session it held (auth_time
// an hour old) is no re-authentication: a sensitive action still asks for
// one, which goes through the provider's login. Without FreshMethod's
// check, a plain sign-in would pass where Reauthenticate refuses.
func TestOIDCSilentSignInIsNoReauthentication(t *testing.T) {
	t.Parallel()
	ta, p := newSSOApp(t)
	p.silent.Store(true)
	b := ta.browser("sso/1.0")
	if page, _ := b.ssoSignIn(p, "test-user2", "/account"); page.code != http.StatusOK {
		t.Fatalf("sign-in: %d %s", page.code, page.body)
	}
	res := b.post("/logout-everywhere", nil)
	if want := reauthFor("/logout-everywhere"); res.code != http.StatusSeeOther || res.header.Get("Location") != want {
		t.Fatalf("a sensitive action after a silent sign-in: %d to %.40q…, want 303 to %q", res.code, res.header.Get("Location"), want)
	}
	p.silent.Store(false)
	if page, at := b.ssoSignInFrom(p, "test-user2", ta.srv.URL+"/reauth?next=/logout-everywhere"); page.code != http.StatusOK || at != ta.srv.URL+"/logout-everywhere" {
		t.Fatalf("the re-authentication ended with %d at %s", page.code, at)
	}
	if res := b.post("/logout-everywhere", nil); res.code != http.StatusSeeOther || strings.Contains(res.header.Get("Location"), "reauth") {
		t.Errorf("a sensitive action after the re-authentication: %d to %q, want it done", res.code, res.header.Get("Location"))
	}
}
