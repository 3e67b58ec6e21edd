package main

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A password a user chooses, at sign-up or as the new password of a
// change, follows NIST SP 800-63B-4 (3.1.1.2):
//
//   - at least minPassword characters, counted as Unicode code points once
//     normalized to NFKC, so that an "é" typed as e and a combining accent
//     counts once, as it shows;
//   - passphrases welcome, up to maxPassword bytes: 1 KiB, far more than
//     the 64 characters the guideline asks to allow;
//   - no composition rules ("a digit and a capital"): they make passwords
//     more predictable, not harder to guess;
//   - not one of the most common passwords, nor the username, which is
//     what a guesser tries first; compared regardless of case, since
//     "Password1" is guessed as early as "password1".
//
// Logins check none of this: an existing password is checked only against
// its hash.

// minPassword is SP 800-63B-4's minimum for a password that is one factor
// of several. For a password that is the only factor, as in this example,
// the guideline asks for 15: raise it before relying on passwords alone.
const minPassword = 8

// commonPasswordsFile is the list of common passwords, one a line; see its
// header for where it comes from.
//
//go:embed common-passwords.txt
var commonPasswordsFile string

// commonPasswords is the list as a set, made on first use.
var commonPasswords = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	for line := range strings.Lines(commonPasswordsFile) {
		if line = strings.TrimSuffix(line, "\n"); line != "" && !strings.HasPrefix(line, "#") {
			set[line] = true
		}
	}
	return set
})

// newPasswordError returns a message fit for the user if password may not
// be chosen by username, or nil. field names the form's field.
func newPasswordError(field, password, username string) error {
	if err := validatePassword(field, password); err != nil {
		return err
	}
	normalized := norm.NFKC.String(password)
	folded := strings.ToLower(normalized)
	switch n := utf8.RuneCountInString(normalized); {
	case n < minPassword:
		return fmt.Errorf("%s must be at least %d characters long (it has %d); a few words make a good one", field, minPassword, n)
	case commonPasswords()[folded]:
		return fmt.Errorf("%s is one of the most common passwords, which are guessed first: choose another", field)
	case username != "" && folded == username:
		return fmt.Errorf("%s must not be your username", field)
	}
	return nil
}
