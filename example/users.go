package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/text/secure/precis"

	"github.com/ddbsession/ddbsession"
)

// User is the signed-in user as the session middleware hands it to
// handlers. ddbsession's default loader decodes it from the user item with
// attributevalue. It has no password hash field on purpose: a value that
// reaches templates, JSON and logs should not carry the hash at all.
type User struct {
	Username string `dynamodbav:"username" json:"username"`
}

// userItem is the user item as sign-up writes it. It shares the sessions
// table: pk "USER#<username>", sk "PROFILE". ddbsession.Manager.RevokeAll
// adds the sessionsValidAfter attribute to it; the app never writes that.
type userItem struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	Username     string `dynamodbav:"username"`
	PasswordHash string `dynamodbav:"passwordHash"`
}

const (
	maxUsername = 64   // bytes
	maxPassword = 1024 // bytes; argon2id takes any length, but hashing has a cost
	// storeTimeout bounds each of the app's own DynamoDB calls, as
	// ddbsession.Config.StoreTimeout bounds the library's.
	storeTimeout = 2 * time.Second
)

var (
	errUsernameTaken   = errors.New("username is taken")
	errPasswordChanged = errors.New("password was changed by another request")
)

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

// normalizeUsername returns the one form of a username that the app
// stores, keys the user item on and rate-limits by, or a message fit for the
// user. Without it, "josé" typed on a Mac (decomposed) and on Windows
// (precomposed), fullwidth "ａｌｉｃｅ", "alic\u200be" with a zero-width
// space and "alice " would each be an account of their own: look-alikes of
// one user, and a way around a limit per username.
//
// It trims surrounding white space, then applies the PRECIS profile
// UsernameCaseMapped (RFC 8265): width folding, lower case, NFC, and the
// IdentifierClass, which refuses spaces, control and format characters
// (zero-width and bidi controls among them), symbols and emoji.
// UsernameCaseMapped rather than UsernameCasePreserved, because "Alice" and
// "alice" should not be two people either, and the app has no display name
// that would need the case kept; a user sees the name as stored.
func normalizeUsername(username string) (string, error) {
	username = strings.TrimSpace(username)
	switch {
	case username == "":
		return "", errors.New("username is required")
	case !utf8.ValidString(username):
		return "", errors.New("username must be text (UTF-8)")
	}
	name, err := precis.UsernameCaseMapped.String(username)
	switch {
	case err != nil:
		return "", errors.New("username may hold letters, digits and ASCII punctuation, but no spaces, symbols, control or invisible characters")
	case len(name) > maxUsername:
		return "", fmt.Errorf("username is longer than %d bytes", maxUsername)
	}
	return name, nil
}

// validatePassword returns a message fit for the user, or nil. Any bytes
// are allowed: the hash does not care, and rules about character classes
// mostly make passwords worse.
func validatePassword(field, password string) error {
	switch {
	case password == "":
		return fmt.Errorf("%s is required", field)
	case len(password) > maxPassword:
		return fmt.Errorf("%s is longer than %d bytes", field, maxPassword)
	}
	return nil
}

// users reads and writes user items in the sessions table.
type users struct {
	client ddbsession.Client
	table  string
}

// create writes a new user item. The condition makes sign-up of a taken
// username fail instead of overwriting that user's password.
func (s users) create(ctx context.Context, username, passwordHash string) error {
	key := userKey(username)
	item, err := attributevalue.MarshalMap(userItem{PK: key.PK, SK: key.SK, Username: username, PasswordHash: passwordHash})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &s.table,
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if _, taken := errors.AsType[*types.ConditionalCheckFailedException](err); taken {
		return errUsernameTaken
	}
	return err
}

// passwordHash returns username's password hash, or
// ddbsession.ErrUserNotFound. The read is strongly consistent so that a user
// can log in right after signing up, or with a password just changed.
func (s users) passwordHash(ctx context.Context, username string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            &s.table,
		Key:                  dynamoKey(userKey(username)),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("passwordHash"),
	})
	if err != nil {
		return "", err
	}
	if out.Item == nil {
		return "", ddbsession.ErrUserNotFound
	}
	var item userItem
	if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
		return "", err
	}
	return item.PasswordHash, nil
}

// setPasswordHash replaces username's password hash, but only if it is
// still oldHash: of two racing changes, the one that checked a stale
// password fails with errPasswordChanged instead of winning silently.
func (s users) setPasswordHash(ctx context.Context, username, oldHash, newHash string) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 dynamoKey(userKey(username)),
		UpdateExpression:    aws.String("SET passwordHash = :new"),
		ConditionExpression: aws.String("passwordHash = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":new": &types.AttributeValueMemberS{Value: newHash},
			":old": &types.AttributeValueMemberS{Value: oldHash},
		},
	})
	if _, changed := errors.AsType[*types.ConditionalCheckFailedException](err); changed {
		return errPasswordChanged
	}
	return err
}
