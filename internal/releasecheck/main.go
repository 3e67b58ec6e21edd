// Command releasecheck checks that this checkout's HEAD, released, installs
// the way a new user installs it: from a module proxy, with no replace
// directive and no workspace.
//
//	go run -C internal/releasecheck . [-version vX.Y.Z] [-v] [-keep]
//
// (scripts/release -check runs it; CI runs it after the tests.) In a
// scratch clone of HEAD, without its tags, it runs scripts/release VERSION
// (by default CHANGELOG.md's newest release), so that the check is of what
// that release would publish. From the tags the script made it builds a
// module proxy on disk, as the go command's GOPROXY protocol lays one out.
// Then, in a fresh module outside the checkout, with GOWORK=off and
// GOPROXY=file://PROXY,UPSTREAM (UPSTREAM is go env GOPROXY), it go-gets
// every published module at VERSION, builds a program importing each of
// their public packages and each of their commands, go-installs the CLI at
// VERSION and runs "ddbsession version", which must print VERSION.
//
// Published modules are the go.mod files outside example/, bench/ and
// internal/; the root's tag is VERSION, a nested module's DIR/VERSION.
//
// Third-party modules come from a module cache of the check's own, kept
// between runs (in the temporary directory) with every module of this
// project removed, so that each run gets this project's modules from its
// own proxy alone. A check holds that cache's lock while it runs, so that
// a second check beside it (two CI jobs on one machine) waits rather than
// finds the project's modules removed under its build. The go command's
// own module cache (its download directory) serves as a proxy before
// UPSTREAM, so that a warm machine downloads nothing.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// A published module of the checkout.
type published struct {
	dir  string // relative to the repository, "" for the root
	path string
	tag  string
}

type checker struct {
	out     io.Writer
	verbose bool
	started time.Time
}

func main() {
	repo := flag.String("repo", "", "the checkout (default: the one holding the current directory)")
	version := flag.String("version", "", "the release to check HEAD as (default: CHANGELOG.md's newest)")
	verbose := flag.Bool("v", false, "print the output of each command")
	keep := flag.Bool("keep", false, "keep the scratch directory (clone, proxy, user module)")
	flag.Parse()
	c := &checker{out: os.Stdout, verbose: *verbose, started: time.Now()}
	if err := c.run(*repo, *version, *keep); err != nil {
		fmt.Fprintf(c.out, "releasecheck: FAILED after %s: %v\n", c.elapsed(), err)
		os.Exit(1)
	}
}

func (c *checker) elapsed() string {
	return time.Since(c.started).Round(100 * time.Millisecond).String()
}

// step prints one finished step.
func (c *checker) step(format string, args ...any) {
	fmt.Fprintf(c.out, "ok   %-6s %s\n", c.elapsed(), fmt.Sprintf(format, args...))
}

func (c *checker) run(repo, version string, keep bool) error {
	var err error
	if repo == "" {
		if repo, err = output("", nil, "git", "rev-parse", "--show-toplevel"); err != nil {
			return err
		}
	}
	if repo, err = filepath.Abs(repo); err != nil {
		return err
	}
	if version == "" {
		if version, err = changelogVersion(filepath.Join(repo, "CHANGELOG.md")); err != nil {
			return err
		}
	}
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Prerelease(version) != "" {
		return fmt.Errorf("-version %q is not a release version vX.Y.Z", version)
	}
	head, err := output(repo, nil, "git", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if dirty, _ := output(repo, nil, "git", "status", "--porcelain"); dirty != "" {
		fmt.Fprintf(c.out, "note: the check is of HEAD %.12s; the work tree's uncommitted changes are not in it\n", head)
	}

	scratch, err := os.MkdirTemp("", "ddbsession-releasecheck-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(c.out, "scratch directory kept:", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}

	// The release, as scripts/release makes it, in a clone without tags.
	clone := filepath.Join(scratch, "clone")
	if err := c.cmd("", nil, "git", "clone", "-q", "--no-checkout", repo, clone); err != nil {
		return err
	}
	if err := c.cmd(clone, nil, "git", "checkout", "-q", "-B", "releasecheck", head); err != nil {
		return err
	}
	tags, _ := output(clone, nil, "git", "tag", "-l")
	if tags := strings.Fields(tags); len(tags) > 0 {
		if err := c.cmd(clone, nil, "git", append([]string{"tag", "-d"}, tags...)...); err != nil {
			return err
		}
	}
	identity := []string{
		"GIT_AUTHOR_NAME=releasecheck", "GIT_AUTHOR_EMAIL=releasecheck@invalid",
		"GIT_COMMITTER_NAME=releasecheck", "GIT_COMMITTER_EMAIL=releasecheck@invalid",
	}
	if err := c.cmd(clone, identity, "scripts/release", version); err != nil {
		return fmt.Errorf("scripts/release %s: %w", version, err)
	}
	mods, err := publishedModules(clone, version)
	if err != nil {
		return err
	}
	var tagList []string
	for _, m := range mods {
		tagList = append(tagList, m.tag)
	}
	c.step("scripts/release %s in a clone of HEAD %.12s tagged %s", version, head, strings.Join(tagList, " "))

	// At its tag, each published go.mod requires the project's modules
	// at this release, and the root, which holds the commands, replaces
	// nothing (go install pkg@version refuses a go.mod that does).
	root := mods[0].path
	for _, m := range mods {
		data, err := output(clone, nil, "git", "show", m.tag+":"+path(m.dir, "go.mod"))
		if err != nil {
			return err
		}
		f, err := modfile.Parse(m.path+"/go.mod", []byte(data), nil)
		if err != nil {
			return err
		}
		for _, r := range f.Require {
			if isProject(root, r.Mod.Path) && r.Mod.Version != version {
				return fmt.Errorf("at %s, %s requires %s %s, not %s", m.tag, m.path, r.Mod.Path, r.Mod.Version, version)
			}
		}
		if m.dir == "" && len(f.Replace) > 0 {
			return fmt.Errorf("at %s, the root go.mod has %d replace directives, which go install refuses", m.tag, len(f.Replace))
		}
	}
	c.step("at their tags, the published go.mod files require the project's modules at %s; the root's replaces nothing", version)

	proxy := filepath.Join(scratch, "proxy")
	for _, m := range mods {
		if err := publish(proxy, clone, m, version); err != nil {
			return fmt.Errorf("%s@%s: %w", m.path, version, err)
		}
	}
	c.step("module proxy built from the tags: %s", proxy)

	// A new user's module.
	upstream, err := output("", nil, "go", "env", "GOPROXY")
	if err != nil {
		return err
	}
	goModCache, err := output("", nil, "go", "env", "GOMODCACHE")
	if err != nil {
		return err
	}
	proxies := []string{"file://" + filepath.ToSlash(proxy)}
	if goModCache != "" {
		proxies = append(proxies, "file://"+filepath.ToSlash(filepath.Join(goModCache, "cache", "download")))
	}
	if upstream != "" {
		proxies = append(proxies, upstream)
	}
	modCache, unlock, err := ownModCache(root)
	if err != nil {
		return err
	}
	defer unlock()
	gobin := filepath.Join(scratch, "bin")
	env := []string{
		"GOWORK=off", "GOFLAGS=-mod=mod",
		"GOPROXY=" + strings.Join(proxies, ","),
		"GONOSUMDB=" + root, "GOPRIVATE=", "GONOPROXY=",
		"GOMODCACHE=" + modCache,
		"GOBIN=" + gobin,
		// The module index trusts a version never to change; here the
		// same version is built anew from each HEAD.
		"GODEBUG=goindex=0",
	}
	app := filepath.Join(scratch, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		return err
	}
	if err := c.cmd(app, env, "go", "mod", "init", "example.com/newuser"); err != nil {
		return err
	}
	get := []string{"get"}
	for _, m := range mods {
		get = append(get, m.path+"@"+version)
	}
	if err := c.cmd(app, env, "go", get...); err != nil {
		return err
	}
	c.step("go %s", strings.Join(get, " "))

	listed, err := output(app, env, "go", "list", "-f", "{{.ImportPath}} {{.Name}}", root+"/...")
	if err != nil {
		return err
	}
	var libraries, commands []string
	for line := range strings.Lines(listed) {
		pkg, name, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case strings.Contains(pkg+"/", "/internal/"):
		case name == "main":
			commands = append(commands, pkg)
		default:
			libraries = append(libraries, pkg)
		}
	}
	var program bytes.Buffer
	program.WriteString("package main\n\nimport (\n")
	for _, pkg := range libraries {
		fmt.Fprintf(&program, "\t_ %q\n", pkg)
	}
	program.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(app, "main.go"), program.Bytes(), 0o644); err != nil {
		return err
	}
	if err := c.cmd(app, env, "go", "build", "-o", filepath.Join(scratch, "app.bin"), "."); err != nil {
		return err
	}
	if err := c.cmd(app, env, "go", append([]string{"build", "-o", filepath.Join(scratch, "commands") + string(filepath.Separator)}, commands...)...); err != nil {
		return err
	}
	c.step("a program importing every public package builds (%s), and so does every command (%s)", strings.Join(libraries, ", "), strings.Join(commands, ", "))

	resolved, err := output(app, env, "go", "list", "-m", "-f", "{{.Path}} {{.Version}} {{.Replace}}", "all")
	if err != nil {
		return err
	}
	var got []string
	for line := range strings.Lines(resolved) {
		f := strings.Fields(line)
		if len(f) >= 2 && isProject(root, f[0]) {
			if f[1] != version || len(f) > 2 && f[2] != "<nil>" {
				return fmt.Errorf("the user's module resolved %s", strings.TrimSpace(line))
			}
			got = append(got, f[0])
		}
	}
	for _, m := range mods {
		if !slices.Contains(got, m.path) {
			return fmt.Errorf("the user's module does not list %s", m.path)
		}
	}
	c.step("the user's module resolved every published module at %s and nothing else of the project's", version)

	cli := root + "/cmd/ddbsession@" + version
	if err := c.cmd(app, env, "go", "install", cli); err != nil {
		return err
	}
	c.step("go install %s", cli)
	for _, arg := range []string{"version", "-version", "--version"} {
		said, err := output("", nil, filepath.Join(gobin, "ddbsession"), arg)
		if err != nil {
			return fmt.Errorf("ddbsession %s: %w", arg, err)
		}
		if want := "ddbsession " + version; said != want {
			return fmt.Errorf("ddbsession %s printed %q, want %q", arg, said, want)
		}
	}
	c.step("ddbsession version (and -version, --version) prints \"ddbsession %s\"", version)
	fmt.Fprintf(c.out, "releasecheck: HEAD %.12s installs as %s: every step holds, in %s\n", head, version, c.elapsed())
	return nil
}

// cmd runs a command in dir with env added to this process's environment,
// and returns an error holding its output's tail if it fails.
func (c *checker) cmd(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if c.verbose {
		fmt.Fprintf(c.out, "$ %s %s\n%s", name, strings.Join(args, " "), out)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out))
	}
	return nil
}

// output runs a command and returns its standard output, trimmed.
func output(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

func path(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// isProject reports whether p is the root module or a module under it.
func isProject(root, p string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// changelogVersion returns the version of the first release heading,
// "## [vX.Y.Z] - DATE", skipping "## [Unreleased]".
func changelogVersion(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		heading, ok := strings.CutPrefix(sc.Text(), "## [")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(heading, "]")
		if semver.IsValid(v) && semver.Prerelease(v) == "" {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s has no release heading \"## [vX.Y.Z] - DATE\"", file)
}

// publishedModules lists the root module first, then each nested published
// module, with its tag at version.
func publishedModules(repo, version string) ([]published, error) {
	files, err := output(repo, nil, "git", "ls-files", "--", "go.mod", "*/go.mod")
	if err != nil {
		return nil, err
	}
	var mods []published
	for _, f := range strings.Fields(files) {
		dir := filepath.ToSlash(filepath.Dir(f))
		if dir == "." {
			dir = ""
		}
		if slices.ContainsFunc(strings.Split(dir, "/"), func(part string) bool {
			return part == "example" || part == "examples" || part == "bench" || part == "internal" || part == "testdata"
		}) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			return nil, err
		}
		m := published{dir: dir, path: modfile.ModulePath(data), tag: path(dir, version)}
		if m.path == "" {
			return nil, fmt.Errorf("%s names no module", f)
		}
		if _, err := output(repo, nil, "git", "rev-parse", "-q", "--verify", "refs/tags/"+m.tag); err != nil {
			return nil, fmt.Errorf("scripts/release made no tag %s for %s", m.tag, m.path)
		}
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b published) int { return strings.Compare(a.dir, b.dir) })
	if len(mods) == 0 || mods[0].dir != "" {
		return nil, errors.New("no root go.mod")
	}
	return mods, nil
}

// publish writes m's .info, .mod and .zip at its tag into the proxy, and
// adds version to its list.
func publish(proxy, repo string, m published, version string) error {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rev, err := output(repo, nil, "git", "rev-list", "-n1", m.tag)
	if err != nil {
		return err
	}
	when, err := output(repo, nil, "git", "log", "-1", "--format=%cI", rev)
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct{ Version, Time string }{version, when})
	if err != nil {
		return err
	}
	gomod, err := output(repo, nil, "git", "show", rev+":"+path(m.dir, "go.mod"))
	if err != nil {
		return err
	}
	var zipped bytes.Buffer
	if err := zip.CreateFromVCS(&zipped, module.Version{Path: m.path, Version: version}, repo, rev, m.dir); err != nil {
		return err
	}
	for name, content := range map[string][]byte{
		version + ".info": info,
		version + ".mod":  []byte(gomod + "\n"),
		version + ".zip":  zipped.Bytes(),
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ownModCache returns the check's module cache, locked until unlock,
// without any of the project's modules that an earlier run put there: the
// extracted root module (ROOT@VERSION), the nested ones (under ROOT/) and
// the downloads.
func ownModCache(root string) (dir string, unlock func(), err error) {
	dir = filepath.Join(os.TempDir(), "ddbsession-releasecheck-modcache")
	if unlock, err = lockFile(dir+".lock", true); err != nil {
		return "", nil, fmt.Errorf("lock the check's module cache: %w", err)
	}
	escaped, err := module.EscapePath(root)
	if err != nil {
		panic(err) // the root go.mod's path, which the go command accepted
	}
	extracted := filepath.Join(dir, filepath.FromSlash(escaped))
	stale, _ := filepath.Glob(extracted + "@*")
	stale = append(stale, extracted, filepath.Join(dir, "cache", "download", filepath.FromSlash(escaped)))
	for _, p := range stale {
		makeWritable(p)
		os.RemoveAll(p)
	}
	return dir, unlock, nil
}

// makeWritable makes the tree at p writable, as the go command leaves its
// extracted modules read-only.
func makeWritable(p string) {
	_ = filepath.WalkDir(p, func(name string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(name, 0o755)
		}
		return nil
	})
}
