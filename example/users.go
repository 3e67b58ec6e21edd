package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// User is the user item as sign-up writes it and as the session middleware
// hands it to handlers: ddbsession decodes it with attributevalue. It
// carries the password hash because a password login must check the hash
// that ddbsession.Manager.Login reads in the same call that stamps the
// new session: a hash read separately could be stale by the time the session
// is written (see changePassword). The hash is a passwordHash, which prints
// as "[redacted]" through fmt, templates and logs and is left out of JSON,
// so a User can reach a page or a log line without it. The one-time-code
// secrets (totp.go) are the same kind of thing, and kept out the same way.
type User struct {
	Username     string       `dynamodbav:"username" json:"username"`
	PasswordHash passwordHash `dynamodbav:"passwordHash" json:"-"`
	// TOTPSecret is the secret of the authenticator app whose codes the
	// user's logins need, "" for none; TOTPLastStep is the time step of the
	// last code accepted, which no code may repeat; TOTPPending is a secret
	// shown for set-up and not confirmed yet.
	TOTPSecret   totpSecret `dynamodbav:"totpSecret,omitempty" json:"-"`
	TOTPLastStep int64      `dynamodbav:"totpLastStep,omitempty" json:"-"`
	TOTPPending  totpSecret `dynamodbav:"totpPending,omitempty" json:"-"`
	// Passkeys are the user's passkeys by passkeyID, and PasskeyHandle the
	// WebAuthn user handle they share (passkeystore.go).
	Passkeys      map[string]passkey `dynamodbav:"passkeys,omitempty" json:"-"`
	PasskeyHandle []byte             `dynamodbav:"passkeyHandle,omitempty" json:"-"`
}

// TOTPEnrolled reports whether the user's logins need a one-time code.
func (u User) TOTPEnrolled() bool { return u.TOTPSecret != "" }

// passwordHash is an argon2id hash in PHC format (see password.go).
type passwordHash string

// Format prints "[redacted]" for every verb: fmt, and through it
// html/template and log/slog's text output, never show the hash.
func (passwordHash) Format(f fmt.State, verb rune) { io.WriteString(f, "[redacted]") }

// MarshalJSON keeps the hash out of JSON wherever it is encoded on its own,
// as slog's JSON handler would.
func (passwordHash) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// userItem is the whole user item: the table's key and the User. It shares
// the sessions table: pk "USER#<username>", sk "PROFILE". It holds two
// numbers that ddbsession copies into each session at its login, and
// compares on every request (docs/item-format.md#user-items):
//
//	sessionsVersion    ddbsession's Layout.VersionAttribute: a random one
//	                   that Manager.CreateUser writes when it creates the
//	                   item, and RevokeAll changes; the app never writes it
//	credentialVersion  Layout.CredentialAttribute: absent (0) until the
//	                   first change of a credential that signs the user in
//	                   alone, the password or a passkey, which adds one to
//	                   it in the same write (bumpCredential): every session
//	                   of the user ends, none that the old credential made
//	                   outlives it, whatever the order of their writes
type userItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	User
}

const (
	maxUsername = 64   // bytes
	maxPassword = 1024 // bytes; argon2id takes any length, but hashing has a cost
)

var errPasswordChanged = errors.New("password was changed by another request")

// userKey is where username's item lives, in the form ddbsession wants.
func userKey(username string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + username, SK: "PROFILE"}
}

func dynamoKey(k ddbsession.UserKey) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: k.PK},
		"sk": &types.AttributeValueMemberS{Value: k.SK},
	}
}

// validatePassword returns a message fit for the user, or nil: the check of
// any password the app is sent, which a new one must also pass (see
// passwordpolicy.go). Any bytes are allowed: the hash does not care.
func validatePassword(field, password string) error {
	switch {
	case password == "":
		return fmt.Errorf("%s is required", field)
	case len(password) > maxPassword:
		return fmt.Errorf("%s is longer than %d bytes", field, maxPassword)
	}
	return nil
}

// users writes what ddbsession does not write for it: the password hash of
// an existing user item, its one-time-code attributes (totp.go), and its
// passkeys with their handle and ceremony items (passkeystore.go). The
// user item is read through ddbsession, which decodes it into a User.
type users struct {
	client ddbsession.Client
	table  string
}

// credentialAttribute is the user item's credential version, ddbsession's
// default Layout.CredentialAttribute, which this app keeps.
const credentialAttribute = "credentialVersion"

// bumpCredential is the clause of an UpdateExpression that gives the user
// a new credential version, in the write that changes the credential: a
// session that a login made with the old one, read in the same item as
// the old credential, cannot hold the new version.
const bumpCredential = "ADD " + credentialAttribute + " :one"

// setPasswordHash replaces user's password hash, and its credential
// version with it, but only if the hash is still oldHash: of two racing
// changes, the one that checked a stale password fails with
// errPasswordChanged instead of winning silently. ctx bounds it.
func (s users) setPasswordHash(ctx context.Context, user ddbsession.UserKey, oldHash, newHash passwordHash) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 dynamoKey(user),
		UpdateExpression:    aws.String("SET passwordHash = :new " + bumpCredential),
		ConditionExpression: aws.String("passwordHash = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":new": &types.AttributeValueMemberS{Value: string(newHash)},
			":old": &types.AttributeValueMemberS{Value: string(oldHash)},
			":one": number(1),
		},
	})
	if isConditionFailed(err) {
		return errPasswordChanged
	}
	return err
}

// skeletonPrefix starts the key of the item that reserves a username's
// skeleton (see usernames.go) for the name that holds it:
//
//	pk        "NAMESKELETON#<skeleton>": no user ("USER#"), session, index or
//	          failure ("FAILURES#") item starts so
//	sk        "NAMESKELETON"
//	username  the name that holds it
//
// A skeleton is at most 7 bytes for each byte of the name it comes from,
// so 448 for the longest name, well within a key's 2048.
const skeletonPrefix = "NAMESKELETON#"

// errLookAlike is claimSkeleton's answer for a name whose skeleton is
// held by another name.
var errLookAlike = errors.New("username looks like another")

// claimSkeleton writes the item that reserves username's skeleton, before
// sign-up creates the user item (the engine for the tests, dynalite, has
// no transactions to write both at once). The write is conditional: it
// succeeds if no name holds the skeleton, or username itself does (its
// sign-up failed after this write and is tried again, or the name is
// taken, which CreateUser then finds), and otherwise fails with
// errLookAlike. So of two look-alike names signing up at once, on any
// instances, one claims the skeleton and the other is refused.
//
// The item is never deleted. A sign-up that fails after the claim leaves
// the skeleton to its name, which can still sign up; deleting it instead
// could free a skeleton whose user a racing sign-up of the same name has
// just created.
func (s users) claimSkeleton(ctx context.Context, username string) error {
	key := skeletonPrefix + skeleton(username)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			"pk":       &types.AttributeValueMemberS{Value: key},
			"sk":       &types.AttributeValueMemberS{Value: "NAMESKELETON"},
			"username": &types.AttributeValueMemberS{Value: username},
		},
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR username = :username"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":username": &types.AttributeValueMemberS{Value: username}},
	})
	if isConditionFailed(err) {
		return errLookAlike
	}
	return err
}
