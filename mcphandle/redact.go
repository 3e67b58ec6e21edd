package mcphandle

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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
	if l == nil {
		return nil
	}
	return slog.New(redacting{l.Handler()})
}

const redacted = "[redacted]"

// The shortest runs Redact replaces: half of a handle, in base64url, and
// a token, in base32.
const (
	minB64Run = 36
	minB32Run = 26
)

type redacting struct{ h slog.Handler }

func (r redacting) Enabled(ctx context.Context, level slog.Level) bool {
	return r.h.Enabled(ctx, level)
}

func (r redacting) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, redactText(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r redacting) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(a)
	}
	return redacting{r.h.WithAttrs(out)}
}

func (r redacting) WithGroup(name string) slog.Handler { return redacting{r.h.WithGroup(name)} }

// redactAttr returns a redacted. A value other than text, a number, a
// time or a group (an error, a struct) becomes its text, which is what a
// handler would print of it.
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]slog.Attr, len(attrs))
		for i, g := range attrs {
			out[i] = redactAttr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindString:
		return slog.String(a.Key, redactText(v.String()))
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, redactText(err.Error()))
		}
		return slog.String(a.Key, redactText(fmt.Sprintf("%+v", v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// redactText returns s with its secrets replaced: the runs of base64url
// of minB64Run or more characters, then, in what is left, those of base32
// of minB32Run or more.
func redactText(s string) string {
	return replaceRuns(replaceRuns(s, inBase64URL, minB64Run), inBase32, minB32Run)
}

// replaceRuns returns s with every run of min or more characters of an
// alphabet replaced by redacted.
func replaceRuns(s string, in func(byte) bool, min int) string {
	var out strings.Builder
	copied, run := 0, 0 // s[:copied] is in out; s[run:i] is a run of the alphabet
	for i := 0; i <= len(s); i++ {
		if i < len(s) && in(s[i]) {
			continue
		}
		if i-run >= min {
			out.WriteString(s[copied:run])
			out.WriteString(redacted)
			copied = i
		}
		run = i + 1
	}
	if copied == 0 {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}

func inBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func inBase32(c byte) bool { return 'A' <= c && c <= 'Z' || '2' <= c && c <= '7' }
