package item

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The scs session item: the session of an app on github.com/alexedwards/scs
// kept by the scsstore module. It shares the table layout, the version
// attribute, the TTL attribute and the token hashing of the core's session
// item, and is told apart from it by its kind, its partition key prefix and
// its sort key. Its attributes are described once, for readers, under "Item
// format" in ddbsession's package documentation. A deleted session is not
// removed but turned into a tombstone that TTL removes later, so that a
// request that loaded the session before it was deleted cannot write it
// back (see scsstore).
const (
	KindSCS          = "scs-session"
	KindSCSDestroyed = "scs-destroyed"
	AttrData         = "data"
	// DefaultSCSPrefix starts an scs session item's partition key.
	DefaultSCSPrefix = "SCS#"
	scsSort          = "SCS"
)

// SCSSession is an scs session item, decoded. It never holds the token.
type SCSSession struct {
	Data      []byte
	ExpiresAt time.Time // whole seconds, as stored for TTL
}

// SCSLayout is where scs session items live: the table's [Layout] and the
// prefix of their partition keys.
type SCSLayout struct {
	Layout
	Prefix string
}

// PK returns the partition key of the scs session behind token: the prefix
// and base64url(SHA-256(token)), hashed as the core hashes its tokens.
func (l *SCSLayout) PK(token string) string {
	hashing := l.Layout
	hashing.SessionPrefix = l.Prefix
	return hashing.SessionPK(token)
}

// Key addresses the scs session item whose partition key is pk.
func (l *SCSLayout) Key(pk string) map[string]types.AttributeValue {
	return l.Layout.Key(pk, scsSort)
}

// Encode encodes s as the scs session item stored under pk.
func (l *SCSLayout) Encode(pk string, s SCSSession) map[string]types.AttributeValue {
	av := l.Key(pk)
	av[AttrVersion] = Num(StateFormat)
	av[AttrKind] = Str(KindSCS)
	av[AttrData] = &types.AttributeValueMemberB{Value: s.Data}
	av[l.TTLAttribute] = Num(s.ExpiresAt.Unix())
	return av
}

// Decode reads an scs session item. It returns [ErrOtherKind] for any other
// item, a tombstone included, and an error wrapping [ErrMalformed] for an
// scs session item that is not in format [StateFormat].
func (l *SCSLayout) Decode(av map[string]types.AttributeValue) (SCSSession, error) {
	if k, _ := av[AttrKind].(*types.AttributeValueMemberS); k == nil || k.Value != KindSCS {
		return SCSSession{}, ErrOtherKind
	}
	d := decoder{av: av}
	if v := d.num(AttrVersion); d.err == nil && v != StateFormat {
		return SCSSession{}, fmt.Errorf("%w: format version %d is not %d", ErrMalformed, v, StateFormat)
	}
	s := SCSSession{Data: d.bin(AttrData), ExpiresAt: time.Unix(d.num(l.TTLAttribute), 0)}
	if d.err != nil {
		return SCSSession{}, d.err
	}
	return s, nil
}

// CommitCondition is the condition of every put of an scs session item: the
// key is free, or holds a live scs session. It holds neither for a
// tombstone, so a deleted session is never written back, nor for an item of
// another kind, so the app's own items are never overwritten.
func (l *SCSLayout) CommitCondition() Writes {
	return Writes{
		Condition: "attribute_not_exists(#pk) OR #kind = :live",
		Names:     map[string]string{"#pk": l.PartitionKey, "#kind": AttrKind},
		Values:    map[string]types.AttributeValue{":live": Str(KindSCS)},
	}
}

// Destroy turns a live scs session item into a tombstone that TTL removes
// at until: the data goes, the kind becomes [KindSCSDestroyed]. The
// condition makes it a no-op for a missing item, a tombstone, or an item of
// another kind.
func (l *SCSLayout) Destroy(until time.Time) Writes {
	return Writes{
		Update:    "SET #kind = :dead, #ttl = :until REMOVE #data",
		Condition: "#kind = :live",
		Names:     map[string]string{"#kind": AttrKind, "#ttl": l.TTLAttribute, "#data": AttrData},
		Values: map[string]types.AttributeValue{
			":live":  Str(KindSCS),
			":dead":  Str(KindSCSDestroyed),
			":until": Num(until.Unix()),
		},
	}
}

// scsTokenLen is the length of an scs v2 token: 32 random bytes in
// unpadded base64url. scs's HashTokenInStore passes the token's SHA-256 in
// the same form, which has the same shape.
const scsTokenLen = 43

// ValidSCSToken reports whether s has the shape of an scs token. Anything
// else is rejected before it can cost a DynamoDB call.
func ValidSCSToken(s string) bool {
	if len(s) != scsTokenLen {
		return false
	}
	// Strict: the two spare bits of the last character must be zero, as
	// they are in every token scs generates, so each token has one spelling.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}
