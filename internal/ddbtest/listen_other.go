//go:build !unix

package ddbtest

import "net"

// Listen returns a TCP listener on a free loopback port. Where the system
// offers no socket calls to keep a port that stopped listening, Refuse
// closes it: its port may then be taken again.
func Listen() (*Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: ln}, nil
}

// Listener is a listener that can refuse connections; see [Listen].
type Listener struct {
	net.Listener
}

// Refuse stops listening, here by closing the listener.
func (l *Listener) Refuse() error { return l.Listener.Close() }
