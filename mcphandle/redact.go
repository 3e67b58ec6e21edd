package mcphandle

import (
	"log/slog"

	"github.com/ddbsession/ddbsession/internal/redact"
)

// This file is the log filter that keeps handles, and the tokens and
// digests behind them, out of the log lines of the SDK and of the app.

// Redact returns a logger that logs what l logs, with every secret in the
// message and in the text of every attribute (an error's, a value's
// printed form) replaced by "[redacted]": each run of 36 or more
// characters of the base64url alphabet (A-Z, a-z, 0-9, '-', '_'), which a
// handle (72), half of one and a SHA-256 digest in base64url (43) are, and
// each run of 26 or more of RFC 4648 base32 (A-Z, 2-7), which a ddbsession
// token is. A session's public ID (32 hex digits) stays. A nil l stays
// nil.
//
// Give it to the SDK's server (mcp.ServerOptions.Logger) and streamable
// HTTP handler (mcp.StreamableHTTPOptions.Logger), whose lines may quote
// what a request carried, and to Config.Sessions.Logger:
//
//	logger := mcphandle.Redact(slog.Default())
//	server := mcp.NewServer(impl, &mcp.ServerOptions{Logger: logger})
func Redact(l *slog.Logger) *slog.Logger {
	return redact.New(l, redact.Rules{Text: func(s string) string {
		return redact.Runs(redact.Runs(s, redact.Base64URL, minB64Run), redact.Base32, minB32Run)
	}})
}

// The shortest runs Redact replaces: half of a handle, in base64url, and
// a token, in base32; in that order, so that a base32 run inside a
// base64url one goes with it.
const (
	minB64Run = 36
	minB32Run = 26
)
