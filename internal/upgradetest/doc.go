// Package upgradetest holds TestRollingUpgradeFromV010, which runs the
// released v0.1.0 and the code of this checkout side by side on one table,
// as a rolling deploy does, and checks that sessions made before the deploy
// stay signed in and that no ended session is accepted by either version.
//
// It is a module of its own so that the root module's tests stay fast: it
// checks the release's commit out with git worktree (the commit that
// CHANGELOG.md's link reference for v0.1.0 names, which a shallow clone
// lacks: the test then fails and says to fetch the full history), builds
// the driver in testdata/driver against each, and drives the instances
// over HTTP. Run it from this directory against a local engine:
//
//	../../scripts/with-dynalite go test -race -count=1 -v ./...
//
// The package has no code besides its tests.
package upgradetest
