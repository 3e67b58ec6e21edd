package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
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
				if res := ta.browser("other").post("/signup", url.Values{"username": {v}, "password": {"another password"}}); res.code != http.StatusConflict {
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

func TestMixedScripts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want []string // nil: one script
	}{
		{"alice", nil},
		{"alıce", nil}, // a dotless ı is Latin: the skeleton catches it
		{"jos\u00e9", nil},
		{"bob.smith+1@example.com", nil},
		{"ελένη", nil},
		{"аннa", []string{"Cyrillic", "Latin"}}, // the last letter is Latin
		{"\u0430lice", []string{"Cyrillic", "Latin"}},
		{"p\u0430yp\u0430l", []string{"Latin", "Cyrillic"}},
		{"alice\u03b1", []string{"Latin", "Greek"}},
		{"アリス太郎", nil}, // Katakana and Han write Japanese
		{"김철수한", nil},  // Hangul
		{"한국漢字", nil},  // Hangul and Han write Korean
		{"アリス한국", []string{"Katakana", "Hangul"}},
		{"abc漢字", []string{"Latin", "Han"}},
		{"42", nil},
	} {
		if got := mixedScripts(tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("mixedScripts(%+q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLookAlikeUsernames signs up alice, then names a reader could take
// for hers: mixed scripts are refused as such, names of one script whose
// skeleton is alice's as look-alikes. Other names, and alice herself, are
// unaffected.
func TestLookAlikeUsernames(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, unlimited)
	ta.browser("alice").signup("alice", "correct horse")

	for _, tc := range []struct {
		name, username string
		want           int
		message        string // part of the page's message
	}{
		{"Cyrillic а", "\u0430lice", http.StatusBadRequest, "username mixes Cyrillic and Latin letters, which lets a name pass for another: use the letters of one script"},
		{"Greek ο", "b\u03bfb", http.StatusBadRequest, "username mixes Latin and Greek letters"},
		{"dotless ı", "al\u0131ce", http.StatusConflict, "That username looks like one that is taken: some letters look alike (such as l and 1, or i and ı). Choose another."},
		{"digit one", "a1ice", http.StatusConflict, "looks like one that is taken"},
		{"the name itself", "Alice", http.StatusConflict, "That username is taken."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ta.browser("other").post("/signup", creds(tc.username, "another password"))
			if msg := pageMessage(t, res.body); res.code != tc.want || !strings.Contains(msg, tc.message) {
				t.Errorf("sign-up as %+q: %d %q, want %d and a message with %q", tc.username, res.code, msg, tc.want, tc.message)
			}
		})
	}
	ta.browser("bob").signup("bob", "bob's password")
	ta.browser("alice again").login("alice", "correct horse")
	// A look-alike of a name that never signed up is no look-alike.
	ta.browser("carol").signup("car\u0131", "carol's password")
}

// TestSignupAfterFailedCreateUser fails a sign-up once its name's
// skeleton is claimed: the claim is the name's, so the same name signs up
// on the next try, and a look-alike still cannot.
func TestSignupAfterFailedCreateUser(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	ta.faults.failNext("PutItem", putsPK("USER#"))
	if res := ta.browser("carol").post("/signup", creds("carol", "carol's password")); res.code != http.StatusServiceUnavailable {
		t.Fatalf("sign-up whose user item could not be written: %d, want 503", res.code)
	}
	if !strings.Contains(ta.logs.String(), `op="create user"`) {
		t.Errorf("the failed CreateUser was not logged:\n%s", ta.logs)
	}
	ta.browser("carol").signup("carol", "carol's password")
	if res := ta.browser("other").post("/signup", creds("caro1", "another password")); res.code != http.StatusConflict {
		t.Errorf("sign-up as a look-alike of carol: %d, want 409", res.code)
	}
}

// TestLookAlikeSignupsRacing holds one sign-up right after it claimed its
// name's skeleton, before it creates the user, and lets a look-alike sign
// up on another instance meanwhile: only one of the two may get an
// account. Then the same race is left to chance, round after round.
func TestLookAlikeSignupsRacing(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, unlimited)
	second := ta.anotherInstance(unlimited)

	pause := ta.faults.pauseAfter("PutItem", putsPK(skeletonPrefix))
	defer pause.release()
	done := make(chan response, 1)
	go func() {
		res, err := ta.browser("first").postForm(context.Background(), ta.srv.URL, "/signup", creds("alice", "correct horse"))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	pause.waitReached(t)
	if res := second.browser("second").post("/signup", creds("al\u0131ce", "another password")); res.code != http.StatusConflict {
		t.Errorf("a look-alike signing up while alice's sign-up is held: %d, want 409", res.code)
	}
	pause.release()
	if res := <-done; res.code != http.StatusSeeOther {
		t.Errorf("the held sign-up: %d, want 303", res.code)
	}

	instances := []*testApp{ta, second}
	for round := range 4 {
		codes := make([]int, 2)
		var wg sync.WaitGroup
		// Two ones look like two ls: one skeleton.
		for i, name := range []string{fmt.Sprintf("bi11%d", round), fmt.Sprintf("bill%d", round)} {
			wg.Go(func() {
				res, err := instances[i].browser(name).postForm(context.Background(), instances[i].srv.URL, "/signup", creds(name, "a password"))
				if err != nil {
					t.Error(err)
				}
				codes[i] = res.code
			})
		}
		wg.Wait()
		if !slices.Equal(codes, []int{http.StatusSeeOther, http.StatusConflict}) && !slices.Equal(codes, []int{http.StatusConflict, http.StatusSeeOther}) {
			t.Errorf("round %d: two look-alikes signing up at once on two instances: %v, want one 303 and one 409", round, codes)
		}
	}
}
