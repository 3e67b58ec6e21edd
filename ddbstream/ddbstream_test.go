package ddbstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/ddbstream"
)

// ttlIdentity is the userIdentity that AWS documents for deletions by Time
// to Live.
const ttlIdentity = `{"type": "Service", "principalId": "dynamodb.amazonaws.com"}`

// sessionImage is a session item as ddbsession writes it (format 4):
// signed in at 2026-11-30T12:00:00.250Z with a password and a one-time
// code, refreshed ten minutes later, expiring an hour after that, with the
// app's data.
const sessionImage = `{
	"pk": {"S": "SESSION#Yq0oZ5Xb1cW1bq2cR3kOo4mS6vQ7z8H9aJ0bK1lM2nO"},
	"sk": {"S": "SESSION"},
	"v": {"N": "4"},
	"kind": {"S": "session"},
	"sid": {"S": "0123456789abcdef0123456789abcdef"},
	"userPK": {"S": "USER#alice"},
	"userSK": {"S": "PROFILE"},
	"createdAt": {"N": "1796040000250"},
	"refreshedAt": {"N": "1796040600250"},
	"expiresAt": {"N": "1796044200"},
	"userAgent": {"S": "test-agent/1.0"},
	"gen": {"N": "2718281828459045"},
	"userGen": {"N": "2718281828459045"},
	"credGen": {"N": "2"},
	"globalGen": {"N": "0"},
	"authAt": {"N": "1796040000250"},
	"methods": {"L": [{"S": "password"}, {"S": "otp"}]},
	"appData": {"S": "{\"cart\":3}"},
	"dataRev": {"N": "4242"}
}`

// wantSession is sessionImage decoded.
var wantSession = ddbsession.Session{
	ID:          "0123456789abcdef0123456789abcdef",
	User:        ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"},
	CreatedAt:   time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC),
	RefreshedAt: time.Date(2026, 11, 30, 12, 10, 0, 250_000_000, time.UTC),
	ExpiresAt:   time.Date(2026, 11, 30, 13, 10, 0, 0, time.UTC),
	UserAgent:   "test-agent/1.0",

	AuthenticatedAt: time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC),
	Methods:         []string{"password", "otp"},
	Data:            json.RawMessage(`{"cart":3}`),
}

// indexImage is the per-user index item that accompanies sessionImage.
const indexImage = `{
	"pk": {"S": "USERSESSIONS#10#USER#alicePROFILE"},
	"sk": {"S": "S#0123456789abcdef0123456789abcdef"},
	"v": {"N": "4"},
	"kind": {"S": "session-index"},
	"sid": {"S": "0123456789abcdef0123456789abcdef"},
	"userPK": {"S": "USER#alice"},
	"userSK": {"S": "PROFILE"},
	"createdAt": {"N": "1796040000250"},
	"refreshedAt": {"N": "1796040600250"},
	"expiresAt": {"N": "1796044200"},
	"gen": {"N": "2718281828459045"},
	"userGen": {"N": "2718281828459045"},
	"credGen": {"N": "2"},
	"globalGen": {"N": "0"},
	"authAt": {"N": "1796040000250"},
	"sessionPK": {"S": "SESSION#Yq0oZ5Xb1cW1bq2cR3kOo4mS6vQ7z8H9aJ0bK1lM2nO"}
}`

// foreignImage is one of the app's own items in a shared table, with a TTL
// of its own.
const foreignImage = `{
	"pk": {"S": "CART#42"},
	"sk": {"S": "CART"},
	"kind": {"S": "cart"},
	"expiresAt": {"N": "1796044200"}
}`

// rec describes one stream record; record renders it as JSON in the shape
// of the DynamoDB Streams event that AWS documents for Lambda.
type rec struct {
	name     string // eventName
	identity string // userIdentity JSON, or "" for none
	old, new string // OldImage and NewImage JSON, or "" for none
	seq      string
}

func (r rec) json() string {
	var b strings.Builder
	fmt.Fprintf(&b, `{
		"eventID": "id-%s",
		"eventName": %q,
		"eventVersion": "1.1",
		"eventSource": "aws:dynamodb",
		"awsRegion": "us-east-1",`, r.seq, r.name)
	if r.identity != "" {
		fmt.Fprintf(&b, `"userIdentity": %s,`, r.identity)
	}
	view := "NEW_AND_OLD_IMAGES"
	b.WriteString(`"dynamodb": {
			"ApproximateCreationDateTime": 1796044260,
			"Keys": {"pk": {"S": "SESSION#Yq0oZ5Xb1cW1bq2cR3kOo4mS6vQ7z8H9aJ0bK1lM2nO"}, "sk": {"S": "SESSION"}},`)
	if r.old != "" {
		fmt.Fprintf(&b, `"OldImage": %s,`, r.old)
	}
	if r.new != "" {
		fmt.Fprintf(&b, `"NewImage": %s,`, r.new)
	}
	if r.old == "" && r.new == "" {
		view = "KEYS_ONLY"
	}
	fmt.Fprintf(&b, `
			"SequenceNumber": %q,
			"SizeBytes": 412,
			"StreamViewType": %q
		},
		"eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/app/stream/2026-11-01T00:00:00.000"
	}`, r.seq, view)
	return b.String()
}

// event decodes records through encoding/json, as the Lambda runtime does.
func event(t *testing.T, records ...rec) events.DynamoDBEvent {
	t.Helper()
	parts := make([]string, len(records))
	for i, r := range records {
		parts[i] = r.json()
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal([]byte(`{"Records": [`+strings.Join(parts, ",")+`]}`), &ev); err != nil {
		t.Fatalf("unmarshal event: %v", err)
	}
	return ev
}

// withAttrs returns image with attributes replaced or added; an empty value
// removes the attribute.
func withAttrs(t *testing.T, image string, attrs map[string]string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(image), &m); err != nil {
		t.Fatalf("image: %v", err)
	}
	for k, v := range attrs {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = json.RawMessage(v)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	return string(b)
}

// legacy is image as release v0.1.0 wrote it, in format version v (1 to
// 3): without userGen and credGen, which format 4 added.
func legacy(t *testing.T, image string, v int) string {
	t.Helper()
	return withAttrs(t, image, map[string]string{"v": fmt.Sprintf(`{"N": "%d"}`, v), "userGen": "", "credGen": ""})
}

// recorder is a cleanup function that records its calls and fails for the
// session IDs in fail.
type recorder struct {
	mu    sync.Mutex
	calls []ddbsession.Session
	fail  map[string]bool
}

func (c *recorder) cleanup(_ context.Context, s ddbsession.Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
	if c.fail[s.ID] {
		return errors.New("downstream unavailable")
	}
	return nil
}

func newHandler(t *testing.T, cfg ddbstream.Config) *ddbstream.Handler {
	t.Helper()
	h, err := ddbstream.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]ddbstream.Config{
		"no cleanup":                  {},
		"TTL attribute of the format": {Cleanup: (&recorder{}).cleanup, Layout: ddbsession.Layout{TTLAttribute: "sid"}},
	} {
		if _, err := ddbstream.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func newLogger() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func TestHandler(t *testing.T) {
	ttlDelete := func(image, seq string) rec {
		return rec{name: "REMOVE", identity: ttlIdentity, old: image, seq: seq}
	}
	second := func(t *testing.T) (string, ddbsession.Session) {
		s := wantSession
		s.ID = "fedcba9876543210fedcba9876543210"
		return withAttrs(t, sessionImage, map[string]string{"sid": `{"S": "` + s.ID + `"}`}), s
	}

	tests := []struct {
		name         string
		records      func(t *testing.T) []rec
		ttl          string   // Config.Layout.TTLAttribute
		fail         []string // session IDs whose cleanup fails
		wantCalls    []ddbsession.Session
		wantFailures []string // sequence numbers
		wantLog      string   // a substring of the log, if any
		wantNoLog    bool
	}{
		{
			name:      "TTL delete of a session",
			records:   func(*testing.T) []rec { return []rec{ttlDelete(sessionImage, "100")} },
			wantCalls: []ddbsession.Session{wantSession},
			wantNoLog: true,
		},
		{
			name: "TTL delete of a session in a hash-only table",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"sk": "", "userSK": "", "userAgent": ""}), "100")}
			},
			wantCalls: []ddbsession.Session{{
				ID: wantSession.ID, User: ddbsession.UserKey{PK: "USER#alice"},
				CreatedAt: wantSession.CreatedAt, RefreshedAt: wantSession.RefreshedAt, ExpiresAt: wantSession.ExpiresAt,
				AuthenticatedAt: wantSession.AuthenticatedAt, Methods: wantSession.Methods, Data: wantSession.Data,
			}},
		},
		{
			name: "custom TTL attribute",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"expiresAt": "", "ttl": `{"N": "1796044200"}`}), "100")}
			},
			ttl:       "ttl",
			wantCalls: []ddbsession.Session{wantSession},
			wantNoLog: true,
		},
		{
			name: "TTL attribute not where the option says",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"expiresAt": "", "ttl": `{"N": "1796044200"}`}), "100")}
			},
			wantLog: `no \"expiresAt\"`,
		},
		{
			name:    "application delete",
			records: func(*testing.T) []rec { return []rec{{name: "REMOVE", old: sessionImage, seq: "100"}} },
		},
		{
			name: "insert",
			records: func(*testing.T) []rec {
				return []rec{{name: "INSERT", identity: ttlIdentity, new: sessionImage, seq: "100"}}
			},
		},
		{
			name: "modify",
			records: func(t *testing.T) []rec {
				refreshed := withAttrs(t, sessionImage, map[string]string{"expiresAt": `{"N": "1796047800"}`})
				return []rec{{name: "MODIFY", identity: ttlIdentity, old: sessionImage, new: refreshed, seq: "100"}}
			},
		},
		{
			name:      "TTL delete of an index item",
			records:   func(*testing.T) []rec { return []rec{ttlDelete(indexImage, "100")} },
			wantNoLog: true,
		},
		{
			name:      "TTL delete of the app's own item",
			records:   func(*testing.T) []rec { return []rec{ttlDelete(foreignImage, "100")} },
			wantNoLog: true,
		},
		{
			name: "TTL delete of the app's own item without a kind",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, foreignImage, map[string]string{"kind": ""}), "100")}
			},
			wantNoLog: true,
		},
		{
			name: "another service principal",
			records: func(*testing.T) []rec {
				return []rec{{name: "REMOVE", identity: `{"type": "Service", "principalId": "glue.amazonaws.com"}`, old: sessionImage, seq: "100"}}
			},
		},
		{
			name: "not a service identity",
			records: func(*testing.T) []rec {
				return []rec{{name: "REMOVE", identity: `{"type": "User", "principalId": "dynamodb.amazonaws.com"}`, old: sessionImage, seq: "100"}}
			},
		},
		{
			name:    "TTL delete without an old image",
			records: func(*testing.T) []rec { return []rec{ttlDelete("", "100")} },
			wantLog: "without an old image",
		},
		{
			name: "device-bound session (format version 5)",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"v": `{"N": "5"}`}), "100")}
			},
			wantCalls: func() []ddbsession.Session {
				s := wantSession
				s.DeviceBound = true
				return []ddbsession.Session{s}
			}(),
		},
		// Sessions that release v0.1.0 wrote, which expire after an
		// upgrade: formats 1 to 3, without userGen and credGen.
		{
			name: "a session of v0.1.0 (format version 1)",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(legacy(t, sessionImage, 1), "100")}
			},
			wantCalls: []ddbsession.Session{wantSession},
		},
		{
			name: "a device-bound session of v0.1.0 (format version 2)",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(legacy(t, sessionImage, 2), "100")}
			},
			wantCalls: func() []ddbsession.Session {
				s := wantSession
				s.DeviceBound = true
				return []ddbsession.Session{s}
			}(),
		},
		{
			name: "malformed session item: unknown format version",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"v": `{"N": "8"}`}), "100")}
			},
			wantLog: "format 8 is not one",
		},
		{
			name: "malformed session item: format version 4 without userGen",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"userGen": ""}), "100")}
			},
			wantLog: `no \"userGen\"`,
		},
		{
			name: "a two-step login that expired waiting for its second factor (format version 6) is no session",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"v": `{"N": "6"}`, "attempts": `{"N": "2"}`}), "100")}
			},
			wantNoLog: true,
		},
		{
			name: "a two-step login of v0.1.0 (format version 3) is no session",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, legacy(t, sessionImage, 3), map[string]string{"attempts": `{"N": "2"}`}), "100")}
			},
			wantNoLog: true,
		},
		{
			name: "malformed session item: no session ID",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"sid": ""}), "100")}
			},
			wantLog: "malformed session item",
		},
		{
			name: "malformed session item: creation time of the wrong type",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"createdAt": `{"S": "1796040000250"}`}), "100")}
			},
			wantLog: "malformed session item",
		},
		{
			name: "malformed session item: fractional expiry",
			records: func(t *testing.T) []rec {
				return []rec{ttlDelete(withAttrs(t, sessionImage, map[string]string{"expiresAt": `{"N": "1796044200.5"}`}), "100")}
			},
			wantLog: "not an integer",
		},
		{
			name: "a failed cleanup is reported for its record only",
			records: func(t *testing.T) []rec {
				image2, _ := second(t)
				return []rec{
					ttlDelete(sessionImage, "100"),
					{name: "REMOVE", old: image2, seq: "150"},
					ttlDelete(image2, "200"),
					ttlDelete(indexImage, "250"),
					ttlDelete(withAttrs(t, sessionImage, map[string]string{"sid": `{"S": "00000000000000000000000000000003"}`}), "300"),
				}
			},
			fail: []string{"fedcba9876543210fedcba9876543210"},
			wantCalls: func() []ddbsession.Session {
				_, s2 := second(t)
				s3 := wantSession
				s3.ID = "00000000000000000000000000000003"
				return []ddbsession.Session{wantSession, s2, s3}
			}(),
			wantFailures: []string{"200"},
			wantLog:      "downstream unavailable",
		},
		{
			name: "several failed cleanups",
			records: func(t *testing.T) []rec {
				image2, _ := second(t)
				return []rec{ttlDelete(sessionImage, "100"), ttlDelete(image2, "200")}
			},
			fail: []string{wantSession.ID, "fedcba9876543210fedcba9876543210"},
			wantCalls: func() []ddbsession.Session {
				_, s2 := second(t)
				return []ddbsession.Session{wantSession, s2}
			}(),
			wantFailures: []string{"100", "200"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &recorder{fail: map[string]bool{}}
			for _, id := range tt.fail {
				c.fail[id] = true
			}
			logger, logs := newLogger()
			h := newHandler(t, ddbstream.Config{Cleanup: c.cleanup, Layout: ddbsession.Layout{TTLAttribute: tt.ttl}, Logger: logger})

			resp, err := h.Handle(context.Background(), event(t, tt.records(t)...))
			if err != nil {
				t.Fatalf("handler error: %v", err)
			}
			if diff := cmp.Diff(tt.wantCalls, c.calls, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cleanup calls (-want +got):\n%s", diff)
			}
			var failures []string
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			if diff := cmp.Diff(tt.wantFailures, failures, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("batch item failures (-want +got):\n%s", diff)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log does not mention %q:\n%s", tt.wantLog, logs)
			}
			if tt.wantNoLog && logs.Len() > 0 {
				t.Errorf("unexpected log:\n%s", logs)
			}
		})
	}
}

// TestHandlerResponseJSON checks the response that Lambda reads: failures
// by sequence number under the documented key names.
func TestHandlerResponseJSON(t *testing.T) {
	c := &recorder{fail: map[string]bool{wantSession.ID: true}}
	logger, _ := newLogger()
	h := newHandler(t, ddbstream.Config{Cleanup: c.cleanup, Logger: logger})
	resp, err := h.Handle(context.Background(), event(t, rec{name: "REMOVE", identity: ttlIdentity, old: sessionImage, seq: "4421584500000000017450439091"}))
	if err != nil {
		t.Fatalf("handler error: %v", err)
	}
	got, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"batchItemFailures":[{"itemIdentifier":"4421584500000000017450439091"}]}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("response JSON (-want +got):\n%s", diff)
	}
}

// TestHandlerDoneContext checks that once the invocation's context is done,
// sessions are reported as failures without calling cleanup, so that they
// are retried rather than lost.
func TestHandlerDoneContext(t *testing.T) {
	c := &recorder{}
	logger, _ := newLogger()
	h := newHandler(t, ddbstream.Config{Cleanup: c.cleanup, Logger: logger})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := h.Handle(ctx, event(t,
		rec{name: "REMOVE", identity: ttlIdentity, old: sessionImage, seq: "100"},
		rec{name: "REMOVE", identity: ttlIdentity, old: indexImage, seq: "200"},
	))
	if err != nil {
		t.Fatalf("handler error: %v", err)
	}
	if len(c.calls) != 0 {
		t.Errorf("cleanup called %d times with a done context", len(c.calls))
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: "100"}}
	if diff := cmp.Diff(want, resp.BatchItemFailures); diff != "" {
		t.Errorf("batch item failures (-want +got):\n%s", diff)
	}
}

func TestIsTTLDelete(t *testing.T) {
	tests := []struct {
		name string
		rec  rec
		want bool
	}{
		{"TTL delete", rec{name: "REMOVE", identity: ttlIdentity, old: sessionImage}, true},
		{"TTL delete, keys only", rec{name: "REMOVE", identity: ttlIdentity}, true},
		{"application delete", rec{name: "REMOVE", old: sessionImage}, false},
		{"insert by the service", rec{name: "INSERT", identity: ttlIdentity, new: sessionImage}, false},
		{"modify by the service", rec{name: "MODIFY", identity: ttlIdentity, old: sessionImage, new: sessionImage}, false},
		{"other principal", rec{name: "REMOVE", identity: `{"type": "Service", "principalId": "lambda.amazonaws.com"}`}, false},
		{"other identity type", rec{name: "REMOVE", identity: `{"type": "AssumedRole", "principalId": "dynamodb.amazonaws.com"}`}, false},
		{"empty identity", rec{name: "REMOVE", identity: `{}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rec.seq = "1"
			if got := ddbstream.IsTTLDelete(event(t, tt.rec).Records[0]); got != tt.want {
				t.Errorf("IsTTLDelete = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	image := func(t *testing.T, js string) map[string]events.DynamoDBAttributeValue {
		t.Helper()
		var m map[string]events.DynamoDBAttributeValue
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatalf("image: %v", err)
		}
		return m
	}
	tests := []struct {
		name    string
		image   func(t *testing.T) string
		want    ddbsession.Session
		wantErr error
	}{
		{"session", func(*testing.T) string { return sessionImage }, wantSession, nil},
		{"session of v0.1.0", func(t *testing.T) string { return legacy(t, sessionImage, 1) }, wantSession, nil},
		{"index item", func(*testing.T) string { return indexImage }, ddbsession.Session{}, ddbitem.ErrOtherKind},
		{"foreign item", func(*testing.T) string { return foreignImage }, ddbsession.Session{}, ddbitem.ErrOtherKind},
		{"empty image", func(*testing.T) string { return `{}` }, ddbsession.Session{}, ddbitem.ErrOtherKind},
		{"kind of the wrong type", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"kind": `{"SS": ["session"]}`})
		}, ddbsession.Session{}, ddbitem.ErrOtherKind},
		{"no version", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"v": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"version of the wrong type", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"v": `{"S": "1"}`})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"empty session ID", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"sid": `{"S": ""}`})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"no user", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"userPK": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"empty user", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"userPK": `{"S": ""}`})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"user SK of the wrong type", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"userSK": `{"N": "1"}`})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"no creation time", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"createdAt": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"no refresh time", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"refreshedAt": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"no expiry", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"expiresAt": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"refresh time of the wrong type", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"refreshedAt": `{"NULL": true}`})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"expiry of the wrong type", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"expiresAt": `{"S": "1796044200"}`})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"format 4 without userGen", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"userGen": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
		{"format 4 without credGen", func(t *testing.T) string {
			return withAttrs(t, sessionImage, map[string]string{"credGen": ""})
		}, ddbsession.Session{}, ddbitem.ErrMalformed},
	}
	h := newHandler(t, ddbstream.Config{Cleanup: (&recorder{}).cleanup})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.Decode(image(t, tt.image(t)))
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Decode error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}
