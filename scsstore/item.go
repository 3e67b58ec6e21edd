package scsstore

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// The scs session item, the one format this package reads and writes, as
// docs/item-format.md ("scs session items") describes it. It shares the
// table's Layout (key names, TTL attribute) and the token hashing of the
// core's session items, and is told apart from them by its kind, its
// partition key prefix and its sort key.
const (
	attrVersion = "v"
	attrKind    = "kind"
	attrData    = "data"

	formatVersion = 1
	kindLive      = "scs-session"
	kindDestroyed = "scs-destroyed" // a tombstone: see itemLayout.destroy
	sortValue     = "SCS"

	// defaultPrefix starts an scs session item's partition key.
	defaultPrefix = "SCS#"
)

// itemLayout is where scs session items live: the table, its resolved
// Layout, and the prefix of their partition keys.
type itemLayout struct {
	table string
	ddbsession.Layout
	prefix string
}

// session is an scs session item, decoded. It never holds the token.
type session struct {
	data    []byte
	expires int64 // epoch seconds, as stored for TTL
}

// pk returns the partition key of the session behind token: the prefix and
// base64url(SHA-256(token)), unpadded, as the core hashes its tokens. The
// table never holds the token itself.
func (l *itemLayout) pk(token string) string {
	sum := sha256.Sum256([]byte(token))
	var buf [64 + 43]byte // a prefix of up to 64 bytes stays on the stack
	b := append(buf[:0], l.prefix...)
	return string(base64.RawURLEncoding.AppendEncode(b, sum[:]))
}

// key addresses the item whose partition key is pk; a hash-only table has
// no sort key.
func (l *itemLayout) key(pk string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{l.PartitionKey: str(pk)}
	if !l.HashOnly {
		k[l.SortKey] = str(sortValue)
	}
	return k
}

// encode returns s as the live item stored under pk.
func (l *itemLayout) encode(pk string, s session) map[string]types.AttributeValue {
	av := l.key(pk)
	av[attrVersion] = num(formatVersion)
	av[attrKind] = str(kindLive)
	av[attrData] = &types.AttributeValueMemberB{Value: s.data}
	av[l.TTLAttribute] = num(s.expires)
	return av
}

// decode reads a live item. ok is false for anything else: no item, a
// tombstone, an item of another kind, and a live item that lacks an
// attribute, has one of the wrong type, or is of a format version this
// package does not know. Failing closed is safer than misreading.
func (l *itemLayout) decode(av map[string]types.AttributeValue) (s session, ok bool) {
	if k, _ := av[attrKind].(*types.AttributeValueMemberS); k == nil || k.Value != kindLive {
		return session{}, false
	}
	if v, ok := integer(av, attrVersion); !ok || v != formatVersion {
		return session{}, false
	}
	// Empty data is allowed: DynamoDB stores an empty Binary outside a key.
	data, ok := av[attrData].(*types.AttributeValueMemberB)
	if !ok {
		return session{}, false
	}
	expires, ok := integer(av, l.TTLAttribute)
	if !ok {
		return session{}, false
	}
	return session{data: data.Value, expires: expires}, true
}

// get reads the item under pk, strongly consistent: the redirect after a
// login must see the session the login just wrote.
func (l *itemLayout) get(pk string) *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{TableName: &l.table, Key: l.key(pk), ConsistentRead: aws.Bool(true)}
}

// commit writes s under pk on the condition that the key is free or holds
// a live session. The condition holds neither for a tombstone, so that a
// deleted session is never written back, nor for an item of another kind,
// so that the app's own items are never overwritten.
func (l *itemLayout) commit(pk string, s session) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                 &l.table,
		Item:                      l.encode(pk, s),
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #kind = :live"),
		ExpressionAttributeNames:  map[string]string{"#pk": l.PartitionKey, "#kind": attrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{":live": str(kindLive)},
	}
}

// move writes s under pk only where the key is free: a session copied from
// the old store of a [Migration] never overwrites what the table says of
// it, a tombstone above all.
func (l *itemLayout) move(pk string, s session) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                &l.table,
		Item:                     l.encode(pk, s),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": l.PartitionKey},
	}
}

// mirror writes s under pk only where the key holds a live session: a
// commit that a [Migration] in the dual phase copies into the table for a
// session the table holds, never one that ended meanwhile.
func (l *itemLayout) mirror(pk string, s session) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                 &l.table,
		Item:                      l.encode(pk, s),
		ConditionExpression:       aws.String("#kind = :live"),
		ExpressionAttributeNames:  map[string]string{"#kind": attrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{":live": str(kindLive)},
	}
}

// bury writes a tombstone under pk that TTL removes at until (epoch
// seconds), whether the key is free, live or a tombstone already; never
// over an item of another kind. Unlike destroy, it marks a free key too: a
// [Migration] buries a session that may still be only in the old store, so
// that no copy of it can be moved in later.
func (l *itemLayout) bury(pk string, until int64) *dynamodb.PutItemInput {
	item := l.key(pk)
	item[attrVersion] = num(formatVersion)
	item[attrKind] = str(kindDestroyed)
	item[l.TTLAttribute] = num(until)
	return &dynamodb.PutItemInput{
		TableName:                &l.table,
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR #kind IN (:live, :dead)"),
		ExpressionAttributeNames: map[string]string{"#pk": l.PartitionKey, "#kind": attrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":live": str(kindLive),
			":dead": str(kindDestroyed),
		},
	}
}

// destroy turns the live item under pk into a tombstone that TTL removes
// at until (epoch seconds): the data goes, the kind becomes kindDestroyed.
// The condition makes it a no-op for a missing item, a tombstone, or an
// item of another kind.
func (l *itemLayout) destroy(pk string, until int64) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                &l.table,
		Key:                      l.key(pk),
		UpdateExpression:         aws.String("SET #kind = :dead, #ttl = :until REMOVE #data"),
		ConditionExpression:      aws.String("#kind = :live"),
		ExpressionAttributeNames: map[string]string{"#kind": attrKind, "#ttl": l.TTLAttribute, "#data": attrData},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":live":  str(kindLive),
			":dead":  str(kindDestroyed),
			":until": num(until),
		},
	}
}

// tokenLen is the length of an scs v2 token: 32 random bytes in unpadded
// base64url. scs's HashTokenInStore passes the token's SHA-256 in the same
// form, which has the same shape.
const tokenLen = 43

// validToken reports whether s has the shape of an scs token. Anything
// else is rejected before it can cost a DynamoDB call.
func validToken(s string) bool {
	if len(s) != tokenLen {
		return false
	}
	// Strict: the two spare bits of the last character must be zero, as
	// they are in every token scs generates, so each token has one spelling.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}

// integer reads an integer Number attribute; ok is false if it is absent,
// of another type, fractional or out of range.
func integer(av map[string]types.AttributeValue, name string) (n int64, ok bool) {
	v, _ := av[name].(*types.AttributeValueMemberN)
	if v == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
