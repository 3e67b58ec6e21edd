package main

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal reports whether stream is an *os.File on a terminal: one that
// answers the terminal's own ioctl. /dev/null, the stdin of cron and of a
// systemd service, is a character device but no terminal.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
