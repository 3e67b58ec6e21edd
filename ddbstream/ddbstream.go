// Package ddbstream runs an application's clean-up code when DynamoDB's Time
// to Live deletes an expired session, from an AWS Lambda function subscribed
// to the session table's stream.
//
// DynamoDB deletes expired session items on its own, some time (typically
// within a few days) after their expiry. Each deletion appears on the
// table's stream as a REMOVE record whose userIdentity is the DynamoDB
// service. [Handler] picks those records out, decodes the session from the
// record's old image and passes it to the application's clean-up function,
// for example to delete per-session data kept elsewhere or to audit the
// expiry:
//
//	func cleanup(ctx context.Context, s ddbstream.ExpiredSession) error {
//		return carts.DeleteForSession(ctx, s.User, s.ID)
//	}
//
//	func main() {
//		lambda.Start(ddbstream.Handler(cleanup))
//	}
//
// lambda is github.com/aws/aws-lambda-go/lambda. The function is wired up
// like this:
//
//   - The table's stream must carry old images: StreamViewType OLD_IMAGE or
//     NEW_AND_OLD_IMAGES. With KEYS_ONLY or NEW_IMAGE a deleted item cannot be
//     decoded; such records are logged and skipped.
//   - The event source mapping should list ReportBatchItemFailures in its
//     FunctionResponseTypes. Handler reports a failed clean-up as a batch item
//     failure and returns no error; without ReportBatchItemFailures Lambda
//     ignores the report and counts the whole batch as done, and the failed
//     clean-ups are not retried.
//   - If the table's TTL attribute is not "expiresAt" (Config.TTLAttribute),
//     pass the same name with [WithTTLAttribute].
//   - To spare invocations in a busy shared table, the mapping may filter
//     on the old image's kind, with the pattern
//     {"dynamodb": {"OldImage": {"kind": {"S": ["session"]}}}}. Lambda
//     filters DynamoDB events on the dynamodb key only, so the TTL check on
//     userIdentity stays in Handler.
//
// Only TTL deletions of session items reach the clean-up function. Inserts,
// updates, deletions by the application (Logout, Revoke, the rotation in
// Login), TTL deletions of the per-user index items that accompany sessions,
// and TTL deletions of the application's own items in a shared table are
// skipped. Sessions that RevokeAll ended stay in the table until TTL removes
// them, so they are reported then, like any other expiry.
//
// Lambda delivers stream records at least once, and retries every record
// from the first failed one, so the clean-up function must be idempotent: it
// may see the same session more than once.
package ddbstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbsession/ddbsession"
)

// Attribute names and values of the session item format that
// github.com/ddbsession/ddbsession writes, as its package comment documents
// under "Item format". Only items of kind "session" and format version 1 are
// decoded; TestHandlerDecodesManagerItems ties these names to the items a
// real Manager writes.
const (
	attrVersion     = "v"
	attrKind        = "kind"
	attrID          = "sid"
	attrUserPK      = "userPK"
	attrUserSK      = "userSK"
	attrCreatedAt   = "createdAt"
	attrRefreshedAt = "refreshedAt"
	attrUserAgent   = "userAgent"

	kindSession   = "session"
	formatVersion = 1

	defaultTTLAttribute = "expiresAt"
)

// ExpiredSession is a session that Time to Live deleted. It never holds the
// session's token.
type ExpiredSession struct {
	// ID is the session's public identifier, as in ddbsession.Session.
	ID string
	// User is the key of the user item the session belonged to. SK is empty
	// in a table without a sort key.
	User ddbsession.UserKey
	// CreatedAt is when the user signed in, to the millisecond.
	CreatedAt time.Time
	// RefreshedAt is when a request last moved the session's expiry
	// forward, to the millisecond; zero if the item does not say.
	RefreshedAt time.Time
	// ExpiresAt is when the session expired, in whole seconds. TTL deletes
	// the item some time after that. It is zero if the item has no attribute
	// of the configured TTL name, which means that [WithTTLAttribute] does
	// not match the table's TTL attribute; Handler then logs a warning.
	ExpiresAt time.Time
	// UserAgent is the User-Agent of the browser that signed in, if any.
	UserAgent string
}

// ErrNotSession is returned by [Decode] for an item that is not a session
// item: a per-user index item, or one of the application's own items.
var ErrNotSession = errors.New("ddbstream: not a session item")

// ErrMalformed is wrapped by the error that [Decode] returns for an item
// that says it is a session (kind "session") but that is not in a format
// this package knows: a required attribute is missing or has the wrong type,
// or the format version is unknown.
var ErrMalformed = errors.New("ddbstream: malformed session item")

// Option configures [Handler] and [Decode].
type Option func(*options)

type options struct {
	ttlAttribute string
	logger       *slog.Logger
}

// WithTTLAttribute names the Number attribute that holds a session's expiry
// in epoch seconds. It must match ddbsession.Config.TTLAttribute. Default
// "expiresAt".
func WithTTLAttribute(name string) Option {
	return func(o *options) { o.ttlAttribute = name }
}

// WithLogger sets the logger that receives skipped malformed items, records
// without an old image and failed clean-ups. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

func newOptions(opts []Option) options {
	o := options{ttlAttribute: defaultTTLAttribute}
	for _, opt := range opts {
		opt(&o)
	}
	if o.ttlAttribute == "" {
		o.ttlAttribute = defaultTTLAttribute
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o
}

// IsTTLDelete reports whether r records a deletion by DynamoDB's Time to
// Live: a REMOVE whose userIdentity has type "Service" and principalId
// "dynamodb.amazonaws.com". A deletion by the application has no
// userIdentity.
func IsTTLDelete(r events.DynamoDBEventRecord) bool {
	return r.EventName == string(events.DynamoDBOperationTypeRemove) &&
		r.UserIdentity != nil &&
		r.UserIdentity.Type == "Service" &&
		r.UserIdentity.PrincipalID == "dynamodb.amazonaws.com"
}

// Handler returns a Lambda handler for the session table's stream. For every
// record that [IsTTLDelete] accepts and whose old image [Decode] reads as a
// session, it calls cleanup, one record after another in stream order; it
// skips all other records.
//
// A record whose cleanup returns an error, or that is not attempted because
// ctx is already done, is reported in BatchItemFailures by its sequence
// number, so that Lambda retries from it. The other records are still
// processed. A session item that Decode rejects as malformed is logged at
// error level and skipped rather than failed: retrying cannot fix it, and a
// failed record would hold up its stream shard until it ages out. The
// handler never returns an error.
func Handler(cleanup func(context.Context, ExpiredSession) error, opts ...Option) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if cleanup == nil {
		panic("ddbstream: Handler needs a cleanup function")
	}
	o := newOptions(opts)
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, r := range ev.Records {
			if !IsTTLDelete(r) {
				continue
			}
			log := o.logger.With("eventID", r.EventID, "sequenceNumber", r.Change.SequenceNumber)
			if len(r.Change.OldImage) == 0 {
				log.WarnContext(ctx, "ddbstream: skipping a TTL deletion without an old image; set the stream's view type to OLD_IMAGE or NEW_AND_OLD_IMAGES",
					"streamViewType", r.Change.StreamViewType)
				continue
			}
			s, err := decode(r.Change.OldImage, o)
			if errors.Is(err, ErrNotSession) {
				continue
			}
			if err != nil {
				log.ErrorContext(ctx, "ddbstream: skipping a TTL-deleted session item", "err", err)
				continue
			}
			if s.ExpiresAt.IsZero() {
				log.WarnContext(ctx, "ddbstream: TTL-deleted session item has no "+strconv.Quote(o.ttlAttribute)+" attribute; does WithTTLAttribute match the table's TTL attribute?")
			}
			if err := ctx.Err(); err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
				continue
			}
			if err := cleanup(ctx, s); err != nil {
				log.ErrorContext(ctx, "ddbstream: session clean-up failed; Lambda will retry the record", "sid", s.ID, "err", err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			}
		}
		return resp, nil
	}
}

// Decode reads a session item from a stream record's image, normally its
// OldImage. It returns [ErrNotSession] for any other item, and an error
// wrapping [ErrMalformed] for an item of kind "session" that it cannot read.
// Of the options only [WithTTLAttribute] matters.
//
// Decode is for handlers that do more than [Handler] does, such as one
// function that handles both sessions and the application's own items:
//
//	for _, r := range ev.Records {
//		if !ddbstream.IsTTLDelete(r) {
//			continue
//		}
//		if s, err := ddbstream.Decode(r.Change.OldImage); err == nil {
//			// a session expired
//		}
//	}
func Decode(image map[string]events.DynamoDBAttributeValue, opts ...Option) (ExpiredSession, error) {
	return decode(image, newOptions(opts))
}

func decode(image map[string]events.DynamoDBAttributeValue, o options) (ExpiredSession, error) {
	if kind, _ := getStr(image, attrKind); kind != kindSession {
		return ExpiredSession{}, ErrNotSession
	}
	malformed := func(format string, args ...any) (ExpiredSession, error) {
		return ExpiredSession{}, fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}

	v, ok, err := getInt(image, attrVersion)
	switch {
	case err != nil:
		return malformed("%v", err)
	case !ok:
		return malformed("no format version %q", attrVersion)
	case v != formatVersion:
		return malformed("format version %d is not %d; is ddbstream older than the ddbsession that wrote it?", v, formatVersion)
	}

	var s ExpiredSession
	if s.ID, ok = getStr(image, attrID); !ok || s.ID == "" {
		return malformed("no session ID %q", attrID)
	}
	if s.User.PK, ok = getStr(image, attrUserPK); !ok || s.User.PK == "" {
		return malformed("no user key %q", attrUserPK)
	}
	if _, present := image[attrUserSK]; present {
		if s.User.SK, ok = getStr(image, attrUserSK); !ok {
			return malformed("%q is not a string", attrUserSK)
		}
	}
	if s.UserAgent, ok = getStr(image, attrUserAgent); !ok {
		if _, present := image[attrUserAgent]; present {
			return malformed("%q is not a string", attrUserAgent)
		}
	}

	created, ok, err := getInt(image, attrCreatedAt)
	if err != nil {
		return malformed("%v", err)
	}
	if !ok {
		return malformed("no creation time %q", attrCreatedAt)
	}
	s.CreatedAt = time.UnixMilli(created)

	refreshed, ok, err := getInt(image, attrRefreshedAt)
	if err != nil {
		return malformed("%v", err)
	}
	if ok {
		s.RefreshedAt = time.UnixMilli(refreshed)
	}

	expires, ok, err := getInt(image, o.ttlAttribute)
	if err != nil {
		return malformed("%v", err)
	}
	if ok {
		s.ExpiresAt = time.Unix(expires, 0)
	}
	return s, nil
}

// getStr reads a String attribute; ok is false if it is absent or of another
// type.
func getStr(image map[string]events.DynamoDBAttributeValue, name string) (string, bool) {
	av, present := image[name]
	if !present || av.DataType() != events.DataTypeString {
		return "", false
	}
	return av.String(), true
}

// getInt reads an integer Number attribute. ok is false if it is absent; an
// attribute of another type, or a fractional or out-of-range number, is an
// error rather than rounded.
func getInt(image map[string]events.DynamoDBAttributeValue, name string) (n int64, ok bool, err error) {
	av, present := image[name]
	if !present {
		return 0, false, nil
	}
	if av.DataType() != events.DataTypeNumber {
		return 0, false, fmt.Errorf("%q is not a Number", name)
	}
	n, err = strconv.ParseInt(av.Number(), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not an integer: %q", name, av.Number())
	}
	return n, true, nil
}
