package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/secure/precis"
)

// normalizeUsername returns the one form of a username that the app
// stores, keys the user item on and rate-limits by, or a message fit for the
// user. Without it, "josé" typed on a Mac (decomposed) and on Windows
// (precomposed), fullwidth "ａｌｉｃｅ", "alic\u200be" with a zero-width
// space and "alice " would each be an account of their own: look-alikes of
// one user, and a way around a limit per username.
//
// It trims surrounding white space, then applies the PRECIS profile
// UsernameCaseMapped (RFC 8265): width folding, lower case, NFC, and the
// IdentifierClass, which refuses spaces, control and format characters
// (zero-width and bidi controls among them), symbols and emoji.
// UsernameCaseMapped rather than UsernameCasePreserved, because "Alice" and
// "alice" should not be two people either, and the app has no display name
// that would need the case kept; a user sees the name as stored.
func normalizeUsername(username string) (string, error) {
	username = strings.TrimSpace(username)
	switch {
	case username == "":
		return "", errors.New("username is required")
	case !utf8.ValidString(username):
		return "", errors.New("username must be text (UTF-8)")
	}
	name, err := precis.UsernameCaseMapped.String(username)
	switch {
	case err != nil:
		return "", errors.New("username may hold letters, digits and ASCII punctuation, but no spaces, symbols, control or invisible characters")
	case len(name) > maxUsername:
		return "", fmt.Errorf("username is longer than %d bytes", maxUsername)
	}
	return name, nil
}

// PRECIS makes "ALICE", "ａｌｉｃｅ" and "alice" one name, but "аlice" (with
// a Cyrillic а) and "alıce" (with a dotless ı) stay names of their own,
// which a reader cannot tell from alice. Sign-up refuses both kinds, as
// Unicode Technical Standard #39 describes them:
//
//   - a name whose letters come from scripts that are not written together,
//     as in "аlice" (mixedScripts);
//   - a name that looks like one already taken: two names look alike when
//     their UTS #39 skeletons, which map each character to the one it is
//     mistaken for, are equal. "alıce", "a1ice" and "alice" share the
//     skeleton "alice". A sign-up claims its name's skeleton in an item of
//     its own before it creates the user (users.claimSkeleton).
//
// These rules are for new names only: a user who has a name keeps logging
// in with it.

// newUsernameError returns a message fit for the user if username, as
// normalizeUsername returns it, may not be signed up, or nil.
func newUsernameError(username string) error {
	if scripts := mixedScripts(username); scripts != nil {
		return fmt.Errorf("username mixes %s letters, which lets a name pass for another: use the letters of one script", joinAnd(scripts))
	}
	return nil
}

// skeleton is username's UTS #39 skeleton, from the library's copy of the
// Unicode data (confusables.txt). A later copy may map more characters, so
// the skeletons stored in the table would need computing anew after an
// upgrade that changes them.
func skeleton(username string) string { return confusables.Skeleton(username) }

// augmentedScripts are UTS #39's augmented script sets for the scripts
// that are written together: Han with Hiragana and Katakana in Japanese,
// with Hangul in Korean, with Bopomofo in Chinese. Every other script is a
// set of its own.
var augmentedScripts = map[string][]string{
	"Han":      {"Han", "Japanese", "Korean", "Chinese"},
	"Hiragana": {"Hiragana", "Japanese"},
	"Katakana": {"Katakana", "Japanese"},
	"Hangul":   {"Hangul", "Korean"},
	"Bopomofo": {"Bopomofo", "Chinese"},
}

// mixedScripts returns the scripts of s's letters, in the order they
// appear, if no one script (or augmented set) covers them all: UTS #39's
// mixed-script detection, with each character's Script property (Go's
// unicode package has no Script_Extensions). Characters of the Common and
// Inherited scripts, such as digits, punctuation and combining marks, go
// with any. It returns nil for a single-script s.
func mixedScripts(s string) []string {
	var seen []string
	var resolved []string // nil until a script is seen
	for _, r := range s {
		script := scriptOf(r)
		if script == "" || script == "Common" || script == "Inherited" || slices.Contains(seen, script) {
			continue
		}
		seen = append(seen, script)
		set, ok := augmentedScripts[script]
		if !ok {
			set = []string{script}
		}
		if resolved == nil {
			resolved = slices.Clone(set)
			continue
		}
		resolved = slices.DeleteFunc(resolved, func(s string) bool { return !slices.Contains(set, s) })
	}
	if resolved != nil && len(resolved) == 0 {
		return seen
	}
	return nil
}

func scriptOf(r rune) string {
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return ""
}

// joinAnd joins names as a sentence lists them: "A", "A and B", "A, B and C".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
