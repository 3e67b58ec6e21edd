package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNewPasswordError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, password string
		message        string // part of the error; "" for none
	}{
		{"one character", "x", "password must be at least 8 characters long (it has 1)"},
		{"seven characters", "abcdefg", "(it has 7)"},
		{"eight characters", "abcdefgh", ""},
		{"no composition rules", "tangerine pelican", ""},
		{"a 64-character passphrase", strings.Repeat("ox ", 21) + "x", ""},
		{"a 1 KiB passphrase", strings.Repeat("long ", 204) + "pass", ""},
		{"over 1 KiB", strings.Repeat("x", maxPassword+1), "longer than 1024 bytes"},
		// Code points once normalized, not bytes: each é is one.
		{"eight é, precomposed", strings.Repeat("\u00e9", 8), ""},
		{"seven é, decomposed", strings.Repeat("e\u0301", 7), "(it has 7)"},
		{"eight emoji", strings.Repeat("\U0001F600", 8), ""},
		{"common", "password", "is one of the most common passwords, which are guessed first: choose another"},
		{"common, other case", "PassWord1", "most common"},
		{"common, fullwidth", "ｐａｓｓｗｏｒｄ", "most common"},
		{"common, long", "qwertyuiop", "most common"},
		{"the username", "aliceliddell", "must not be your username"},
		{"the username, upper case", "AliceLiddell", "must not be your username"},
		{"empty", "", "password is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := newPasswordError("password", tc.password, "aliceliddell")
			switch {
			case tc.message == "" && err != nil:
				t.Errorf("newPasswordError(%q): %v, want none", tc.password, err)
			case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
				t.Errorf("newPasswordError(%q): %v, want one that says %q", tc.password, err, tc.message)
			}
		})
	}
}

// TestCommonPasswordsFile checks the shipped list: 10,000 passwords, each
// of them long enough to pass the length rule (shorter ones would never be
// looked up), in the folded form they are compared in, none twice.
func TestCommonPasswordsFile(t *testing.T) {
	t.Parallel()
	list := commonPasswords()
	if len(list) != 10_000 {
		t.Errorf("%d common passwords, want 10,000", len(list))
	}
	var lines int
	for line := range strings.Lines(commonPasswordsFile) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		lines++
		if utf8.RuneCountInString(line) < minPassword || line != strings.ToLower(line) || strings.TrimSpace(line) != line {
			t.Errorf("list entry %q: want %d characters or more, lower case, no surrounding space", line, minPassword)
		}
	}
	if lines != len(list) {
		t.Errorf("%d entries for %d passwords: some are there twice", lines, len(list))
	}
}

// TestNewPasswordRules runs the rules through the forms: sign-up and the
// password change refuse a short, common or username password with a
// message that says so, and take a long passphrase.
func TestNewPasswordRules(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, unlimited)
	for _, tc := range []struct {
		username, password string
		want               int
		message            string
	}{
		{"bob", "x", http.StatusBadRequest, "password must be at least 8 characters long (it has 1)"},
		{"bob", "iloveyou", http.StatusBadRequest, "password is one of the most common passwords"},
		{"bobthebuilder", "BobTheBuilder", http.StatusBadRequest, "password must not be your username"},
		{"bob", strings.Repeat("a long passphrase ", 4), http.StatusSeeOther, ""},
	} {
		res := ta.browser("B").post("/signup", creds(tc.username, tc.password))
		if msg := pageMessage(t, res.body); res.code != tc.want || !strings.Contains(msg, tc.message) {
			t.Errorf("sign-up as %s with %q: %d %q, want %d and a message with %q", tc.username, tc.password, res.code, msg, tc.want, tc.message)
		}
	}

	owner := ta.browser("owner")
	owner.signup("carol", "correct horse")
	for _, tc := range []struct {
		next, message string
	}{
		{"short", "new password must be at least 8 characters long (it has 5)"},
		{"sunshine", "new password is one of the most common passwords"},
		{"Carol", "(it has 5)"},
		{"carolcarol", ""}, // not the username itself
	} {
		res := owner.post("/password", url.Values{"current": {"correct horse"}, "new": {tc.next}})
		if tc.message == "" {
			if res.code != http.StatusSeeOther {
				t.Errorf("password change to %q: %d %q, want 303", tc.next, res.code, pageMessage(t, res.body))
			}
			continue
		}
		if msg := pageMessage(t, res.body); res.code != http.StatusBadRequest || !strings.Contains(msg, tc.message) {
			t.Errorf("password change to %q: %d %q, want 400 and a message with %q", tc.next, res.code, msg, tc.message)
		}
	}
	// The old rules still hold for logins: an existing password is only
	// checked against its hash.
	ta.browser("C").login("carol", "carolcarol")
}
