package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// Passkeys (passkeys.go) keep three kinds of thing in the table.
//
// The user's passkeys live in the user item, beside the password hash, so
// that a login checks an assertion against the credentials of the same
// strongly consistent read that gives the session its sessions version,
// as a password login does (and so that the account page lists them at no
// call of its own):
//
//	passkeyHandle  B  the WebAuthn user handle: 32 random bytes, the same
//	                  for all the user's passkeys; absent before the first
//	passkeys       M  by passkeyID (base64url of the first 16 bytes of the
//	                  credential ID's SHA-256), a map of:
//	  name         S  the user's name for it
//	  record       B  go-webauthn's Credential (public key, sign counter,
//	                  flags, AAGUID, transports), MessagePack
//	  createdAt    N  epoch ms
//	  lastUsedAt   N  epoch ms of the last sign-in or step-up; absent if none
//
// An ES256 passkey takes about 200 bytes there, and a user has at most
// maxPasskeys, so the user item that every request reads stays within one
// 4 KB read unit for typical ones.
//
// A sign-in with a discoverable passkey names no user: the authenticator
// returns the user handle, which one item maps to the user's key (a user
// of the single sign-on provider's is no "USER#<username>"):
//
//	pk      "PASSKEYHANDLE#<base64url(handle)>": no user ("USER#",
//	        "SSOUSER#"), session, index or failure item starts so
//	sk      "PASSKEYHANDLE"
//	userPK  the user item's pk
//	userSK  the user item's sk
//
// A ceremony's challenge waits in an item of its own, found by the hash of
// the random ceremony ID in the browser's passkey cookie (never the ID):
//
//	pk         "PASSKEYCEREMONY#<base64url(sha256(ceremony ID))>"
//	sk         "PASSKEYCEREMONY"
//	kind       S  "register", "login" or "reauth"
//	session    S  the ID of the signed-in session that began it; absent
//	              for a sign-in, whose browser has no session yet
//	data       S  go-webauthn's SessionData, JSON (the challenge)
//	handle     B  a registration's user handle
//	until      N  epoch ms: the ceremony is refused from then on, by the
//	              app's clock
//	expiresAt  N  epoch seconds, for TTL's clean-up alone
//
// The finish step takes the item with a conditional DeleteItem whose
// condition is the kind and the session: of two finishes with one
// ceremony, on any instances, one gets the item and the other nothing, and
// a finish from another session deletes nothing.
const (
	passkeyHandlePrefix = "PASSKEYHANDLE#"
	ceremonyPrefix      = "PASSKEYCEREMONY#"
)

// passkey is one entry of the user item's passkeys map.
type passkey struct {
	Name       string `dynamodbav:"name"`
	Record     []byte `dynamodbav:"record"`
	CreatedAt  int64  `dynamodbav:"createdAt"`
	LastUsedAt int64  `dynamodbav:"lastUsedAt,omitempty"`
}

// passkeyID is the key of a credential in the passkeys map, and its ID in
// forms: short and of one length whatever the credential ID's (up to 1023
// bytes), so that it fits a form field that a step-up carries (reauth.go's
// maxKeptField) and a DynamoDB document path.
func passkeyID(credentialID []byte) string {
	sum := sha256.Sum256(credentialID)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

var (
	// errPasskeyChanged is a passkey write whose condition failed: the
	// passkey, the user handle or the user changed meanwhile.
	errPasskeyChanged = errors.New("passkeys were changed by another request")
	// errNoCeremony is a ceremony that is not there for this kind and
	// session: never begun, taken already, or begun by another session.
	errNoCeremony = errors.New("no such passkey ceremony")
	// errLastPasskey is the removal of the only passkey of a user who has
	// no password, which would lock them out.
	errLastPasskey = errors.New("the last passkey of an account without a password")
)

func str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

// addPasskey writes p into user's passkeys, with handle as the user
// handle: the first passkey creates the map and sets the handle, any
// other needs the handle to be handle already. It fails with
// errPasskeyChanged if the user item is gone, the passkey is there, the
// user has maxPasskeys, or the handle is another (a racing registration
// set it first).
func (s users) addPasskey(ctx context.Context, user ddbsession.UserKey, id string, p passkey, handle []byte, first bool) error {
	entry := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"name":      str(p.Name),
		"record":    &types.AttributeValueMemberB{Value: p.Record},
		"createdAt": number(p.CreatedAt),
	}}
	in := &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      dynamoKey(user),
		ExpressionAttributeNames: map[string]string{"#id": id},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":h": &types.AttributeValueMemberB{Value: handle},
		},
	}
	if first {
		in.UpdateExpression = aws.String("SET passkeys = :map, passkeyHandle = :h")
		in.ConditionExpression = aws.String("attribute_exists(pk) AND attribute_not_exists(passkeys) AND (attribute_not_exists(passkeyHandle) OR passkeyHandle = :h)")
		in.ExpressionAttributeValues[":map"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{id: entry}}
		in.ExpressionAttributeNames = nil
	} else {
		in.UpdateExpression = aws.String("SET passkeys.#id = :entry")
		in.ConditionExpression = aws.String("attribute_exists(pk) AND passkeyHandle = :h AND attribute_not_exists(passkeys.#id) AND size(passkeys) < :max")
		in.ExpressionAttributeValues[":entry"] = entry
		in.ExpressionAttributeValues[":max"] = number(maxPasskeys)
	}
	_, err := s.client.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return errPasskeyChanged
	}
	return err
}

// usePasskey records a sign-in with passkey id: its record, with the new
// sign counter and flags, replaces old, and lastUsedAt is now, if the
// record is still old. Of two sign-ins that read one record, one writes
// and the other gets errPasskeyChanged; so does one whose passkey was
// removed meanwhile.
func (s users) usePasskey(ctx context.Context, user ddbsession.UserKey, id string, old, record []byte, nowMs int64) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      dynamoKey(user),
		UpdateExpression:         aws.String("SET passkeys.#id.#record = :new, passkeys.#id.lastUsedAt = :now"),
		ConditionExpression:      aws.String("passkeys.#id.#record = :old"),
		ExpressionAttributeNames: map[string]string{"#id": id, "#record": "record"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":new": &types.AttributeValueMemberB{Value: record},
			":old": &types.AttributeValueMemberB{Value: old},
			":now": number(nowMs),
		},
	})
	if isConditionFailed(err) {
		return errPasskeyChanged
	}
	return err
}

// renamePasskey sets the name of user's passkey id; errPasskeyChanged if
// it is not there.
func (s users) renamePasskey(ctx context.Context, user ddbsession.UserKey, id, name string) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       dynamoKey(user),
		UpdateExpression:          aws.String("SET passkeys.#id.#name = :name"),
		ConditionExpression:       aws.String("attribute_exists(passkeys.#id)"),
		ExpressionAttributeNames:  map[string]string{"#id": id, "#name": "name"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":name": str(name)},
	})
	if isConditionFailed(err) {
		return errPasskeyChanged
	}
	return err
}

// removePasskey removes user's passkey id, and gives the user a new
// credential version in the same write, which ends every session of the
// user: one that the passkey signed in, even one whose login read the
// passkey just before this write, cannot outlive it. The condition keeps a
// way to sign in: the user has a password, or another passkey, or (viaSSO)
// signs in through the provider. It fails with errPasskeyChanged if the
// passkey is not there or it is the last way in, which
// passkeyRemovalRefused tells apart for the user as the request read it;
// this condition holds against racing removals too.
func (s users) removePasskey(ctx context.Context, user ddbsession.UserKey, id string, viaSSO bool) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       dynamoKey(user),
		UpdateExpression:          aws.String("REMOVE passkeys.#id " + bumpCredential),
		ConditionExpression:       aws.String("attribute_exists(passkeys.#id) AND (attribute_exists(passwordHash) OR size(passkeys) > :one)"),
		ExpressionAttributeNames:  map[string]string{"#id": id},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": number(1)},
	}
	if viaSSO {
		in.ConditionExpression = aws.String("attribute_exists(passkeys.#id)")
	}
	_, err := s.client.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return errPasskeyChanged
	}
	return err
}

func handleKey(handle []byte) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": str(passkeyHandlePrefix + base64.RawURLEncoding.EncodeToString(handle)),
		"sk": str("PASSKEYHANDLE"),
	}
}

// claimHandle writes the item that maps handle to user, unless it maps it
// to another user (a handle is 32 random bytes: that is a bug).
func (s users) claimHandle(ctx context.Context, handle []byte, user ddbsession.UserKey) error {
	item := handleKey(handle)
	item["userPK"], item["userSK"] = str(user.PK), str(user.SK)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &s.table,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR (userPK = :pk AND userSK = :sk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(user.PK), ":sk": str(user.SK)},
	})
	if isConditionFailed(err) {
		return errPasskeyChanged
	}
	return err
}

// handleUser returns the key of the user that handle maps to; ok is false
// for none. The read is strongly consistent, so a passkey registered a
// moment ago on another instance signs in.
func (s users) handleUser(ctx context.Context, handle []byte) (user ddbsession.UserKey, ok bool, err error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            handleKey(handle),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return user, false, err
	}
	pk, _ := out.Item["userPK"].(*types.AttributeValueMemberS)
	sk, _ := out.Item["userSK"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return user, false, nil
	}
	return ddbsession.UserKey{PK: pk.Value, SK: sk.Value}, true, nil
}

// ceremony is a passkey ceremony waiting for its finish.
type ceremony struct {
	Kind    string // ceremonyRegister, ceremonyLogin or ceremonyReauth
	Session string // the signed-in session's ID; "" for a sign-in
	Data    []byte // go-webauthn's SessionData, JSON
	Handle  []byte // a registration's user handle
	UntilMs int64
}

const (
	ceremonyRegister = "register"
	ceremonyLogin    = "login"
	ceremonyReauth   = "reauth"
)

// ceremonyKey is where the ceremony of id (the cookie's value) waits: under
// the ID's hash, so that the table never holds what the browser sends.
func ceremonyKey(id string) map[string]types.AttributeValue {
	sum := sha256.Sum256([]byte(id))
	return map[string]types.AttributeValue{
		"pk": str(ceremonyPrefix + base64.RawURLEncoding.EncodeToString(sum[:])),
		"sk": str("PASSKEYCEREMONY"),
	}
}

// putCeremony writes c under id. The ID is fresh (128 bits and more), so
// the write needs no condition.
func (s users) putCeremony(ctx context.Context, id string, c ceremony) error {
	item := ceremonyKey(id)
	item["kind"] = str(c.Kind)
	item["data"] = str(string(c.Data))
	item["until"] = number(c.UntilMs)
	item["expiresAt"] = number(c.UntilMs/1000 + 1)
	if c.Session != "" {
		item["session"] = str(c.Session)
	}
	if len(c.Handle) > 0 {
		item["handle"] = &types.AttributeValueMemberB{Value: c.Handle}
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item})
	return err
}

// takeCeremony deletes the ceremony of id and returns it, if it is of kind
// and was begun by the session sessionID ("" for a sign-in, which none
// began); otherwise it deletes nothing and fails with errNoCeremony. Its
// expiry is the caller's to check.
func (s users) takeCeremony(ctx context.Context, id, kind, sessionID string) (ceremony, error) {
	in := &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       ceremonyKey(id),
		ExpressionAttributeNames:  map[string]string{"#kind": "kind", "#session": "session"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": str(kind)},
		ReturnValues:              types.ReturnValueAllOld,
	}
	if sessionID == "" {
		in.ConditionExpression = aws.String("#kind = :kind AND attribute_not_exists(#session)")
	} else {
		in.ConditionExpression = aws.String("#kind = :kind AND #session = :session")
		in.ExpressionAttributeValues[":session"] = str(sessionID)
	}
	out, err := s.client.DeleteItem(ctx, in)
	if isConditionFailed(err) {
		return ceremony{}, errNoCeremony
	}
	if err != nil {
		return ceremony{}, err
	}
	c := ceremony{Kind: kind, Session: sessionID}
	data, _ := out.Attributes["data"].(*types.AttributeValueMemberS)
	until, _ := out.Attributes["until"].(*types.AttributeValueMemberN)
	if data == nil || until == nil {
		return ceremony{}, errNoCeremony
	}
	c.Data = []byte(data.Value)
	if c.UntilMs, err = strconv.ParseInt(until.Value, 10, 64); err != nil {
		return ceremony{}, errNoCeremony
	}
	if h, ok := out.Attributes["handle"].(*types.AttributeValueMemberB); ok {
		c.Handle = h.Value
	}
	return c, nil
}
