package scsstore_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// scs is this module's dependency, never the core's: an app that imports
// only ddbsession must not download it.
func TestCoreDoesNotRequireSCS(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "mod", "graph")
	cmd.Dir = ".." // the root module
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go mod graph in the root module: %v\n%s", err, out)
	}
	if len(out) == 0 {
		t.Fatal("the root module's graph is empty")
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "github.com/alexedwards/scs") {
			t.Errorf("the core's module graph has scs: %s", strings.TrimSpace(line))
		}
	}
}
