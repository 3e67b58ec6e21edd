package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// version, -version and --version print the build's version on stdout and
// exit 0. A test binary is a development build: no release, no commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	f := &fixture{t: t, probe: ddbtest.NewProbe(nil)} // a nil client: any call panics
	for _, arg := range []string{"version", "-version", "--version"} {
		t.Run(arg, func(t *testing.T) {
			code, stdout, stderr := f.runBare(arg)
			wantCode(t, code, exitOK, stdout, stderr)
			if stdout != "ddbsession (devel)\n" || stderr != "" {
				t.Errorf("stdout %q, stderr %q; want \"ddbsession (devel)\\n\" and nothing", stdout, stderr)
			}
		})
	}
	code, stdout, stderr := f.runBare("version", "extra")
	wantCode(t, code, exitUsage, stdout, stderr)
	if !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("stderr does not name the extra argument:\n%s", stderr)
	}
	for _, args := range [][]string{{"version", "-h"}, {"help", "version"}} {
		code, stdout, stderr := f.runBare(args...)
		wantCode(t, code, exitOK, stdout, stderr)
		if !strings.HasPrefix(stdout, "Usage: ddbsession version") {
			t.Errorf("%v:\n%s", args, stdout)
		}
	}
	_, usage, _ := f.runBare("-h")
	if !strings.Contains(usage, "\n  version ") {
		t.Errorf("-h does not list version:\n%s", usage)
	}
}

func TestVersionString(t *testing.T) {
	t.Parallel()
	const revision = "3fe51b4c0ffee0123456789abcdef0123456789a"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: revision},
			{Key: "vcs.time", Value: "2026-12-01T12:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"installed at a release", &debug.BuildInfo{Main: debug.Module{Path: "github.com/ddbsession/ddbsession", Version: "v0.1.0"}}, "ddbsession v0.1.0"},
		{"a pseudo-version the go command derived from the checkout",
			&debug.BuildInfo{Main: debug.Module{Version: "v0.1.1-0.20261201120000-3fe51b4c0ffe+dirty"}, Settings: vcs("true")},
			"ddbsession v0.1.1-0.20261201120000-3fe51b4c0ffe+dirty"},
		{"devel with a commit", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "ddbsession (devel) 3fe51b4c0ffe"},
		{"devel with a modified tree", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "ddbsession (devel) 3fe51b4c0ffe+dirty"},
		{"devel without VCS information", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "ddbsession (devel)"},
		{"no main module version at all", &debug.BuildInfo{}, "ddbsession (devel)"},
		{"no build info", nil, "ddbsession (unknown version: no build info)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := versionString(tc.info); got != tc.want {
				t.Errorf("versionString = %q, want %q", got, tc.want)
			}
		})
	}
}
