package ddbtest_test

import (
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestCheckEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, endpoint string
		want           string // a part of the error, or "" for none
	}{
		{"dynalite on loopback", "http://127.0.0.1:8000", ""},
		{"localhost", "http://localhost:8000", ""},
		{"IPv6 loopback", "http://[::1]:8000", ""},
		{"a private engine over TLS", "https://dynamodb.internal.example:8443", ""},
		{"AWS name as userinfo only", "http://dynamodb.us-east-1.amazonaws.com@127.0.0.1:8000", ""},
		{"AWS name inside another domain", "http://dynamodb.us-east-1.amazonaws.com.example.test", ""},
		{"a domain merely ending alike", "http://notamazonaws.com", ""},

		{"DynamoDB", "https://dynamodb.us-east-1.amazonaws.com", "AWS endpoint"},
		{"DynamoDB over http with a port", "http://dynamodb.eu-west-1.amazonaws.com:80", "AWS endpoint"},
		{"upper case and a trailing dot", "HTTPS://DYNAMODB.US-EAST-1.AMAZONAWS.COM.", "AWS endpoint"},
		{"the bare domain", "https://amazonaws.com", "AWS endpoint"},
		{"China", "https://dynamodb.cn-north-1.amazonaws.com.cn", "AWS endpoint"},
		{"dual-stack", "https://dynamodb.us-east-1.api.aws", "AWS endpoint"},
		{"FIPS", "https://dynamodb-fips.us-gov-west-1.amazonaws.com", "AWS endpoint"},
		{"European Sovereign Cloud", "https://dynamodb.eusc-de-east-1.amazonaws.eu", "AWS endpoint"},
		{"loopback as userinfo, AWS as host", "http://127.0.0.1@dynamodb.us-east-1.amazonaws.com", "AWS endpoint"},
		{"account-based endpoint", "https://123456789012.ddb.us-east-1.amazonaws.com", "AWS endpoint"},

		{"unset", "", "not an http:// or https:// URL"},
		{"no scheme", "localhost:8000", "not an http:// or https:// URL"},
		{"a bare AWS host", "dynamodb.us-east-1.amazonaws.com", "not an http:// or https:// URL"},
		{"another scheme", "ftp://127.0.0.1:8000", "not an http:// or https:// URL"},
		{"escaped dots", "http://dynamodb%2Eus-east-1%2Eamazonaws%2Ecom", "not an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ddbtest.CheckEndpoint(tc.endpoint)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckEndpoint(%q) = %v, want nil", tc.endpoint, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckEndpoint(%q) = %v, want an error saying %q", tc.endpoint, err, tc.want)
			}
		})
	}
}
