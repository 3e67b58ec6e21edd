package ddbtest

import "context"

// InstallDynaliteWith is InstallDynalite into the cache directory root,
// with npm as the command that installs.
func InstallDynaliteWith(ctx context.Context, root, npm string) (string, error) {
	return installDynalite(ctx, root, npm, project.Name)
}

var (
	DynaliteVersion = dynaliteVersion
	DynaliteFiles   = dynaliteFiles
	StartDynaliteIn = startDynaliteIn
)
