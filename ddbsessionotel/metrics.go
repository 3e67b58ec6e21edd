package ddbsessionotel

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/ddbsession/ddbsession"
)

// This file holds the instruments, one per kind of event, and what each
// event adds to them. The package documentation lists them for operators;
// this is where they are made.

// The attribute keys of this package, on metrics and spans alike. Their
// values are the library's own words (ddbsession.Reason, and the scopes
// and outcomes below), never a token, session ID or user key.
const (
	reasonKey  = attribute.Key("ddbsession.rejection.reason")
	scopeKey   = attribute.Key("ddbsession.revocation.scope")
	outcomeKey = attribute.Key("ddbsession.check.outcome")
)

// durationBounds are the refresh histogram's buckets, in seconds: the
// OpenTelemetry conventions' boundaries for request durations, from 5ms to
// 10s, which cover two DynamoDB writes up to their Limits.StoreTimeout each.
var durationBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

type instruments struct {
	created, rotated, ended, bound metric.Int64Counter
	reauthenticated, evicted       metric.Int64Counter
	adopted, newDevice             metric.Int64Counter
	revoked                        metric.Int64Counter // by ddbsession.revocation.scope
	boundRefreshed                 metric.Int64Counter
	pending, secondFactorFailed    metric.Int64Counter
	signInFailed                   metric.Int64Counter
	refused                        metric.Int64Counter
	stepUp                         metric.Int64Counter
	rejected                       metric.Int64Counter // by ddbsession.rejection.reason
	storeFailed                    metric.Int64Counter // by error.type
	refresh                        metric.Float64Histogram

	// One attribute set per revocation scope, made once.
	revokedOne, revokedUser, revokedEveryone metric.AddOption
}

func newInstruments(meter metric.Meter) (instruments, error) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	ins := instruments{
		created: counter("ddbsession.session.created", "{session}",
			"Sessions created by Login, CompleteLogin or LoginBearer, re-authentications included."),
		reauthenticated: counter("ddbsession.session.reauthenticated", "{session}",
			"Sessions created by a login on a request that carried the same user's live session, which it rotated; each is a created session too."),
		adopted: counter("ddbsession.session.adopted", "{session}",
			"Sessions that Adopt made from another session store's cookie, on its first request; each is a created session too."),
		newDevice: counter("ddbsession.session.new_device", "{session}",
			"Sessions signed in from a device their user had not used (Cookie.RememberDevices); each is a created session too."),
		rotated: counter("ddbsession.session.rotated", "{session}",
			"Sessions that a login ended because its request carried them."),
		ended: counter("ddbsession.session.ended", "{session}",
			"Sessions ended by Logout."),
		revoked: counter("ddbsession.session.revoked", "{revocation}",
			"Revocations: of one session (Revoke), of all of a user's sessions (RevokeAll), of every session (RevokeEveryone)."),
		evicted: counter("ddbsession.session.evicted", "{session}",
			"Sessions that a login ended, oldest first, to keep its user within Config.Limits.MaxSessions."),
		bound: counter("ddbsession.session.bound", "{session}",
			"Sessions that a browser bound to its device key (DBSC)."),
		boundRefreshed: counter("ddbsession.bound_cookie.refreshed", "{cookie}",
			"Bound cookies refreshed by a device that proved it holds its key (DBSC)."),
		pending: counter("ddbsession.login.pending", "{login}",
			"Two-step logins whose first factor passed (BeginLogin), left pending for the second."),
		secondFactorFailed: counter("ddbsession.login.second_factor.failed", "{attempt}",
			"Tries at a pending login's second factor that CompleteLogin's verify refused."),
		signInFailed: counter("ddbsession.login.failed", "{attempt}",
			"Logins whose verify refused the user's proof: a wrong password or second factor."),
		refused: counter("ddbsession.login.refused", "{login}",
			"Logins refused because their user had Config.Limits.MaxSessions sessions (Limits.RefuseAtMaxSessions)."),
		stepUp: counter("ddbsession.request.step_up", "{request}",
			"Requests with a session that RequireAuthentication sent to re-authenticate."),
		rejected: counter("ddbsession.request.rejected", "{request}",
			"Requests whose credential granted no session, by reason."),
		storeFailed: counter("ddbsession.store.failed", "{request}",
			"Requests failed closed because DynamoDB failed or timed out."),
		revokedOne:      metric.WithAttributeSet(attribute.NewSet(scopeKey.String("session"))),
		revokedUser:     metric.WithAttributeSet(attribute.NewSet(scopeKey.String("user"))),
		revokedEveryone: metric.WithAttributeSet(attribute.NewSet(scopeKey.String("everyone"))),
	}
	var err error
	ins.refresh, err = meter.Float64Histogram("ddbsession.session.refresh.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long a session refresh's writes took, after the response; its count is the number of refreshes."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	errs = append(errs, err)
	return ins, errors.Join(errs...)
}

// record adds e to the instrument of its kind. A kind this release does
// not know is left out.
func (ins *instruments) record(ctx context.Context, e ddbsession.Event) {
	switch e.Kind {
	case ddbsession.EventCreated:
		ins.created.Add(ctx, 1)
	case ddbsession.EventRefreshed:
		ins.refresh.Record(ctx, e.Elapsed.Seconds())
	case ddbsession.EventRotated:
		ins.rotated.Add(ctx, 1)
	case ddbsession.EventEnded:
		ins.ended.Add(ctx, 1)
	case ddbsession.EventRevoked:
		ins.revoked.Add(ctx, 1, ins.revokedOne)
	case ddbsession.EventRevokedAll:
		ins.revoked.Add(ctx, 1, ins.revokedUser)
	case ddbsession.EventRevokedEveryone:
		ins.revoked.Add(ctx, 1, ins.revokedEveryone)
	case ddbsession.EventBound:
		ins.bound.Add(ctx, 1)
	case ddbsession.EventBoundRefreshed:
		ins.boundRefreshed.Add(ctx, 1)
	case ddbsession.EventReauthenticated:
		ins.reauthenticated.Add(ctx, 1)
	case ddbsession.EventAdopted:
		ins.adopted.Add(ctx, 1)
	case ddbsession.EventNewDevice:
		ins.newDevice.Add(ctx, 1)
	case ddbsession.EventPending:
		ins.pending.Add(ctx, 1)
	case ddbsession.EventSecondFactorFailed:
		ins.secondFactorFailed.Add(ctx, 1)
	case ddbsession.EventSignInFailed:
		ins.signInFailed.Add(ctx, 1)
	case ddbsession.EventStepUp:
		ins.stepUp.Add(ctx, 1)
	case ddbsession.EventEvicted:
		ins.evicted.Add(ctx, 1)
	case ddbsession.EventRefusedAtMaxSessions:
		ins.refused.Add(ctx, 1)
	case ddbsession.EventRejected:
		ins.rejected.Add(ctx, 1, metric.WithAttributes(reasonKey.String(string(e.Reason))))
	case ddbsession.EventStoreFailed:
		ins.storeFailed.Add(ctx, 1, metric.WithAttributes(errorType(e.Err)))
	}
}

// errorType is the error.type of a store failure, one of a short list, as
// the conventions ask: "timeout" for a deadline (Limits.StoreTimeout), "canceled"
// for a request whose client went away, DynamoDB's error code (such as
// "ProvisionedThroughputExceededException" or "ThrottlingException") for an
// error that DynamoDB answered, and "_OTHER" for anything else (a network
// error, a panic in a LoadUser of the app's).
func errorType(err error) attribute.KeyValue {
	var api smithy.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return semconv.ErrorTypeKey.String("timeout")
	case errors.Is(err, context.Canceled):
		return semconv.ErrorTypeKey.String("canceled")
	case errors.As(err, &api) && errorCode(api.ErrorCode()):
		return semconv.ErrorTypeKey.String(api.ErrorCode())
	}
	return semconv.ErrorTypeOther
}

// errorCode reports whether code looks like an AWS error code (a short
// identifier), so that an endpoint that answers with anything else cannot
// raise the attribute's cardinality.
func errorCode(code string) bool {
	return code != "" && len(code) <= 64 && !strings.ContainsFunc(code, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_')
	})
}
