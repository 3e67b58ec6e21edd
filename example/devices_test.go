package main

import (
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
