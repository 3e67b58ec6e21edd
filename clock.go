package ddbsession

import "time"

// This file holds the machine's monotonic clock, which measures how old
// this instance's copies are: no skew between instances, and no injected
// Config.Now, moves it.

// monoBase anchors monotonic instants.
var monoBase = time.Now()

// mono is the monotonic clock, in nanoseconds since monoBase, and never 0.
func mono() int64 { return int64(time.Since(monoBase)) + 1 }

// clockMargin is how far the wall clocks of a table's instances may
// disagree where an order between them matters and no version settles it:
// the start of a user made anew, against the former user's history.
const clockMargin = time.Minute
