package ddbsessionoidc_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/crypto"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionoidc"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }

// The app's client at the test provider.
const (
	clientID     = "app"
	clientSecret = "app-secret"
)

// user is the app's user item.
type user struct {
	PK   string `dynamodbav:"pk"`
	SK   string `dynamodbav:"sk"`
	Name string `dynamodbav:"name"`
}

// keyOf is the app's mapping: one user item per subject of the issuer.
func keyOf(issuer, subject string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + issuer + "|" + subject, SK: "PROFILE"}
}

// provider is a real OpenID provider, zitadel/oidc's op package with its
// example's storage and login page, served over TLS. It keeps a session of
// its own per browser (a cookie of the login page), whose ID is the sid of
// the ID tokens it issues, and its end-session endpoint sends a
// back-channel logout to the app, as a provider does.
type provider struct {
	*storage.Storage
	t      *testing.T
	server *httptest.Server
	issuer string
	client *testClient

	mu   sync.Mutex
	sids map[string]string // auth request ID → the browser's provider session
	// backChannel is the app's back-channel logout URI, which the
	// end-session endpoint calls; "" for none. backChannelStatus is what
	// it answered last.
	backChannel       string
	backChannelStatus int
	// authTime, if set, gives the auth_time of the ID tokens issued from
	// the time of the code's exchange: a provider whose login was that
	// long before its token, or that leaves auth_time out (zero).
	authTime func(exchange time.Time) time.Time
}

// AuthRequestByCode is the storage's, with the auth_time that authTime
// gives, or the exchange's time: the login as late as it can be. Not the
// login page's time, which the storage keeps: the tests' clock stands
// still while the provider's runs, so the real time from the login page
// to the exchange, which a busy machine stretches, would count as the
// login's age and never as the attempt's.
func (p *provider) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := p.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return r, err
	}
	p.mu.Lock()
	at := p.authTime
	p.mu.Unlock()
	exchange := time.Now()
	if at == nil {
		return authTimeOf{r, exchange}, nil
	}
	return authTimeOf{r, at(exchange)}, nil
}

type authTimeOf struct {
	op.AuthRequest
	at time.Time
}

func (a authTimeOf) GetAuthTime() time.Time { return a.at }

// setAuthTime sets authTime, for the rest of the test.
func (p *provider) setAuthTime(f func(time.Time) time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.authTime = f
}

// testClient is the app's client at the provider, with the
// post-logout redirect URI that the example's client lacks.
type testClient struct {
	*storage.Client
	postLogout []string
}

func (c *testClient) PostLogoutRedirectURIs() []string { return c.postLogout }

func newProvider(t *testing.T, redirectURI, postLogout string) *provider {
	t.Helper()
	p := &provider{t: t, sids: map[string]string{}}
	p.server = httptest.NewUnstartedServer(nil)
	p.server.StartTLS()
	t.Cleanup(p.server.Close)
	p.issuer = p.server.URL
	p.client = &testClient{Client: storage.WebClient(clientID, clientSecret, redirectURI), postLogout: []string{postLogout}}
	p.Storage = storage.NewStorageWithClients(storage.NewUserStore(p.issuer), map[string]*storage.Client{clientID: p.client.Client})
	router := exampleop.SetupServer(p.issuer, p, nil, false)
	p.server.Config.Handler = p.sessionCookie(router)
	return p
}

// sessionCookie gives each browser a session at the provider, in a
// cookie of the login page: the sid of the ID tokens of its logins.
func (p *provider) sessionCookie(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/login/username" {
			r.ParseForm()
			sid := ""
			if c, err := r.Cookie("op_session"); err == nil {
				sid = c.Value
			} else {
				sid = rand.Text()
				http.SetCookie(w, &http.Cookie{Name: "op_session", Value: sid, Path: "/", Secure: true, HttpOnly: true})
			}
			p.mu.Lock()
			p.sids[r.PostForm.Get("id")] = sid
			p.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// GetClientByClientID returns the app's client with its post-logout
// redirect URI.
func (p *provider) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id == clientID {
		return p.client, nil
	}
	return p.Storage.GetClientByClientID(ctx, id)
}

// SetUserinfoFromRequest puts the browser's provider session into the ID
// token, as sid.
func (p *provider) SetUserinfoFromRequest(ctx context.Context, info *zoidc.UserInfo, request op.IDTokenRequest, scopes []string) error {
	if err := p.Storage.SetUserinfoFromRequest(ctx, info, request, scopes); err != nil {
		return err
	}
	if ar, ok := request.(interface{ GetID() string }); ok {
		p.mu.Lock()
		sid := p.sids[ar.GetID()]
		p.mu.Unlock()
		if sid != "" {
			info.AppendClaims("sid", sid)
		}
	}
	return nil
}

// TerminateSessionFromRequest ends the session of the ID token hint at
// the provider, and tells the app by back-channel logout.
func (p *provider) TerminateSessionFromRequest(ctx context.Context, req *op.EndSessionRequest) (string, error) {
	if err := p.Storage.TerminateSession(ctx, req.UserID, req.ClientID); err != nil {
		return "", err
	}
	p.mu.Lock()
	target := p.backChannel
	p.mu.Unlock()
	if target != "" && req.IDTokenHintClaims != nil {
		token := p.logoutToken(p.logoutClaims(req.IDTokenHintClaims.Subject, req.IDTokenHintClaims.SessionID))
		resp := postLogoutToken(p.t, p.server.Client(), target, token)
		p.mu.Lock()
		p.backChannelStatus = resp.StatusCode
		p.mu.Unlock()
	}
	return req.RedirectURI, nil
}

// logoutClaims are the claims of a logout token for subject and sid (""
// for none), issued now, for the app.
func (p *provider) logoutClaims(subject, sid string) *zoidc.LogoutTokenClaims {
	return zoidc.NewLogoutTokenClaims(p.issuer, subject, zoidc.Audience{clientID}, time.Now().Add(2*time.Minute), rand.Text(), sid, 0)
}

// logoutToken signs claims with the provider's own signing key.
func (p *provider) logoutToken(claims *zoidc.LogoutTokenClaims) string {
	p.t.Helper()
	return p.signed(claims)
}

// signed signs claims with the provider's own signing key, through its
// API, as it signs its ID tokens.
func (p *provider) signed(claims any) string {
	p.t.Helper()
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

// forgedToken signs claims with a key of its own, under the provider's key
// ID: a signature the provider's keys do not verify.
func (p *provider) forgedToken(claims any) string {
	p.t.Helper()
	real, err := p.Storage.SigningKey(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		p.t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: &jose.JSONWebKey{Key: other, KeyID: real.ID()}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		p.t.Fatal(err)
	}
	token, err := crypto.Sign(claims, signer)
	if err != nil {
		p.t.Fatal(err)
	}
	return token
}

// sidOf returns the provider session of a browser's last login.
func (p *provider) sidOf(b *browser) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sids[b.lastAuthRequest]
}

// pkOf returns the partition key of an item or key.
func pkOf(key map[string]types.AttributeValue) string {
	s, _ := key["pk"].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

// instance is one of the app's instances: a Manager and a Provider on the
// shared table, each through a probe of its own, serving the app's routes.
type instance struct {
	sessions *ddbsession.Manager[user]
	oidc     *ddbsessionoidc.Provider[user]
	calls    *ddbtest.Probe // counts its calls by operation
	mux      *http.ServeMux
}

// env is a test's world: one table, one clock, the provider, and two
// instances of the app behind one TLS server each. The provider sends
// the browser back to instance a, and its back-channel logouts to b.
type env struct {
	t        *testing.T
	client   *dynamodb.Client
	table    string
	clock    *ddbtest.Clock // starts at the real time, which the provider's tokens are issued on
	provider *provider
	a, b     *instance
	aURL     string
	bURL     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	client := ddbsessiontest.Client(t)
	e := &env{t: t, client: client, table: ddbsessiontest.TableName(t, client), clock: ddbtest.NewClock(time.Now())}
	quiet := slog.New(slog.DiscardHandler) // dynalite has no TTL; the warning is expected
	setup, err := ddbsession.New(ddbsession.Config[user]{Client: client, Table: e.table, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	serverA, serverB := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	serverA.StartTLS()
	serverB.StartTLS()
	t.Cleanup(serverA.Close)
	t.Cleanup(serverB.Close)
	e.aURL, e.bURL = serverA.URL, serverB.URL
	e.provider = newProvider(t, e.aURL+"/callback", e.aURL+"/signed-out")
	e.a, e.b = e.newInstance(), e.newInstance()
	serverA.Config.Handler, serverB.Config.Handler = e.a.mux, e.b.mux
	return e
}

// config is the Provider's Config of an instance, on calls.
func (e *env) config(sessions *ddbsession.Manager[user], calls *ddbtest.Probe) ddbsessionoidc.Config[user] {
	return ddbsessionoidc.Config[user]{
		Sessions:              sessions,
		Client:                calls,
		Table:                 e.table,
		Issuer:                e.provider.issuer,
		ClientID:              clientID,
		ClientSecret:          clientSecret,
		RedirectURL:           e.aURL + "/callback",
		PostLogoutRedirectURL: e.aURL + "/signed-out",
		User: func(ctx context.Context, id ddbsessionoidc.Identity) (ddbsession.UserKey, error) {
			key := keyOf(id.Issuer, id.Subject)
			err := sessions.CreateUser(ctx, user{PK: key.PK, SK: key.SK, Name: id.Subject})
			if err != nil && err != ddbsession.ErrUserExists {
				return key, err
			}
			return key, nil
		},
		HTTPClient: e.provider.server.Client(),
		Logger:     slog.New(slog.DiscardHandler),
		Now:        e.clock.Now,
	}
}

func (e *env) newInstance() *instance {
	e.t.Helper()
	calls := ddbtest.NewProbe(e.client)
	sessions, err := ddbsession.New(ddbsession.Config[user]{
		Client: calls, Table: e.table, Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler),
		WriteBeforeResponse: true, // a refresh's write is a call of the request, not one after it
	})
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := ddbsessionoidc.New(context.Background(), e.config(sessions, calls))
	if err != nil {
		e.t.Fatal(err)
	}
	in := &instance{sessions: sessions, oidc: p, calls: calls, mux: http.NewServeMux()}
	in.mux.HandleFunc("GET /signin", p.SignIn)
	in.mux.HandleFunc("GET /reauth", p.Reauthenticate)
	in.mux.HandleFunc("GET /callback", p.Callback)
	in.mux.HandleFunc("/backchannel-logout", p.BackChannelLogout) // every method: it answers the others itself
	in.mux.Handle("POST /logout", sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.Logout(w, r); err != nil {
			http.Error(w, "sign-out did not complete", http.StatusServiceUnavailable)
		}
	})))
	in.mux.Handle("GET /account", sessions.RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := sessions.Session(r.Context())
		u, _ := sessions.User(r.Context())
		json.NewEncoder(w).Encode(map[string]any{"user": u.PK, "methods": s.Methods, "id": s.ID})
	})))
	// A password sign-in, for a session that is not the provider's.
	in.mux.HandleFunc("POST /password-login", func(w http.ResponseWriter, r *http.Request) {
		key := ddbsession.UserKey{PK: r.PostFormValue("pk"), SK: "PROFILE"}
		if err := sessions.Login(w, r, key, nil, "password"); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
		}
	})
	in.mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "signed out") })
	return in
}

// browser is a user agent: a cookie jar, TLS that trusts the test servers,
// and redirects followed, as a browser follows them.
type browser struct {
	t               *testing.T
	http            *http.Client
	lastAuthRequest string // the provider's auth request of its last login
}

func (e *env) newBrowser() *browser {
	e.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &browser{t: e.t, http: &http.Client{Transport: e.provider.server.Client().Transport, Jar: jar}}
}

func (b *browser) get(target string) *http.Response {
	b.t.Helper()
	resp, err := b.http.Get(target)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp
}

func (b *browser) post(target string, form url.Values) *http.Response {
	b.t.Helper()
	resp, err := b.http.PostForm(target, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp
}

// startSignIn follows the app's sign-in to the provider's login page and
// signs in there as username, stopping where the provider sends the
// browser back to the app: it returns the callback URL, not yet visited.
func (b *browser) startSignIn(e *env, username string) string {
	b.t.Helper()
	return b.startAt(e, "/signin", username)
}

// startAt is startSignIn from the app's path start (/signin or /reauth).
func (b *browser) startAt(e *env, start, username string) string {
	b.t.Helper()
	page := b.get(e.aURL + start + "?next=/account")
	body(b.t, page)
	if page.Request.URL.Path != "/login/username" {
		b.t.Fatalf("the sign-in ended at %s, not the provider's login page", page.Request.URL)
	}
	b.lastAuthRequest = page.Request.URL.Query().Get("authRequestID")
	callback := ""
	b.http.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), e.aURL+"/callback") {
			callback = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	defer func() { b.http.CheckRedirect = nil }()
	resp := b.post(e.provider.issuer+"/login/username", url.Values{"username": {username}, "password": {"verysecure"}, "id": {b.lastAuthRequest}})
	body(b.t, resp)
	if callback == "" {
		b.t.Fatalf("the provider's login answered %s at %s, not a redirect to the app", resp.Status, resp.Request.URL)
	}
	return callback
}

// signIn signs the browser in through the provider as username, and
// checks that it lands on the account page, signed in.
func (b *browser) signIn(e *env, username string) account {
	b.t.Helper()
	resp := b.get(b.startSignIn(e, username))
	text := body(b.t, resp)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/account" {
		b.t.Fatalf("the callback ended with %s at %s: %s", resp.Status, resp.Request.URL, text)
	}
	var acct account
	if err := json.Unmarshal([]byte(text), &acct); err != nil {
		b.t.Fatal(err)
	}
	return acct
}

// account is what the app's account page shows.
type account struct {
	User    string   `json:"user"`
	Methods []string `json:"methods"`
	ID      string   `json:"id"`
}

// signedIn reports whether the browser's session is valid at base.
func (b *browser) signedIn(base string) bool {
	b.t.Helper()
	resp := b.get(base + "/account")
	body(b.t, resp)
	switch resp.StatusCode {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	}
	b.t.Fatalf("the account page answered %s", resp.Status)
	return false
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// postLogoutToken sends a back-channel logout request, as a provider does.
func postLogoutToken(t *testing.T, client *http.Client, target, token string) *http.Response {
	t.Helper()
	resp, err := client.PostForm(target, url.Values{"logout_token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// logoutAnswer is a back-channel logout's response: status, error and
// Cache-Control.
type logoutAnswer struct {
	Status       int
	Error        string
	CacheControl string
}

func (e *env) backChannel(base, token string) logoutAnswer {
	e.t.Helper()
	resp := postLogoutToken(e.t, e.provider.server.Client(), base+"/backchannel-logout", token)
	text := body(e.t, resp)
	a := logoutAnswer{Status: resp.StatusCode, CacheControl: resp.Header.Get("Cache-Control")}
	if resp.StatusCode != http.StatusOK {
		var oauthErr struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(text), &oauthErr); err != nil {
			e.t.Fatalf("the error answer is not JSON: %q", text)
		}
		a.Error = oauthErr.Error
	}
	return a
}

// scanTable returns every item of the table: the tests' own look, never
// the module's.
func (e *env) scanTable() []map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.table})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Items
}

// itemsText is every attribute value of the table's items, for a test
// that a value never reached it.
func (e *env) itemsText() string {
	var b strings.Builder
	for _, item := range e.scanTable() {
		fmt.Fprintf(&b, "%v\n", item)
		for _, v := range item {
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				b.WriteString(v.Value + "\n")
			case *types.AttributeValueMemberSS:
				b.WriteString(strings.Join(v.Value, "\n") + "\n")
			}
		}
	}
	return b.String()
}
