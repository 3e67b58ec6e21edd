package ddbsession

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds what a session is, to callers and to the rules: the
// public view of one, the words for why a request has none (ErrNoSession
// and its Reasons), and the three limits of its life (idle, refresh,
// absolute) as arithmetic on times. The package doc's "Time" section says
// why the units are what they are.

// UserKey is the primary key of the user's item (SK in a table with a sort
// key): a session stores it, so a request needs no secondary index.
type UserKey struct {
	PK string
	SK string
}

// Session describes one signed-in session. It never holds the token.
type Session struct {
	// ID is public: random, unrelated to the token, safe to show to users.
	ID          string
	User        UserKey // the user item's key; Manager.User gives the user
	CreatedAt   time.Time
	RefreshedAt time.Time
	ExpiresAt   time.Time // whole seconds, as stored for TTL
	UserAgent   string
	Address     string // the client's IP at the sign-in (RemoteAddr: docs/security.md#client-addresses)
	LastAddress string // and at the last refresh
	// AuthenticatedAt is when the user last proved themselves for this
	// session, at the login or re-authentication that made it, and Methods
	// how, in the app's names ("password", "otp"): the guard of
	// [Manager.RequireAuthentication], or code of the app's own:
	//
	//	fresh := time.Since(s.AuthenticatedAt) < 10*time.Minute && slices.Contains(s.Methods, "otp")
	AuthenticatedAt time.Time
	Methods         []string
	// Data is the app's value of the session, as JSON, read with the
	// session; nil for none, in List, and when kept apart ([Manager.Data]).
	Data json.RawMessage
	// DeviceBound says that the session is bound to a key on its device
	// ([DeviceBinding]): its cookie or token alone, copied, is not enough.
	DeviceBound bool
	// Current is set by [Manager.List] on the session of the request whose
	// context it was given: "this browser".
	Current bool
}

// Reason is why a request was rejected; "" for none.
type Reason string

const (
	ReasonMalformed        Reason = "malformed"         // not a credential this Manager could have issued; no DynamoDB call
	ReasonUnknown          Reason = "unknown"           // no such session (never issued, logged out, revoked, or TTL-deleted)
	ReasonExpired          Reason = "expired"           // past its expiry, though TTL has not deleted it yet
	ReasonAbsoluteLifetime Reason = "absolute-lifetime" // past Limits.AbsoluteLifetime since it was created
	ReasonRevoked          Reason = "revoked"           // its user's sessions version changed since (RevokeAll)
	ReasonUserMissing      Reason = "user-missing"      // the user item is gone
	ReasonUserMismatch     Reason = "user-mismatch"     // the credential names another user than the session's
	ReasonNotBound         Reason = "not-bound"         // a device-bound session without its bound cookie or DPoP proof: a copy
	ReasonNotReplicated    Reason = "not-replicated"    // MREC: the session is newer than its user's state in this Region; the cookie is kept
	ReasonEveryone         Reason = "revoked-everyone"  // created before a RevokeEveryone
	ReasonPending          Reason = "pending"           // a login waiting for its second factor (BeginLogin), which only CompleteLogin takes
	ReasonSessionLimit     Reason = "session-limit"     // ended by Limits.MaxSessions to make room for a newer session
)

// ddbitem decodes items outside a Manager, with this conversion.
func init() { item.Public = func(s item.Session) any { return sessionOf(s) } }

// sessionOf converts a decoded item to the public Session.
func sessionOf(s item.Session) Session {
	return Session{
		ID:          s.ID,
		User:        userOf(s),
		CreatedAt:   s.CreatedAt,
		RefreshedAt: s.RefreshedAt,
		ExpiresAt:   s.ExpiresAt,
		UserAgent:   s.UserAgent,
		Address:     s.Address,
		LastAddress: s.LastAddress,
		DeviceBound: s.DeviceBound || s.DPoP,

		AuthenticatedAt: s.AuthAt,
		Methods:         s.Methods,
		Data:            dataOf(s.Data),
	}
}

// userAgent returns the request's User-Agent as stored, which the client
// controls: valid UTF-8 without control or format characters (bidi
// overrides, zero-width characters), so that a stolen session cannot
// disguise itself in the device list, and at most item.MaxUserAgent bytes.
func userAgent(r *http.Request) string {
	s := strings.ToValidUTF8(r.UserAgent(), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return -1
		}
		return r
	}, s)
	n := item.MaxUserAgent
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n-- // do not split a UTF-8 sequence
	}
	return s[:n]
}

// clientAddress is the address a session records of request r: its
// RemoteAddr's IP, never a header, which any client can write; an app
// behind a proxy sets RemoteAddr from the header its own proxies write,
// and only theirs. "" where RemoteAddr is no IP (a Unix socket).
func clientAddress(r *http.Request) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	return a.Unmap().WithZone("").String()
}

// dataOf is an item's data as the Session holds it: nil for none.
func dataOf(data string) json.RawMessage {
	if data == "" {
		return nil
	}
	return json.RawMessage(data)
}

// userOf is the key of the user a decoded session belongs to.
func userOf(s item.Session) UserKey { return UserKey{PK: s.UserPK, SK: s.UserSK} }

// lifetimes are a Manager's time limits, validated by [New].
type lifetimes struct {
	idle     time.Duration // Limits.IdleTimeout
	refresh  time.Duration // Limits.RefreshInterval
	absolute time.Duration // Limits.AbsoluteLifetime
	pending  time.Duration // Limits.PendingLifetime: a two-step login's wait for its second step
}

// newSession returns a session for user created at now. Times are stored
// in milliseconds and the expiry in whole seconds, so they are rounded here
// the way they will be read back.
func (l lifetimes) newSession(user UserKey, r *http.Request, now time.Time) item.Session {
	created := time.UnixMilli(now.UnixMilli())
	return item.Session{
		ID:          item.NewID(created),
		UserPK:      user.PK,
		UserSK:      user.SK,
		CreatedAt:   created,
		RefreshedAt: created,
		AuthAt:      created,
		ExpiresAt:   time.Unix(now.Add(min(l.idle, l.absolute)).Unix(), 0),
		UserAgent:   userAgent(r),
		Address:     clientAddress(r),
		LastAddress: clientAddress(r),
	}
}

// live reports whether s is within its expiry and its absolute lifetime at
// now.
func (l lifetimes) live(s item.Session, now time.Time) bool { return l.ended(s, now) == "" }

// ended says why s is over at now, or "" if it is not. TTL deletion lags
// by up to 48 hours, so a present item is not a valid one; and the lifetime
// is checked on every read, so that lowering it takes effect at once for
// sessions written under a longer one.
func (l lifetimes) ended(s item.Session, now time.Time) Reason {
	switch {
	case s.ExpiresAt.Unix() <= now.Unix():
		return ReasonExpired
	case !now.Before(s.CreatedAt.Add(l.absolute)):
		return ReasonAbsoluteLifetime
	}
	return ""
}

// refreshed returns s with its expiry slid forward to now+idle, capped by
// the absolute lifetime, and seen last at addr (if not ""), if a refresh is
// due: at most once per refresh interval, and never when the expiry would
// not move.
func (l lifetimes) refreshed(s item.Session, addr string, now time.Time) (item.Session, bool) {
	if now.Sub(s.RefreshedAt) < l.refresh {
		return s, false
	}
	expires := now.Add(l.idle)
	if limit := s.CreatedAt.Add(l.absolute); expires.After(limit) {
		expires = limit
	}
	expires = time.Unix(expires.Unix(), 0)
	if !expires.After(s.ExpiresAt) {
		return s, false // at the absolute cap: nothing to write
	}
	next := s
	next.ExpiresAt = expires
	next.RefreshedAt = time.UnixMilli(now.UnixMilli())
	if addr != "" {
		next.LastAddress = addr
	}
	return next, true
}

// methodMigrated is among the methods of a session that Adopt made: no
// credential was shown, so RequireAuthentication never counts it recent.
const methodMigrated = "migrated"
