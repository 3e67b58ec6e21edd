package ddbtest

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// captureLogs takes what the process logs every way there is: slog's
// default logger, the log package, os.Stderr; and gives each back when it
// stops.
func TestCaptureLogs(t *testing.T) {
	stderr, output := os.Stderr, log.Writer()
	l := captureLogs(t)
	slog.Info("through slog", "k", "v")
	slog.Debug("at debug level")
	log.Print("through the log package")
	fmt.Fprintln(os.Stderr, "through stderr")
	l.printf("through the SDK's logger")
	lines, text := l.stop()
	for _, want := range []string{`msg="through slog" k=v`, `msg="at debug level"`, "through the log package", "stderr: through stderr\n", "through the SDK's logger\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the capture lacks %q:\n%s", want, text)
		}
	}
	if lines != 5 {
		t.Errorf("%d lines captured, want 5:\n%s", lines, text)
	}
	if os.Stderr != stderr || log.Writer() != output {
		t.Error("stop left os.Stderr or the log package's output changed")
	}
	if _, ours := slog.Default().Handler().(*slog.TextHandler); ours {
		t.Error("stop left slog's default logger the capture's")
	}
}
