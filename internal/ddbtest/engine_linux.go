package ddbtest

import "syscall"

// dieWithParent makes a started engine die with this process.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
