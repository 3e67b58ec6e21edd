// Package mcphandle keeps the state handles of an MCP server built on the
// official Go SDK, github.com/modelcontextprotocol/go-sdk, in DynamoDB,
// through ddbsession, for MCP revision 2026-07-28 and later, which have no
// protocol sessions (SEP-2575, SEP-2567): state lives in opaque handles
// that a tool mints, that the model passes back as ordinary tool
// arguments, and that the server checks against the request's
// authenticated caller on every call. It is a module of its own, apart
// from mcpsession, which serves the revisions with sessions on
// github.com/mark3labs/mcp-go: each brings its SDK, and a server
// downloads only the one it is built on.
//
//	go get github.com/ddbsession/ddbsession/mcphandle
//
// A handle is a ddbsession bearer session of the caller's own user item,
// so everything that ends a user's sessions ends their handles:
// [ddbsession.Manager.RevokeAll] of the caller (the ddbsession command's
// "sessions revoke-all"), RevokeEveryone, a change of their credential
// version, and expiry.
//
//   - The caller is who the SDK's auth layer says (auth.RequireBearerToken
//     puts a TokenInfo in each request): by default the user item
//     "USER#<subject>" / "PROFILE" and the token's OAuth client
//     ([DefaultCaller]).
//   - The handle seals the session's token (130 random bits) with
//     AES-256-GCM, with the caller as additional data, under a key kept in
//     one item of the table: a handle opens for its caller alone, and is
//     no credential for any Manager on the table, so a handle that leaks
//     through a model's context signs nobody in. The table holds the
//     token's SHA-256 alone.
//   - Each use is one strongly consistent BatchGetItem of the handle's
//     item and the caller's user item, which no other caller's handle
//     shares; expiry and revocation are checked in code. Another caller's
//     handle, a made-up one and an expired or revoked one get the same
//     [ErrNoHandle], and none of them a write (the first two no call).
//   - Use slides the expiry forward at most once per
//     Limits.RefreshInterval, after the call; the calls in between write
//     nothing. Opening and closing a handle write only the caller's own
//     items: the handle's, and the caller's index partition.
//   - [Manager.List] lists a caller's live handles; TTL deletes expired
//     ones, and ddbstream's clean-up function gets each, whose state
//     [StateOf] reads.
//
// Costs, in DynamoDB calls and units, and how a server serves 2025-11-25
// clients beside (with mcpsession) are in
// https://github.com/ddbsession/ddbsession/blob/main/docs/mcp.md.
//
// # Usage
//
// The server goes behind auth.RequireBearerToken, whose TokenVerifier
// sets TokenInfo.UserID; a tool opens a handle, and the others use it:
//
//	handles, err := mcphandle.New[int](mcphandle.Config{
//		Sessions: ddbsession.Config[struct{}]{Client: client, Table: "app"},
//	})
//	...
//	func open(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Opened, error) {
//		h, err := handles.Open(ctx, req, 0)
//		return nil, Opened{Handle: h}, err
//	}
//	func add(ctx context.Context, req *mcp.CallToolRequest, in AddArgs) (*mcp.CallToolResult, Value, error) {
//		s, err := handles.Update(ctx, req, in.Handle, func(s *mcphandle.State[int]) error {
//			s.Data += in.N
//			return nil
//		})
//		return nil, Value{s.Data}, err
//	}
//
// A tool returns the Manager's error as its own: the SDK sends it as the
// tool's error result, the same text for every handle that is not the
// caller's live one.
//
// # Logs
//
// No log line of this package or of ddbsession shows a handle, a token or
// a digest. The SDK's lines are the SDK's to choose, and a handle is a
// tool argument like any other: give its server and its HTTP handler a
// logger through [Redact], which a test holds to seeing the SDK's lines.
//
// # Reading the code
//
//	handles.go  Config, the Manager, and each use of a handle: Open, Get, Update, Close
//	key.go      the table's handle key, which seals a session's token into its handle
//	state.go    the state in the session's data: one encoder, one decoder
//	redact.go   the log filter
package mcphandle
