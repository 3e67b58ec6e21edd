package ddbtest

import "context"

// InstallDynaliteIn is InstallDynalite into the cache directory root.
func InstallDynaliteIn(ctx context.Context, root string) (string, error) {
	return installDynalite(ctx, root, project.Name)
}

var (
	DynaliteVersion = dynaliteVersion
	DynaliteFiles   = dynaliteFiles
	StartDynaliteIn = startDynaliteIn
)
