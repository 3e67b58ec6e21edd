// Package ddbsessionotel reports what a [ddbsession.Manager] does to
// OpenTelemetry: its events as metrics, and each request's session check
// as a span, with the check's DynamoDB calls as children. It is a module of
// its own, so that the core's users never download OpenTelemetry:
//
//	go get github.com/ddbsession/ddbsession/ddbsessionotel
//
// What to watch, and how the example app exports it, is in
// https://github.com/ddbsession/ddbsession/blob/main/docs/operations.md#observability.
//
// # Usage
//
// [New] takes the app's meter and tracer providers; the Manager's
// Config.OnEvent is the Telemetry's OnEvent, and [Telemetry.Guard] wraps
// the Manager's guards. The DynamoDB spans come from the AWS SDK's
// OpenTelemetry middleware (otelaws), on the client the Manager uses:
//
//	tel, err := ddbsessionotel.New(ddbsessionotel.Config{MeterProvider: meters, TracerProvider: tracers})
//	if err != nil {
//		log.Fatal(err)
//	}
//	awsCfg, err := config.LoadDefaultConfig(ctx)
//	if err != nil {
//		log.Fatal(err)
//	}
//	otelaws.AppendMiddlewares(&awsCfg.APIOptions, otelaws.WithTracerProvider(tracers))
//	sessions, err := ddbsession.New(ddbsession.Config[User]{
//		Client:  dynamodb.NewFromConfig(awsCfg),
//		Table:   "app",
//		OnEvent: tel.OnEvent,
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	signedIn := tel.Guard(sessions.RequireSession, sessions.Session)
//	mux.Handle("GET /account", signedIn(http.HandlerFunc(account)))
//
// An app with an OnEvent of its own (an audit log, say) calls both from
// one function; OnEvent never blocks, so the order does not matter:
//
//	OnEvent: func(ctx context.Context, e ddbsession.Event) {
//		tel.OnEvent(ctx, e)
//		audit(ctx, e) // the app's own
//	},
//
// # Metrics
//
// One instrument per kind of [ddbsession.Event], in the "ddbsession."
// namespace, with units in the conventions' curly-brace form:
//
//	instrument                             kind       unit          event kinds (attributes)
//	ddbsession.session.created             counter    {session}     created
//	ddbsession.session.reauthenticated     counter    {session}     reauthenticated
//	ddbsession.session.adopted             counter    {session}     adopted (Adopt: another store's session moved over)
//	ddbsession.session.new_device          counter    {session}     new-device (Cookie.RememberDevices)
//	ddbsession.session.rotated             counter    {session}     rotated
//	ddbsession.session.ended               counter    {session}     ended (Logout)
//	ddbsession.session.revoked             counter    {revocation}  revoked, revoked-all, revoked-everyone
//	                                                                (ddbsession.revocation.scope: session, user, everyone)
//	ddbsession.session.evicted             counter    {session}     evicted (Config.Limits.MaxSessions)
//	ddbsession.session.bound               counter    {session}     bound (DBSC)
//	ddbsession.bound_cookie.refreshed      counter    {cookie}      bound-refreshed (DBSC)
//	ddbsession.login.pending               counter    {login}       pending (BeginLogin)
//	ddbsession.login.second_factor.failed  counter    {attempt}     second-factor-failed (CompleteLogin)
//	ddbsession.login.failed                counter    {attempt}     sign-in-failed (a verify refused)
//	ddbsession.login.refused               counter    {login}       refused-at-max-sessions (Config.Limits.RefuseAtMaxSessions)
//	ddbsession.request.step_up             counter    {request}     step-up (RequireAuthentication)
//	ddbsession.request.rejected            counter    {request}     rejected (ddbsession.rejection.reason: a ddbsession.Reason)
//	ddbsession.store.failed                counter    {request}     store-failed (error.type, below)
//	ddbsession.session.refresh.duration    histogram  s             refreshed: Event.Elapsed, the refresh's writes
//
// The refresh histogram's count is the number of refreshes; it has no
// counter of its own. Its buckets run from 5ms to 10s. A revocation of a
// user's sessions or of everyone's counts one, however many sessions it
// ends: the library ends them without reading them.
//
// The login counters overlap as the events do. A re-authentication (a
// login on a request that carried the user's own live session) counts
// once in ddbsession.session.created and once in
// ddbsession.session.reauthenticated, and the session it replaced once in
// ddbsession.session.rotated. A session that Adopt makes counts in
// ddbsession.session.created and in ddbsession.session.adopted. A two-step login counts in
// ddbsession.login.pending when BeginLogin passes its first factor, in
// ddbsession.login.second_factor.failed for each try that CompleteLogin's
// verify refuses, and in ddbsession.session.created once it completes.
// ddbsession.login.refused counts only the logins that
// Config.Limits.MaxSessions refused: a verify that refuses a password
// reports no event, and counts nowhere. A login that makes room under
// Config.Limits.MaxSessions counts each
// session it ends in ddbsession.session.evicted. A request that carries
// one of those is rejected with the reason "session-limit" while its item
// is still there (the login deletes it at once, if it can), and "unknown"
// after; a request that presents a pending login's token as its session
// is rejected with "pending".
//
// error.type is "timeout" for a store call past its Limits.StoreTimeout,
// "canceled" for a request whose client went away (no outage: the library
// logs those at debug level), DynamoDB's error code for an error that
// DynamoDB answered ("ProvisionedThroughputExceededException",
// "ThrottlingException", "ResourceNotFoundException", ...), and "_OTHER"
// for anything else (a network error, a panic in the app's LoadUser).
//
// Attribute values are the library's own words, a short fixed list each.
// No instrument carries a token, a token's hash, a session ID or a user
// key: those are per session or per user, and would make a time series of
// each.
//
// Through the OpenTelemetry Prometheus exporter the names become, for
// example, ddbsession_request_rejected_total with the label
// ddbsession_rejection_reason, and ddbsession_session_refresh_duration_seconds.
//
// # Traces
//
// [Telemetry.Guard] starts a span named "ddbsession.check" (internal) before
// the guard reads the credential. The library makes its store calls with
// the request's context, so an instrumented client's spans (one
// BatchGetItem, or two GetItems in turn) are the check span's children.
// The check span ends once the check is over, in one of three places:
//
//   - OnEvent, for a rejection or a store failure: the library reports
//     either with the request's context, where OnEvent finds the check;
//   - the guard calling the app's handler: the session was accepted, or,
//     with LoadSession, the request goes on anonymously;
//   - the guard returning, if neither came first: the request carried no
//     credential, or the guard refused it without an event (both a cookie
//     and a bearer token, 400; a user item that the app's type cannot
//     decode, 500, which the library logs).
//
// Its attribute ddbsession.check.outcome is "accepted", "rejected" (with
// ddbsession.rejection.reason), "store-failed" (with error.type, and the
// span's status an error) or "none". The check span never carries a token,
// session ID or user key either.
//
// The app's handler runs after the check span has ended, with the span that
// was current before it (an otelhttp server span, say) current again: the
// handler's context is the guard's, with the session and user in it, and
// trace.ContextWithSpan puts the parent back. The handler's own spans are
// then the check's siblings, not its children. Two things stay within the
// check's context, since the guard gives them the request it was given: a
// refresh's two UpdateItems, which the check started and which run after
// the response (their spans are children of the check span, and end after
// it), and Config.Unauthorized or StoreUnavailable, which answer a refused
// request (their spans, if they make any, are the check span's children).
//
// Guard needs the Manager's Session method to tell an accepted request from
// an anonymous one that LoadSession lets through; the guard itself does not
// say.
//
// # The DynamoDB spans
//
// This module's tests and example make them with otelaws
// (go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws),
// whose contrib module was deprecated in v0.72.0 for want of an owner: it
// still works, and this package does not import it. Guard needs no more of
// an instrumentation than that it start each call's span from the call's
// context, so another one that does (the AWS SDK's own tracing adapter, say)
// nests its spans under the check span the same way.
package ddbsessionotel
