package ddbsession_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The core's users must not download what they do not import: the
// example's browser driver and password hashing, and ddbstream's Lambda
// types, live in modules of their own. These tests ask the go command, with
// the workspace off, what this module needs.

const rootModule = "github.com/ddbsession/ddbsession"

// integrationOnly are module path prefixes that only the integration
// modules (example, example/routers, example/scs, example/mcp, ddbstream,
// scsstore, ddbsessionotel, mcpsession) may need. (The example's
// golang.org/x/text and x/time are not listed: the AWS SDK's own graph may
// name them.) The root module's graph names none of them, except
// golang.org/x/crypto through testOnlyLegacy.
var integrationOnly = []string{
	"github.com/chromedp/",
	"github.com/aws/aws-lambda-go",
	"github.com/alexedwards/scs",
	"github.com/go-chi/",
	"github.com/gorilla/mux",
	"github.com/labstack/echo",
	"github.com/gin-gonic/",
	"github.com/medama-io/go-useragent",
	"go.opentelemetry.io/",
	"github.com/mark3labs/mcp-go",
	"github.com/google/jsonschema-go",        // mcp-go's
	"github.com/santhosh-tekuri/jsonschema/", // mcp-go's
	"github.com/yosida95/uritemplate/",       // mcp-go's
	"golang.org/x/crypto",
}

// neverInGraph are the integrationOnly prefixes that no edge of the root
// module's graph may name at all.
var neverInGraph = integrationOnly[:len(integrationOnly)-1]

// testOnlyLegacy is dockertest's dependency (through Docker's API types)
// whose go.mod predates module graph pruning: in this module's own graph it
// brings along old golang.org/x/tools releases and, through them, go.mod
// files of golang.org/x/crypto from 2019 and 2020, never built. A user's
// graph is pruned at this module and holds none of them, which
// TestUserModuleGraph checks.
const testOnlyLegacy = "github.com/gogo/protobuf@"

func TestModuleGraph(t *testing.T) {
	t.Parallel()
	edges := moduleGraph(t, ".")
	for _, e := range edges {
		for _, prefix := range neverInGraph {
			if strings.HasPrefix(e[1], prefix) {
				t.Errorf("go mod graph: %s requires %s", e[0], e[1])
			}
		}
	}
	for _, m := range reachable(edges, rootModule, testOnlyLegacy) {
		for _, prefix := range integrationOnly {
			if strings.HasPrefix(m, prefix) {
				t.Errorf("go mod graph: %s is reachable from %s other than through %s", m, rootModule, testOnlyLegacy)
			}
		}
	}
}

// TestUserModuleGraph builds the module graph of an app that imports the
// root package, against this checkout.
func TestUserModuleGraph(t *testing.T) {
	t.Parallel()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	app := t.TempDir()
	goMod := "module example.com/app\n\ngo 1.26.0\n\n" +
		"require " + rootModule + " v0.0.0-00010101000000-000000000000\n\n" +
		"replace " + rootModule + " => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"go.mod":  goMod,
		"go.sum":  string(sum),
		"main.go": "package main\n\nimport _ \"" + rootModule + "\"\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(app, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edges := moduleGraph(t, app)
	if len(edges) == 0 {
		t.Fatal("the app's module graph is empty")
	}
	for _, e := range edges {
		for _, prefix := range integrationOnly {
			if strings.HasPrefix(e[1], prefix) {
				t.Errorf("an app's go mod graph: %s requires %s", e[0], e[1])
			}
		}
	}
}

// TestPackageDeps checks that the root package builds from the AWS SDK
// alone, besides the module's own internal packages (whose dependencies go
// list -deps lists too).
func TestPackageDeps(t *testing.T) {
	t.Parallel()
	out := goCommand(t, ".", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	var sawRoot bool
	for _, pkg := range strings.Fields(out) {
		switch {
		case pkg == rootModule:
			sawRoot = true
		case strings.HasPrefix(pkg, rootModule+"/internal/"):
		case strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2/"), strings.HasPrefix(pkg, "github.com/aws/smithy-go"):
		default:
			t.Errorf("the root package depends on %s, want only the AWS SDK (aws-sdk-go-v2, smithy-go)", pkg)
		}
	}
	if !sawRoot {
		t.Errorf("go list -deps did not list the root package itself:\n%s", out)
	}
}

// moduleGraph returns the edges of go mod graph, run in dir.
func moduleGraph(t *testing.T, dir string) [][2]string {
	t.Helper()
	var edges [][2]string
	for line := range strings.Lines(goCommand(t, dir, "mod", "graph")) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			t.Fatalf("go mod graph: unexpected line %q", line)
		}
		edges = append(edges, [2]string{from, to})
	}
	return edges
}

// reachable returns the modules reachable from start without entering
// modules whose name@version begins with skip.
func reachable(edges [][2]string, start, skip string) []string {
	next := map[string][]string{}
	for _, e := range edges {
		next[e[0]] = append(next[e[0]], e[1])
	}
	seen := map[string]bool{start: true}
	var out []string
	for queue := []string{start}; len(queue) > 0; queue = queue[1:] {
		for _, m := range next[queue[0]] {
			if !seen[m] && !strings.HasPrefix(m, skip) {
				seen[m] = true
				out = append(out, m)
				queue = append(queue, m)
			}
		}
	}
	return out
}

// goCommand runs the go command in dir with the workspace off, so that it
// answers for one module as its users see it, and returns its output.
func goCommand(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	return string(out)
}

// goTool finds the go command: on PATH, as go test has it, or else in the
// GOROOT that built this test.
func goTool(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	//lint:ignore SA1019 only a fallback: the test binary runs on the machine that built it.
	path := filepath.Join(runtime.GOROOT(), "bin", "go")
	if runtime.GOOS == "windows" {
		path += ".exe"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no go command on PATH or in GOROOT: %v", err)
	}
	return path
}
