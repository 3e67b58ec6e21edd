package ddbsession

import (
	"fmt"
	"runtime/debug"
)

// This file turns a panic while a session is checked (in an app's
// LoadUser, say) into an error that fails the request closed, with the
// stack where it happened for the log.

// panicError is a panic recovered while checking a session, with the stack
// where it happened, which storeFailed logs.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return fmt.Sprintf("panic while checking a session: %v", p.value)
}

// recovered turns a panic, if there is one, into *errp: a panic in a
// LoadUser of the app's, say, fails the request closed instead of escaping.
// Call it deferred.
func recovered(errp *error) {
	if p := recover(); p != nil {
		*errp = &panicError{value: p, stack: debug.Stack()}
	}
}
