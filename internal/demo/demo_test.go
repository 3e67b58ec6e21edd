package demo_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ddbsession/ddbsession/internal/demo"
)

// The shutdown's order: once the context ends the listener is closed, the
// request under way finishes, and only then does Drain run.
func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var finished, drainedAfter atomic.Bool
	shuttingDown := make(chan struct{})
	srv := &demo.Server{
		Addr: "127.0.0.1:0",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			io.WriteString(w, "done")
			finished.Store(true)
		}),
		OnShutdown: func() { close(shuttingDown) }, // after the listener is closed
		Drain: func(ctx context.Context) error {
			drainedAfter.Store(finished.Load())
			return nil
		},
	}
	url, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	// localhost, not 127.0.0.1, where browsers make no passkeys.
	if !strings.HasPrefix(url, "http://localhost:") || !strings.HasSuffix(url, "/") {
		t.Fatalf("Listen on 127.0.0.1: %q, want http://localhost:<port>/", url)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	answer := make(chan string, 1)
	go func() {
		res, err := http.Get(url)
		if err != nil {
			answer <- err.Error()
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		answer <- string(body)
	}()
	<-entered
	cancel()
	<-shuttingDown
	if conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")); err == nil {
		conn.Close()
		t.Error("the listener takes connections once the shutdown has begun")
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v with a request under way", err)
	default:
	}
	close(release)
	if got := <-answer; got != "done" {
		t.Errorf("the request under way at the shutdown: %q, want its answer", got)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after a graceful shutdown: %v, want nil", err)
	}
	if !drainedAfter.Load() {
		t.Error("Drain ran before the request under way had finished")
	}
}

// Drain's error, and the shutdown's, are Serve's.
func TestServeReturnsDrainError(t *testing.T) {
	t.Parallel()
	errDrain := errors.New("refreshes still running")
	srv := &demo.Server{Addr: "127.0.0.1:0", Handler: http.NotFoundHandler(), Drain: func(context.Context) error { return errDrain }}
	if _, err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Serve(ctx); !errors.Is(err, errDrain) {
		t.Errorf("Serve: %v, want Drain's error", err)
	}
}

func TestServeBeforeListen(t *testing.T) {
	t.Parallel()
	if err := (&demo.Server{Addr: "127.0.0.1:0"}).Serve(context.Background()); err == nil {
		t.Error("Serve before Listen: nil, want an error")
	}
}

func TestListenRefusesABadAddress(t *testing.T) {
	t.Parallel()
	if _, err := (&demo.Server{Addr: "127.0.0.1:http-alt-nope"}).Listen(); err == nil {
		t.Error("Listen on a port that is no number: nil, want an error")
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		addr string
		want string // part of the error; "" for none
	}{
		{"default", nil, "127.0.0.1:8080", ""},
		{"addr", []string{"-addr", ":9000"}, ":9000", ""},
		{"stray argument", []string{"-dev", "false"}, "", `unexpected arguments ["false"]: every setting is a flag (-h lists them)`},
		{"unknown flag", []string{"-nope"}, "", "flag provided but not defined: -nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			flags := demo.NewFlags("prog", &stderr)
			flags.Bool("dev", false, demo.DevUsage)
			err := flags.Parse(tc.args)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Parse(%q): %v", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Parse(%q): %v, want an error that says %q", tc.args, err, tc.want)
			case tc.want == "" && flags.Addr != tc.addr:
				t.Errorf("Parse(%q): Addr %q, want %q", tc.args, flags.Addr, tc.addr)
			}
		})
	}
	var stderr strings.Builder
	if err := demo.NewFlags("prog", &stderr).Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "Usage of prog:") {
		t.Errorf("Parse(-h): %v, usage %q; want flag.ErrHelp and the usage on stderr", err, stderr.String())
	}
}
