//go:build !unix

package ddbtest

import (
	"os"
	"syscall"
)

func ownGroup() *syscall.SysProcAttr { return nil }

func signalGroup(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Signal(sig)
	}
}
