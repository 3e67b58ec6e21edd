// Command install-dynalite installs the pinned dynalite where Go tests that
// start their own engine look for it (see ddbtest.InstallDynalite), unless
// it is there already, and says which directory that is. scripts/test runs it
// first, so that no npm ci competes for the CPU with tests that run against
// the shared engine.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := ddbtest.InstallDynalite(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "install-dynalite:", err)
		os.Exit(1)
	}
	fmt.Println("dynalite for tests that start their own engine:", dir)
}
