package main

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"

	"github.com/ddbsession/ddbsession"
)

// This file names the devices sessions sign in from, and checks a new one:
// ddbsession's Cookie.RememberDevices recognises each browser a user signs
// in from, and records a sign-in from a new one in the history as
// EventNewDevice, which the account page shows (newDeviceNotice).

// errNewDevice is a right password from a device new to an account that
// has no one-time codes, with appConfig.NewDeviceCode: the sign-in needs
// a second factor the account lacks. Counted as a failed sign-in in the
// history, which is how the account's user hears that someone else knows
// the password.
var errNewDevice = errors.New("a password alone from a device new to the account")

// newDeviceMessage is the answer to errNewDevice.
const newDeviceMessage = "This device is new to your account, and a password alone does not sign in a new device. " +
	"Sign in with a passkey, or set up one-time codes from a device you have signed in on before."

// secondFactorFor reports whether a password sign-in of user from r must
// show a second factor: with appConfig.NewDeviceCode, from a browser the
// user has not signed in from, or from a program (browser false), which
// has no device cookie. One read, for a browser with a device cookie.
func (a *app) secondFactorFor(r *http.Request, user ddbsession.UserKey, browser bool) (bool, error) {
	if !a.newDeviceCode || !browser {
		return a.newDeviceCode, nil
	}
	known, err := a.sessions.KnownDevice(r, user)
	return !known, err
}

// newDeviceNotice is how long the account page shows a sign-in from a new
// device, on every browser of the account but that one.
const newDeviceNotice = 7 * 24 * time.Hour

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
