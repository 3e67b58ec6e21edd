package mcpsession

import (
	"log/slog"
	"strings"

	"github.com/ddbsession/ddbsession/internal/redact"
)

// This file is the log filter that keeps session IDs, which are bearer
// tokens, out of mcp-go's log lines.

// RedactSessionIDs returns a logger that logs what l logs, with every
// session ID replaced by "[redacted]": the value of each attribute that
// mcp-go names a session by ("session", "sessionID", "mcp.session.id" and
// their kin), and, in the message and the text of every other attribute
// (an error's too), every run of 26 or more characters of the IDs' RFC
// 4648 base32 alphabet (A-Z, 2-7), so an ID that mcp-go writes into an
// error is caught too. A nil l stays nil.
//
// [Manager.NewTransport] gives the transport one. Give one to
// server.WithLogger, whose log line of every request carries its session
// ID (mcp.session.id), and to whatever logs the errors mcp-go hands an
// OnError hook, which name the session when a notification could not be
// sent:
//
//	server.NewMCPServer("notes", "1.0.0", server.WithHooks(hooks),
//		server.WithLogger(mcpsession.RedactSessionIDs(slog.Default())))
func RedactSessionIDs(l *slog.Logger) *slog.Logger {
	return redact.New(l, redact.Rules{
		Text: func(s string) string { return redact.Runs(s, redact.Base32, idLen) },
		Key:  func(key string) bool { return idKeys[strings.ToLower(key)] },
	})
}

// idKeys are the attribute keys, lower-cased, whose values are session IDs
// whatever their form: mcp-go's ("session", "sessionID",
// "mcp.session.id"), and the spellings a later release might use.
var idKeys = map[string]bool{
	"session": true, "sessionid": true, "session_id": true, "session.id": true,
	"mcp.session.id": true, "mcp-session-id": true,
}

// idLen is the length of a session ID: ddbsession's bearer token, 26
// characters of RFC 4648 base32.
const idLen = 26
