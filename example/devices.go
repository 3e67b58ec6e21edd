package main

import (
	"sync"

	"github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"
)

// uaParser is built on first use: it loads the library's table of user
// agents into a trie, work that only the sessions list needs.
var uaParser = sync.OnceValue(useragent.NewParser)

// deviceName is how the sessions list names a session's device, from its
// User-Agent: "Chrome 156 on Linux". A client the parser does not know,
// neither its browser nor its system (a script's "mytool/1.0"), is shown by
// its User-Agent as it is, which names it better than "unknown" would.
func deviceName(userAgent string) string {
	if userAgent == "" {
		return "Unknown device"
	}
	ua := uaParser().Parse(userAgent)
	browser, os := string(ua.Browser()), osName(ua.OS())
	if browser != "" {
		if v := ua.BrowserVersionMajor(); v != "" {
			browser += " " + v
		}
	}
	switch {
	case browser != "" && os != "":
		return browser + " on " + os
	case browser != "":
		return browser
	case os != "":
		return "A browser on " + os
	}
	return userAgent
}

// osName spells the parser's system names the way their makers do.
func osName(os agents.OS) string {
	switch os {
	case agents.OSMacOS:
		return "macOS"
	case agents.OSIOS:
		return "iOS"
	}
	return string(os)
}
