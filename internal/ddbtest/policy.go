package ddbtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Policy is an IAM identity policy of one Allow statement for DynamoDB, as a
// function's role has it: the actions it allows ("dynamodb:GetItem") on the
// resources it names (a table's ARN, [TableARN], and an index's,
// [IndexARN]). As in IAM, actions compare without regard to case, and both
// may hold the wildcards * and ?.
type Policy struct {
	Actions   []string
	Resources []string
}

// The account of the ARNs that a Front sees, as in AWS's documentation.
const testAccount = "123456789012"

// TableARN is the ARN of table in the test Region and account: what a
// policy names and what a Front checks.
func TableARN(table string) string {
	return "arn:aws:dynamodb:" + testRegion + ":" + testAccount + ":table/" + table
}

// IndexARN is the ARN of a table's secondary index, which a Query or Scan
// of the index acts on.
func IndexARN(table, index string) string { return TableARN(table) + "/index/" + index }

// A Front stands in front of the test engine, as IAM stands in front of
// DynamoDB: it lets a call through only if its Policy allows the call's
// action on every resource the call names, and refuses any other as
// DynamoDB does, HTTP 400 with AccessDeniedException, before the engine
// sees it. It speaks DynamoDB's own protocol on a loopback URL, so that a
// client of its own ([Front.Client]) or another process
// (AWS_ENDPOINT_URL_DYNAMODB=[Front.URL]) reaches the engine only through
// it. It records each action it let through and each call it refused, for
// a test to check that a documented policy is exactly what its code uses,
// and counts the calls it let through.
//
// The resources of a call are those IAM checks for it: the table (or, for
// a Query or Scan with IndexName, the index) that TableName names, each
// table of a batch's RequestItems and of a transaction's items.
type Front struct {
	// URL is the front's endpoint.
	URL string

	policy   Policy
	upstream string
	http     *http.Client
	ttl      *TTLClient
	hold     func(context.Context, FrontCall) bool

	mu      sync.Mutex
	used    map[string]int // calls let through, by action
	refused []FrontCall
}

// FrontCall is one call that reached a Front.
type FrontCall struct {
	Action    string   // "dynamodb:GetItem"
	Resources []string // the ARNs it acts on, as IAM checks them
	Body      []byte   // the request's JSON
}

// A FrontOption changes what a Front does with the calls it lets through.
type FrontOption func(*Front)

// FrontTTL makes the Front answer the calls it lets through of
// DescribeTimeToLive and UpdateTimeToLive through c, so that on an engine
// without TTL (dynalite) a table whose TTL c has turned on reads as on,
// as it does on DynamoDB once a template has deployed it.
func FrontTTL(c *TTLClient) FrontOption { return func(f *Front) { f.ttl = c } }

// FrontHold runs hold on each call the policy lets through, on the
// request's goroutine, before the call reaches the engine: a test pauses a
// call there, at a point it names, until it lets it go. A call whose hold
// returns false, or whose caller hung up meanwhile (ctx is the caller's
// connection), never reaches the engine: as a write of a process that is
// frozen or killed before its request is sent.
func FrontHold(hold func(ctx context.Context, c FrontCall) bool) FrontOption {
	return func(f *Front) { f.hold = hold }
}

// NewFront starts a Front for p before the test engine, which it stops when
// t ends. The package's TestMain must call [Main].
func NewFront(t testing.TB, p Policy, opts ...FrontOption) *Front {
	t.Helper()
	if !mainRan {
		t.Fatal("ddbtest: NewFront needs the package's TestMain to call ddbtest.Main")
	}
	upstream := os.Getenv(endpointEnv)
	if err := CheckEndpoint(upstream); err != nil {
		t.Fatalf("ddbtest: %v", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	f := &Front{policy: p, upstream: strings.TrimSuffix(upstream, "/"), http: &http.Client{Transport: transport}, used: map[string]int{}}
	for _, o := range opts {
		o(f)
	}
	srv := httptest.NewServer(f)
	f.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	return f
}

// Client returns a client that reaches the engine through the front, with
// the dummy credentials and region of every test.
func (f *Front) Client() *dynamodb.Client { return newClient(f.URL) }

// Used returns the actions the front let through, sorted.
func (f *Front) Used() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := make([]string, 0, len(f.used))
	for a := range f.used {
		used = append(used, a)
	}
	slices.Sort(used)
	return used
}

// Calls returns how many calls of each operation ("GetItem") the front
// let through: what a [Probe] counts, for calls that another process (the
// CLI) makes.
func (f *Front) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls := make(map[string]int, len(f.used))
	for action, n := range f.used {
		calls[strings.TrimPrefix(action, "dynamodb:")] = n
	}
	return calls
}

// Refused returns the calls the front refused, in order.
func (f *Front) Refused() []FrontCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refused)
}

// Forget forgets what the front let through and refused, so that a test
// can check the calls of one step alone.
func (f *Front) Forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.used)
	f.refused = nil
}

// targetPrefix starts every X-Amz-Target of DynamoDB's JSON protocol.
const targetPrefix = "DynamoDB_20120810."

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	body, err := io.ReadAll(r.Body)
	if !ok || err != nil {
		// Not a DynamoDB call: nothing for a policy to allow.
		writeAPIError(w, http.StatusBadRequest, "com.amazon.coral.service#UnknownOperationException", "")
		return
	}
	c := FrontCall{Action: "dynamodb:" + op, Body: body}
	if c.Resources, err = resourcesOf(op, body); err != nil {
		writeAPIError(w, http.StatusBadRequest, "com.amazon.coral.validate#ValidationException", err.Error())
		return
	}
	if denied, ok := f.policy.denied(c); ok {
		f.mu.Lock()
		f.refused = append(f.refused, c)
		f.mu.Unlock()
		// IAM's own words, with the role a Lambda function would run as.
		writeAPIError(w, http.StatusBadRequest, "com.amazon.coral.service#AccessDeniedException", fmt.Sprintf(
			"User: arn:aws:sts::%s:assumed-role/ddbtest-front/ddbtest is not authorized to perform: %s on resource: %s because no identity-based policy allows the %s action",
			testAccount, c.Action, denied, c.Action))
		return
	}
	f.mu.Lock()
	f.used[c.Action]++
	f.mu.Unlock()
	if f.hold != nil && !f.hold(r.Context(), c) || r.Context().Err() != nil {
		// Lost on its way: a caller still there sees its connection close.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		return
	}
	if f.ttl != nil && (op == "DescribeTimeToLive" || op == "UpdateTimeToLive") {
		f.serveTTL(w, r.Context(), op, body)
		return
	}
	f.forward(w, r, body)
}

// denied returns the first resource of c that p does not allow c's action
// on, and true; or false if p allows c.
func (p Policy) denied(c FrontCall) (string, bool) {
	if !slices.ContainsFunc(p.Actions, func(a string) bool { return wildcardMatch(strings.ToLower(a), strings.ToLower(c.Action)) }) {
		if len(c.Resources) == 0 {
			return "*", true
		}
		return c.Resources[0], true
	}
	if len(c.Resources) == 0 {
		// An action on no table (ListTables): IAM wants Resource "*".
		return "*", !slices.Contains(p.Resources, "*")
	}
	for _, res := range c.Resources {
		if !slices.ContainsFunc(p.Resources, func(pattern string) bool { return wildcardMatch(pattern, res) }) {
			return res, true
		}
	}
	return "", false
}

// wildcardMatch matches s against an IAM pattern, whose * matches any
// run of characters, slashes and colons included, and ? any one.
func wildcardMatch(pattern, s string) bool {
	// path.Match's * stops at a slash, which IAM's does not: match the
	// pattern's parts between stars in order instead.
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return len(s) == len(pattern) && questionMatch(pattern, s)
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !questionMatch(first, s[:len(first)]) || !questionMatch(last, s[len(s)-len(last):]) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, part := range parts[1 : len(parts)-1] {
		i := indexQuestion(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}

// questionMatch reports whether s, as long as pattern, matches it with ?
// for any one byte.
func questionMatch(pattern, s string) bool {
	if len(pattern) != len(s) {
		return false
	}
	for i := range len(pattern) {
		if pattern[i] != '?' && pattern[i] != s[i] {
			return false
		}
	}
	return true
}

// indexQuestion is strings.Index for a pattern with ? for any one byte.
func indexQuestion(s, pattern string) int {
	for i := 0; i+len(pattern) <= len(s); i++ {
		if questionMatch(pattern, s[i:i+len(pattern)]) {
			return i
		}
	}
	return -1
}

// resourcesOf returns the ARNs that a call of op with body acts on, as IAM
// checks them.
func resourcesOf(op string, body []byte) ([]string, error) {
	var in struct {
		TableName     string
		IndexName     string
		ResourceArn   string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("the body of %s is not DynamoDB's JSON: %v", op, err)
		}
	}
	arn := func(table string) string {
		if strings.HasPrefix(table, "arn:") {
			return table
		}
		return TableARN(table)
	}
	var resources []string
	switch {
	case in.RequestItems != nil:
		for table := range in.RequestItems {
			resources = append(resources, arn(table))
		}
		slices.Sort(resources)
	case in.TransactItems != nil:
		for _, ti := range in.TransactItems {
			for _, action := range ti {
				resources = append(resources, arn(action.TableName))
			}
		}
		slices.Sort(resources)
		resources = slices.Compact(resources)
	case in.IndexName != "" && (op == "Query" || op == "Scan"):
		resources = []string{arn(in.TableName) + "/index/" + in.IndexName}
	case in.TableName != "":
		resources = []string{arn(in.TableName)}
	case in.ResourceArn != "":
		resources = []string{in.ResourceArn}
	}
	return resources, nil
}

// forward sends the call on to the engine and its answer back, untouched:
// the SDK checks the answer's CRC32.
func (f *Front) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, f.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error())
		return
	}
	for name, values := range r.Header {
		if name != "Content-Length" {
			req.Header[name] = values
		}
	}
	res, err := f.http.Do(req)
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "ddbtest front: "+err.Error())
		return
	}
	defer res.Body.Close()
	for name, values := range res.Header {
		w.Header()[name] = values
	}
	w.WriteHeader(res.StatusCode)
	io.Copy(w, res.Body)
}

// serveTTL answers a TTL call through the Front's TTLClient.
func (f *Front) serveTTL(w http.ResponseWriter, ctx context.Context, op string, body []byte) {
	var in struct {
		TableName               *string
		TimeToLiveSpecification *types.TimeToLiveSpecification
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeAPIError(w, http.StatusBadRequest, "com.amazon.coral.validate#ValidationException", err.Error())
		return
	}
	var out any
	var err error
	switch op {
	case "DescribeTimeToLive":
		var d *dynamodb.DescribeTimeToLiveOutput
		if d, err = f.ttl.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: in.TableName}); err == nil {
			out = struct{ TimeToLiveDescription *types.TimeToLiveDescription }{d.TimeToLiveDescription}
		}
	default:
		var u *dynamodb.UpdateTimeToLiveOutput
		if u, err = f.ttl.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: in.TableName, TimeToLiveSpecification: in.TimeToLiveSpecification}); err == nil {
			out = struct {
				TimeToLiveSpecification *types.TimeToLiveSpecification
			}{u.TimeToLiveSpecification}
		}
	}
	var api smithy.APIError
	switch {
	case errors.As(err, &api):
		writeAPIError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#"+api.ErrorCode(), api.ErrorMessage())
	case err != nil:
		writeAPIError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", err.Error())
	default:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		json.NewEncoder(w).Encode(out)
	}
}

// writeAPIError answers with an error in DynamoDB's JSON protocol.
func writeAPIError(w http.ResponseWriter, status int, errorType, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", strings.ToUpper(rand.Text()))
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Type    string `json:"__type"`
		Message string `json:"Message,omitempty"`
	}{errorType, message})
}

// Policies are documented in a table of a Markdown file whose rows name a
// feature set in code (`sign-in`) in the first cell and its actions
// (`dynamodb:GetItem`), in code, in the last.
var (
	policyRow = regexp.MustCompile("^\\|\\s*`([a-z][a-z-]*)`\\s*\\|.*\\|((?:\\s*`dynamodb:[A-Za-z]+`,?)+)\\s*\\|\\s*$")
	actionRe  = regexp.MustCompile(`dynamodb:[A-Za-z]+`)
)

// DocumentedPolicies reads the policy of each feature set from the table
// of the Markdown file at file, so that the document is the one place the
// policies are written and tests check them: its actions, sorted, by
// feature set.
func DocumentedPolicies(file string) (map[string][]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sets := map[string][]string{}
	for line := range strings.Lines(string(b)) {
		m := policyRow.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		if m == nil {
			continue
		}
		if _, dup := sets[m[1]]; dup {
			return nil, fmt.Errorf("%s: feature set %q has two rows", filepath.Base(file), m[1])
		}
		actions := actionRe.FindAllString(m[2], -1)
		slices.Sort(actions)
		sets[m[1]] = slices.Compact(actions)
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("%s: no policy table (rows of | `feature` | ... | `dynamodb:Action` ... |)", filepath.Base(file))
	}
	return sets, nil
}

// PolicyOf is the Policy that allows the actions of the feature sets named,
// from sets, on resources; it fails t for a set sets lacks.
func PolicyOf(t testing.TB, sets map[string][]string, resources []string, features ...string) Policy {
	t.Helper()
	var actions []string
	for _, name := range features {
		a, ok := sets[name]
		if !ok {
			t.Fatalf("ddbtest: no documented policy for feature set %q", name)
		}
		actions = append(actions, a...)
	}
	slices.Sort(actions)
	return Policy{Actions: slices.Compact(actions), Resources: resources}
}
