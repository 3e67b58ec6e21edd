package mcphandle_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/mcphandle"
)

// Redact leaves no handle, token or digest, whole or half a handle, in a
// line, wherever the line holds it, and leaves the rest.
func TestRedact(t *testing.T) {
	t.Parallel()
	handle := "q1w2E3r4T5y6U7i8O9p0-_aSdFgHjKlZxCvBnM" + "q1w2E3r4T5y6U7i8O9p0-_aSdFgHjKlZxC" // 72
	secrets := []string{
		handle, handle[:36], handle[36:],
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ",                  // a token
		"WIMh8LOWTHe_C4z-iFUYgc65vmQATkKzE6EWr-cnuIM", // a digest
	}
	var out strings.Builder
	l := mcphandle.Redact(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	for _, s := range secrets {
		l.Debug("calling counter_add with "+s, "args", map[string]any{"handle": s}, "err", errors.New(`bad "`+s+`"`),
			slog.Group("req", "handle", s), "n", 3)
		l.With("handle", s).WithGroup("g").Info("x", "h", s)
	}
	lines := out.String()
	for _, s := range secrets {
		if strings.Contains(lines, s) {
			t.Errorf("the lines hold %q:\n%s", s, lines)
		}
	}
	if !strings.Contains(lines, "calling counter_add with [redacted]") || !strings.Contains(lines, "n=3") {
		t.Errorf("the lines lost what is no secret:\n%s", lines)
	}
	// What is no secret stays: a session's public ID, lower-case words,
	// runs shorter than a token.
	out.Reset()
	l.Info("ended session", "sid", "0190a1b2c3d4e5f6a7b8c9d0e1f2a3b4", "tool", "counter_open_counter_add_counter", "x", "ABCDEFGHIJKLMNOPQRSTUVWXY")
	if want := `sid=0190a1b2c3d4e5f6a7b8c9d0e1f2a3b4 tool=counter_open_counter_add_counter x=ABCDEFGHIJKLMNOPQRSTUVWXY`; !strings.Contains(out.String(), want) {
		t.Errorf("logged %s, want %s", out.String(), want)
	}
	if mcphandle.Redact(nil) != nil {
		t.Error("Redact(nil) is not nil")
	}
}
