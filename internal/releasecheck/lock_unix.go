//go:build unix

package main

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on the file at name, which it creates
// if need be: waiting for another process's, or failing at once if wait is
// false. The lock ends with unlock, or with the process.
func lockFile(name string, wait bool) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
