//go:build unix

package ddbtest

import (
	"net"
	"syscall"
)

// StopListening makes ln refuse connections. Where the system allows it
// (Linux), it shuts the socket down but keeps it open, so that its port
// stays taken and no other listener of the test process can get it while
// a test expects refusals; elsewhere it closes ln.
func StopListening(ln net.Listener) {
	if tcp, ok := ln.(*net.TCPListener); ok {
		if raw, err := tcp.SyscallConn(); err == nil {
			var shut error
			if err := raw.Control(func(fd uintptr) { shut = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) }); err == nil && shut == nil {
				return
			}
		}
	}
	ln.Close()
}
