package main

import (
	"fmt"
	"runtime/debug"
)

const versionHelp = `Usage: ddbsession version

Prints which build of the command this is: its release, as in
"ddbsession v0.1.0", when installed with go install ...@version; for a
build from a checkout, the version the go command gave it, or "(devel)"
and the commit it was built from where the build recorded one. Also
-version and --version.
`

// runVersion prints the command's version; it takes no arguments.
func (e *env) runVersion(args []string) int {
	if len(args) > 0 {
		if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprint(e.stdout, versionHelp)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "ddbsession version: unexpected argument %q\nRun 'ddbsession version -h' for help.\n", args[0])
		return exitUsage
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	fmt.Fprintln(e.stdout, versionString(info))
	return exitOK
}

// versionString says which build info describes: the main module's
// version where the go command set one (a release, or a pseudo-version it
// derived from the checkout), else "(devel)" with the commit it recorded
// (12 digits, as in a pseudo-version; "+dirty" if the tree was modified).
// info is nil for a binary built without module support.
func versionString(info *debug.BuildInfo) string {
	if info == nil {
		return "ddbsession (unknown version: no build info)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return "ddbsession " + v
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return "ddbsession (devel)"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified {
		revision += "+dirty"
	}
	return "ddbsession (devel) " + revision
}
