package mcpsession_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/mcpsession"
)

// token is a session ID of the form mcpsession issues.
const token = "K3FQZ7XWMB2TRAHVNYJ5CLODE4"

// secretValue logs as the text that holds the token.
type secretValue struct{}

func (secretValue) LogValue() slog.Value { return slog.StringValue("id " + token) }

// Each way a session ID reaches a log record comes out redacted, and text
// that only looks alike in part does not.
func TestRedactSessionIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
		want string
	}{
		{"mcp-go's keys, whatever the value", func(l *slog.Logger) {
			l.Info("Sweeping expired session", "session", token, "sessionID", "not-a-token", "mcp.session.id", token)
		}, `level=INFO msg="Sweeping expired session" session=[redacted] sessionID=[redacted] mcp.session.id=[redacted]`},
		{"in the message", func(l *slog.Logger) {
			l.Warn("panic in OnError hook (session " + token + "): boom")
		}, `level=WARN msg="panic in OnError hook (session [redacted]): boom"`},
		{"in an error", func(l *slog.Logger) {
			l.Error("Failed to handle sampling response", "err", fmt.Errorf("no active session found for session %s", token))
		}, `level=ERROR msg="Failed to handle sampling response" err="no active session found for session [redacted]"`},
		{"in any other value", func(l *slog.Logger) {
			l.Error("panic", "panic", []string{token, token + "." + token}, "n", 3)
		}, `level=ERROR msg=panic panic="[[redacted] [redacted].[redacted]]" n=3`},
		{"in a group, and a LogValuer", func(l *slog.Logger) {
			l.Info("request", slog.Group("req", "header", "Bearer "+token, "sid", "0190a1b2c3d4e5f6a7b8c9d0e1f2a3b4"), "v", secretValue{})
		}, `level=INFO msg=request req.header="Bearer [redacted]" req.sid=0190a1b2c3d4e5f6a7b8c9d0e1f2a3b4 v="id [redacted]"`},
		{"in With's attributes", func(l *slog.Logger) {
			l.With("session", token).WithGroup("g").With("e", errors.New(token)).Info("x")
		}, `level=INFO msg=x session=[redacted] g.e=[redacted]`},
		{"runs shorter than an ID, and other alphabets", func(l *slog.Logger) {
			l.Info("ABCDEFGHIJKLMNOPQRSTUVWXY "+strings.ToLower(token), "sum", "0123456789ABCDEF0123456789ABCDEF")
		}, `level=INFO msg="ABCDEFGHIJKLMNOPQRSTUVWXY ` + strings.ToLower(token) + `" sum=0123456789ABCDEF0123456789ABCDEF`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			tc.log(mcpsession.RedactSessionIDs(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if len(groups) == 0 && a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))))
			if got := strings.TrimSpace(b.String()); got != tc.want {
				t.Errorf("logged\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	if mcpsession.RedactSessionIDs(nil) != nil {
		t.Error("RedactSessionIDs(nil) != nil: server.WithLogger would log where it was told not to")
	}
	quiet := mcpsession.RedactSessionIDs(slog.New(slog.NewTextHandler(&strings.Builder{}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if quiet.Enabled(context.Background(), slog.LevelInfo) || !quiet.Enabled(context.Background(), slog.LevelWarn) {
		t.Error("the redacting logger does not keep the wrapped handler's level")
	}
}
