package ddbsession

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// This file reports what sessions do, for operators' counters and audit
// logs (Config.OnEvent receives an Event for each), and logs the failures
// that fail a request closed.

// An Event is something that happened to a session. It never holds a token
// or a token's hash.
type Event struct {
	Kind EventKind
	// SessionID is the session's public ID and User its user, where known.
	SessionID string
	User      UserKey
	// Reason: why a request was rejected, or a session evicted.
	Reason Reason
	// Err is EventStoreFailed's, Elapsed EventRefreshed's write time.
	Err     error
	Elapsed time.Duration
	// In History and at a sign-in; Count: EventSignInFailed's, in the hour;
	// Device: EventNewDevice's, as [Manager.DeviceOf] names the browser.
	Time                       time.Time
	Address, UserAgent, Device string
	Methods                    []string
	Count                      int
}

// EventKind is what happened. Its values are short lowercase names, fit
// for a metric's attribute as they are.
type EventKind string

const (
	EventCreated         EventKind = "created"          // Login or LoginBearer made a session
	EventRefreshed       EventKind = "refreshed"        // a request moved the expiry forward (reported once written)
	EventRotated         EventKind = "rotated"          // Login ended a session the request carried
	EventEnded           EventKind = "ended"            // Logout ended a session
	EventRevoked         EventKind = "revoked"          // Revoke ended one session
	EventRevokedAll      EventKind = "revoked-all"      // RevokeAll ended all of a user's sessions
	EventRevokedEveryone EventKind = "revoked-everyone" // RevokeEveryone ended every session of every user
	EventRejected        EventKind = "rejected"         // a request's credential granted no session; see Reason
	EventStoreFailed     EventKind = "store-failed"     // DynamoDB failed or timed out; the request failed closed
	EventBound           EventKind = "bound"            // a browser bound a session to its device key (DBSC)
	EventBoundRefreshed  EventKind = "bound-refreshed"  // a bound session's device proved itself for a fresh bound cookie

	EventReauthenticated      EventKind = "reauthenticated"         // a Login on a request that carried the user's own session: a new session, with fresh AuthenticatedAt
	EventPending              EventKind = "pending"                 // BeginLogin: a first factor passed, the second awaited
	EventSecondFactorFailed   EventKind = "second-factor-failed"    // CompleteLogin's verify refused; the pending session ends after five
	EventStepUp               EventKind = "step-up"                 // RequireAuthentication sent a request to re-authenticate
	EventEvicted              EventKind = "evicted"                 // Limits.MaxSessions ended the oldest session to make room (twice, rarely, when a login's answer was lost)
	EventRefusedAtMaxSessions EventKind = "refused-at-max-sessions" // Login refused: the user has Limits.MaxSessions sessions (RefuseAtMaxSessions)
	EventAdopted              EventKind = "adopted"                 // Adopt made a session from another store's (after its EventCreated)
	EventSignInFailed         EventKind = "sign-in-failed"          // a login's verify refused (History counts them by the hour)
	EventNewDevice            EventKind = "new-device"              // a Login from a browser new to the user (Cookie.RememberDevices), after EventCreated
)

// events tells the app's OnEvent, if it has one, and logs store failures.
type events struct {
	on     func(context.Context, Event) // Config.OnEvent, or nil
	logger *slog.Logger
}

// emit reports e if the app asked for events; without a listener it costs
// a comparison.
func (ev events) emit(ctx context.Context, e Event) {
	if ev.on != nil {
		ev.on(ctx, e)
	}
}

// storeFailed logs and reports why a request failed closed. A client that
// hung up is no store outage: it stays refused, but must not flood the
// error log. A panic is logged with the stack where it happened.
func (ev events) storeFailed(ctx context.Context, err error) {
	level := slog.LevelError
	if ctx.Err() != nil {
		level = slog.LevelDebug
	}
	attrs := []any{"err", err}
	var p *panicError
	if errors.As(err, &p) {
		attrs = append(attrs, "stack", string(p.stack))
	}
	ev.logger.Log(ctx, level, "ddbsession: cannot check session, failing closed", attrs...)
	ev.emit(ctx, Event{Kind: EventStoreFailed, Err: err})
}
