package ddbsessionotel

import (
	"context"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbsession/ddbsession"
)

// This file traces a request's session check: Guard starts its span, and
// one of three ends it, whichever comes first: OnEvent for a rejection or
// a store failure, the guard calling the app's handler, or the guard
// returning. The package documentation says why it is built so.

// spanName is the check span's name.
const spanName = "ddbsession.check"

// The values of ddbsession.check.outcome.
const (
	outcomeAccepted    = "accepted"
	outcomeRejected    = "rejected"
	outcomeStoreFailed = "store-failed"
	outcomeNone        = "none"
)

// Guard wraps guard, a Manager's RequireSession or LoadSession, so that a
// span covers each request's session check, with the DynamoDB calls of an
// instrumented client as its children and the outcome as its attributes.
// session is the same Manager's Session method, which tells an accepted
// request from an anonymous one that LoadSession lets through:
//
//	signedIn := tel.Guard(sessions.RequireSession, sessions.Session)
//	mux.Handle("GET /account", signedIn(http.HandlerFunc(account)))
//
// The span ends before the app's handler runs, and the handler's context
// has the span that was current before the check (the server's, say)
// current again, with the session and user that the guard put in it. A
// rejection's reason and a store failure come to the span through the
// events: the Manager's Config.OnEvent must call this Telemetry's OnEvent.
func (t *Telemetry) Guard(guard func(http.Handler) http.Handler, session func(context.Context) (ddbsession.Session, bool)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		guarded := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c := checkFrom(r.Context()); c != nil {
				outcome := outcomeNone
				if _, ok := session(r.Context()); ok {
					outcome = outcomeAccepted
				}
				c.end(outcome)
				// The parent span is current again, and the check is no
				// longer in the context: events of the handler's own
				// calls (a Logout, say) are not the check's.
				ctx := context.WithValue(trace.ContextWithSpan(r.Context(), c.parent), checkKey{}, (*check)(nil))
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
		}))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			parent := trace.SpanFromContext(r.Context())
			ctx, span := t.tracer.Start(r.Context(), spanName, trace.WithSpanKind(trace.SpanKindInternal))
			c := &check{span: span, parent: parent}
			guarded.ServeHTTP(w, r.WithContext(context.WithValue(ctx, checkKey{}, c)))
			// Neither the handler nor an event: the request carried no
			// credential, or the guard refused it without an event (a
			// cookie and a bearer token at once; a user item that the
			// app's type cannot decode).
			c.end(outcomeNone)
		})
	}
}

// checkKey keys the request's check in its context.
type checkKey struct{}

// check is one request's session check in progress.
type check struct {
	span   trace.Span
	parent trace.Span // the span current before the check, which the app's handler gets back
	once   sync.Once
}

// checkFrom returns the check in progress in ctx, or nil.
func checkFrom(ctx context.Context) *check {
	c, _ := ctx.Value(checkKey{}).(*check)
	return c
}

// end ends the check's span with its outcome and attrs, the first time it
// is called.
func (c *check) end(outcome string, attrs ...attribute.KeyValue) {
	c.once.Do(func() {
		c.span.SetAttributes(outcomeKey.String(outcome))
		c.span.SetAttributes(attrs...)
		if outcome == outcomeStoreFailed {
			c.span.SetStatus(codes.Error, "session store failed")
		}
		c.span.End()
	})
}
