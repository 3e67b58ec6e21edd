// Package ddbstream runs an application's clean-up code when DynamoDB's Time
// to Live deletes an expired session, from an AWS Lambda function subscribed
// to the session table's stream. It is a module of its own, so that only its
// users download aws-lambda-go:
//
//	go get github.com/ddbsession/ddbsession/ddbstream
//
// DynamoDB deletes expired session items on its own, some time (typically
// within a few days) after their expiry. Each deletion appears on the
// table's stream as a REMOVE record whose userIdentity is the DynamoDB
// service. [Handler] picks those records out, decodes the session from the
// record's old image and passes it to the application's clean-up function,
// for example to delete per-session data kept elsewhere or to audit the
// expiry:
//
//	func main() {
//		h, err := ddbstream.New(ddbstream.Config{
//			Cleanup: func(ctx context.Context, s ddbsession.Session) error {
//				return carts.DeleteForSession(ctx, s.User, s.ID)
//			},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		lambda.Start(h.Handle)
//	}
//
// lambda is github.com/aws/aws-lambda-go/lambda. The function is wired up
// like this:
//
//   - The table's stream must carry old images: StreamViewType OLD_IMAGE or
//     NEW_AND_OLD_IMAGES. With KEYS_ONLY or NEW_IMAGE a deleted item cannot be
//     decoded; such records are logged and skipped.
//   - The event source mapping should list ReportBatchItemFailures in its
//     FunctionResponseTypes. Handle reports a failed clean-up as a batch item
//     failure and returns no error; without ReportBatchItemFailures Lambda
//     ignores the report and counts the whole batch as done, and the failed
//     clean-ups are not retried.
//   - [Config.Layout] is the table's layout: the same value as ddbsession's
//     Config.Layout (its TTL attribute, above all, where that is not
//     "expiresAt").
//   - To spare invocations in a busy shared table, the mapping may filter
//     on the old image's kind, with the pattern
//     {"dynamodb": {"OldImage": {"kind": {"S": ["session"]}}}}. Lambda
//     filters DynamoDB events on the dynamodb key only, so the TTL check on
//     userIdentity stays in Handle.
//
// Items are decoded by ddbsession's own decoder, [ddbitem.DecodeSession],
// whose errors ([ddbitem.ErrOtherKind], [ddbitem.ErrMalformed])
// [Handler.Decode] returns as they are, in the format of
// https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md;
// the table's stream is set up in the CloudFormation example of
// https://github.com/ddbsession/ddbsession/blob/main/docs/operations.md#the-table.
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

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// Config configures a [Handler]. Cleanup is required; the other fields may
// be left zero for their defaults, which [New] fills in once.
type Config struct {
	// Cleanup runs for every session that TTL deleted. It must be
	// idempotent: Lambda delivers records at least once. The Session never
	// holds the token.
	Cleanup func(context.Context, ddbsession.Session) error

	// Layout is the session table's layout, the same value as
	// ddbsession's Config.Layout: the zero Layout for a table with the
	// default names.
	Layout ddbsession.Layout

	// Logger receives skipped malformed items, records without an old
	// image and failed clean-ups. Default slog.Default().
	Logger *slog.Logger
}

// Handler turns TTL deletions on a session table's stream into Cleanup
// calls. It is safe for concurrent use.
type Handler struct {
	cfg Config
}

// New validates cfg, fills in its defaults and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Cleanup == nil {
		return nil, errors.New("ddbstream: Config.Cleanup is nil")
	}
	layout, err := ddbitem.Resolve(cfg.Layout)
	if err != nil {
		return nil, fmt.Errorf("ddbstream: Config.Layout: %w", err)
	}
	cfg.Layout = layout
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg}, nil
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

// Handle is the Lambda handler for the session table's stream: pass it to
// lambda.Start. For every record that [IsTTLDelete] accepts and whose old
// image [Handler.Decode] reads as a session, it calls Cleanup, one record
// after another in stream order; it skips all other records.
//
// A record whose Cleanup returns an error, or that is not attempted because
// ctx is already done, is reported in BatchItemFailures by its sequence
// number, so that Lambda retries from it. The other records are still
// processed. A session item that Decode rejects as malformed is logged at
// error level and skipped rather than failed: retrying cannot fix it, and a
// failed record would hold up its stream shard until it ages out. Handle
// never returns an error.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		if !IsTTLDelete(r) {
			continue
		}
		log := h.cfg.Logger.With("eventID", r.EventID, "sequenceNumber", r.Change.SequenceNumber)
		if len(r.Change.OldImage) == 0 {
			log.WarnContext(ctx, "ddbstream: skipping a TTL deletion without an old image; set the stream's view type to OLD_IMAGE or NEW_AND_OLD_IMAGES",
				"streamViewType", r.Change.StreamViewType)
			continue
		}
		s, err := h.Decode(r.Change.OldImage)
		if errors.Is(err, ddbitem.ErrOtherKind) {
			continue
		}
		if err != nil {
			log.ErrorContext(ctx, "ddbstream: skipping a TTL-deleted session item; does Config.Layout.TTLAttribute match the table's TTL attribute?",
				"ttlAttribute", h.cfg.Layout.TTLAttribute, "err", err)
			continue
		}
		if err := ctx.Err(); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			continue
		}
		if err := h.cfg.Cleanup(ctx, s); err != nil {
			log.ErrorContext(ctx, "ddbstream: session clean-up failed; Lambda will retry the record", "sid", s.ID, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
		}
	}
	return resp, nil
}

// Decode reads a session item from a stream record's image, normally its
// OldImage, through [ddbitem.DecodeSession]. It returns
// [ddbitem.ErrOtherKind] for any other item (a per-user index item, a login
// that waited for its second factor, one of the application's own items),
// and an error wrapping [ddbitem.ErrMalformed] for an item of kind
// "session" that it cannot read: a required attribute, such as the
// layout's TTL attribute, missing or of the wrong type, or a format version
// this release does not know.
//
// Decode is for handlers that do more than [Handler.Handle] does, such as
// one function that handles both sessions and the application's own items:
//
//	for _, r := range ev.Records {
//		if !ddbstream.IsTTLDelete(r) {
//			continue
//		}
//		if s, err := h.Decode(r.Change.OldImage); err == nil {
//			// a session expired
//		}
//	}
func (h *Handler) Decode(image map[string]events.DynamoDBAttributeValue) (ddbsession.Session, error) {
	return ddbitem.DecodeSession(h.cfg.Layout, attributes(image))
}

// attributes converts a stream image to the SDK's attribute values, which
// the decoder reads. It carries Strings, Numbers, Binaries, Lists and Maps;
// an attribute of a type the format does not use becomes NULL, so that the
// decoder reports it as mistyped rather than missing.
func attributes(image map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	av := make(map[string]types.AttributeValue, len(image))
	for name, v := range image {
		av[name] = attribute(v)
	}
	return av
}

// attribute converts one stream attribute value, Lists and Maps within
// too (a session's methods are a List). Types the format does not use
// become NULL, which its decoder rejects where a value is required.
func attribute(v events.DynamoDBAttributeValue) types.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeList:
		l := make([]types.AttributeValue, len(v.List()))
		for i, e := range v.List() {
			l[i] = attribute(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case events.DataTypeMap:
		return &types.AttributeValueMemberM{Value: attributes(v.Map())}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
