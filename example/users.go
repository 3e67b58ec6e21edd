package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/text/secure/precis"

	"github.com/ddbsession/ddbsession"
)

// User is the user item as sign-up writes it and as the session middleware
// hands it to handlers: ddbsession decodes it with attributevalue. It
// carries the password hash because a password login must check the hash
// that ddbsession.Manager.Login reads in the same call that stamps the
// new session: a hash read separately could be stale by the time the session
// is written (see changePassword). The hash is a passwordHash, which prints
// as "[redacted]" through fmt, templates and logs and is left out of JSON,
// so a User can reach a page or a log line without it.
type User struct {
	Username     string       `dynamodbav:"username" json:"username"`
	PasswordHash passwordHash `dynamodbav:"passwordHash" json:"-"`
}

// passwordHash is an argon2id hash in PHC format (see password.go).
type passwordHash string

// Format prints "[redacted]" for every verb: fmt, and through it
// html/template and log/slog's text output, never show the hash.
func (passwordHash) Format(f fmt.State, verb rune) { io.WriteString(f, "[redacted]") }

// MarshalJSON keeps the hash out of JSON wherever it is encoded on its own,
// as slog's JSON handler would.
func (passwordHash) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// userItem is the whole user item: the table's key and the User. It shares
// the sessions table: pk "USER#<username>", sk "PROFILE".
// ddbsession.Manager.CreateUser adds the sessionsValidAfter cutoff to it,
// and RevokeAll moves it; the app never writes that attribute itself.
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

// users writes what ddbsession does not write for it: the password hash of
// an existing user item. Reads go through ddbsession, which decodes the item
// into a User.
type users struct {
	client ddbsession.Client
	table  string
}

// setPasswordHash replaces user's password hash, but only if it is still
// oldHash: of two racing changes, the one that checked a stale password
// fails with errPasswordChanged instead of winning silently. ctx bounds it.
func (s users) setPasswordHash(ctx context.Context, user ddbsession.UserKey, oldHash, newHash passwordHash) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 dynamoKey(user),
		UpdateExpression:    aws.String("SET passwordHash = :new"),
		ConditionExpression: aws.String("passwordHash = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":new": &types.AttributeValueMemberS{Value: string(newHash)},
			":old": &types.AttributeValueMemberS{Value: string(oldHash)},
		},
	})
	if _, changed := errors.AsType[*types.ConditionalCheckFailedException](err); changed {
		return errPasswordChanged
	}
	return err
}
