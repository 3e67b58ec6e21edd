package item

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Writes is the expression part of a conditional write to an item: what it
// sets and on which condition. The writes of the format live here, next to
// the attributes they name; the calls that carry them are ddbsession's
// store and scsstore's.
type Writes struct {
	Update, Condition string
	Names             map[string]string
	Values            map[string]types.AttributeValue
}

// Refresh slides a session item's expiry from old's to next's. It is
// conditional on the item being a session (not a session limit's void
// over it), on the expiry old was read with, and on that expiry still
// being ahead of now: so it never revives an item that was deleted or has
// expired meanwhile, and of concurrent writers that read the same expiry at
// most one writes. It records next's LastAddress, if any, at no cost of its
// own; with an expiry index, the session moves to its new bucket too.
func (l *Layout) Refresh(old, next Session, now time.Time) Writes {
	w := Writes{
		Update:    "SET #ttl = :exp, #refreshed = :refreshed",
		Condition: "attribute_exists(#pk) AND #kind = :kind AND #ttl = :old AND #ttl > :now",
		Names:     map[string]string{"#pk": l.PartitionKey, "#kind": AttrKind, "#ttl": l.TTLAttribute, "#refreshed": AttrRefreshedAt},
		Values: map[string]types.AttributeValue{
			":kind":      Str(KindSession),
			":exp":       Num(next.ExpiresAt.Unix()),
			":refreshed": Num(next.RefreshedAt.UnixMilli()),
			":old":       Num(old.ExpiresAt.Unix()),
			":now":       Num(now.Unix()),
		},
	}
	if next.LastAddress != "" {
		w.Update += ", #last = :last"
		w.Names["#last"] = AttrLastAddress
		w.Values[":last"] = Str(next.LastAddress)
	}
	if l.ExpiryIndex != "" {
		w.Update += ", #bucket = :bucket"
		w.Names["#bucket"] = AttrExpiryBucket
		w.Values[":bucket"] = Str(l.ExpiryBucket(next.ID, next.ExpiresAt))
	}
	return w
}

// Bind binds session s's item to a device key: it answers the challenge
// jti, which must still be the session's and unexpired, and the session
// must not be bound yet, so that a challenge binds once and a bound session
// is never bound to another key. The item becomes bound, in its format's
// bound form, with the key, its first bound cookie and the next challenge.
func (l *Layout) Bind(s Session, jti, key string, cookie BoundCookie, next Challenge, now time.Time) Writes {
	unbound, bound := s, s
	unbound.DeviceBound, bound.DeviceBound = false, true
	return Writes{
		Update: "SET #v = :bound, #key = :key, #cookie = :cookie, #cookieExp = :cookieExp, " +
			"#challenge = :next, #challengeExp = :nextExp",
		Condition: "attribute_exists(#pk) AND #v = :unbound AND #challenge = :jti AND #challengeExp > :now AND #ttl > :now",
		Names: map[string]string{
			"#pk": l.PartitionKey, "#v": AttrVersion, "#ttl": l.TTLAttribute, "#key": AttrBoundKey,
			"#cookie": AttrBoundCookie, "#cookieExp": AttrBoundExpires,
			"#challenge": AttrChallenge, "#challengeExp": AttrChallengeExpires,
		},
		Values: map[string]types.AttributeValue{
			":bound": Num(formatOf(bound)), ":unbound": Num(formatOf(unbound)),
			":key": Str(key), ":cookie": Str(cookie.Digest), ":cookieExp": Num(cookie.Expires.Unix()),
			":next": Str(next.Value), ":nextExp": Num(next.Expires.Unix()),
			":jti": Str(jti), ":now": Num(now.Unix()),
		},
	}
}

// Rebind gives bound session s a fresh bound cookie for the challenge jti,
// which must still be the session's and unexpired: a challenge is answered
// once. The cookie s was read with stays valid until its own expiry, for
// requests already on their way with it; the one before it is dropped.
func (l *Layout) Rebind(s Session, jti string, cookie BoundCookie, next Challenge, now time.Time) Writes {
	w := Writes{
		Update:    "SET #cookie = :cookie, #cookieExp = :cookieExp, #challenge = :next, #challengeExp = :nextExp",
		Condition: "attribute_exists(#pk) AND #v = :bound AND #key = :key AND #challenge = :jti AND #challengeExp > :now AND #ttl > :now",
		Names: map[string]string{
			"#pk": l.PartitionKey, "#v": AttrVersion, "#ttl": l.TTLAttribute, "#key": AttrBoundKey,
			"#cookie": AttrBoundCookie, "#cookieExp": AttrBoundExpires,
			"#challenge": AttrChallenge, "#challengeExp": AttrChallengeExpires,
		},
		Values: map[string]types.AttributeValue{
			":bound": Num(formatOf(s)), ":key": Str(s.Binding.Key),
			":cookie": Str(cookie.Digest), ":cookieExp": Num(cookie.Expires.Unix()),
			":next": Str(next.Value), ":nextExp": Num(next.Expires.Unix()),
			":jti": Str(jti), ":now": Num(now.Unix()),
		},
	}
	if prev := s.Binding.Cookies[0]; prev.Digest != "" {
		w.Update += ", #prev = :prev, #prevExp = :prevExp"
		w.Names["#prev"], w.Names["#prevExp"] = AttrBoundPrev, AttrBoundPrevExpires
		w.Values[":prev"], w.Values[":prevExp"] = Str(prev.Digest), Num(prev.Expires.Unix())
	}
	return w
}

// SetChallenge makes next the challenge that bound session id awaits: the
// condition finds the session bound (in either format), live, of that ID,
// and with no challenge open (none, or expired).
func (l *Layout) SetChallenge(id string, next Challenge, now time.Time) Writes {
	return Writes{
		Update: "SET #challenge = :next, #challengeExp = :nextExp",
		Condition: "attribute_exists(#pk) AND #v IN (:bound, :legacyBound) AND #sid = :sid AND #ttl > :now AND " +
			"(attribute_not_exists(#challenge) OR #challengeExp <= :now)",
		Names: map[string]string{
			"#pk": l.PartitionKey, "#v": AttrVersion, "#ttl": l.TTLAttribute, "#sid": AttrID,
			"#challenge": AttrChallenge, "#challengeExp": AttrChallengeExpires,
		},
		Values: map[string]types.AttributeValue{
			":bound": Num(FormatBound), ":legacyBound": Num(legacyFormatBound), ":sid": Str(id),
			":next": Str(next.Value), ":nextExp": Num(next.Expires.Unix()), ":now": Num(now.Unix()),
		},
	}
}

// MaxData bounds a session's data, JSON text, so that a session item with
// it stays within the 4 KB that one strongly consistent read unit reads
// (see TestSessionItemFitsOneReadUnit).
const MaxData = 2048

// SetData writes a session's data (REMOVE for "") and its new revision
// next, on the condition that the item is a session (not a void over
// it), unexpired at now, and its data revision is still rev, as read: a write never brings an ended
// session back, and of two writers that read the same revision one writes,
// and the other reads again. Revisions are random, not counted, so that a
// writer whose answer was lost knows its own write by it: two writers may
// write the same data, never the same revision.
//
// apart says that the data is in the data item of revision next
// (EncodeData), and data is then "".
func (l *Layout) SetData(data string, apart bool, rev, next int64, now time.Time) Writes {
	w := Writes{
		Update:    "SET #data = :data, #rev = :next REMOVE #apart",
		Condition: "attribute_exists(#pk) AND #kind = :kind AND #ttl > :now AND ",
		Names:     map[string]string{"#pk": l.PartitionKey, "#kind": AttrKind, "#ttl": l.TTLAttribute, "#data": AttrAppData, "#rev": AttrDataRev, "#apart": AttrDataApart},
		Values:    map[string]types.AttributeValue{":kind": Str(KindSession), ":next": Num(next), ":now": Num(now.Unix()), ":rev": Num(rev)},
	}
	switch {
	case apart:
		w.Update = "REMOVE #data SET #rev = :next, #apart = :next"
	case data == "":
		w.Update = "REMOVE #data, #apart SET #rev = :next"
	default:
		w.Values[":data"] = Str(data)
	}
	if rev == 0 {
		w.Condition += "(attribute_not_exists(#rev) OR #rev = :rev)"
	} else {
		w.Condition += "#rev = :rev"
	}
	return w
}
