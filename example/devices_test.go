package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

const chromeOnLinux = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"

// safariOnMac is a desktop Safari's User-Agent.
const safariOnMac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15"

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
// sign-up's sign-in, from a new device; a wrong password, counted; another
// browser's first sign-in, from a new device, and its sign-out; its second,
// whose device cookie outlived the logout, a plain sign-in. Each browser's
// page notes the other's new device, not its own session's, for a week.
func TestAccountPageShowsHistory(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, unlimited, func(c *appConfig) { c.Now, c.IdleTimeout = clock.Now, 2*newDeviceNotice })
	b := ta.browser(chromeOnLinux)
	b.signup("alice", "correct horse")
	other := ta.browser(safariOnMac)
	if res := other.post("/login", url.Values{"username": {"alice"}, "password": {"wrong horse"}}); res.code == http.StatusSeeOther {
		t.Fatal("a wrong password signed in")
	}
	notice := func(b *browser, want, not string) {
		t.Helper()
		notice := section(t, b.get("/").body, `<section id="new-devices"`, "</section>")
		if !strings.Contains(notice, "<li>"+want+" from 127.0.0.1, ") || strings.Contains(notice, not) || strings.Count(notice, "<li>") != 1 {
			t.Errorf("the new-device notice: want %s alone, got:\n%s", want, notice)
		}
	}
	for _, step := range []func(){
		func() { other.login("alice", "correct horse") },
		// The notice, on each browser: the other's first sign-in, not its own.
		func() { notice(other, "Chrome 156 on Linux", "Safari") },
		func() { notice(b, "Safari 18 on macOS", "Chrome") },
		func() { other.mustPost(http.StatusSeeOther, "/logout", nil) },
		func() { other.login("alice", "correct horse") },
		// Signed out and in again, it still knows its own sign-in.
		func() { notice(other, "Chrome 156 on Linux", "Safari") },
	} {
		clock.Advance(time.Second) // the history's order
		step()
	}

	page := b.get("/").body
	history := section(t, page, `<table id="history"`, "</table>")
	var order []int
	for _, want := range []string{
		`<td class="agent">Signed in<span class="hint"> with password</span></td>`,
		`title="` + safariOnMac + `">Safari 18 on macOS</td>`, // the second sign-in, from a known device
		`<td class="agent">Signed out</td>`,
		`<td class="agent">Signed in from a new device<span class="hint"> with password</span></td>`,
		`title="` + safariOnMac + `">Safari 18 on macOS</td>`,
		`<td class="agent">Signed in from a new device<span class="hint"> with password</span></td>`,
		`title="` + chromeOnLinux + `">Chrome 156 on Linux</td>`, // the sign-up's sign-in
		`<td class="agent">1 failed sign-in</td>`,                // counted at its hour's start
	} {
		from := 0
		if len(order) > 0 {
			from = order[len(order)-1] + 1
		}
		i := strings.Index(history[from:], want)
		if i < 0 {
			t.Fatalf("the history lacks, after the rows before it,\n\t%s\nin:\n%s", want, history)
		}
		order = append(order, from+i)
	}
	if !strings.Contains(history, `data-label="Where">127.0.0.1</td>`) {
		t.Errorf("the history shows no address:\n%s", history)
	}
	// A week on, the notice is gone; the history keeps the events.
	clock.Advance(newDeviceNotice)
	if page := b.get("/").body; strings.Contains(page, `id="new-devices"`) || !strings.Contains(page, "Signed in from a new device") {
		t.Errorf("a week on: want no notice and the history's events:\n%s", page)
	}
}

// section is the part of page from start to the first end after it.
func section(t *testing.T, page, start, end string) string {
	t.Helper()
	i := strings.Index(page, start)
	if i < 0 {
		t.Fatalf("the page has no %s:\n%s", start, page)
	}
	return page[i : i+strings.Index(page[i:], end)]
}

// With -new-device-code, a password alone signs in only on a device the
// account has used: from a new browser, an account without one-time codes
// is refused (403, counted as a failed sign-in in its history, which is how
// its user hears of it), and one with codes types its code, as always; a
// program, which has no device cookie, needs the code. Sign-up and the
// browsers the account knows are not asked.
func TestNewDeviceCode(t *testing.T) {
	t.Parallel()
	clock := ddbtest.NewClock(time.Now())
	ta := newTestApp(t, unlimited, func(c *appConfig) { c.Now, c.NewDeviceCode = clock.Now, true })
	home := ta.browser(chromeOnLinux)
	home.signup("alice", "correct horse") // no code: the account is new
	home.mustPost(http.StatusSeeOther, "/logout", nil)
	home.login("alice", "correct horse") // a device alice used

	away := ta.browser(safariOnMac)
	res := away.post("/login", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	if res.code != http.StatusForbidden || !strings.Contains(res.body, "This device is new to your account") || away.meStatus() == http.StatusOK {
		t.Fatalf("a password alone from a new browser: %d, want 403 and the reason, not signed in\n%s", res.code, res.body)
	}
	history, _, err := ta.app.sessions.History(context.Background(), userKey("alice"), "")
	i := slices.IndexFunc(history, func(e ddbsession.Event) bool { return e.Kind == ddbsession.EventSignInFailed })
	if err != nil || i < 0 || history[i].Count != 1 || history[i].UserAgent != safariOnMac {
		t.Errorf("alice's history after the refusal: %+v, %v; want a failed sign-in from the new browser", history, err)
	}
	if res := ta.apiClient("cli/1.0").request("POST", "/api/login", `{"username": "alice", "password": "correct horse"}`); res.code != http.StatusForbidden || !isAPIError(res.body) {
		t.Errorf("POST /api/login with a password alone: %d %s, want 403", res.code, res.body)
	}

	// A store that fails the device's read fails the sign-in closed.
	ta.faults.failNext("GetItem", func(in any) bool {
		return strings.HasPrefix(attrString(in.(*dynamodb.GetItemInput).Key["sk"]), "DEV#")
	})
	if res := home.post("/login", url.Values{"username": {"alice"}, "password": {"correct horse"}}); res.code != http.StatusServiceUnavailable {
		t.Errorf("a login whose device read failed: %d, want 503\n%s", res.code, res.body)
	}

	// With one-time codes, the new browser signs in with the code.
	secret := home.enrolTOTP(clock.Now())
	clock.Advance(30 * time.Second)
	if res := away.loginTwoSteps("alice", "correct horse", codeAt(t, secret, clock.Now())); res.code != http.StatusSeeOther || away.meStatus() != http.StatusOK {
		t.Errorf("password and code from the new browser: %d, want signed in\n%s", res.code, res.body)
	}
	clock.Advance(30 * time.Second)
	body, _ := json.Marshal(loginRequest{Username: "alice", Password: "correct horse", Code: codeAt(t, secret, clock.Now())})
	if res := ta.apiClient("cli/1.0").request("POST", "/api/login", string(body)); res.code != http.StatusOK {
		t.Errorf("POST /api/login with password and code: %d %s, want 200", res.code, res.body)
	}
}
