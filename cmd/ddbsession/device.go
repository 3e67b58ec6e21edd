package main

import "strings"

// This file names a session's device for the DEVICE column: a browser and
// its system, read from the User-Agent the session stored, as a person
// would say them ("Firefox on Linux"). -json keeps the User-Agent as it is.

// uaBrowsers and uaSystems are the tokens that name a browser or a
// system, with the name to show, in the order
// they are looked for: a browser's User-Agent names the engines it is
// compatible with too (Edge's says Chrome and Safari), so the most
// particular comes first.
var (
	uaBrowsers = [][2]string{
		{"Edg", "Edge"}, {"OPR/", "Opera"}, {"SamsungBrowser/", "Samsung Internet"}, {"Firefox/", "Firefox"},
		{"FxiOS/", "Firefox"}, {"CriOS/", "Chrome"}, {"Chromium/", "Chromium"}, {"Chrome/", "Chrome"}, {"Safari/", "Safari"},
	}
	uaSystems = [][2]string{
		{"Windows", "Windows"}, {"iPhone", "iOS"}, {"iPad", "iPadOS"}, {"Android", "Android"}, {"CrOS", "ChromeOS"},
		{"Macintosh", "macOS"}, {"Mac OS X", "macOS"}, {"Linux", "Linux"},
	}
)

// deviceName is a readable name of the device that sent userAgent: its
// browser, or else its first product ("curl/8.14.1"), and its system where
// known ("Firefox on Linux", "Safari on iOS"); "-" for none.
func deviceName(userAgent string) string {
	find := func(names [][2]string) string {
		for _, n := range names {
			if strings.Contains(userAgent, n[0]) {
				return n[1]
			}
		}
		return ""
	}
	browser, system := "", find(uaSystems)
	if strings.HasPrefix(userAgent, "Mozilla/") { // what browsers send; a tool's product may say "Chrome/"
		browser = find(uaBrowsers)
	}
	name := browser
	if name == "" {
		name, _, _ = strings.Cut(strings.TrimSpace(userAgent), " ")
	}
	switch {
	case name == "":
		return "-"
	case system != "":
		return name + " on " + system
	}
	return name
}
