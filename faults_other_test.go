//go:build !unix

package ddbsession_test

import "net"

// stopListening makes ln refuse connections by closing it.
func stopListening(ln net.Listener) { ln.Close() }
