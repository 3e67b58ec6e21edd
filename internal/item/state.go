package item

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The library's own items beside a user's sessions. Each is written by one
// kind of call only, so that on a global table in multi-Region eventual
// consistency (MREC), where concurrent writes of one item in two Regions
// are settled whole, last writer wins, no write can undo another of a
// different kind:
//
//   - the revocation item holds the user's sessions version in MREC, where
//     it cannot live in the user item, which the app writes: only RevokeAll
//     and CreateUser write it, and each write only changes the version, so
//     that whichever of two concurrent revocations wins, the version is no
//     longer the one the revoked sessions copied;
//
//   - an end record, per session, says that a session ended (Logout,
//     Revoke, a rotation, an eviction) in MREC, where a refresh in another
//     Region that had not seen the delete yet writes the session item back,
//     whole, and wins: the record, which no refresh writes, keeps it ended;
//
//   - the slots item lists the sessions that a session limit counts, in the
//     order they took their slots, for the next login to count them. No
//     request reads it: a session the limit ends gets a void over it (and
//     in MREC its end record) before the session that took its place
//     exists.
//
//     revocation  pk: the user's index partition  sk: REVOKED  kind "session-revocation"  gen N
//     end record  pk: the session's               sk: ENDED    kind "session-ended"       sid S, TTL
//     slots       pk: the user's index partition  sk: SLOTS    kind "session-slots"       slots B, rev N
//     void        pk: the session's               sk: the session's  kind "session-void"   TTL
//
// A void stands, briefly, under the key of a session whose slot a login
// took: over the session, or before it was written, when the session's
// write (or the SDK's retry of one), which must find its key free, fails;
// so no session outlives its slot.
//
// In a hash-only table an end record's partition key is the session's and
// "#ENDED" (no session's partition key ends so), and there are no slots.
const (
	KindRevocation = "session-revocation"
	KindEnded      = "session-ended"
	KindSlots      = "session-slots"
	KindVoid       = "session-void"
	revocationSort = "REVOKED"
	endedSort      = "ENDED"
	slotsSort      = "SLOTS"
	AttrSlots      = "slots"
	AttrSlotsRev   = "rev"
)

// RevocationKey addresses a user's revocation item.
func (l *Layout) RevocationKey(userPK, userSK string) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(userPK, userSK), revocationSort)
}

// DecodeRevocation reads a revocation item's version: 0 for none. An item
// of another form is an error, so that its reader fails closed.
func DecodeRevocation(av map[string]types.AttributeValue) (int64, error) {
	if av == nil {
		return 0, nil
	}
	if err := checkKind(av, KindRevocation); err != nil {
		return 0, err
	}
	d := decoder{av: av}
	return d.num(AttrGen), d.err
}

// EndKey addresses the end record of the session under sessionPK.
func (l *Layout) EndKey(sessionPK string) map[string]types.AttributeValue {
	return l.Key(l.EndPK(sessionPK), endedSort)
}

// EndPK is the partition key of the end record of the session under
// sessionPK.
func (l *Layout) EndPK(sessionPK string) string {
	if l.HashOnly {
		return sessionPK + "#" + endedSort
	}
	return sessionPK
}

// EncodeEnd is the end record of session id, under sessionPK, kept until
// until, when TTL removes it: as long as a copy of the session could live.
// id is "" for a session not written yet, whose key alone is known.
func (l *Layout) EncodeEnd(sessionPK, id string, until time.Time) map[string]types.AttributeValue {
	av := l.EndKey(sessionPK)
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindEnded)
	if id != "" {
		av[AttrID] = Str(id)
	}
	av[l.TTLAttribute] = Num(until.Unix())
	return av
}

// DecodeEnd reports whether av is an end record; nil is none. An item of
// another form under its key is an error, so that its reader fails closed.
func DecodeEnd(av map[string]types.AttributeValue) (bool, error) {
	if av == nil {
		return false, nil
	}
	return true, checkKind(av, KindEnded)
}

// EncodeVoid is the void under the key of the session under sessionPK,
// kept until until, when TTL removes it.
func (l *Layout) EncodeVoid(sessionPK string, until time.Time) map[string]types.AttributeValue {
	av := l.SessionKey(sessionPK)
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindVoid)
	av[l.TTLAttribute] = Num(until.Unix())
	return av
}

// VoidOver is the condition of a void's put: a void goes where no item is,
// or over a session, never over another void or an item of another kind.
func (l *Layout) VoidOver() Writes {
	return Writes{
		Condition: "attribute_not_exists(#pk) OR #kind = :session",
		Names:     map[string]string{"#pk": l.PartitionKey, "#kind": AttrKind},
		Values:    map[string]types.AttributeValue{":session": Str(KindSession)},
	}
}

// SlotsKey addresses a user's slots item.
func (l *Layout) SlotsKey(userPK, userSK string) map[string]types.AttributeValue {
	return l.Key(l.IndexPK(userPK, userSK), slotsSort)
}

// Slot is a session that a session limit counts.
type Slot struct {
	SessionPK string
	Created   time.Time // when its login took the slot, to the millisecond
}

// Slots is a slots item, decoded: the slots in the order they were taken,
// and the revision, for the next write's condition. The zero Slots is a
// user without one.
type Slots struct {
	List []Slot
	Rev  int64
}

// A slot is stored as the session's token digest, 32 bytes, and its
// creation in epoch milliseconds, 8 bytes big-endian: 100 slots fit in 4 KB.
const slotSize = 32 + 8

// DecodeSlots reads a slots item; the zero Slots for none.
func (l *Layout) DecodeSlots(av map[string]types.AttributeValue) (Slots, error) {
	if av == nil {
		return Slots{}, nil
	}
	if err := checkKind(av, KindSlots); err != nil {
		return Slots{}, err
	}
	d := decoder{av: av}
	s := Slots{Rev: d.num(AttrSlotsRev)}
	raw := d.bin(AttrSlots)
	if d.err != nil {
		return Slots{}, d.err
	}
	if len(raw)%slotSize != 0 {
		return Slots{}, fmt.Errorf("%w: %q is %d bytes, not slots of %d", ErrMalformed, AttrSlots, len(raw), slotSize)
	}
	for ; len(raw) > 0; raw = raw[slotSize:] {
		s.List = append(s.List, Slot{
			SessionPK: l.SessionPrefix + base64.RawURLEncoding.EncodeToString(raw[:32]),
			Created:   time.UnixMilli(int64(binary.BigEndian.Uint64(raw[32:slotSize]))),
		})
	}
	return s, nil
}

// ClaimSlots writes the slots next over prev, as read, on the condition
// that no other write came between: of racing logins one writes, and the
// others read again.
func (l *Layout) ClaimSlots(prev Slots, next []Slot) (Writes, error) {
	raw := make([]byte, 0, len(next)*slotSize)
	for _, s := range next {
		digest, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s.SessionPK, l.SessionPrefix))
		if err != nil || len(digest) != 32 {
			return Writes{}, fmt.Errorf("slot of %q: not a session's partition key", s.SessionPK)
		}
		raw = append(raw, digest...)
		raw = binary.BigEndian.AppendUint64(raw, uint64(s.Created.UnixMilli()))
	}
	w := Writes{
		Update: "SET #v = :v, #kind = :kind, #slots = :slots, #rev = :next",
		Names:  map[string]string{"#v": AttrVersion, "#kind": AttrKind, "#slots": AttrSlots, "#rev": AttrSlotsRev},
		Values: map[string]types.AttributeValue{
			":v": Num(StateFormat), ":kind": Str(KindSlots), ":slots": &types.AttributeValueMemberB{Value: raw}, ":next": Num(prev.Rev + 1),
		},
	}
	if prev.Rev == 0 {
		w.Condition = "attribute_not_exists(#rev)"
	} else {
		w.Condition = "#rev = :rev"
		w.Values[":rev"] = Num(prev.Rev)
	}
	return w, nil
}

// TryKey addresses the record of second-factor try n (1 to max) of the
// pending session under sessionPK.
func (l *Layout) TryKey(sessionPK string, n int) map[string]types.AttributeValue {
	sort := "TRY#" + strconv.Itoa(n)
	if l.HashOnly {
		return l.Key(sessionPK+"#"+sort, "")
	}
	return l.Key(sessionPK, sort)
}

// EncodeTry is the record of try n of the pending session under sessionPK,
// which TTL removes with the pending session, at expires. Each try writes
// a record of its own that must not exist yet, so that tries are counted
// even across Regions: two Regions may each take try n within the
// replication lag, but no write takes one back.
func (l *Layout) EncodeTry(sessionPK string, n int, expires time.Time) map[string]types.AttributeValue {
	av := l.TryKey(sessionPK, n)
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindTry)
	av[l.TTLAttribute] = Num(expires.Unix())
	return av
}

// KindTry is the kind of a second-factor try's record.
const KindTry = "session-try"

// checkKind is nil for an item of kind in this format, and an error
// wrapping ErrMalformed otherwise.
func checkKind(av map[string]types.AttributeValue, kind string) error {
	if k, _ := av[AttrKind].(*types.AttributeValueMemberS); k == nil || k.Value != kind {
		return fmt.Errorf("%w: not a %s item", ErrMalformed, kind)
	}
	d := decoder{av: av}
	if v := d.num(AttrVersion); d.err == nil && v != StateFormat {
		d.fail("%s format version %d is not %d", kind, v, StateFormat)
	}
	return d.err
}
