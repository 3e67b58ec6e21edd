package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// Failed password checks per username are counted in the sessions table,
// so that every instance of the app shares one count: limits kept in each
// instance's memory would let N instances behind a load balancer allow N
// times the guesses. Each username has a small item per kind of check:
//
//	pk         "FAILURES#<username>": no user ("USER#"), session, index or
//	           name ("NAMESKELETON#") item starts so
//	sk         the check: "login", "password change", "reauthentication" or
//	           "one-time code"
//	fullAt     Number: epoch milliseconds at which the bucket is full again
//	expiresAt  Number: epoch seconds, the table's TTL attribute; a bucket
//	           that is full again is the same as none
//
// One number holds the bucket (as in the generic cell rate algorithm): at
// time now it has Burst - (fullAt - now)/Every tokens left, and taking one
// moves fullAt on by Every. An attempt takes its token before the password
// check, and a success gives it back after. Both are single conditional
// updates, applied atomically by DynamoDB, so no instance reads the count
// and writes back what it computed from it: however many attempts race on
// however many instances, no more of them take a token than the bucket
// holds. That costs a write per attempt and another per success.

const (
	failuresPrefix = "FAILURES#"
	// ttlAttribute is ddbsession's default Layout.TTLAttribute, on which
	// CreateTable enables the table's TTL.
	ttlAttribute = "expiresAt"
)

// The checks that count failures per username, each with a bucket of its
// own: someone failing logins as a user does not also keep the user from
// changing the password. The password's checks have a bucket each; the
// one-time code has one for every request that sends one (the browser's
// second step, an API login, a re-authentication, a password change), so
// that a user's codes get UserLimit's guesses in all, wherever they come
// from. A request that sends both counts against both: a wrong password
// spends the password's token, a wrong code the code's.
const (
	loginCheck          = "login"
	passwordChangeCheck = "password change"
	reauthCheck         = "reauthentication" // a signed-in user's, at /reauth and /api/reauth
	codeCheck           = "one-time code"    // every one-time code, whatever request sends it
)

// userBucket names the bucket an attempt counts against: a username's
// failures at one check. The zero userBucket is none.
type userBucket struct {
	username, check string
}

func (b userBucket) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: failuresPrefix + b.username},
		"sk": &types.AttributeValueMemberS{Value: b.check},
	}
}

// userFailures counts failed password checks per username in the table.
type userFailures struct {
	client ddbsession.Client
	table  string
	limit  rateLimit
}

// take takes a token from b at now, and returns true; or false and how
// long until a token is back. ctx bounds it.
func (f userFailures) take(ctx context.Context, b userBucket, now time.Time) (bool, time.Duration, error) {
	every := f.limit.Every.Milliseconds()
	at := now.UnixMilli()
	last := at + int64(f.limit.Burst-1)*every // the latest fullAt that leaves a token
	// The item is needed until fullAt, at most a bucket's worth from now,
	// plus a minute for the clocks of instances and of DynamoDB's TTL.
	expires := (at+int64(f.limit.Burst)*every)/1000 + 61
	// A bucket moves from one case to another only when a concurrent
	// attempt changes it between these calls; a few rounds settle it.
	for range 4 {
		// A full bucket: no item yet, or one whose fullAt has passed.
		err := f.update(ctx, b, "SET fullAt = :next, #ttl = :expires", "attribute_not_exists(fullAt) OR fullAt <= :now",
			map[string]types.AttributeValue{":next": number(at + every), ":now": number(at), ":expires": number(expires)})
		if !isConditionFailed(err) {
			return err == nil, 0, err
		}
		// A bucket with a token left.
		err = f.update(ctx, b, "SET fullAt = fullAt + :every, #ttl = :expires", "fullAt > :now AND fullAt <= :last",
			map[string]types.AttributeValue{":every": number(every), ":now": number(at), ":last": number(last), ":expires": number(expires)})
		if !isConditionFailed(err) {
			return err == nil, 0, err
		}
		fullAt, err := f.fullAt(ctx, b)
		if err != nil {
			return false, 0, err
		}
		if fullAt > last {
			return false, time.Duration(fullAt-last) * time.Millisecond, nil
		}
	}
	// Lost to concurrent attempts every time: refused, as if spent.
	return false, f.limit.Every, nil
}

// giveBack returns the token an attempt took, once it has succeeded.
func (f userFailures) giveBack(ctx context.Context, b userBucket) error {
	err := f.update(ctx, b, "SET fullAt = fullAt - :every", "attribute_exists(fullAt)",
		map[string]types.AttributeValue{":every": number(f.limit.Every.Milliseconds())})
	if isConditionFailed(err) {
		return nil // the item is gone: a full bucket already
	}
	return err
}

func (f userFailures) update(ctx context.Context, b userBucket, update, condition string, values map[string]types.AttributeValue) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 &f.table,
		Key:                       b.key(),
		UpdateExpression:          &update,
		ConditionExpression:       &condition,
		ExpressionAttributeValues: values,
	}
	if _, ok := values[":expires"]; ok {
		in.ExpressionAttributeNames = map[string]string{"#ttl": ttlAttribute}
	}
	_, err := f.client.UpdateItem(ctx, in)
	return err
}

// fullAt reads b's fullAt, zero if b has no item.
func (f userFailures) fullAt(ctx context.Context, b userBucket) (int64, error) {
	out, err := f.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            &f.table,
		Key:                  b.key(),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("fullAt"),
	})
	if err != nil {
		return 0, err
	}
	n, ok := out.Item["fullAt"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func isConditionFailed(err error) bool {
	_, failed := errors.AsType[*types.ConditionalCheckFailedException](err)
	return failed
}
