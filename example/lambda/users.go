package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/crypto/argon2"

	"github.com/ddbsession/ddbsession"
)

// User is the user item as the example server writes it, so that both
// serve one table: ddbsession decodes it with attributevalue and hands it
// to the handlers.
type User struct {
	Username     string       `dynamodbav:"username" json:"username"`
	PasswordHash passwordHash `dynamodbav:"passwordHash" json:"-"`
	// TOTPSecret is set for a user whose logins need a one-time code, which
	// this function does not take: such a user is refused here.
	TOTPSecret string `dynamodbav:"totpSecret,omitempty" json:"-"`
}

// passwordHash is an argon2id hash in PHC format.
type passwordHash string

// Format prints "[redacted]" for every verb, so that the hash never shows
// in a page or a log line.
func (passwordHash) Format(f fmt.State, verb rune) { io.WriteString(f, "[redacted]") }

// userItem is the whole user item: pk "USER#<username>", sk "PROFILE", and
// the User. CreateUser adds the sessions version.
type userItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	User
}

func userKey(username string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: "USER#" + username, SK: "PROFILE"}
}

const (
	maxUsername = 64   // bytes
	maxPassword = 1024 // bytes
	minPassword = 8    // a new password's length, at least
)

// normalizeUsername returns the username as stored: lower case ASCII
// letters, digits, '.', '_' and '-'. The example server takes any letters
// and refuses look-alikes; this function keeps to ASCII, which needs no
// such check.
func normalizeUsername(username string) (string, error) {
	name := strings.ToLower(strings.TrimSpace(username))
	switch {
	case name == "":
		return "", errors.New("username is required")
	case len(name) > maxUsername:
		return "", fmt.Errorf("username is longer than %d bytes", maxUsername)
	case strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}):
		return "", errors.New("username may hold letters a to z, digits, '.', '_' and '-'")
	}
	return name, nil
}

// validatePassword checks any password the app is sent.
func validatePassword(password string) error {
	switch {
	case password == "":
		return errors.New("password is required")
	case len(password) > maxPassword:
		return fmt.Errorf("password is longer than %d bytes", maxPassword)
	}
	return nil
}

// newPasswordError checks a new password: also long enough, and not the
// username.
func newPasswordError(password, username string) error {
	if err := validatePassword(password); err != nil {
		return err
	}
	switch {
	case len([]rune(password)) < minPassword:
		return fmt.Errorf("password must be at least %d characters", minPassword)
	case strings.EqualFold(password, username):
		return errors.New("password must not be the username")
	}
	return nil
}

// The example server's argon2id parameters (OWASP's minimum), so that a
// hash either one wrote, the other verifies.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var b64 = base64.RawStdEncoding

// hashPassword returns password's argon2id hash with a fresh salt, as
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>". An execution environment
// serves one request at a time, so no queue bounds the hashes at once, as
// the example server's does.
func hashPassword(password string) passwordHash {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return passwordHash(fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)))
}

// dummyHash is verified against when a login names an unknown user, so
// that it costs as much as a wrong password for a real one: the hash of a
// random password no one kept, written here rather than made at each cold
// start, where it would cost the Init a hash's time.
const dummyHash passwordHash = "$argon2id$v=19$m=19456,t=2,p=1$yAI8CNigZJLsP531EHj8Ug$Mm6gSwvP+Il3a2vqFJpEeuFlAOk4+b5lefNpQKYn5bM"

// verifyPassword reports whether password matches hash, doing the hash's
// work whenever the hash can be read.
func verifyPassword(hash passwordHash, password string) bool {
	parts := strings.Split(string(hash), "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false
	}
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil || time == 0 || threads == 0 || memory > 1<<20 {
		return false
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// Failed password checks are counted per username in the table, as the
// example server counts them (userlimit.go there), so that every execution
// environment shares one count: the item
//
//	pk         "FAILURES#<username>"
//	sk         the check: "login" or "reauthentication"
//	fullAt     Number: epoch milliseconds at which the bucket is full again
//	expiresAt  Number: epoch seconds, the table's TTL attribute
//
// holds a token bucket of burst failures, one more every every. An attempt
// takes a token before the password check, with one conditional write, and
// a success gives it back.
const (
	loginCheck  = "login"
	reauthCheck = "reauthentication"
)

type failureBucket struct{ username, check string }

func (b failureBucket) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "FAILURES#" + b.username},
		"sk": &types.AttributeValueMemberS{Value: b.check},
	}
}

type failures struct {
	client ddbsession.Client
	table  string
	every  time.Duration
	burst  int
}

// take takes a token from b at now and returns true; or false and how long
// until a token is back.
func (f failures) take(ctx context.Context, b failureBucket, now time.Time) (bool, time.Duration, error) {
	every, at := f.every.Milliseconds(), now.UnixMilli()
	last := at + int64(f.burst-1)*every // the latest fullAt that leaves a token
	expires := (at+int64(f.burst)*every)/1000 + 61
	for range 4 {
		err := f.update(ctx, b, "SET fullAt = :next, #ttl = :expires", "attribute_not_exists(fullAt) OR fullAt <= :now",
			map[string]types.AttributeValue{":next": number(at + every), ":now": number(at), ":expires": number(expires)})
		if !conditionFailed(err) {
			return err == nil, 0, err
		}
		err = f.update(ctx, b, "SET fullAt = fullAt + :every, #ttl = :expires", "fullAt > :now AND fullAt <= :last",
			map[string]types.AttributeValue{":every": number(every), ":now": number(at), ":last": number(last), ":expires": number(expires)})
		if !conditionFailed(err) {
			return err == nil, 0, err
		}
		out, err := f.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &f.table, Key: b.key(), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("fullAt")})
		if err != nil {
			return false, 0, err
		}
		n, _ := out.Item["fullAt"].(*types.AttributeValueMemberN)
		if n == nil {
			continue // gone meanwhile: a full bucket
		}
		fullAt, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return false, 0, err
		}
		if fullAt > last {
			return false, time.Duration(fullAt-last) * time.Millisecond, nil
		}
	}
	return false, f.every, nil // lost to concurrent attempts every time: refused, as if spent
}

// giveBack returns the token a successful attempt took.
func (f failures) giveBack(ctx context.Context, b failureBucket) error {
	err := f.update(ctx, b, "SET fullAt = fullAt - :every", "attribute_exists(fullAt)",
		map[string]types.AttributeValue{":every": number(f.every.Milliseconds())})
	if conditionFailed(err) {
		return nil // gone: a full bucket already
	}
	return err
}

func (f failures) update(ctx context.Context, b failureBucket, update, condition string, values map[string]types.AttributeValue) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 &f.table,
		Key:                       b.key(),
		UpdateExpression:          &update,
		ConditionExpression:       &condition,
		ExpressionAttributeValues: values,
	}
	if _, ok := values[":expires"]; ok {
		in.ExpressionAttributeNames = map[string]string{"#ttl": "expiresAt"} // ddbsession's TTL attribute
	}
	_, err := f.client.UpdateItem(ctx, in)
	return err
}

func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func conditionFailed(err error) bool {
	_, failed := errors.AsType[*types.ConditionalCheckFailedException](err)
	return failed
}

// retryAfter is d in whole seconds, at least 1, for a Retry-After header.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(d.Seconds()))))
}
