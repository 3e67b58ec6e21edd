package ddbsession_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's usage block compiles as written: it is copied into a module
// of its own that requires this checkout, and built.
func TestREADMEUsageCompiles(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, usage, ok := strings.Cut(string(readme), "## Usage\n")
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(usage)
	if !ok || block == nil || !strings.HasPrefix(block[1], "package main") {
		t.Fatal("README.md has no ```go block of a whole program under ## Usage")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The example module pins golang.org/x/crypto, which the block uses for
	// bcrypt; its go.sum and the root's hold every hash the build needs.
	exampleMod, err := os.ReadFile(filepath.Join(root, "example", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	crypto := regexp.MustCompile(`golang.org/x/crypto (v\S+)`).FindSubmatch(exampleMod)
	if crypto == nil {
		t.Fatal("example/go.mod does not require golang.org/x/crypto")
	}
	var sums []byte
	for _, f := range []string{"go.sum", "example/go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	dir := t.TempDir()
	files := map[string]string{
		"main.go": block[1],
		"go.mod": "module example.com/readme\n\ngo 1.26.0\n\nrequire (\n\t" + rootModule + " v0.0.0-00010101000000-000000000000\n" +
			"\tgolang.org/x/crypto " + string(crypto[1]) + "\n)\n\nreplace " + rootModule + " => " + root + "\n",
		"go.sum": string(sums),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool(t), "build", "-mod=mod", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's usage does not build: %v\n%s", err, out)
	}
}
