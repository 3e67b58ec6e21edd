//go:build unix

package ddbtest

import "syscall"

// ownGroup starts a command in a process group of its own.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the process group that pid leads.
func signalGroup(pid int, sig syscall.Signal) { syscall.Kill(-pid, sig) }
