package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/pquerna/otp/totp"
)

// rfcSecret is RFC 6238's SHA-1 test secret, "12345678901234567890", in
// base32.
const rfcSecret totpSecret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"

// TestCodeStep checks codes against RFC 6238's SHA-1 test vector (94287082
// at 59 s, whose last six digits are the six-digit code), and the window of
// a step either side.
func TestCodeStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		code string
		at   int64 // Unix seconds
		step int64
		ok   bool
	}{
		{"the RFC's code at its time", "287082", 59, 1, true},
		{"at the start of its step", "287082", 30, 1, true},
		{"a step later", "287082", 89, 1, true},
		{"a step earlier", "287082", 0, 1, true},
		{"two steps later", "287082", 90, 0, false},
		{"another code", "287083", 59, 0, false},
		{"the RFC's code at 1111111109 s", "081804", 1111111109, 1111111109 / 30, true},
	} {
		step, ok := codeStep(rfcSecret, tc.code, time.Unix(tc.at, 0))
		if step != tc.step || ok != tc.ok {
			t.Errorf("%s: codeStep(%q at %d s) = %d, %v; want %d, %v", tc.name, tc.code, tc.at, step, ok, tc.step, tc.ok)
		}
	}
}

func TestNormalizeCode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"123456": "123456", "123 456": "123456", " 123456 ": "123456"} {
		if got, err := normalizeCode(in); got != want || err != nil {
			t.Errorf("normalizeCode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "12345", "1234567", "12345a", "١٢٣٤٥٦", "123\t456"} {
		if got, err := normalizeCode(in); err == nil {
			t.Errorf("normalizeCode(%q) = %q, want an error", in, got)
		}
	}
}

// TestUserPrintsNoTOTPSecret prints a User with one-time codes every way
// the app could by mistake, as TestUserPrintsNoHash does with the hash.
func TestUserPrintsNoTOTPSecret(t *testing.T) {
	t.Parallel()
	u := User{Username: "alice", TOTPSecret: rfcSecret, TOTPPending: "JBSWY3DPEHPK3PXP", TOTPLastStep: 1}
	var out bytes.Buffer
	fmt.Fprintf(&out, "%v %+v %#v %s %q %x|", u, u, u, u.TOTPSecret, u.TOTPPending, u.TOTPSecret)
	js, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(js)
	if err := template.Must(template.New("").Parse("{{.}} {{.TOTPSecret}} {{.TOTPPending}}|")).Execute(&out, u); err != nil {
		t.Fatal(err)
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("text", "user", u, "secret", u.TOTPSecret)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("json", "user", u, "secret", u.TOTPSecret)
	if strings.Contains(out.String(), string(rfcSecret)) || strings.Contains(out.String(), "JBSWY3DPEHPK3PXP") {
		t.Errorf("a one-time-code secret was printed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "alice") || !strings.Contains(out.String(), "[redacted]") {
		t.Errorf("want the username and [redacted] printed:\n%s", out.String())
	}
}

// codeAt is secret's code at when, as an authenticator app shows it.
func codeAt(t *testing.T, secret totpSecret, when time.Time) string {
	t.Helper()
	code, err := totp.GenerateCode(string(secret), when)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// userItemOf reads username's whole user item.
func (ta *testApp) userItemOf(username string) userItem {
	ta.t.Helper()
	out, err := ta.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &ta.table, Key: dynamoKey(userKey(username)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		ta.t.Fatal(err)
	}
	var item userItem
	if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
		ta.t.Fatal(err)
	}
	return item
}
