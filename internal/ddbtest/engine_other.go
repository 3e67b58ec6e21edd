//go:build !linux

package ddbtest

import "syscall"

// dieWithParent is nothing outside Linux, which alone has a parent-death
// signal: Main stops the engine when it returns.
func dieWithParent() *syscall.SysProcAttr { return nil }
