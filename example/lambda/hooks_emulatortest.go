//go:build emulatortest

package main

import (
	"os"
	"strings"
	"time"
)

// The tests under the Lambda runtime emulator build the function with the
// tag emulatortest, which adds two hooks that a function built for Lambda
// never has:
//
//   - TEST_CLOCK_FILE names a file holding the time (RFC 3339), which the
//     test moves forward between invocations, across environments: time
//     passes without waiting for it.
//   - TEST_REFRESH_AFTER_RESPONSE=1 hides AWS_LAMBDA_FUNCTION_NAME from
//     ddbsession.New, which then writes refreshes after the response, as
//     off Lambda: the test that shows what a freeze does to them. The
//     emulator always sets the variable, so the function clears it itself.

// now reads the test's clock.
func now() time.Time {
	b, err := os.ReadFile(os.Getenv("TEST_CLOCK_FILE"))
	if err != nil {
		panic("emulatortest: TEST_CLOCK_FILE: " + err.Error())
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		panic("emulatortest: TEST_CLOCK_FILE: " + err.Error())
	}
	return t
}

func testHooks() {
	if os.Getenv("TEST_REFRESH_AFTER_RESPONSE") == "1" {
		os.Unsetenv("AWS_LAMBDA_FUNCTION_NAME")
	}
}
