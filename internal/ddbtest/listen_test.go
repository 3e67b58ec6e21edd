package ddbtest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// After Refuse, connections to the port are refused, and the port stays
// taken: a busy machine's other listeners never get it while it is held.
func TestListenRefuseKeepsThePort(t *testing.T) {
	ln, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	accepted := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Close()
		}
		accepted <- err
	}()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial before Refuse: %v", err)
	}
	conn.Close()
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
	if err := ln.Refuse(); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("Accept after Refuse returned a connection")
	}
	if conn, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("dial after Refuse: %v, want connection refused", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 2000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		if l.Addr().(*net.TCPAddr).Port == port {
			t.Fatalf("another listener got port %d, held by a refusing listener", port)
		}
	}
	if _, err := net.Listen("tcp", addr); err == nil {
		t.Errorf("a listener bound %s, held by a refusing listener", addr)
	}
}
