// Command run runs a program against a local DynamoDB-compatible engine,
// found or started as package ddbsessiontest finds one for tests, with
// dummy credentials and Region, so that it can reach no AWS account. From
// an app's own module directory:
//
//	go run github.com/ddbsession/ddbsession/ddbsessiontest/run go run .
//
// Ctrl-C or a SIGTERM to it stops the program, "go run" and all, then the
// engine; it exits with the program's status.
package main

import (
	"os"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func main() {
	os.Exit(ddbtest.Harness{Name: "ddbsessiontest/run"}.Run(os.Args[1:]))
}
