// Package item is the one definition of the items that ddbsession keeps in
// DynamoDB: their keys, their attributes, how tokens and public session IDs
// look, and the single encoder and decoder that every package of the module
// uses (the middleware, List and Revoke, the Streams handler, and the
// integrations). The package documentation of ddbsession describes the same
// format for readers under "Item format"; a test there writes items by hand in
// that documented form and reads them back through [Layout.Decode].
package item

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Format is the item format this release writes, in attribute "v", for a
// session item or index item that is not device-bound. An incompatible
// change bumps it, and a release that reads the new format ships before one
// that writes it: a reader that meets a format it does not know treats the
// item as absent, since failing closed is safer than misreading it.
//
// Format 4 added the session's stamp of the user item's sessions version and
// credential version ([Stamp]), which end it when they change: release
// v0.1.0 reads formats 1 to 3 only, so it refuses a session of format 4
// rather than accept one that a credential change has ended. This release
// still reads formats 1 to 3, whose sessions carry no such stamp (legacy).
const Format = 4

// FormatBound is the format of the session and index items of a
// device-bound session (DBSC). A release that knew nothing of device
// binding would read such a session as a plain one and accept it without
// its bound cookie; with a format of its own, that release treats it as
// absent instead. The format is therefore also where a bound session is
// marked as bound: one fact in one place.
const FormatBound = 5

// FormatPending is the format of the session item of a login that has
// passed its first factor and waits for its second: a session that nothing
// but the second-factor step may accept.
const FormatPending = 6

// FormatDPoP is the format of the session and index items of a bearer
// session bound to its client's key by DPoP (RFC 9449). As with
// [FormatBound], a release that knows nothing of DPoP (v0.2.0 reads formats
// 1 to 6) treats such a session as absent rather than accept its token as
// a plain bearer token.
const FormatDPoP = 7

// The formats of release v0.1.0: plain, bound and pending sessions without
// the stamp of format 4.
const (
	legacyFormat        = 1
	legacyFormatBound   = 2
	legacyFormatPending = 3
)

// StateFormat is the format of the library's other items: the global
// item, and the items beside a user's sessions (state.go).
const StateFormat = 1

// Attribute names of session and index items.
const (
	AttrVersion      = "v"
	AttrKind         = "kind"
	AttrID           = "sid"
	AttrUserPK       = "userPK"
	AttrUserSK       = "userSK"
	AttrCreatedAt    = "createdAt"
	AttrRefreshedAt  = "refreshedAt"
	AttrUserAgent    = "userAgent"
	AttrSessionPK    = "sessionPK"    // index items only
	AttrExpiryBucket = "expiryBucket" // session items only, with an expiry index
	AttrBrowserOnly  = "browserOnly"  // 1 for a session whose cookie ends with the browser
	// The client's IP address (text, no port) at the sign-in, and as the
	// last refresh saw it: optional, so that older readers, which ignore
	// attributes they do not know, read the session as before.
	AttrAddress     = "addr"
	AttrLastAddress = "lastAddr" // session items only
	// The session's stamp ([Stamp]): what its login read of everything
	// that can end it. AttrGen is the version that RevokeAll changes,
	// AttrUserGen the user item's sessions version, AttrCredGen its
	// credential version, and AttrGlobalGen the table's global revocation
	// generation (see global.go). Format 4 on; formats 1 to 3 have AttrGen
	// and AttrGlobalGen alone.
	AttrGen       = "gen"
	AttrUserGen   = "userGen"
	AttrCredGen   = "credGen"
	AttrGlobalGen = "globalGen"
	// AttrAuthAt is when the user last proved themselves for the session,
	// epoch milliseconds: at the login, or the re-authentication, that
	// made it.
	AttrAuthAt = "authAt"
	// AttrMethods lists how they did (a List of Strings, the app's names:
	// "password", "otp", "passkey").
	AttrMethods = "methods"
	// AttrAppData is the app's data of the session, JSON text, and
	// AttrDataRev its revision, a random number new with each write, for
	// the next one's condition. Session items only.
	AttrAppData = "appData"
	AttrDataRev = "dataRev"

	// Device binding (DBSC), session items only.
	AttrBoundKey         = "boundKey"         // the device's public key: a JWK, in JSON
	AttrBoundCookie      = "boundCookie"      // base64url(SHA-256(bound cookie value))
	AttrBoundExpires     = "boundExpires"     // its expiry, epoch seconds
	AttrBoundPrev        = "boundPrev"        // the bound cookie before the last refresh
	AttrBoundPrevExpires = "boundPrevExpires" // its expiry, epoch seconds
	AttrChallenge        = "challenge"        // the DBSC challenge the session awaits
	AttrChallengeExpires = "challengeExpires" // its expiry, epoch seconds

	// AttrDPoPKey is the JWK SHA-256 thumbprint (RFC 7638) of a DPoP-bound
	// session's key, session items only.
	AttrDPoPKey = "dpopJkt"
)

// Values of [AttrKind].
const (
	KindSession = "session"
	KindIndex   = "session-index"
)

// reserved holds the attribute names above, which no configured key or
// attribute name may take.
var reserved = map[string]bool{
	AttrVersion: true, AttrKind: true, AttrID: true, AttrUserPK: true, AttrUserSK: true,
	AttrCreatedAt: true, AttrRefreshedAt: true, AttrUserAgent: true, AttrSessionPK: true,
	AttrExpiryBucket: true, AttrData: true, AttrBrowserOnly: true, AttrAddress: true, AttrLastAddress: true, AttrGen: true, AttrGlobalGen: true,
	AttrUserGen: true, AttrCredGen: true,
	AttrAuthAt: true, AttrMethods: true, AttrAppData: true, AttrDataRev: true, AttrDataApart: true,
	AttrSlots: true, AttrSlotsRev: true, AttrEvent: true, AttrAt: true, AttrCount: true,
	AttrBoundKey: true, AttrBoundCookie: true, AttrBoundExpires: true, AttrBoundPrev: true,
	AttrBoundPrevExpires: true, AttrChallenge: true, AttrChallengeExpires: true, AttrDPoPKey: true,
}

// Reserved reports whether name is one of the format's own attribute names.
func Reserved(name string) bool { return reserved[name] }

// Sort key values and prefixes that are fixed by the format. An index
// item's sort key is IndexSort and the session ID, whose first 12 hex digits
// are its creation time, so that a user's index partition sorts by creation
// time.
const (
	SessionSort = "SESSION"
	IndexSort   = "S#"
)

// MaxUserAgent bounds the stored User-Agent, which the client controls.
const MaxUserAgent = 256

// Layout is where the items live in a table. It is ddbsession.Layout field
// for field, which converts to it, and is documented there; this copy is the
// one the encoder, the decoder and [Layout.WithDefaults] work on, for the
// core and every integration alike.
type Layout struct {
	PartitionKey        string
	SortKey             string // empty in a hash-only table
	HashOnly            bool
	SessionPrefix       string
	UserSessionsPrefix  string
	TTLAttribute        string
	VersionAttribute    string
	CredentialAttribute string
	ExpiryIndex         string // empty: no expiry index, and no item carries AttrExpiryBucket
	ExpiryIndexShards   int
	MREC                bool
}

// Default is the layout with every name at its default. The defaults are
// written down here, once.
var Default = Layout{
	PartitionKey:        "pk",
	SortKey:             "sk",
	SessionPrefix:       "SESSION#",
	UserSessionsPrefix:  "USERSESSIONS#",
	TTLAttribute:        "expiresAt",
	VersionAttribute:    "sessionsVersion",
	CredentialAttribute: "credentialVersion",
	ExpiryIndexShards:   8,
}

// WithDefaults returns l with every unset field at its default, or an error
// naming the first invalid field as "Layout.<Field>", which each caller
// prefixes with its own package and Config. It is the one validation of a
// layout, for the core, scsstore and ddbstream alike.
func (l Layout) WithDefaults() (Layout, error) {
	d := Default
	setDefault(&l.PartitionKey, d.PartitionKey)
	if l.HashOnly {
		if l.SortKey != "" {
			return l, fmt.Errorf("Layout.SortKey %q is set but Layout.HashOnly is true", l.SortKey)
		}
	} else {
		setDefault(&l.SortKey, d.SortKey)
	}
	if l.PartitionKey == l.SortKey {
		return l, fmt.Errorf("Layout.PartitionKey and Layout.SortKey are both %q", l.SortKey)
	}
	for _, key := range []string{l.PartitionKey, l.SortKey} {
		if Reserved(key) {
			return l, fmt.Errorf("Layout: key attribute name %q clashes with a session attribute", key)
		}
	}
	setDefault(&l.SessionPrefix, d.SessionPrefix)
	setDefault(&l.UserSessionsPrefix, d.UserSessionsPrefix)
	if l.SessionPrefix == l.UserSessionsPrefix {
		return l, fmt.Errorf("Layout.SessionPrefix and Layout.UserSessionsPrefix are both %q", l.SessionPrefix)
	}
	setDefault(&l.TTLAttribute, d.TTLAttribute)
	setDefault(&l.VersionAttribute, d.VersionAttribute)
	setDefault(&l.CredentialAttribute, d.CredentialAttribute)
	names := []string{l.TTLAttribute, l.VersionAttribute, l.CredentialAttribute}
	for i, name := range names {
		if name == l.PartitionKey || name == l.SortKey || Reserved(name) || slices.Contains(names[:i], name) {
			return l, fmt.Errorf("Layout: attribute name %q clashes with a key, a session attribute or another attribute of the Layout", name)
		}
	}
	if l.ExpiryIndexShards == 0 {
		l.ExpiryIndexShards = d.ExpiryIndexShards
	}
	if l.ExpiryIndexShards < 1 || l.ExpiryIndexShards > 100 {
		return l, fmt.Errorf("Layout.ExpiryIndexShards %d: must be between 1 and 100", l.ExpiryIndexShards)
	}
	return l, nil
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}

// Session is a session or index item, decoded. It never holds the token.
type Session struct {
	ID          string
	UserPK      string
	UserSK      string // empty in a hash-only table
	CreatedAt   time.Time
	RefreshedAt time.Time
	ExpiresAt   time.Time // whole seconds, as stored for TTL
	UserAgent   string
	// Address is the client's IP address at the sign-in, and LastAddress
	// at the last refresh ([AttrAddress]); "" where unknown.
	Address     string
	LastAddress string
	// SessionPK is the session item's partition key. Index items store it
	// so that one session can be deleted from the user's list; a decoded
	// session item has it from its key.
	SessionPK string
	// BrowserOnly marks a session whose cookie has no Max-Age, so that it
	// ends when the browser closes; a refresh keeps it so.
	BrowserOnly bool
	// Stamp is what the session's login read of everything that can end
	// it. Legacy marks a session of formats 1 to 3 (release v0.1.0),
	// whose stamp holds Revocation and Global alone.
	Stamp  Stamp
	Legacy bool
	// AuthAt is when the user last proved themselves for the session, and
	// Methods how ([AttrAuthAt], [AttrMethods]).
	AuthAt  time.Time
	Methods []string
	// Pending marks a login waiting for its second factor, stored as
	// [FormatPending].
	Pending bool
	// Data is the app's data, JSON text, and DataRev its revision, random
	// and new with each write (0: never written). Session items only.
	Data    string
	DataRev int64
	// DataApart says that the data lives in its data item (data.go),
	// under DataRev, and not in Data.
	DataApart bool
	// DeviceBound marks a session bound to a device key (DBSC), stored as
	// [FormatBound]. A bound session is valid only with its bound cookie.
	DeviceBound bool
	// Binding is what a bound session item holds of its binding; zero in
	// an index item and in an item that is not bound.
	Binding Binding
	// Challenge is the DBSC challenge the session awaits, if any: for its
	// registration, then for its next refresh. Session items only.
	Challenge Challenge
	// DPoP marks a bearer session bound to its client's key (RFC 9449),
	// stored as [FormatDPoP]: valid only with a proof of that key, whose
	// thumbprint DPoPKey is. DPoPKey is empty in an index item, and in a
	// session item read from the expiry index, which does not project it:
	// no key's thumbprint is empty, so such a session fails closed.
	DPoP    bool
	DPoPKey string
}

// Binding is a device-bound session's key and the short-lived cookies that
// prove, between refreshes, that a request comes from the device. The
// table holds only the cookies' digests, as it holds only the token's.
type Binding struct {
	Key string // the device's public key, a JWK in JSON
	// Cookies are the bound cookie issued at the last refresh and the one
	// before it, which requests already on their way may still carry.
	Cookies [2]BoundCookie
}

// BoundCookie is one bound cookie, by digest.
type BoundCookie struct {
	Digest  string    // base64url(SHA-256(value)); empty for none
	Expires time.Time // whole seconds
}

// Challenge is a DBSC challenge: a random value the device signs, once,
// before it expires.
type Challenge struct {
	Value   string
	Expires time.Time // whole seconds
}

// Errors of [Layout.Decode].
var (
	// ErrOtherKind is returned for an item of another kind than asked for,
	// including the application's own items in a shared table.
	ErrOtherKind = errors.New("not an item of this kind")
	// ErrMalformed is wrapped by the error for an item of the asked kind
	// that this release cannot read: an unknown version, a missing or
	// mistyped attribute.
	ErrMalformed = errors.New("malformed session item")
)

// Key builds a primary key; sk is dropped in a hash-only table.
func (l *Layout) Key(pk, sk string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{l.PartitionKey: Str(pk)}
	if !l.HashOnly {
		k[l.SortKey] = Str(sk)
	}
	return k
}

// SessionKey addresses the session item of the token whose partition key is
// sessionPK.
func (l *Layout) SessionKey(sessionPK string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{l.PartitionKey: Str(sessionPK)}
	if !l.HashOnly {
		k[l.SortKey] = sessionSortValue
	}
	return k
}

// sessionSortValue is shared by every session key: the SDK only reads it.
var sessionSortValue = Str(SessionSort)

// IndexPK is the partition key of a user's index items. The user's key is
// length-prefixed, so that no two users share an index partition whatever
// characters their keys hold.
func (l *Layout) IndexPK(userPK, userSK string) string {
	return l.UserSessionsPrefix + strconv.Itoa(len(userPK)) + "#" + userPK + userSK
}

// IndexKey addresses the index item of session s.
func (l *Layout) IndexKey(s Session) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(s.UserPK, s.UserSK), indexSortOf(s))
}

// IndexKeyOf addresses the index item of session id of a user, for a
// caller that knows the ID alone.
func (l *Layout) IndexKeyOf(userPK, userSK, id string) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(userPK, userSK), IndexSort+id)
}

// indexSortOf is the sort key of s's index item.
func indexSortOf(s Session) string { return IndexSort + s.ID }

// IndexSortFrom is the least sort key of an index item created at or after
// t, for a key condition that skips older sessions.
func IndexSortFrom(t time.Time) string { return IndexSort + timePrefix(t) }

// IndexSortEnd sorts after every index item's sort key.
const IndexSortEnd = IndexSort + "g" // 'g' follows every hex digit

// timePrefix is t in epoch milliseconds as 12 lowercase hex digits, which
// sort as the times do until the year 10889.
func timePrefix(t time.Time) string {
	ms := max(t.UnixMilli(), 0)
	return fmt.Sprintf("%012x", ms)
}

// SessionPK returns the partition key of the session behind token: the
// prefix and base64url(SHA-256(token)). The table never holds the token
// itself, so whoever reads it, or a backup of it, cannot lift a live session
// out of it.
func (l *Layout) SessionPK(token string) string {
	sum := sha256.Sum256([]byte(token))
	var buf [64 + 43]byte // a prefix of up to 64 bytes stays on the stack
	b := append(buf[:0], l.SessionPrefix...)
	b = base64.RawURLEncoding.AppendEncode(b, sum[:])
	return string(b)
}

// EncodeSession encodes s as the session item stored under sessionPK.
func (l *Layout) EncodeSession(sessionPK string, s Session) map[string]types.AttributeValue {
	av := l.SessionKey(sessionPK)
	l.encodeCommon(av, KindSession, s)
	if l.ExpiryIndex != "" {
		av[AttrExpiryBucket] = Str(l.ExpiryBucket(s.ID, s.ExpiresAt))
	}
	return av
}

// EncodeIndex encodes s as its index item, which points back at the session
// item under sessionPK.
func (l *Layout) EncodeIndex(sessionPK string, s Session) map[string]types.AttributeValue {
	av := l.IndexKey(s)
	l.encodeCommon(av, KindIndex, s)
	av[AttrSessionPK] = Str(sessionPK)
	return av
}

func (l *Layout) encodeCommon(av map[string]types.AttributeValue, kind string, s Session) {
	av[AttrVersion] = Num(formatOf(s))
	av[AttrKind] = Str(kind)
	av[AttrID] = Str(s.ID)
	av[AttrUserPK] = Str(s.UserPK)
	if s.UserSK != "" {
		av[AttrUserSK] = Str(s.UserSK)
	}
	av[AttrCreatedAt] = Num(s.CreatedAt.UnixMilli())
	av[AttrRefreshedAt] = Num(s.RefreshedAt.UnixMilli())
	av[l.TTLAttribute] = Num(s.ExpiresAt.Unix())
	if s.UserAgent != "" {
		av[AttrUserAgent] = Str(s.UserAgent)
	}
	if s.BrowserOnly {
		av[AttrBrowserOnly] = Num(1)
	}
	if s.Address != "" {
		av[AttrAddress] = Str(s.Address)
	}
	av[AttrGen] = Num(s.Stamp.Revocation)
	av[AttrGlobalGen] = Num(s.Stamp.Global)
	if !s.Legacy {
		av[AttrUserGen] = Num(s.Stamp.User)
		av[AttrCredGen] = Num(s.Stamp.Credential)
	}
	av[AttrAuthAt] = Num(s.AuthAt.UnixMilli())
	if len(s.Methods) > 0 {
		methods := make([]types.AttributeValue, len(s.Methods))
		for i, m := range s.Methods {
			methods[i] = Str(m)
		}
		av[AttrMethods] = &types.AttributeValueMemberL{Value: methods}
	}
	if kind != KindSession {
		return
	}
	if s.LastAddress != "" {
		av[AttrLastAddress] = Str(s.LastAddress)
	}
	if s.Data != "" {
		av[AttrAppData] = Str(s.Data)
	}
	if s.DataRev != 0 {
		av[AttrDataRev] = Num(s.DataRev)
	}
	if s.DataApart {
		av[AttrDataApart] = Num(s.DataRev)
	}
	if s.Binding.Key != "" {
		av[AttrBoundKey] = Str(s.Binding.Key)
	}
	for i, names := range boundCookieAttrs {
		if c := s.Binding.Cookies[i]; c.Digest != "" {
			av[names[0]] = Str(c.Digest)
			av[names[1]] = Num(c.Expires.Unix())
		}
	}
	if s.DPoP {
		av[AttrDPoPKey] = Str(s.DPoPKey)
	}
	if s.Challenge.Value != "" {
		av[AttrChallenge] = Str(s.Challenge.Value)
		av[AttrChallengeExpires] = Num(s.Challenge.Expires.Unix())
	}
}

// boundCookieAttrs name Binding.Cookies' digest and expiry attributes.
var boundCookieAttrs = [2][2]string{
	{AttrBoundCookie, AttrBoundExpires},
	{AttrBoundPrev, AttrBoundPrevExpires},
}

// formatOf is the format of session s's items.
func formatOf(s Session) int64 {
	switch {
	case s.Pending && s.Legacy:
		return legacyFormatPending
	case s.Pending:
		return FormatPending
	case s.DeviceBound && s.Legacy:
		return legacyFormatBound
	case s.DeviceBound:
		return FormatBound
	case s.DPoP:
		return FormatDPoP
	case s.Legacy:
		return legacyFormat
	}
	return Format
}

// Decode reads a session or index item (kind is [KindSession] or
// [KindIndex]). It returns [ErrOtherKind] for any other item, and an error
// wrapping [ErrMalformed] for an item of that kind in a format it does not
// know (1 to 7; 3 and 6 for a session item only): every attribute but
// userSK, userAgent, the addresses, browserOnly and those of device binding
// is required, and of formats 1 to 3 userGen and credGen are not read. A
// bound session item that lacks its key or bound cookie decodes as bound
// all the same: no bound cookie matches it, so it fails closed.
func (l *Layout) Decode(av map[string]types.AttributeValue, kind string) (Session, error) {
	if k, _ := av[AttrKind].(*types.AttributeValueMemberS); k == nil || k.Value != kind {
		return Session{}, ErrOtherKind
	}
	d := decoder{av: av}
	var s Session
	switch v := d.num(AttrVersion); {
	case d.err != nil:
	case v == Format:
	case v == FormatBound:
		s.DeviceBound = true
	case v == FormatPending && kind == KindSession:
		s.Pending = true
	case v == FormatDPoP:
		s.DPoP = true
	case v == legacyFormat:
		s.Legacy = true
	case v == legacyFormatBound:
		s.Legacy, s.DeviceBound = true, true
	case v == legacyFormatPending && kind == KindSession:
		s.Legacy, s.Pending = true, true
	default:
		return Session{}, fmt.Errorf("%w: format %d is not one of 1 to %d that this release reads", ErrMalformed, v, FormatDPoP)
	}
	s.ID = d.str(AttrID, true)
	s.UserPK = d.str(AttrUserPK, true)
	s.UserSK = d.str(AttrUserSK, false)
	s.CreatedAt = time.UnixMilli(d.num(AttrCreatedAt))
	s.RefreshedAt = time.UnixMilli(d.num(AttrRefreshedAt))
	s.ExpiresAt = time.Unix(d.num(l.TTLAttribute), 0)
	s.UserAgent = d.str(AttrUserAgent, false)
	s.Address = d.str(AttrAddress, false)
	if kind == KindIndex {
		s.SessionPK = d.str(AttrSessionPK, true)
	} else {
		s.SessionPK = d.str(l.PartitionKey, true)
	}
	if _, present := av[AttrBrowserOnly]; present {
		s.BrowserOnly = d.num(AttrBrowserOnly) == 1
	}
	s.Stamp.Revocation = d.num(AttrGen)
	s.Stamp.Global = d.num(AttrGlobalGen)
	if !s.Legacy {
		s.Stamp.User = d.num(AttrUserGen)
		s.Stamp.Credential = d.num(AttrCredGen)
	}
	s.AuthAt = time.UnixMilli(d.num(AttrAuthAt))
	s.Methods = d.strs(AttrMethods)
	if kind == KindSession {
		s.LastAddress = d.str(AttrLastAddress, false)
		s.Data = d.str(AttrAppData, false)
		if _, present := av[AttrDataRev]; present {
			s.DataRev = d.num(AttrDataRev)
		}
		// Apart only if dataApart names the current revision: a write of
		// an older release, which does not know dataApart, moves dataRev
		// and leaves it, and its data is the inline one.
		if _, present := av[AttrDataApart]; present {
			s.DataApart = d.num(AttrDataApart) == s.DataRev
		}
		d.dbsc(&s)
		if s.DPoP {
			s.DPoPKey = d.str(AttrDPoPKey, false)
		}
	}
	if d.err != nil {
		return Session{}, d.err
	}
	return s, nil
}

// dbsc reads a session item's device binding and challenge, all optional.
func (d *decoder) dbsc(s *Session) {
	if s.DeviceBound {
		s.Binding.Key = d.str(AttrBoundKey, false)
		for i, names := range boundCookieAttrs {
			if digest := d.str(names[0], false); digest != "" {
				s.Binding.Cookies[i] = BoundCookie{Digest: digest, Expires: time.Unix(d.num(names[1]), 0)}
			}
		}
	}
	if value := d.str(AttrChallenge, false); value != "" {
		s.Challenge = Challenge{Value: value, Expires: time.Unix(d.num(AttrChallengeExpires), 0)}
	}
}

// decoder reads attributes and keeps the first problem it meets.
type decoder struct {
	av  map[string]types.AttributeValue
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (d *decoder) str(name string, required bool) string {
	v, present := d.av[name]
	if !present {
		if required {
			d.fail("no %q", name)
		}
		return ""
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok || (required && s.Value == "") {
		d.fail("%q is not a non-empty String", name)
		return ""
	}
	return s.Value
}

// bin reads a required Binary attribute. Empty is allowed: DynamoDB stores
// an empty Binary outside a key.
func (d *decoder) bin(name string) []byte {
	v, present := d.av[name]
	if !present {
		d.fail("no %q", name)
		return nil
	}
	b, ok := v.(*types.AttributeValueMemberB)
	if !ok {
		d.fail("%q is not a Binary", name)
		return nil
	}
	return b.Value
}

// strs reads an optional List of Strings; nil if absent.
func (d *decoder) strs(name string) []string {
	v, present := d.av[name]
	if !present {
		return nil
	}
	l, ok := v.(*types.AttributeValueMemberL)
	if !ok {
		d.fail("%q is not a List", name)
		return nil
	}
	out := make([]string, len(l.Value))
	for i, e := range l.Value {
		s, ok := e.(*types.AttributeValueMemberS)
		if !ok {
			d.fail("%q holds a value that is not a String", name)
			return nil
		}
		out[i] = s.Value
	}
	return out
}

// num reads a required integer Number. A fractional or out-of-range value
// is malformed rather than rounded.
func (d *decoder) num(name string) int64 {
	n, ok, err := GetNum(d.av, name)
	switch {
	case err != nil:
		d.fail("%v", err)
	case !ok:
		d.fail("no %q", name)
	}
	return n
}

// GetNum reads an integer Number attribute. ok is false if it is absent; an
// attribute of another type, or a fractional or out-of-range number, is an
// error.
func GetNum(av map[string]types.AttributeValue, name string) (n int64, ok bool, err error) {
	v, present := av[name]
	if !present {
		return 0, false, nil
	}
	num, isNum := v.(*types.AttributeValueMemberN)
	if !isNum {
		return 0, false, fmt.Errorf("%q is not a Number", name)
	}
	n, err = strconv.ParseInt(num.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not an integer", name)
	}
	return n, true, nil
}

// VersionOf reads a user item's sessions version, which RevokeAll changes;
// zero if the user has none.
func (l *Layout) VersionOf(user map[string]types.AttributeValue) (int64, error) {
	ms, _, err := GetNum(user, l.VersionAttribute)
	return ms, err
}

// ExpiryBucket returns the expiry index partition of a session: the UTC hour
// of its expiry and a shard derived from its public ID, such as
// "2026113019#3". Hours keep a window query to a few partitions; shards keep
// one busy hour from landing on a single partition.
func (l *Layout) ExpiryBucket(id string, expires time.Time) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return Bucket(expires, int(h.Sum32()%uint32(l.ExpiryIndexShards)))
}

// Bucket names shard of the expiry index partition for hour.
func Bucket(hour time.Time, shard int) string {
	return hour.UTC().Format("2006010215") + "#" + strconv.Itoa(shard)
}

// Projection lists the attributes the expiry index projects besides its
// keys: enough to decode a session item. The device binding is left out: it
// is the middleware's alone, and a reader of the index learns whether a
// session is bound from "v".
func Projection() []string {
	return []string{AttrVersion, AttrKind, AttrID, AttrUserPK, AttrUserSK, AttrCreatedAt, AttrRefreshedAt, AttrUserAgent,
		AttrGen, AttrUserGen, AttrCredGen, AttrGlobalGen, AttrAuthAt, AttrMethods, AttrBrowserOnly}
}

// Digest is how the table holds a secret it must recognise but never
// reveal, such as a bound cookie's value: base64url(SHA-256(secret)).
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// A token is rand.Text's output: 26 characters of the RFC 4648 base32
// alphabet, 130 bits from crypto/rand. It travels only to the client.
const tokenLen = 26

// NewToken returns a new session token.
func NewToken() string { return rand.Text() }

// ValidToken reports whether s has the one length and alphabet that tokens
// have. Anything else is rejected before it can cost a DynamoDB call.
func ValidToken(s string) bool {
	if len(s) != tokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// NewID returns the public ID of a session created at created: 32 lowercase
// hex digits, the creation time in epoch milliseconds (12 digits) and 80
// random bits, so that IDs sort by creation time. It is independent of the
// token, and its alphabet and length differ from a token's, so it can never
// be mistaken for one.
func NewID(created time.Time) string {
	var b [10]byte
	rand.Read(b[:])
	return timePrefix(created) + hex.EncodeToString(b[:])
}

// ValidID reports whether id has the shape of a public session ID.
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Public converts a decoded session to ddbsession.Session. The root
// package sets it when it starts, so that one conversion serves the
// Manager and ddbitem, which cannot see the root's unexported code.
var Public func(Session) any

// Num encodes an integer Number attribute.
func Num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Str encodes a String attribute.
func Str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
