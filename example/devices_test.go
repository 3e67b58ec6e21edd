package main

import (
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

const chromeOnLinux = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"

func TestDeviceName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ userAgent, want string }{
		{chromeOnLinux, "Chrome 156 on Linux"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox 128 on Windows"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari 17 on iOS"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari 17 on macOS"},
		{"mytool/1.0", "mytool/1.0"}, // unknown to the parser: shown as it is
		{"", "Unknown device"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			if got := deviceName(tc.userAgent); got != tc.want {
				t.Errorf("deviceName(%q) = %q, want %q", tc.userAgent, got, tc.want)
			}
		})
	}
}

func TestSessionsListNamesDevices(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t)
	b := ta.browser(chromeOnLinux)
	b.signup("alice", "correct horse")
	cli := ta.apiClient(`mytool/1.0 "quoted" <b>`)
	cli.login("alice", "correct horse")

	page := b.get("/")
	for _, want := range []string{
		`<td class="agent" title="` + chromeOnLinux + `">Chrome 156 on Linux<span class="badge">this browser</span></td>`,
		// The raw string, escaped in the text and in the title alike.
		`<td class="agent" title="mytool/1.0 &#34;quoted&#34; &lt;b&gt;">mytool/1.0 &#34;quoted&#34; &lt;b&gt;</td>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the sessions list lacks\n\t%s\nbody:\n%s", want, page.body)
		}
	}
	// Neither session is device-bound: the page says nothing about it.
	if strings.Contains(page.body, "device-bound") {
		t.Errorf("the page calls a session device-bound, and none is:\n%s", page.body)
	}
	// The API keeps the raw string.
	if list := b.sessions(); len(list) != 2 || list[1].UserAgent != chromeOnLinux {
		t.Errorf("GET /api/sessions = %+v, want the raw user agents", list)
	}
}

// The sessions list shows where each session signed in and was last seen:
// behind a trusted proxy, the client its X-Forwarded-For names; from any
// other peer, the connection's address, whatever header it sends. The
// app's place lookup, if any, names the place.
func TestSessionsListShowsAddresses(t *testing.T) {
	t.Parallel()
	place := func(addr string) string {
		if addr == "203.0.113.5" {
			return "Lisbon, Portugal"
		}
		return ""
	}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		want    string
	}{
		// The test's client connects from loopback: with loopback trusted
		// it is the proxy, and the header names the client.
		{"behind a trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, "203.0.113.5"},
		{"a direct client's spoofed header", nil, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ta := newTestApp(t, func(c *appConfig) { c.TrustedProxies, c.Place = tc.trusted, place })
			b := ta.browser(chromeOnLinux)
			res := b.post("/signup", url.Values{"username": {"alice"}, "password": {"correct horse"}}, "X-Forwarded-For", "198.51.100.66, 203.0.113.5")
			if res.code != http.StatusSeeOther {
				t.Fatalf("signup: %d %s", res.code, res.body)
			}
			list := b.sessions()
			if len(list) != 1 || list[0].Address != tc.want || list[0].LastAddress != tc.want {
				t.Fatalf("GET /api/sessions = %+v, want address and last address %s", list, tc.want)
			}
			want := `<td class="where" data-label="Last seen at">` + tc.want
			if place(tc.want) != "" {
				want += " (Lisbon, Portugal)"
			}
			if page := b.get("/"); !strings.Contains(page.body, want+"</td>") {
				t.Errorf("the sessions list lacks\n\t%s</td>\nbody:\n%s", want, page.body)
			}
		})
	}
}

// The account page shows the user's security history, newest first: the
// sign-up's sign-in, a wrong password counted, another browser's sign-in
// and its sign-out, with devices and addresses.
func TestAccountPageShowsHistory(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, unlimited)
	b := ta.browser(chromeOnLinux)
	b.signup("alice", "correct horse")
	other := ta.browser("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15")
	if res := other.post("/login", url.Values{"username": {"alice"}, "password": {"wrong horse"}}); res.code == http.StatusSeeOther {
		t.Fatal("a wrong password signed in")
	}
	other.login("alice", "correct horse")
	other.mustPost(http.StatusSeeOther, "/logout", nil)

	page := b.get("/").body
	start := strings.Index(page, `<table id="history"`)
	if start < 0 {
		t.Fatalf("the account page has no history:\n%s", page)
	}
	history := page[start : start+strings.Index(page[start:], "</table>")]
	var order []int
	for _, want := range []string{
		`<td class="agent">Signed out</td>`,
		`<td class="agent">Signed in<span class="hint"> with password</span></td>`,
		`title="` + chromeOnLinux + `">Chrome 156 on Linux</td>`, // the sign-up's sign-in
		`<td class="agent">1 failed sign-in</td>`,                // counted at its hour's start
	} {
		i := strings.Index(history, want)
		if i < 0 {
			t.Errorf("the history lacks\n\t%s\nin:\n%s", want, history)
		}
		order = append(order, i)
	}
	if !slices.IsSorted(order) {
		t.Errorf("the history is not newest first (%v):\n%s", order, history)
	}
	if !strings.Contains(history, `data-label="Where">127.0.0.1</td>`) {
		t.Errorf("the history shows no address:\n%s", history)
	}
}
