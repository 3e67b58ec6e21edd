package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The function builds as template.yaml deploys it: a static bootstrap for
// provided.al2023 on arm64, without the emulator's test hooks.
func TestBootstrapBuildsForLambda(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=linux GOARCH=arm64 go build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("bootstrap is for %v, want arm64", f.Machine)
	}
	if f.Section(".interp") != nil {
		t.Error("bootstrap is dynamically linked: build it with CGO_ENABLED=0")
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"TEST_CLOCK_FILE", "TEST_REFRESH_AFTER_RESPONSE"} {
		if bytes.Contains(data, []byte(hook)) {
			t.Errorf("the Lambda build holds the emulator's test hook %s", hook)
		}
	}
}
