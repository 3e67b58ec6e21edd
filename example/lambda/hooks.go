//go:build !emulatortest

package main

import "time"

// now is the clock of the sessions and of the limits.
var now = time.Now

// testHooks changes nothing: the hooks of the emulator's tests are not in
// a function built for Lambda (hooks_emulatortest.go).
func testHooks() {}
