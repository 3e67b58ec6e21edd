package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// scripts/release, run in a scratch clone of HEAD whose origin is an empty
// bare repository, with the work tree's copy of the script.

// TestReleaseTagsEveryPublishedModule releases a version whose go.mod
// requirements HEAD does not have yet.
func TestReleaseTagsEveryPublishedModule(t *testing.T) {
	t.Parallel()
	r := newScratchRelease(t)
	r.addChangelogRelease("v0.9.0")
	before := r.git("rev-parse", "HEAD")

	out := r.release(0, "v0.9.0")

	if got := r.git("log", "-1", "--format=%s"); got != "Release v0.9.0: modules require their siblings at v0.9.0" {
		t.Errorf("the release's commit is %q", got)
	}
	if parent := r.git("rev-parse", "HEAD^"); parent != before {
		t.Errorf("the release's commit has parent %s, want the commit released, %s", parent, before)
	}
	for _, f := range strings.Fields(r.git("diff", "--name-only", "HEAD^", "HEAD")) {
		if filepath.Base(f) != "go.mod" {
			t.Errorf("the release's commit changes %s, want go.mod files only", f)
		}
	}
	r.wantRequirements("v0.9.0")
	r.wantTags("v0.9.0", out)
	if git := r.git("status", "--porcelain"); git != "" {
		t.Errorf("the work tree is not clean after the release:\n%s", git)
	}
	if pushed := r.git("ls-remote", "origin"); pushed != "" {
		t.Errorf("the script pushed:\n%s", pushed)
	}
	if out := r.release(1, "v0.9.0"); !strings.Contains(out, "tag v0.9.0 exists already") {
		t.Errorf("a second run of the same release does not say its tag exists:\n%s", out)
	}
}

// TestReleaseWithoutChanges releases the version HEAD's go.mod files
// require already: nothing to commit, only tags.
func TestReleaseWithoutChanges(t *testing.T) {
	t.Parallel()
	r := newScratchRelease(t)
	version := r.requiredVersion("scsstore")
	if !strings.Contains(r.read("CHANGELOG.md"), "\n## ["+version+"] - ") {
		r.addChangelogRelease(version)
	}
	before := r.git("rev-parse", "HEAD")

	out := r.release(0, version)

	if after := r.git("rev-parse", "HEAD"); after != before {
		t.Errorf("the script committed %s, with nothing to change:\n%s", r.git("log", "-1", "--stat"), out)
	}
	r.wantTags(version, out)
}

// TestReleaseRefuses checks each refusal, and that a refused release
// changes nothing.
func TestReleaseRefuses(t *testing.T) {
	t.Parallel()
	r := newScratchRelease(t)
	r.addChangelogRelease("v0.9.0")
	r.write("CHANGELOG.md", strings.Replace(r.read("CHANGELOG.md"), "\n## [", "\n## [v0.9.2]\n\n## [", 1))
	r.git("commit", "-q", "-am", "CHANGELOG.md: a heading without a date")
	r.git("tag", "scsstore/v0.9.0")
	head, tags := r.git("rev-parse", "HEAD"), r.git("tag", "-l")
	for _, tc := range []struct {
		name  string
		args  []string
		setup func()
		says  string
	}{
		{"no version", nil, nil, "usage: scripts/release VERSION"},
		{"two versions", []string{"v0.9.0", "v0.9.1"}, nil, "usage: scripts/release VERSION"},
		{"no v", []string{"0.9.0"}, nil, "0.9.0 is not a release version vX.Y.Z"},
		{"two numbers", []string{"v0.9"}, nil, "v0.9 is not a release version"},
		{"a leading zero", []string{"v0.09.0"}, nil, "v0.09.0 is not a release version"},
		{"a pre-release", []string{"v0.9.0-rc.1"}, nil, "v0.9.0-rc.1 is not a release version"},
		{"build metadata", []string{"v0.9.0+meta"}, nil, "v0.9.0+meta is not a release version"},
		{"an untracked file", []string{"v0.9.1"}, func() { r.write("stray.txt", "") }, "the work tree is not clean"},
		{"a modified file", []string{"v0.9.1"}, func() { r.write("CHANGELOG.md", r.read("CHANGELOG.md")+"\nmore\n") }, "the work tree is not clean"},
		{"no changelog heading", []string{"v0.9.1"}, nil, `CHANGELOG.md has no "## [v0.9.1] - DATE" heading`},
		{"a heading without a date", []string{"v0.9.2"}, nil, `CHANGELOG.md has no "## [v0.9.2] - DATE" heading`},
		{"a nested module's tag exists", []string{"v0.9.0"}, nil, "tag scsstore/v0.9.0 exists already"},
	} {
		if tc.setup != nil {
			tc.setup()
		}
		out := r.release(-1, tc.args...)
		if !strings.Contains(out, tc.says) {
			t.Errorf("%s: the script does not say %q:\n%s", tc.name, tc.says, out)
		}
		if got := r.git("tag", "-l"); got != tags {
			t.Errorf("%s: the tags are now\n%s\nwant\n%s", tc.name, got, tags)
		}
		if got := r.git("rev-parse", "HEAD"); got != head {
			t.Errorf("%s: the script committed:\n%s", tc.name, r.git("log", "-1", "--stat"))
		}
		r.git("checkout", "-q", ".")
		r.git("clean", "-qfd")
	}
}

// scratchRelease is a clone of this checkout's HEAD, without its tags.
type scratchRelease struct {
	t   *testing.T
	dir string
}

var gitIdentity = []string{
	"GIT_AUTHOR_NAME=releasecheck test", "GIT_AUTHOR_EMAIL=test@invalid",
	"GIT_COMMITTER_NAME=releasecheck test", "GIT_COMMITTER_EMAIL=test@invalid",
}

func newScratchRelease(t *testing.T) *scratchRelease {
	t.Helper()
	repo, err := output("", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(repo, "scripts", "release"))
	if err != nil {
		t.Fatal(err)
	}
	r := &scratchRelease{t: t, dir: filepath.Join(t.TempDir(), "clone")}
	head := r.gitIn("", "rev-parse", "HEAD")
	r.gitIn("", "clone", "-q", "--no-checkout", repo, r.dir)
	r.git("checkout", "-q", "-B", "release-test", head)
	// A release tags a version no tag of the checkout names yet.
	if tags := strings.Fields(r.git("tag", "-l")); len(tags) > 0 {
		r.git(append([]string{"tag", "-d"}, tags...)...)
	}
	origin := filepath.Join(t.TempDir(), "origin.git")
	r.gitIn("", "init", "-q", "--bare", origin)
	r.git("remote", "set-url", "origin", origin)
	// The script under test is the work tree's, which may be ahead of HEAD.
	r.write("scripts/release", string(script))
	if r.git("status", "--porcelain") != "" {
		r.git("add", "scripts/release")
		r.git("commit", "-q", "-m", "scripts/release from the work tree")
	}
	return r
}

// release runs scripts/release with args, wants its exit code to be code
// (-1: anything but 0), and returns its output.
func (r *scratchRelease) release(code int, args ...string) string {
	r.t.Helper()
	cmd := exec.Command(filepath.Join(r.dir, "scripts", "release"), args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), gitIdentity...)
	out, err := cmd.CombinedOutput()
	got := cmd.ProcessState.ExitCode()
	if err != nil && got < 0 {
		r.t.Fatalf("scripts/release %s: %v", strings.Join(args, " "), err)
	}
	if code >= 0 && got != code || code < 0 && got == 0 {
		r.t.Fatalf("scripts/release %s: exit %d, want %d:\n%s", strings.Join(args, " "), got, code, out)
	}
	return string(out)
}

func (r *scratchRelease) git(args ...string) string {
	r.t.Helper()
	return r.gitIn(r.dir, args...)
}

func (r *scratchRelease) gitIn(dir string, args ...string) string {
	r.t.Helper()
	out, err := output(dir, gitIdentity, "git", args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *scratchRelease) read(name string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func (r *scratchRelease) write(name, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o755); err != nil {
		r.t.Fatal(err)
	}
}

// addChangelogRelease commits a CHANGELOG.md heading for version, as the
// newest release.
func (r *scratchRelease) addChangelogRelease(version string) {
	r.t.Helper()
	changelog := r.read("CHANGELOG.md")
	i := strings.Index(changelog, "\n## [v")
	if i < 0 {
		r.t.Fatalf("CHANGELOG.md has no release heading:\n%s", changelog)
	}
	r.write("CHANGELOG.md", changelog[:i+1]+"## ["+version+"] - 2027-01-01\n\n### Fixed\n\n- A test's release.\n\n"+changelog[i+1:])
	r.git("commit", "-q", "-am", "CHANGELOG.md: "+version)
}

type goMod struct {
	Module  struct{ Path string }
	Require []struct{ Path, Version string }
}

// modules returns every go.mod file of the clone, by its directory.
func (r *scratchRelease) modules() map[string]goMod {
	r.t.Helper()
	mods := map[string]goMod{}
	for _, f := range strings.Fields(r.git("ls-files", "--", "go.mod", "*/go.mod")) {
		out, err := output(r.dir, nil, "go", "mod", "edit", "-json", f)
		if err != nil {
			r.t.Fatal(err)
		}
		var m goMod
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			r.t.Fatal(err)
		}
		mods[filepath.Dir(f)] = m
	}
	return mods
}

// requiredVersion returns the version at which dir's go.mod requires the
// root module.
func (r *scratchRelease) requiredVersion(dir string) string {
	r.t.Helper()
	mods := r.modules()
	for _, req := range mods[dir].Require {
		if req.Path == mods["."].Module.Path {
			return req.Version
		}
	}
	r.t.Fatalf("%s/go.mod does not require the root module", dir)
	return ""
}

// wantRequirements checks that every nested go.mod requires each of the
// project's modules that it requires at version, and that each published
// one requires at least the root.
func (r *scratchRelease) wantRequirements(version string) {
	r.t.Helper()
	mods := r.modules()
	root := mods["."].Module.Path
	var nested int
	for dir, m := range mods {
		if dir == "." {
			continue
		}
		var project int
		for _, req := range m.Require {
			if req.Path == root || strings.HasPrefix(req.Path, root+"/") {
				project++
				if req.Version != version {
					r.t.Errorf("%s/go.mod requires %s %s, want %s", dir, req.Path, req.Version, version)
				}
			}
		}
		if project == 0 && isPublished(dir) {
			r.t.Errorf("%s/go.mod, a published module's, requires none of the project's modules", dir)
		}
		nested++
	}
	if nested == 0 {
		r.t.Error("no nested go.mod")
	}
}

// wantTags checks that the tags are version for the root and DIR/version
// for each go.mod outside example/, bench/ and internal/, all at HEAD, and
// that the script's output says how to push them all.
func (r *scratchRelease) wantTags(version, out string) {
	r.t.Helper()
	want := []string{version}
	for dir := range r.modules() {
		if dir != "." && isPublished(dir) {
			want = append(want, dir+"/"+version)
		}
	}
	for _, tag := range []string{version, "scsstore/" + version, "ddbstream/" + version, "mcpsession/" + version, "mcphandle/" + version, "ddbsessionotel/" + version, "ddbsessionoidc/" + version} {
		if !slices.Contains(want, tag) {
			r.t.Fatalf("the checkout's published modules have changed: no %s in %q; update this test", tag, want)
		}
	}
	slices.Sort(want)
	got := strings.Fields(r.git("tag", "-l"))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		r.t.Errorf("tags %q, want %q", got, want)
	}
	head := r.git("rev-parse", "HEAD")
	for _, tag := range got {
		if at := r.git("rev-list", "-n1", tag); at != head {
			r.t.Errorf("tag %s is at %s, want HEAD %s", tag, at, head)
		}
	}
	_, push, _ := strings.Cut(out, "\n  git push")
	push, _, _ = strings.Cut("git push"+push, "\n")
	if !strings.HasPrefix(push, "git push --atomic origin release-test ") {
		r.t.Errorf("the script does not print the push of the branch and its tags:\n%s", out)
	}
	for _, tag := range want {
		if !slices.Contains(strings.Fields(push), tag) {
			r.t.Errorf("the printed push %q lacks %s", push, tag)
		}
	}
}

// isPublished reports whether the module in dir is published: it is
// outside example/, bench/ and internal/.
func isPublished(dir string) bool {
	return !slices.ContainsFunc(strings.Split(dir, "/"), func(p string) bool {
		return p == "example" || p == "bench" || p == "internal"
	})
}
