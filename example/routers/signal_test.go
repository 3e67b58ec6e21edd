//go:build unix

package main

import (
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestSignalStops runs the command as a process of its own, as a user's
// shell does, and stops it with SIGINT (Ctrl-C) and SIGTERM (kill): it must
// close its listener and exit 0 (see ddbtest.SignalStops).
func TestSignalStops(t *testing.T) {
	t.Parallel()
	ddbtest.SignalStops(t, "-table", ddbtest.TableName(t, ddbtest.Client(t)), "-dev")
}
