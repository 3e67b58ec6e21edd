// Package ddbitem reads the items that ddbsession keeps in a DynamoDB
// table, for code that meets them outside a Manager: a stream's records
// (the ddbstream module), a backup or an export, and ddbsession's own
// modules, which share the table. docs/item-format.md describes the items;
// this package decodes them with the library's one decoder, so that every
// reader agrees with the middleware on what a session item holds.
//
//	layout, err := ddbitem.Resolve(ddbsession.Layout{}) // the app's Config.Layout
//	if err != nil {
//		log.Fatal(err)
//	}
//	s, err := ddbitem.DecodeSession(layout, image)
//	switch {
//	case errors.Is(err, ddbitem.ErrOtherKind): // an index item, a user, the app's own
//	case err != nil: // a session item this release cannot read
//	default:
//		fmt.Println(s.ID, s.User, s.ExpiresAt)
//	}
//
// From v0.1.0 on, the format changes only as CHANGELOG.md records.
package ddbitem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// Errors of DecodeSession.
var (
	// ErrOtherKind is returned for an item that is not a session item: an
	// index item, a user's state, a login waiting for its second factor,
	// an scs session, the app's own items.
	ErrOtherKind = item.ErrOtherKind
	// ErrMalformed is wrapped by the error for a session item that this
	// release cannot read: an unknown version, a missing or mistyped
	// attribute. A reader treats it as absent, failing closed.
	ErrMalformed = item.ErrMalformed
)

// MaxData is the most JSON, in bytes, that a session item holds of its
// session's data, which keeps it within the 4 KB of one read unit.
// ddbsession.Manager.UpdateData keeps larger data, up to 64 KiB, in an item
// of its own, which ddbsession.Manager.Data reads. The number is here, not
// a name, so that go doc shows it; a test holds it to the format's.
const MaxData = 2048

// Resolve returns l with every unset field at its default, or an error
// naming the first invalid field as "Layout.<Field>", for the caller to
// prefix with its own package and Config, as ddbsession.New does: the one
// validation of a layout, for every module that shares the table.
func Resolve(l ddbsession.Layout) (ddbsession.Layout, error) {
	resolved, err := item.Layout(l).WithDefaults()
	if err != nil {
		return l, err
	}
	return ddbsession.Layout(resolved), nil
}

// DecodeSession reads a session item of layout l, as the table, a stream
// record or a backup holds it: [ErrOtherKind] for an item of another kind,
// an error wrapping [ErrMalformed] for a session item it cannot read.
func DecodeSession(l ddbsession.Layout, av map[string]types.AttributeValue) (ddbsession.Session, error) {
	resolved, err := item.Layout(l).WithDefaults()
	if err != nil {
		return ddbsession.Session{}, fmt.Errorf("ddbitem: %w", err)
	}
	s, err := resolved.Decode(av, item.KindSession)
	if err == nil && s.Pending {
		err = ErrOtherKind // a login waiting for its second factor is no session yet
	}
	if errors.Is(err, ErrOtherKind) {
		return ddbsession.Session{}, ErrOtherKind
	}
	if err != nil {
		return ddbsession.Session{}, fmt.Errorf("ddbitem: decode session item: %w", err)
	}
	return item.Public(s).(ddbsession.Session), nil
}

// Client is the part of the DynamoDB client that a [Reader] uses: its
// reads, and the write that records the table's layout where it has none.
// *dynamodb.Client satisfies it.
type Client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// ReaderConfig configures a [Reader]. Client and Table must be set.
type ReaderConfig struct {
	Client Client
	Table  string
	// Layout is the table's layout, the app's Config.Layout: the Reader's
	// first read checks it against the one the table records.
	Layout ddbsession.Layout
	// RevokeEveryoneWithin bounds how long after a RevokeEveryone the
	// Reader may hold to the generation before it, as
	// Limits.RevokeEveryoneWithin does a Manager: default 10 seconds, at
	// least a second.
	RevokeEveryoneWithin time.Duration
	// Monotonic is the clock that ages the Reader's copy of the global
	// revocation generation, in nanoseconds, never 0: default the
	// machine's monotonic clock. Tests inject their own.
	Monotonic func() int64
}

// Reader reads, for a store of sessions other than ddbsession's own (such
// as scsstore's) and for a Config.LoadUser over user items of the table
// (mcpsession's), what decides whether a user's sessions stand, with the
// code a Manager reads it with: in one strongly consistent round trip, the
// user item and, on a Layout.MREC table, the user's revocation item; and
// the table's global revocation generation from a copy it keeps, read
// again once it is RevokeEveryoneWithin old, one read at a time. Its first
// read checks the table's layout record (see CheckLayout). It is safe for
// concurrent use.
type Reader struct{ r *decide.Reader }

// NewReader validates cfg and returns a Reader. It makes no call.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("ddbitem: ReaderConfig.Client is nil")
	case cfg.Table == "":
		return nil, errors.New("ddbitem: ReaderConfig.Table is empty")
	case cfg.RevokeEveryoneWithin == 0:
		cfg.RevokeEveryoneWithin = 10 * time.Second
	case cfg.RevokeEveryoneWithin < time.Second:
		return nil, fmt.Errorf("ddbitem: ReaderConfig.RevokeEveryoneWithin %v: must be at least a second", cfg.RevokeEveryoneWithin)
	}
	layout, err := item.Layout(cfg.Layout).WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("ddbitem: ReaderConfig.%w", err)
	}
	if cfg.Monotonic == nil {
		base := time.Now()
		cfg.Monotonic = func() int64 { return int64(time.Since(base)) + 1 }
	}
	return &Reader{decide.New(decide.Calls{Client: cfg.Client, Table: cfg.Table}, layout, cfg.RevokeEveryoneWithin, cfg.Monotonic)}, nil
}

// CheckLayout checks the Reader's layout against the one the table
// records, and records it in a table that has none: an error names each
// field that differs, with both values. The Reader's first read does the
// same; call it at start to fail there.
func (r *Reader) CheckLayout(ctx context.Context) error {
	return r.r.CheckLayout(ctx)
}

// User reads what decides whether user's sessions stand, in one strongly
// consistent round trip.
func (r *Reader) User(ctx context.Context, user ddbsession.UserKey) (User, error) {
	f, err := r.r.Read(ctx, decide.Query{UserPK: user.PK, UserSK: user.SK})
	if err != nil {
		return User{}, fmt.Errorf("ddbitem: read the user: %w", err)
	}
	return User{f: f, key: user, layout: r.r.Layout}, nil
}

// User is what a Reader found of a user.
type User struct {
	f      decide.Facts
	key    ddbsession.UserKey
	layout item.Layout
}

// Item returns the user item, for the caller to decode; nil if the user
// has none, which no session of theirs survives.
func (u User) Item() map[string]types.AttributeValue { return u.f.User }

// Stamp returns what a session of the user copies at its login, to hold
// it to everything that can end it ([User.Holds]). A user item without a
// sessions version (Layout.VersionAttribute) is an error: nothing tells a
// user item made anew under the same key from the one before it.
func (u User) Stamp() (Stamp, error) {
	switch {
	case !u.f.UserFound:
		return Stamp{}, ddbsession.ErrUserNotFound
	case u.f.Stamp.User == 0:
		return Stamp{}, fmt.Errorf("ddbitem: the user item (%q, %q) has no %s (Layout.VersionAttribute), a Number that every user item needs: "+
			"see https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md#user-items", u.key.PK, u.key.SK, u.layout.VersionAttribute)
	}
	return Stamp{s: u.f.Stamp}, nil
}

// Holds reports whether a session whose login stamped s still stands:
// no RevokeAll, RevokeEveryone, new credential or user item made anew
// since. Where it does not, notHereYet says that on a Layout.MREC table
// its login read a revocation that has not reached this Region yet: it is
// refused here, but may stand once replication brings it.
func (u User) Holds(s Stamp) (ok, notHereYet bool) {
	switch decide.Judge(item.Session{Stamp: s.s, Legacy: s.legacy}, false, u.f.UserFound, u.f.Stamp, u.f.Global(), u.layout.MREC) {
	case decide.Stands:
		return true, false
	case decide.NotHereYet:
		return false, true
	}
	return false, false
}

// Version is one number that changes whenever any part of the user's
// stamp but the global generation does, and 0 for a user without a
// sessions version: what a Config.LoadUser over a user item of the table
// returns (mcpsession's).
func (u User) Version() int64 {
	s := u.f.Stamp
	if s.User == 0 {
		return 0
	}
	// Each part is random, or changed by a random step, so a mix of them
	// changes with any of them; it is 0 by chance alone, one time in 2^64.
	h := fnv.New64a()
	binary.Write(h, binary.BigEndian, [3]int64{s.Revocation, s.User, s.Credential})
	return int64(h.Sum64())
}

// Stamp is what a session copies at its login of everything that can end
// it (docs/item-format.md#the-stamp). A store keeps it as text.
type Stamp struct {
	s      item.Stamp
	legacy bool
}

// LegacyStamp is the stamp that a store of release v0.1.0 recorded: the
// user's sessions version and the global generation alone, which hold a
// session as v0.1.0 held it.
func LegacyStamp(version, global int64) Stamp {
	return Stamp{s: item.Stamp{Revocation: version, Global: global}, legacy: true}
}

// MarshalText encodes s as four decimal numbers, dot-separated.
func (s Stamp) MarshalText() ([]byte, error) {
	if s.legacy {
		return nil, errors.New("ddbitem: a legacy stamp is not written anew")
	}
	return fmt.Appendf(nil, "%d.%d.%d.%d", s.s.Revocation, s.s.User, s.s.Credential, s.s.Global), nil
}

// UnmarshalText decodes what MarshalText encoded.
func (s *Stamp) UnmarshalText(b []byte) error {
	parts := strings.Split(string(b), ".")
	if len(parts) != 4 {
		return errors.New("ddbitem: not a stamp")
	}
	var n [4]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return errors.New("ddbitem: not a stamp")
		}
		n[i] = v
	}
	*s = Stamp{s: item.Stamp{Revocation: n[0], User: n[1], Credential: n[2], Global: n[3]}}
	return nil
}
