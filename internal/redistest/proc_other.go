//go:build !unix

package redistest

import (
	"os"
	"syscall"
)

func ownGroup() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
