// Package mcpsession keeps the sessions of an MCP server built on
// github.com/mark3labs/mcp-go in DynamoDB, through ddbsession, so that every
// instance of the server behind a load balancer serves every session. It is
// a module of its own, so that only its users download mcp-go:
//
//	go get github.com/ddbsession/ddbsession/mcpsession
//
// An example server, run as two instances, and the tests behind each of its
// promises are in https://github.com/ddbsession/ddbsession/blob/main/docs/mcp.md.
//
// MCP's protocol versions 2025-03-26 through 2025-11-25 give each client a
// session at initialize, in the Mcp-Session-Id header, which every request
// after it carries and a DELETE ends. mcp-go keeps sessions in the memory of
// the instance that served initialize; its server.SessionIdManager
// interface lets a server keep them elsewhere. This package is one, on
// ddbsession's bearer sessions: an MCP session is a bearer session of one
// user item, the server's own, and its Mcp-Session-Id is the session's
// bearer token.
//
//   - IDs have the token's strength: 130 random bits (26 base32
//     characters). The table holds only the token's SHA-256.
//   - Each request's ID is checked with one strongly consistent GetItem of
//     its session item (on a Layout.MREC table, a BatchGetItem of it and
//     its end record), expiry and revocation in code (TTL deletes up to 48
//     hours late): an expired session still in the table, a revoked one and
//     one never issued all get 404, the protocol's answer that tells the
//     client to initialize again. A malformed ID costs no call, and no
//     request writes for an ID that is not a live session; a request
//     without an ID (but initialize) gets 400, at no call. The server's
//     user item, which every session shares, is not in that read (see
//     Costs).
//   - Use slides the expiry forward at most once per
//     Limits.RefreshInterval, after the response (a conditional UpdateItem
//     of the session item, which never extends a session that has ended);
//     the requests in between write nothing.
//   - DELETE ends the session on every instance, and so does
//     [Manager.Revoke] (one session). [Manager.RevokeAll] ends all of the
//     server's with one write: on the instance that calls it at once, on
//     the others within Limits.RevokeEveryoneWithin (see Costs).
//   - The session's data holds what initialize settled, which mcp-go lets
//     another instance restore: the protocol version, the client's info and
//     capabilities, and the log level of its last logging/setLevel (see
//     [State]). Tools read it as mcp-go offers it, on any instance.
//   - TTL deletes expired sessions; ddbstream's clean-up function gets each
//     with its data, which [StateOf] reads.
//
// # Usage
//
// Three pieces of wiring, each on the part of mcp-go it belongs to: the
// hooks on the MCP server, the transport built by [Manager.NewTransport]
// (with the Manager as its session ID manager resolver, and a logger that
// shows no session ID), and [Manager.Handler] in front of it.
//
//	sessions, err := mcpsession.New(mcpsession.Config{
//		Sessions: ddbsession.Config[struct{}]{
//			Client: dynamodb.NewFromConfig(awsCfg),
//			Table:  "app",
//			Limits: ddbsession.Limits{IdleTimeout: time.Hour},
//		},
//		Name: "notes",
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	hooks := &server.Hooks{}
//	sessions.AddHooks(hooks)
//	mcpServer := server.NewMCPServer("notes", "1.0.0", server.WithHooks(hooks), server.WithLogging())
//	transport := sessions.NewTransport(mcpServer,
//		server.WithSessionIdleTTL(time.Hour), // drops this instance's memory of idle sessions
//		server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
//	)
//	mux.Handle("/mcp", sessions.Handler(transport))
//
// A transport of mcp-go's own without the Manager as its resolver issues
// IDs that no other instance knows, and one with it but mcp-go's logger
// logs session IDs (see Logs); without the hooks, no session has its
// state, and every session is refused at its second request. The Manager
// logs each mistake. The last option keeps clients on the protocol versions
// that have sessions; without it, clients of 2026-07-28 and later are served
// too, statelessly, and never reach this package.
//
// A tool reads the session's state through mcp-go, on whichever instance
// serves it:
//
//	func whoami(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
//		client := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo).GetClientInfo()
//		return mcp.NewToolResultText(client.Name + " on " + server.RequestProtocolVersion(ctx)), nil
//	}
//
// Every initialize writes a session, and initialize needs no credential:
// put the endpoint behind the app's authentication, or a rate limit, where
// anyone can reach it. For the same reason New refuses
// Limits.MaxSessions: every MCP session is the server user's, so a limit
// would let any initialize end other clients' sessions (or, with
// RefuseAtMaxSessions, refuse every client).
//
// # Costs
//
// All MCP sessions belong to one user item, the server's, and DynamoDB
// serves one item at most 3,000 read units a second: a fleet whose every
// request read that item would be throttled there, and fail closed. So a
// request reads its session item alone, 1 read unit, and takes the
// server's sessions version from this instance's copy, which it reads
// again with the server's user item once the copy is
// Limits.RevokeEveryoneWithin old (10 seconds by default, measured on the
// monotonic clock), one read however many requests find it stale at once.
// The read is a ddbitem.Reader's, the code that ddbsession reads users
// with; its version changes with any part of the server user's stamp (its
// sessions version, on MREC its revocation item, its credential version),
// and a user item without a sessions version is refused. ddbsession reads
// its global revocation generation as often, in a request's read; the
// copy leaves it out. Per instance, that is a strongly consistent GetItem
// (on MREC a BatchGetItem of the user item and its revocation item) per
// RevokeEveryoneWithin, and the global item in one request's read,
// whatever the traffic.
// [Manager.RevokeAll] renews the copy of the instance that calls
// it right after its write; another instance serves the sessions it ended
// until its own copy is stale, and sessions initialized there meanwhile
// copy the old version and end with the others once it reads the new one.
// A session initialized after an instance saw the RevokeAll is refused by
// instances that have not seen it yet, for as long: in the window, a
// client may have to initialize again.
//
// In DynamoDB calls, as the tests count them:
//
//	initialize             4: LoginBearer's two PutItems (the session and its index item;
//	                       the server's version and the global generation come from this
//	                       instance's copies), then a GetItem and an UpdateItem that store
//	                       the state; an instance's first read also reads the global
//	                       item and the layout record, ddbsession's and the copy's alike;
//	                       the first initialize ever also creates the user item
//	                       (PutItem) and reads the copy again (a GetItem)
//	any other request      1 GetItem (on MREC a BatchGetItem of the session and its end
//	                       record), no write; once per Limits.RefreshInterval, 1 UpdateItem
//	                       after the response; once per Limits.RevokeEveryoneWithin per
//	                       instance, the copy's read, and the global item in one
//	                       request's read
//	logging/setLevel       the same, and an UpdateItem when the level changes
//	DELETE                 the same read, and 2 DeleteItems
//	an ID not issued,      the read alone, whatever the method; a malformed ID, none
//	expired or revoked
//	no ID, but initialize  none (400)
//	2026-07-28 and later   none
//
// Every initialize and DELETE writes the server user's index partition
// (the session's index item), which takes at most 1,000 writes a second:
// one server starts and ends at most about 500 sessions a second, however
// many instances serve it (docs/capacity.md).
//
// # Logs
//
// A session ID is a bearer token, and no log line of this package shows
// one: it names a session by its public ID (Session.ID, "sid"). mcp-go's
// lines do: the transport's at Info when server.WithSessionIdleTTL drops a
// session from this instance's memory, at shutdown and at a sampling
// answer; server.WithLogger's line of every request (mcp.session.id); and
// the errors mcp-go hands OnError hooks. NewTransport gives the transport
// Config.Sessions.Logger behind [RedactSessionIDs]; give server.WithLogger,
// and whatever logs those errors, a logger through it too. mcp-go shows
// the ID in two places that no logger reaches: the spans of
// server.WithTracer (leave it out, or give it a tracer that drops
// mcp.session.id), and the standard library's log, when an OnError hook
// panics (recover in the hook).
//
// # What the table cannot share
//
// mcp-go keeps some of a session in the memory of one instance, with no way
// for a server to hand it to another; behind a plain load balancer, these
// work only when the client's requests reach the instance that holds them:
//
//   - the GET stream, and whatever reaches a client through it:
//     notifications the server sends outside a request (list changes,
//     resource updates, log messages from background work), and
//     server-to-client requests (sampling, elicitation, roots), whose
//     answers the client posts, and mcp-go accepts only on the instance that
//     asked;
//   - per-session tools, resources and resource templates
//     (server.SessionWithTools and its kin): handlers are code, not data;
//   - resource subscriptions, cancellation of an in-flight request
//     (notifications/cancelled), and tasks;
//   - resumable streams: with an EventStore that every instance shares,
//     another instance replays what was recorded, but only the instance
//     that runs a stream delivers what comes after;
//   - the log level as a filter between requests: every instance learns a
//     new level at the session's next request there, not at once;
//   - the end of a session, for a GET stream already open: DELETE, Revoke,
//     RevokeAll and expiry refuse every request after them, on every
//     instance, but mcp-go checks no stream once it is open, and one stays
//     open until the client or the instance closes it.
//
// Use sticky sessions (on the Mcp-Session-Id header) for those, or, better,
// do without them, as protocol version 2026-07-28 does.
//
// # Protocol version 2026-07-28
//
// The 2026-07-28 revision removed protocol-level sessions: no Mcp-Session-Id,
// no initialize, and GET and DELETE answered with 405. Each request carries
// its protocol version, client info, capabilities and log level in _meta
// (mcp-go's server.RequestProtocolInfoFromContext), so there is nothing to
// share between instances and no session ID manager to plug in. State that
// must outlive a request lives in handles that a tool returns and the model
// passes back as arguments, bound to the request's authenticated caller:
// the module github.com/ddbsession/ddbsession/mcphandle keeps them in the
// same table, on the official Go SDK. docs/mcp.md shows a server that
// serves both revisions at one path.
//
// # Sharing a table
//
// MCP sessions live in the table's session format
// (https://github.com/ddbsession/ddbsession/blob/main/docs/item-format.md),
// as bearer sessions of the server's user item: List, RevokeAll, ddbstream
// and the ddbsession command treat them as any other session. A web app's
// sessions presented as an Mcp-Session-Id are refused (their user is not
// the server's), but a web app with BearerTokens on the same table and
// Layout would accept an Mcp-Session-Id as a bearer token for the server's
// user item, decoded into its own user type: where a web app takes bearer
// tokens, give MCP sessions a table of their own. Every Manager on a table
// shares its layout, which the table records (CreateTable writes it): a
// Manager whose Config.Sessions.Layout differs fails at its first use with
// an error naming each field and both values (Revoke and RevokeAll check
// before they write).
//
// # Reading the code
//
// A request passes through the files from the top down:
//
//	handler.go    Handler: the check of the request's Mcp-Session-Id
//	version.go    the sessions' LoadUser: this instance's copy of the server's version
//	idmanager.go  mcp-go's session ID manager: Generate, Validate, Terminate
//	hooks.go      the MCP server's hooks: storing and restoring the state
//	sessions.go   the calls into ddbsession that need a request of their own
//	state.go      the state in the session's data: one encoder, one decoder
//	request.go    what one request knows of its session
//
// manager.go holds Config, New, and the Manager's methods that need no
// request; transport.go, NewTransport; redact.go, the log filter that
// NewTransport gives the transport.
package mcpsession
