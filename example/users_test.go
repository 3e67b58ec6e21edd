package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestNormalizeUsername(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string // want "" means refused
	}{
		{"ASCII", "alice", "alice"},
		{"upper case", "ALICE", "alice"},
		{"surrounding spaces", "  alice \t", "alice"},
		{"trailing no-break space", "alice\u00a0", "alice"},
		{"fullwidth", "ａｌｉｃｅ", "alice"},
		{"NFC", "jos\u00e9", "jos\u00e9"},
		{"NFD", "jose\u0301", "jos\u00e9"},
		{"ASCII punctuation", "bob.smith+test@example.com", "bob.smith+test@example.com"},
		{"zero-width space", "alic\u200be", ""},
		{"zero-width joiner", "alic\u200de", ""},
		{"soft hyphen", "alic\u00ade", ""},
		{"bidi override", "\u202eecila", ""},
		{"inner space", "alice smith", ""},
		{"control character", "alice\x00", ""},
		{"emoji", "alice\U0001F600", ""},
		{"empty", "", ""},
		{"spaces only", "   ", ""},
		{"not UTF-8", "alice\xff", ""},
		{"64 bytes", strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"65 bytes", strings.Repeat("a", 65), ""},
		// Width folding must not let a name past the limit: 64 fullwidth
		// letters are 192 bytes, but 64 once folded.
		{"64 fullwidth letters", strings.Repeat("ａ", 64), strings.Repeat("a", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalizeUsername(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Errorf("normalizeUsername(%+q) = %+q, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("normalizeUsername(%+q) = %+q, %v; want %+q", tc.in, got, err, tc.want)
			}
			// Normal forms are stable: storing and looking up agree.
			if again, err := normalizeUsername(got); err != nil || again != got {
				t.Errorf("normalizeUsername(%+q) = %+q, %v; not idempotent", got, again, err)
			}
		})
	}
}

// TestUsernameVariantsAreOneAccount signs up through the app with each
// spelling of one name: the first creates the account, every variant is
// then taken and logs into it, and invisible characters are refused.
func TestUsernameVariantsAreOneAccount(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	for _, tc := range []struct {
		account  string // as signed up, NFC
		variants []string
	}{
		{"jos\u00e9", []string{"jose\u0301", "JOS\u00c9", " jos\u00e9 "}},
		{"alice", []string{"ａｌｉｃｅ", "alice ", "Alice", "ALICE\t"}},
	} {
		t.Run(tc.account, func(t *testing.T) {
			owner := ta.browser("owner")
			owner.signup(tc.account, "correct horse")
			for _, v := range tc.variants {
				if res := ta.browser("other").post("/signup", url.Values{"username": {v}, "password": {"another"}}); res.code != http.StatusConflict {
					t.Errorf("sign-up as %+q after %+q: %d, want 409 (taken)", v, tc.account, res.code)
				}
				b := ta.browser("variant")
				b.login(v, "correct horse")
				if res := b.get("/api/me"); !strings.Contains(res.body, `"username":"`+tc.account+`"`) {
					t.Errorf("login as %+q: /api/me %d %s, want %+q", v, res.code, res.body, tc.account)
				}
			}
		})
	}
	for _, refused := range []string{"alic\u200be", "al\u202eice", "alice\u2060"} {
		if res := ta.browser("other").post("/signup", url.Values{"username": {refused}, "password": {"pw"}}); res.code != http.StatusBadRequest {
			t.Errorf("sign-up as %+q: %d, want 400", refused, res.code)
		}
		if res := ta.browser("other").post("/login", url.Values{"username": {refused}, "password": {"correct horse"}}); res.code != http.StatusBadRequest {
			t.Errorf("login as %+q: %d, want 400", refused, res.code)
		}
	}
}
