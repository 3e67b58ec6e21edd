package ddbsession

import "time"

// This file holds the machine's monotonic clock, which measures how old
// this instance's copies are: no skew between instances, and no injected
// Config.Now, moves it.

// monoBase anchors monotonic instants.
var monoBase = time.Now()

// mono is the monotonic clock, in nanoseconds since monoBase, and never 0.
func mono() int64 { return int64(time.Since(monoBase)) + 1 }
