package ddbsession

import (
	"context"
	"errors"
)

// This file reports what sessions do, for operators' counters and audit
// logs: Config.OnEvent receives an Event for each.

// An Event is something that happened to a session. It never holds a token
// or a token's hash.
type Event struct {
	Kind EventKind
	// SessionID is the session's public ID, where there is one (not for a
	// malformed or unknown credential, nor RevokeAll).
	SessionID string
	// User is the session's user, where known.
	User UserKey
	// Reason says why a request was rejected (EventRejected).
	Reason Reason
	// Err is the store's error (EventStoreFailed).
	Err error
}

// EventKind is what happened.
type EventKind uint8

const (
	EventCreated        EventKind = iota + 1 // Login, LoginWith or LoginBearer made a session
	EventRefreshed                           // a request moved the expiry forward (reported once written)
	EventRotated                             // Login ended a session the request carried
	EventEnded                               // Logout ended a session
	EventRevoked                             // Revoke ended one session
	EventRevokedAll                          // RevokeAll ended all of a user's sessions
	EventRejected                            // a request's credential granted no session; see Reason
	EventStoreFailed                         // DynamoDB failed or timed out; the request failed closed
	EventBound                               // a browser bound a session to its device key (DBSC)
	EventBoundRefreshed                      // a bound session's device proved itself for a fresh bound cookie
)

var eventNames = [...]string{"", "created", "refreshed", "rotated", "ended", "revoked", "revoked-all", "rejected", "store-failed", "bound", "bound-refreshed"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Reason is why a request was rejected.
type Reason uint8

const (
	ReasonMalformed        Reason = iota + 1 // not a credential this Manager could have issued; no DynamoDB call
	ReasonUnknown                            // no such session (never issued, logged out, revoked, or TTL-deleted)
	ReasonExpired                            // past its expiry, though TTL has not deleted it yet
	ReasonAbsoluteLifetime                   // past Config.AbsoluteLifetime since it was created
	ReasonCutoff                             // created before the user's sessions-valid-after cutoff (RevokeAll)
	ReasonUserMissing                        // the user item is gone
	ReasonUserMismatch                       // the credential names another user than the session's
	ReasonNotBound                           // a device-bound session without a valid bound cookie: a copy of its cookie
)

var reasonNames = [...]string{"", "malformed", "unknown", "expired", "absolute-lifetime", "cutoff", "user-missing", "user-mismatch", "not-bound"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// emit reports e if the app asked for events. Callers build e only after
// checking m.cfg.OnEvent, so that an app without a hook pays nothing.
func (m *Manager[U]) emit(ctx context.Context, e Event) { m.cfg.OnEvent(ctx, e) }

// rejection is ErrNoSession with its reason. One value per reason exists,
// so that a rejection allocates nothing.
type rejection struct{ reason Reason }

func (r *rejection) Error() string        { return ErrNoSession.Error() }
func (r *rejection) Is(target error) bool { return target == ErrNoSession }

var rejections = func() (all [len(reasonNames)]*rejection) {
	for i := range all {
		all[i] = &rejection{Reason(i)}
	}
	return all
}()

// rejected returns the ErrNoSession of reason.
func rejected(reason Reason) error { return rejections[reason] }

// reasonOf returns the reason of a rejection, or 0.
func reasonOf(err error) Reason {
	var r *rejection
	if errors.As(err, &r) {
		return r.reason
	}
	return 0
}
