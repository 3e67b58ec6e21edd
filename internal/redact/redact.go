// Package redact is the log filter of the MCP modules (mcphandle's Redact,
// mcpsession's RedactSessionIDs): a slog handler that replaces the secrets
// in every line it passes on, in the message and in the text of every
// attribute, an error's and a value's printed form included.
package redact

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Redacted stands in a log line for a secret.
const Redacted = "[redacted]"

// Rules say what is secret: Text returns a text with its secrets replaced
// (Runs helps), and Key, if not nil, reports whether an attribute's key
// names a secret, whose value is then replaced whole, whatever its form.
type Rules struct {
	Text func(string) string
	Key  func(key string) bool
}

// New returns a logger that logs what l logs, with the secrets rules find
// replaced by Redacted. A nil l stays nil.
func New(l *slog.Logger, rules Rules) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(redacting{l.Handler(), rules})
}

type redacting struct {
	h     slog.Handler
	rules Rules
}

func (r redacting) Enabled(ctx context.Context, level slog.Level) bool {
	return r.h.Enabled(ctx, level)
}

func (r redacting) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.rules.Text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r redacting) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = r.attr(a)
	}
	return redacting{r.h.WithAttrs(out), r.rules}
}

func (r redacting) WithGroup(name string) slog.Handler {
	return redacting{r.h.WithGroup(name), r.rules}
}

// attr returns a with its secrets redacted. A value other than text, a
// number, a time or a group (an error, a panic's value, a struct) becomes
// its text, which is what a handler would print of it.
func (r redacting) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch {
	case v.Kind() == slog.KindGroup:
		attrs := v.Group()
		out := make([]slog.Attr, len(attrs))
		for i, g := range attrs {
			out[i] = r.attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case r.rules.Key != nil && r.rules.Key(a.Key):
		return slog.String(a.Key, Redacted)
	case v.Kind() == slog.KindString:
		return slog.String(a.Key, r.rules.Text(v.String()))
	case v.Kind() == slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, r.rules.Text(err.Error()))
		}
		return slog.String(a.Key, r.rules.Text(fmt.Sprintf("%+v", v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Runs returns s with every run of min or more characters that in takes
// replaced by Redacted.
func Runs(s string, in func(byte) bool, min int) string {
	var out strings.Builder
	copied, run := 0, 0 // s[:copied] is in out; s[run:i] is a run in the alphabet
	for i := 0; i <= len(s); i++ {
		if i < len(s) && in(s[i]) {
			continue
		}
		if i-run >= min {
			out.WriteString(s[copied:run])
			out.WriteString(Redacted)
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

// Base32 reports whether c is in RFC 4648's base32 alphabet, a ddbsession
// token's.
func Base32(c byte) bool { return 'A' <= c && c <= 'Z' || '2' <= c && c <= '7' }

// Base64URL reports whether c is in the base64url alphabet.
func Base64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
