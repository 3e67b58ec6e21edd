package ddbsessiontest_test

import (
	"os"
	"testing"

	"github.com/ddbsession/ddbsession/ddbsessiontest"
)

// As in an app: every test and example in the package runs with the
// engine that Main finds or starts.
func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }
