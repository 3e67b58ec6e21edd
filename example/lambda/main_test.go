package main

import (
	"os"
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// afterTests run once the tests are done: clean-ups of what tests share.
var afterTests []func()

// TestMain runs the tests against the test engine, never AWS, as on
// Lambda: the runtime sets AWS_LAMBDA_FUNCTION_NAME, which makes every
// Manager write its refreshes before the response.
func TestMain(m *testing.M) {
	os.Setenv("AWS_LAMBDA_FUNCTION_NAME", "ddbsession-example-test")
	code := ddbtest.Main(m)
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}
