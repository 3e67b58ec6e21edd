package ddbsession_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// secretForms are the forms in which a session cookie's secret could leak:
// the token (in either case), the digest that keys its item (base64url, as
// stored, and hex or standard base64, as a careless log might print it),
// the item's partition key, and the whole cookie value; and 20 of the
// token's 26 characters, a leak too.
func secretForms(cookieValue string) map[string]string {
	token, _, _ := strings.Cut(cookieValue, ".")
	sum := sha256.Sum256([]byte(token))
	return map[string]string{
		"the token":                token,
		"the token, lowercase":     strings.ToLower(token),
		"20 characters of it":      token[:20],
		"the token's hash":         base64.RawURLEncoding.EncodeToString(sum[:]),
		"the token's hash, hex":    hex.EncodeToString(sum[:]),
		"the token's hash, base64": base64.RawStdEncoding.EncodeToString(sum[:]),
		"the session item's key":   "SESSION#" + base64.RawURLEncoding.EncodeToString(sum[:]),
		"the whole cookie value":   cookieValue,
	}
}

// TestNoSecretInLogsOrErrorsUnderFaults runs the fault matrix with the
// Manager logging at debug level, and checks every log record, every
// returned error and every response body of every case for the case's
// session cookie in any of its secretForms, and for every session item key
// (a token's hash) that went over the wire in the case, including those of
// sessions that Login created and never got to hand out.
func TestNoSecretInLogsOrErrorsUnderFaults(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	levels := map[string]int{}
	runFaultMatrix(t, func(t *testing.T, c *faultCase) {
		mu.Lock()
		for _, level := range []string{"DEBUG", "INFO", "WARN", "ERROR"} {
			levels[level] += strings.Count(c.logs, "level="+level)
		}
		mu.Unlock()
		texts := map[string]string{"the log": c.logs, "the response body": c.out.body}
		if c.out.err != nil {
			texts["the error"] = c.out.err.Error()
		}
		secrets := secretForms(c.fx.cookie.Value)
		for i, key := range c.wire {
			secrets[fmt.Sprintf("session key %d on the wire", i)] = key
			secrets[fmt.Sprintf("token hash %d on the wire", i)] = strings.TrimPrefix(key, "SESSION#")
		}
		for where, text := range texts {
			for what, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("%s holds %s %q:\n%s", where, what, secret, text)
				}
			}
		}
	})
	// The check saw records at the levels where a leak would be: a client
	// that hung up logs at debug level, a store failure at error level.
	if levels["DEBUG"] == 0 || levels["ERROR"] == 0 {
		t.Errorf("log records by level %v: want debug and error records to check", levels)
	}
	t.Logf("log records checked, by level: %v", levels)
}
