package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// domain is the Function URL's host in the tests' events.
const domain = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws"

// start is the fake clock's starting time.
var start = time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)

// function is one execution environment of the function in this process:
// newApp as main calls it, on the template's table, with every DynamoDB
// call through a front that allows only the function's documented policy.
type function struct {
	t      testing.TB
	table  string
	admin  *dynamodb.Client // the test's own, unrestricted
	front  *ddbtest.Front
	app    *app
	clock  *ddbtest.Clock
	handle func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)
}

// testSettings are the tests' settings: sessions idle for an hour,
// refreshed every 10 minutes; a store timeout no busy machine reaches.
func testSettings(table string) settings {
	return settings{Table: table, IdleTimeout: time.Hour, RefreshInterval: 10 * time.Minute, StoreTimeout: time.Minute, Reauth: 10 * time.Minute}
}

func newFunction(t *testing.T) *function {
	t.Helper()
	name, ttl := deployTemplate(t, "")
	f := &function{t: t, table: name, admin: ttl.Client, clock: ddbtest.NewClock(start)}
	f.front = ddbtest.NewFront(t, ddbtest.Policy{Actions: functionActions(t), Resources: []string{ddbtest.TableARN(name)}}, ddbtest.FrontTTL(ttl))
	a, err := newApp(context.Background(), appConfig{
		Client:   f.front.Client(),
		Settings: testSettings(name),
		Now:      f.clock.Now,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	f.app, f.handle = a, functionHandler(a)
	t.Cleanup(func() {
		for _, c := range f.front.Refused() {
			t.Errorf("the function called %s on %s, which its policy lacks", c.Action, strings.Join(c.Resources, ", "))
		}
	})
	return f
}

// response is a Function URL's answer, as the client sees it.
type response struct {
	status  int
	header  http.Header
	cookies []*http.Cookie
	body    string
}

// cookie returns the response's Set-Cookie for name, or nil.
func (r response) cookie(name string) *http.Cookie {
	for _, c := range r.cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// event is a Function URL's invocation event (payload 2.0) for a request,
// with its cookies both in the cookie header and the cookies field, as
// Function URLs send them.
func event(method, target string, header http.Header, cookies []string, body string) *events.LambdaFunctionURLRequest {
	path, query, _ := strings.Cut(target, "?")
	headers := map[string]string{
		"host":              domain,
		"user-agent":        "lambda-test/1.0",
		"x-forwarded-proto": "https",
		"x-forwarded-for":   "203.0.113.7",
	}
	for name, values := range header {
		headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	if len(cookies) > 0 {
		headers["cookie"] = strings.Join(cookies, "; ")
	}
	ev := &events.LambdaFunctionURLRequest{
		Version:        "2.0",
		RawPath:        path,
		RawQueryString: query,
		Cookies:        cookies,
		Headers:        headers,
		Body:           body,
	}
	ev.RequestContext.DomainName = domain
	ev.RequestContext.HTTP = events.LambdaFunctionURLRequestContextHTTPDescription{
		Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.7", UserAgent: headers["user-agent"],
	}
	return ev
}

// invoke runs the function on ev as Lambda does, and reads its streamed
// response whole.
func (f *function) invoke(ev *events.LambdaFunctionURLRequest) response {
	f.t.Helper()
	out, err := f.handle(context.Background(), ev)
	if err != nil {
		f.t.Fatalf("invoke %s %s: %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
	}
	body, err := io.ReadAll(out.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return newResponse(f.t, out.StatusCode, out.Headers, out.Cookies, body)
}

func newResponse(t testing.TB, status int, headers map[string]string, setCookies []string, body []byte) response {
	t.Helper()
	r := response{status: status, header: http.Header{}, body: string(body)}
	for k, v := range headers {
		r.header.Set(k, v)
	}
	for _, line := range setCookies {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			t.Fatalf("Set-Cookie %q: %v", line, err)
		}
		r.cookies = append(r.cookies, c)
	}
	return r
}

// client is a browser or an API client of the function: it keeps the
// cookies the function sets, and a bearer token.
type client struct {
	cookies map[string]string
	token   string
}

func newClient() *client { return &client{cookies: map[string]string{}} }

// keep takes the cookies a response set or cleared.
func (c *client) keep(r response) {
	for _, ck := range r.cookies {
		if ck.MaxAge < 0 || ck.Value == "" {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck.Value
		}
	}
}

func (c *client) cookieList() []string {
	var list []string
	for name, value := range c.cookies {
		list = append(list, name+"="+value)
	}
	return list
}

// request is the event of c's request: a browser's, with its cookies and,
// for a form, the same-origin headers a browser sends; or an API client's,
// with its bearer token.
func (c *client) request(method, target string, form url.Values, jsonBody any) *events.LambdaFunctionURLRequest {
	h := http.Header{}
	body := ""
	switch {
	case form != nil:
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		h.Set("Origin", "https://"+domain)
		h.Set("Sec-Fetch-Site", "same-origin")
		body = form.Encode()
	case jsonBody != nil:
		h.Set("Content-Type", "application/json")
		b, _ := json.Marshal(jsonBody)
		body = string(b)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return event(method, target, h, c.cookieList(), body)
}

// do sends c's request to f and keeps the cookies of the response.
func (c *client) do(f *function, method, target string, form url.Values, jsonBody any) response {
	f.t.Helper()
	r := f.invoke(c.request(method, target, form, jsonBody))
	c.keep(r)
	return r
}

func (c *client) get(f *function, target string) response { return c.do(f, "GET", target, nil, nil) }

func (c *client) post(f *function, target string, form url.Values) response {
	return c.do(f, "POST", target, form, nil)
}

// signUp signs username up with password on c, and fails unless it worked.
func (c *client) signUp(f *function, username, password string) {
	f.t.Helper()
	r := c.post(f, "/signup", url.Values{"username": {username}, "password": {password}, "remember": {"on"}})
	if r.status != http.StatusSeeOther || c.cookies[sessionCookie] == "" {
		f.t.Fatalf("sign-up: %d %q, cookies %v", r.status, r.body, r.cookies)
	}
}

// logIn logs username in on c, and fails unless it worked.
func (c *client) logIn(f *function, username, password string) {
	f.t.Helper()
	r := c.post(f, "/login", url.Values{"username": {username}, "password": {password}})
	if r.status != http.StatusSeeOther || c.cookies[sessionCookie] == "" {
		f.t.Fatalf("login: %d %q", r.status, r.body)
	}
}

// apiLogin logs username in for a bearer token, and fails unless it worked.
func (c *client) apiLogin(f *function, username, password string) {
	f.t.Helper()
	r := c.do(f, "POST", "/api/login", nil, loginRequest{Username: username, Password: password})
	var tok tokenJSON
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &tok) != nil || tok.Token == "" {
		f.t.Fatalf("POST /api/login: %d %q", r.status, r.body)
	}
	c.token = tok.Token
}

// sessionCookie is the example server's session cookie.
const sessionCookie = "__Host-session"

// sessionItems returns the table's session items, decoded.
func (f *function) sessionItems() []ddbsession.Session {
	f.t.Helper()
	return sessionItemsIn(f.t, f.admin, f.table)
}

func sessionItemsIn(t testing.TB, admin *dynamodb.Client, table string) []ddbsession.Session {
	t.Helper()
	out, err := admin.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	layout, err := ddbitem.Resolve(ddbsession.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []ddbsession.Session
	for _, av := range out.Items {
		if s, err := ddbitem.DecodeSession(layout, av); err == nil {
			sessions = append(sessions, s)
		}
	}
	return sessions
}

// jsonOf decodes a response's JSON body into v.
func jsonOf(t testing.TB, r response, v any) {
	t.Helper()
	if err := json.NewDecoder(bytes.NewReader([]byte(r.body))).Decode(v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}
