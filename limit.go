package ddbsession

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds the Limits of a Manager and their defaults; slots.go
// keeps a user's sessions under MaxSessions.

// Limits bound sessions and the Manager's waits. Each zero field takes
// its default; [New] refuses values out of range.
type Limits struct {
	// IdleTimeout is how long a session lives without requests. Default
	// 24h, or the AAL's bound; never longer than AbsoluteLifetime.
	IdleTimeout time.Duration

	// RefreshInterval is how often, at most, a request moves a session's
	// expiry forward; the requests in between cost no writes. Default
	// IdleTimeout/24. It must be shorter than IdleTimeout.
	RefreshInterval time.Duration

	// AbsoluteLifetime caps a session's life from its creation, however
	// active it is. Default 30 days, or the AAL's bound.
	AbsoluteLifetime time.Duration

	// AAL names the NIST SP 800-63B-4 assurance level (1, 2 or 3) whose
	// session bounds apply as defaults and maxima: AAL1 30 days overall,
	// AAL2 an hour idle and 24 hours overall, AAL3 15 minutes and 12 hours.
	// Its authenticators are the app's to ask for: for AAL2, a password and
	// a one-time code, or a passkey with user verification (docs/step-up.md).
	AAL int

	// PendingLifetime is how long a two-step login waits for its second
	// factor after [Manager.BeginLogin]: default 5 minutes, between 10
	// seconds and an hour.
	PendingLifetime time.Duration

	// MaxSessions, if set, caps how many sessions a user may hold at once
	// (OWASP ASVS 5.0 7.1.2), at most 100. A login beyond it ends the
	// user's oldest session, or, with RefuseAtMaxSessions, fails with
	// [ErrTooManySessions]. Racing logins never leave more alive. It needs
	// a sort key, and costs logins a read and a write, requests nothing.
	MaxSessions         int
	RefuseAtMaxSessions bool

	// StoreTimeout bounds one call's DynamoDB work, and each refresh write: 2s.
	StoreTimeout time.Duration

	// HistoryRetention keeps [Manager.History]'s events: 90 days; -1: none.
	HistoryRetention time.Duration

	// RevokeEveryoneWithin bounds how long after [Manager.RevokeEveryone]
	// this instance may accept a session made before it: a request re-reads
	// the global generation with its session once this instance's copy is
	// that old. Default 10 seconds; at least a second.
	RevokeEveryoneWithin time.Duration
}

// maxSessionsLimit bounds Limits.MaxSessions: the slots item, which a login
// under the limit reads and writes, holds 40 bytes a slot and stays within
// the 4 KB of one read unit.
const maxSessionsLimit = 100

// inFlight is the margin by which a slot or an index item must be older
// than StoreTimeout before a missing session item means no login is on its
// way: both are written before the session item, within the login's
// StoreTimeout. The margin covers the clocks of two instances disagreeing.
const inFlight = 30 * time.Second

// aalBounds are the NIST SP 800-63B-4 session bounds of each assurance
// level (sections 2.1.3, 2.2.3 and 2.3.3), which Limits.AAL names: the
// inactivity timeout (0: none) and the overall timeout.
var aalBounds = map[int]struct{ idle, absolute time.Duration }{
	1: {0, 30 * 24 * time.Hour},
	2: {time.Hour, 24 * time.Hour},
	3: {15 * time.Minute, 12 * time.Hour},
}

// withDefaults fills in and checks the limits, within the bounds of the
// assurance level named, if any, and the session limit against layout.
func (l *Limits) withDefaults(layout item.Layout) error {
	aal, ok := aalBounds[l.AAL]
	if !ok && l.AAL != 0 {
		return fmt.Errorf("ddbsession: Config.Limits.AAL %d: must be 1, 2 or 3 (NIST SP 800-63B-4), or 0 for none", l.AAL)
	}
	if l.AbsoluteLifetime == 0 {
		l.AbsoluteLifetime = cmp.Or(aal.absolute, 30*24*time.Hour)
	}
	if l.AbsoluteLifetime < time.Second {
		return fmt.Errorf("ddbsession: Config.Limits.AbsoluteLifetime %v: must be at least a second", l.AbsoluteLifetime)
	}
	if l.IdleTimeout == 0 {
		// Never past the absolute lifetime, which would end every session
		// first.
		l.IdleTimeout = min(cmp.Or(aal.idle, 24*time.Hour), l.AbsoluteLifetime)
	}
	if l.IdleTimeout < time.Second {
		return fmt.Errorf("ddbsession: Config.Limits.IdleTimeout %v: must be at least a second", l.IdleTimeout)
	}
	if l.IdleTimeout > l.AbsoluteLifetime {
		return fmt.Errorf("ddbsession: Config.Limits.IdleTimeout %v is longer than AbsoluteLifetime %v, which ends every session first: "+
			"lower IdleTimeout, or raise AbsoluteLifetime", l.IdleTimeout, l.AbsoluteLifetime)
	}
	if l.RefreshInterval == 0 {
		l.RefreshInterval = l.IdleTimeout / 24
	}
	if l.RefreshInterval < 0 || l.RefreshInterval >= l.IdleTimeout {
		return fmt.Errorf("ddbsession: Config.Limits.RefreshInterval %v: must be positive and shorter than IdleTimeout %v", l.RefreshInterval, l.IdleTimeout)
	}
	if aal.idle > 0 && l.IdleTimeout > aal.idle {
		return fmt.Errorf("ddbsession: Config.Limits.IdleTimeout %v: AAL%d allows at most %v", l.IdleTimeout, l.AAL, aal.idle)
	}
	if aal.absolute > 0 && l.AbsoluteLifetime > aal.absolute {
		return fmt.Errorf("ddbsession: Config.Limits.AbsoluteLifetime %v: AAL%d allows at most %v", l.AbsoluteLifetime, l.AAL, aal.absolute)
	}
	if l.PendingLifetime == 0 {
		l.PendingLifetime = 5 * time.Minute
	}
	if l.PendingLifetime < 10*time.Second || l.PendingLifetime > time.Hour {
		return fmt.Errorf("ddbsession: Config.Limits.PendingLifetime %v: must be between 10s and 1h", l.PendingLifetime)
	}
	switch {
	case l.MaxSessions < 0 || l.MaxSessions > maxSessionsLimit:
		return fmt.Errorf("ddbsession: Config.Limits.MaxSessions %d: must be between 1 and %d, or 0 for no limit", l.MaxSessions, maxSessionsLimit)
	case l.MaxSessions > 0 && layout.HashOnly:
		return errors.New("ddbsession: Config.Limits.MaxSessions needs a table with a sort key, for the user's state item (Layout.HashOnly is set)")
	case l.RefuseAtMaxSessions && l.MaxSessions == 0:
		return errors.New("ddbsession: Config.Limits.RefuseAtMaxSessions is set without a MaxSessions")
	}
	if l.StoreTimeout == 0 {
		l.StoreTimeout = 2 * time.Second
	}
	if l.StoreTimeout < 0 {
		return fmt.Errorf("ddbsession: Config.Limits.StoreTimeout %v: must be positive", l.StoreTimeout)
	}
	switch {
	case l.HistoryRetention == 0 && layout.HashOnly:
		l.HistoryRetention = -1 // its items need a sort key
	case l.HistoryRetention == 0:
		l.HistoryRetention = 90 * 24 * time.Hour
	case l.HistoryRetention > 0 && layout.HashOnly:
		return errors.New("ddbsession: Config.Limits.HistoryRetention needs a table with a sort key, for the user's history items (Layout.HashOnly is set)")
	case l.HistoryRetention > 0 && l.HistoryRetention < time.Hour:
		return fmt.Errorf("ddbsession: Config.Limits.HistoryRetention %v: must be at least an hour, or negative for no history", l.HistoryRetention)
	}
	if l.RevokeEveryoneWithin == 0 {
		l.RevokeEveryoneWithin = 10 * time.Second
	}
	if l.RevokeEveryoneWithin < time.Second {
		return fmt.Errorf("ddbsession: Config.Limits.RevokeEveryoneWithin %v: must be at least a second", l.RevokeEveryoneWithin)
	}
	return nil
}
