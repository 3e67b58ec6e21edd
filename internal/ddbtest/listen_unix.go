//go:build unix

package ddbtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Listen returns a TCP listener on a free loopback port that can stop
// listening while it keeps its port: after Refuse, connections to it are
// refused, as by a host with nothing listening, and no other socket can
// take the port until Close. A fault injector that refuses connections
// needs both: a listener closed instead frees its port, which the kernel
// hands to the next test's listener, and connections meant to be refused
// reach that one.
//
// The socket is bound to its port explicitly, without SO_REUSEADDR: the
// kernel then keeps the port bound when Refuse shuts the socket down
// (a socket bound to port 0 lets it go), and lets no other socket share it.
func Listen() (*Listener, error) {
	for attempt := 0; ; attempt++ {
		ln, err := listenOnce()
		if errors.Is(err, syscall.EADDRINUSE) && attempt < 50 {
			continue // taken between the probe and the bind: try another
		}
		return ln, err
	}
}

func listenOnce() (*Listener, error) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	syscall.CloseOnExec(fd)
	file := os.NewFile(uintptr(fd), "ddbtest listener")
	defer file.Close() // net.FileListener holds a copy of its own
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, fmt.Errorf("bind 127.0.0.1:%d: %w", port, err)
	}
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ln, err := net.FileListener(file)
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: ln}, nil
}

// Listener is a listener that can refuse connections and keep its port;
// see [Listen].
type Listener struct {
	net.Listener
}

// Refuse stops listening: connections are refused from now on, and Accept
// returns an error. The port stays bound until Close.
func (l *Listener) Refuse() error {
	raw, err := l.Listener.(*net.TCPListener).SyscallConn()
	if err != nil {
		return err
	}
	var shut error
	if err := raw.Control(func(fd uintptr) { shut = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) }); err != nil {
		return err
	}
	return shut
}
