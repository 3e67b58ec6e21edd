package ddbsession_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
// scsstore, ddbsessionotel, ddbsessionoidc, mcpsession, mcphandle) may need. (The example's
// golang.org/x/text and x/time are not listed: the AWS SDK's own graph may
// name them.) No edge of the root module's graph names any of them.
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
	"github.com/modelcontextprotocol/go-sdk", // mcphandle's
	"github.com/segmentio/",                  // go-sdk's
	"golang.org/x/crypto",
	"golang.org/x/oauth2",       // ddbsessionoidc's
	"github.com/coreos/go-oidc", // ddbsessionoidc's
	"github.com/go-jose/",       // go-oidc's
	"github.com/zitadel/",       // ddbsessionoidc's tests' provider
}

// userGraph is every module an app's graph gets from the root module: the
// AWS SDK, which the library builds from, and the go.mod files of the
// modules its tests use, go-cmp and goleak. go and toolchain are the
// graph's own nodes for the go line.
var userGraph = []string{
	"github.com/aws/aws-sdk-go-v2",
	"github.com/aws/smithy-go",
	"github.com/google/go-cmp",
	"go.uber.org/goleak",
	"go", "toolchain",
}

// rootGraph is every module the root module's own graph may name: the
// user's, and what goleak's go.mod requires for goleak's own tests, never
// built here. Nothing else: no container engine's client, no integration's
// dependencies.
var rootGraph = append([]string{
	"github.com/stretchr/testify",
	"github.com/davecgh/go-spew",
	"github.com/pmezard/go-difflib",
	"github.com/kr/pretty",
	"gopkg.in/check.v1",
	"gopkg.in/yaml.v3",
}, userGraph...)

func TestModuleGraph(t *testing.T) {
	t.Parallel()
	edges := moduleGraph(t, ".")
	checkGraph(t, "go mod graph", edges, rootGraph)
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
	checkGraph(t, "an app's go mod graph", edges, userGraph)
}

// checkGraph fails t for each edge that requires a module other than the
// root module itself and those of allowed (module paths, each with the
// modules under it), or one that only the integration modules may need.
func checkGraph(t *testing.T, what string, edges [][2]string, allowed []string) {
	t.Helper()
	for _, e := range edges {
		for _, prefix := range integrationOnly {
			if strings.HasPrefix(e[1], prefix) {
				t.Errorf("%s: %s requires %s, which only an integration module may need", what, e[0], e[1])
			}
		}
		path, _, _ := strings.Cut(e[1], "@")
		if path != rootModule && !slices.ContainsFunc(allowed, func(a string) bool { return path == a || strings.HasPrefix(path, a+"/") }) {
			t.Errorf("%s: %s requires %s, want only %s", what, e[0], e[1], strings.Join(allowed, ", "))
		}
	}
}

// TestPackageDeps checks that the root package builds from the AWS SDK
// alone, besides the module's own internal packages (whose dependencies go
// list -deps lists too), and that every other package of the module (the
// CLI, ddbsessiontest and its run command) does too, besides the module's
// own packages.
func TestPackageDeps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, what string
		own           func(pkg string) bool
	}{
		{".", "the root package", func(pkg string) bool { return strings.HasPrefix(pkg, rootModule+"/internal/") }},
		{"./...", "a package of the root module", func(pkg string) bool { return strings.HasPrefix(pkg, rootModule+"/") }},
	} {
		out := goCommand(t, ".", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", tc.pattern)
		var sawRoot bool
		for _, pkg := range strings.Fields(out) {
			switch {
			case pkg == rootModule:
				sawRoot = true
			case tc.own(pkg):
			case strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2/"), strings.HasPrefix(pkg, "github.com/aws/smithy-go"):
			default:
				t.Errorf("%s depends on %s, want only the AWS SDK (aws-sdk-go-v2, smithy-go)", tc.what, pkg)
			}
		}
		if !sawRoot {
			t.Errorf("go list -deps %s did not list the root package itself:\n%s", tc.pattern, out)
		}
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
