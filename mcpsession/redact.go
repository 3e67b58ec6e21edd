package mcpsession

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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
	if l == nil {
		return nil
	}
	return slog.New(redacting{l.Handler()})
}

// redacted stands in a log line for a session ID.
const redacted = "[redacted]"

// idKeys are the attribute keys, lower-cased, whose values are session IDs
// whatever their form: mcp-go's ("session", "sessionID",
// "mcp.session.id"), and the spellings a later release might use.
var idKeys = map[string]bool{
	"session": true, "sessionid": true, "session_id": true, "session.id": true,
	"mcp.session.id": true, "mcp-session-id": true,
}

// redacting is the handler of RedactSessionIDs' logger.
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

// redactAttr returns a with its session IDs redacted. A value other than
// text, a number, a time or a group (an error, a panic's value, a struct)
// becomes its text, which is what a handler would print of it.
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch {
	case v.Kind() == slog.KindGroup:
		attrs := v.Group()
		out := make([]slog.Attr, len(attrs))
		for i, g := range attrs {
			out[i] = redactAttr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case idKeys[strings.ToLower(a.Key)]:
		return slog.String(a.Key, redacted)
	case v.Kind() == slog.KindString:
		return slog.String(a.Key, redactText(v.String()))
	case v.Kind() == slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, redactText(err.Error()))
		}
		return slog.String(a.Key, redactText(fmt.Sprintf("%+v", v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// idLen is the length of a session ID: ddbsession's bearer token, 26
// characters of RFC 4648 base32.
const idLen = 26

// redactText returns s with every run of idLen or more characters of the
// IDs' alphabet replaced by redacted.
func redactText(s string) string {
	var out strings.Builder
	copied, run := 0, 0 // s[:copied] is in out; s[run:i] is a run of the alphabet
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '2' && s[i] <= '7') {
			continue
		}
		if i-run >= idLen {
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
