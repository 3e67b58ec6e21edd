//go:build unix

package redistest

import "syscall"

// ownGroup starts the server in a process group of its own, so that a
// Ctrl-C at the terminal reaches the test binary alone, which then stops it.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the process group that pid leads.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }
