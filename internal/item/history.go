package item

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A user's security history: one item per event, in the user's index
// partition beside their sessions, where no other user's item is, sorted
// by time, so that one Query, newest first, reads it in pages. TTL removes
// each item after the retention. Failed sign-ins are counted, one item an
// hour, so that a guesser adds one item an hour, not one a guess.
//
//	pk         S  the user's index partition (Layout.IndexPK)
//	sk         S  H#<epoch ms, 12 hex digits>#<8 random hex digits>   an event
//	              H#<the hour's start, as above>#failed                the hour's failed sign-ins
//	v          N  1
//	kind       S  "session-history"
//	event      S  what happened: the ddbsession EventKind
//	at         N  when, epoch milliseconds (a failed-sign-in item: the hour's start)
//	sid        S  the session's public ID, if the event has one
//	methods    L  how the user proved themselves, at a sign-in
//	addr       S  the client's IP address, where the request had one
//	userAgent  S  the client's User-Agent, where the request had one
//	count      N  failed sign-ins in the hour
//	device     S  a new device's sort key in the user's partition, without
//	              its DEV# (a digest of the user's key and its ID)
//	<TTL>      N  epoch seconds
//
// No item holds a token, a digest of one, or anything the user proved
// themselves with.
const (
	KindHistory  = "session-history"
	HistorySort  = "H#"
	AttrEvent    = "event"
	AttrAt       = "at"
	AttrCount    = "count"
	AttrDevice   = "device"
	failedSuffix = "failed"
)

// HistoryEntry is one item of a user's history, decoded.
type HistoryEntry struct {
	Event     string
	At        time.Time // milliseconds
	ID        string
	Methods   []string
	Address   string
	UserAgent string
	Device    string // a new device's, as DeviceKey takes it
	Count     int64
	Expires   time.Time // whole seconds, as stored for TTL
	// Cursor is the entry's place in the history: its sort key without
	// HistorySort, which the next page starts after.
	Cursor string
}

// historyCursor is the form of HistoryEntry.Cursor, and so of every
// cursor a reader may be handed back.
var historyCursor = regexp.MustCompile(`^[0-9a-f]{12}#([0-9a-f]{8}|` + failedSuffix + `)$`)

// ValidHistoryCursor reports whether s is a cursor that an entry could
// have: anything else is refused before it reaches DynamoDB.
func ValidHistoryCursor(s string) bool { return historyCursor.MatchString(s) }

// HistoryCursorTime is the time of the entry at cursor, a valid one: for a
// failed-sign-in item, its hour's start.
func HistoryCursorTime(cursor string) time.Time {
	ms, _ := strconv.ParseInt(cursor[:12], 16, 64)
	return time.UnixMilli(ms)
}

// HistoryKey addresses the history item of a user at cursor.
func (l *Layout) HistoryKey(userPK, userSK, cursor string) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(userPK, userSK), HistorySort+cursor)
}

// EncodeHistory encodes e as a new item of the history of a user: its
// cursor is e.At's and a random part, so that two events of one
// millisecond are two items.
func (l *Layout) EncodeHistory(userPK, userSK string, e HistoryEntry) map[string]types.AttributeValue {
	var random [4]byte
	rand.Read(random[:])
	av := l.HistoryKey(userPK, userSK, timePrefix(e.At)+"#"+hex.EncodeToString(random[:]))
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindHistory)
	av[AttrEvent] = Str(e.Event)
	av[AttrAt] = Num(e.At.UnixMilli())
	av[l.TTLAttribute] = Num(e.Expires.Unix())
	if e.ID != "" {
		av[AttrID] = Str(e.ID)
	}
	if len(e.Methods) > 0 {
		methods := make([]types.AttributeValue, len(e.Methods))
		for i, m := range e.Methods {
			methods[i] = Str(m)
		}
		av[AttrMethods] = &types.AttributeValueMemberL{Value: methods}
	}
	if e.Address != "" {
		av[AttrAddress] = Str(e.Address)
	}
	if e.Device != "" {
		av[AttrDevice] = Str(e.Device)
	}
	if e.UserAgent != "" {
		av[AttrUserAgent] = Str(e.UserAgent)
	}
	return av
}

// CountFailed counts one failed sign-in of a user, at e.At, in the item of
// its hour: it makes the item, or adds one to its count, and keeps the
// last attempt's address and User-Agent. It returns the item's key and
// the write.
func (l *Layout) CountFailed(userPK, userSK string, e HistoryEntry) (map[string]types.AttributeValue, Writes) {
	hour := e.At.Truncate(time.Hour)
	w := Writes{
		Update: "SET #v = :v, #kind = :kind, #event = :event, #at = :at, #ttl = :ttl, #addr = :addr, #agent = :agent ADD #count :one",
		// An item of another kind under the key is no history's: leave it.
		Condition: "attribute_not_exists(#kind) OR #kind = :kind",
		Names: map[string]string{
			"#v": AttrVersion, "#kind": AttrKind, "#event": AttrEvent, "#at": AttrAt, "#ttl": l.TTLAttribute,
			"#addr": AttrAddress, "#agent": AttrUserAgent, "#count": AttrCount,
		},
		Values: map[string]types.AttributeValue{
			":v": Num(StateFormat), ":kind": Str(KindHistory), ":event": Str(e.Event), ":at": Num(hour.UnixMilli()),
			// Kept for the retention after the hour's last possible attempt.
			":ttl":  Num(e.Expires.Add(hour.Add(time.Hour).Sub(e.At)).Unix()),
			":addr": Str(e.Address), ":agent": Str(e.UserAgent), ":one": Num(1),
		},
	}
	return l.HistoryKey(userPK, userSK, timePrefix(hour)+"#"+failedSuffix), w
}

// DecodeHistory reads a history item, or returns an error wrapping
// ErrMalformed for any other item, or one it cannot read.
func (l *Layout) DecodeHistory(av map[string]types.AttributeValue) (HistoryEntry, error) {
	if err := checkKind(av, KindHistory); err != nil {
		return HistoryEntry{}, err
	}
	d := decoder{av: av}
	e := HistoryEntry{
		Event:     d.str(AttrEvent, true),
		At:        time.UnixMilli(d.num(AttrAt)),
		ID:        d.str(AttrID, false),
		Methods:   d.strs(AttrMethods),
		Address:   d.str(AttrAddress, false),
		UserAgent: d.str(AttrUserAgent, false),
		Device:    d.str(AttrDevice, false),
		Expires:   time.Unix(d.num(l.TTLAttribute), 0),
	}
	if _, present := av[AttrCount]; present {
		e.Count = d.num(AttrCount)
	}
	e.Cursor = strings.TrimPrefix(d.str(l.SortKey, true), HistorySort)
	if d.err == nil && !ValidHistoryCursor(e.Cursor) {
		d.fail("history sort key %q", e.Cursor)
	}
	if d.err != nil {
		return HistoryEntry{}, fmt.Errorf("history item: %w", d.err)
	}
	return e, nil
}

// A device a user signed in from (Cookie.RememberDevices), by the digest
// of the random ID its device cookie holds, which is no secret of any
// session: one item in the user's index partition, beside their history,
// kept by TTL for as long as the cookie from the first sign-in.
//
//	pk    S  the user's index partition (Layout.IndexPK)
//	sk    S  DEV#<base64url(sha256(user PK, NUL, user SK, NUL, device ID))>
//	v     N  1
//	kind  S  "session-device"
//	at    N  the first sign-in from it, epoch milliseconds
//	<TTL> N  epoch seconds
const (
	KindDevice = "session-device"
	DeviceSort = "DEV#"
)

// DeviceKey addresses the item of a user's device whose ID has digest.
func (l *Layout) DeviceKey(userPK, userSK, digest string) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(userPK, userSK), DeviceSort+digest)
}

// EncodeDevice encodes the item of a user's device whose ID has digest,
// first seen at, kept until expires.
func (l *Layout) EncodeDevice(userPK, userSK, digest string, at, expires time.Time) map[string]types.AttributeValue {
	av := l.DeviceKey(userPK, userSK, digest)
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindDevice)
	av[AttrAt] = Num(at.UnixMilli())
	av[l.TTLAttribute] = Num(expires.Unix())
	return av
}

// DeviceOver is the condition of a device item's write: the key is free,
// or holds a device item that expired by now (TTL deletes it late), so
// that of racing first sign-ins from one device one writes.
func (l *Layout) DeviceOver(now time.Time) Writes {
	return Writes{
		Condition: "attribute_not_exists(#pk) OR (#kind = :device AND #ttl <= :now)",
		Names:     map[string]string{"#pk": l.PartitionKey, "#kind": AttrKind, "#ttl": l.TTLAttribute},
		Values:    map[string]types.AttributeValue{":device": Str(KindDevice), ":now": Num(now.Unix())},
	}
}

// DeviceWrittenAt is the condition of deleting the device item written
// at: none a later sign-in wrote.
func (l *Layout) DeviceWrittenAt(at time.Time) Writes {
	return Writes{
		Condition: "#kind = :device AND #at = :at",
		Names:     map[string]string{"#kind": AttrKind, "#at": AttrAt},
		Values:    map[string]types.AttributeValue{":device": Str(KindDevice), ":at": Num(at.UnixMilli())},
	}
}

// WrittenBefore is the condition of deleting a history or device item
// (kind) written before t: a former user's, not one of a user made anew
// since.
func (l *Layout) WrittenBefore(kind string, t time.Time) Writes {
	return Writes{
		Condition: "#kind = :kind AND #at < :t",
		Names:     map[string]string{"#kind": AttrKind, "#at": AttrAt},
		Values:    map[string]types.AttributeValue{":kind": Str(kind), ":t": Num(t.UnixMilli())},
	}
}

// DeviceExpires reads a device item's expiry; an error for an item of
// another kind or form.
func (l *Layout) DeviceExpires(av map[string]types.AttributeValue) (time.Time, error) {
	if err := checkKind(av, KindDevice); err != nil {
		return time.Time{}, err
	}
	d := decoder{av: av}
	expires := time.Unix(d.num(l.TTLAttribute), 0)
	return expires, d.err
}
