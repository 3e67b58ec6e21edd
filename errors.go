package ddbsession

import (
	"errors"
	"fmt"
)

// This file holds the one convention of the errors that leave the package:
// "ddbsession: <operation>: <cause>", prefixed once, where the error leaves.

// wrap is err as it leaves the package from operation op. The package's
// sentinels (ErrNoSession and its rejections, ErrUserNotFound,
// ErrUserExists, ErrTooManySessions) and the app's own errors, from a
// verify function, pass as they are, for callers to compare.
func wrap(op string, err error) error {
	var own *appError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &own):
		return own.err
	case err == ErrUserNotFound, err == ErrUserExists, err == ErrTooManySessions, err == ErrNoSession:
		return err
	}
	if _, ok := err.(*rejection); ok {
		return err
	}
	return fmt.Errorf("ddbsession: %s: %w", op, err)
}

// appError is an error of the app's own, which wrap hands back as it was.
type appError struct{ err error }

func (e *appError) Error() string { return e.err.Error() }
func (e *appError) Unwrap() error { return e.err }
