//go:build !unix

package ddbtest

import "net"

// StopListening makes ln refuse connections by closing it.
func StopListening(ln net.Listener) { ln.Close() }
