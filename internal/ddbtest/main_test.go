package ddbtest_test

import (
	"os"
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) {
	code := ddbtest.Main(m)
	os.RemoveAll(fakeNPMDir)
	os.Exit(code)
}
