package mcphandle

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// This file is the log filter that keeps handles, and the tokens and
// digests behind them, out of the log lines of the SDK and of the app.

// Redact returns a logger that logs what l logs, with every run of 26 or
// more characters of the base64url alphabet (A-Z, a-z, 0-9, '-', '_') in
// the message and in the text of every attribute (an error's, a value's
// printed form) replaced by "[redacted]": a handle (72 such characters),
// whole or half, a ddbsession token (26) and a SHA-256 digest in base64url
// (43). A nil l stays nil.
//
// Give it to the SDK's server (mcp.ServerOptions.Logger) and streamable
// HTTP handler (mcp.StreamableHTTPOptions.Logger), whose lines quote a
// tool's arguments and errors, and to Config.Sessions.Logger:
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

// minRun is the shortest run of the alphabet that Redact replaces: half
// of a handle is 36 characters, a token 26.
const minRun = 26

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

// redactText returns s with every run of minRun or more characters of the
// base64url alphabet replaced.
func redactText(s string) string {
	var out strings.Builder
	copied, run := 0, 0 // s[:copied] is in out; s[run:i] is a run of the alphabet
	for i := 0; i <= len(s); i++ {
		if i < len(s) && inAlphabet(s[i]) {
			continue
		}
		if i-run >= minRun {
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

func inAlphabet(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
