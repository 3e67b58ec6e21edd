// Package demo is the main skeleton that the example programs (example,
// example/scs, example/routers, example/mcp) share: what each of them does
// the same way before and after its own handler. A program's main reads top
// down with it:
//
//	func main() { demo.Main("example", run) }
//
//	func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
//		flags := demo.NewFlags("example", stderr)
//		flags.StringVar(&table, "table", "my-table", "DynamoDB table; created if missing")
//		if err := flags.Parse(args); err != nil {
//			return err
//		}
//		client, err := demo.DynamoDB(ctx)
//		... the program's own handler, from client ...
//		srv := &demo.Server{Addr: flags.Addr, Handler: h, Drain: m.Wait}
//		url, err := srv.Listen()
//		if err != nil {
//			return err
//		}
//		fmt.Fprintf(stdout, "serving on %s\n", url)
//		return srv.Serve(ctx)
//	}
//
// Main turns Ctrl-C and SIGTERM into the end of run's context, and Serve
// turns that into a graceful shutdown: the listener closes, requests under
// way finish, then Drain waits for the program's work after the responses
// (a refresh's write), all within [ShutdownTimeout]. The AWS configuration
// is the SDK's own (region, credentials, AWS_ENDPOINT_URL_DYNAMODB), so no
// program has an endpoint flag. Each program's app creates its table
// itself (its Manager's CreateTable), where its tests create it too.
//
// It uses the standard library and the AWS SDK only, as the root module
// must.
package demo

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Main runs a program's run until it returns: with a context that Ctrl-C
// (SIGINT) or SIGTERM ends, and with the process's arguments and standard
// output and error. -h is no failure; any other error is logged, as
// "<name> failed", and the process exits 1.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		slog.Error(name+" failed", "err", err)
		os.Exit(1)
	}
}

// DevUsage is the usage of the -dev flag of the programs that have one.
const DevUsage = "plain-HTTP development mode: the cookie loses Secure and the __Host- prefix"

// Flags is a program's flag set, with the -addr flag every program has.
// Errors and usage go to the stderr of [NewFlags]; Parse returns them
// rather than exiting, so that tests can run a program's run.
type Flags struct {
	*flag.FlagSet
	Addr string // -addr: the address to listen on
}

// NewFlags returns the flag set of the program name, with -addr, whose
// errors and usage go to stderr.
func NewFlags(name string, stderr io.Writer) *Flags {
	f := &Flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.SetOutput(stderr)
	f.StringVar(&f.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	return f
}

// Parse parses args, which must all be flags: a program takes no
// arguments, so a stray one (a value after a boolean flag, say) is an
// error rather than ignored.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a flag (-h lists them)", f.Args())
	}
	return nil
}

// DynamoDB returns a DynamoDB client from the SDK's own configuration,
// which finds the region, the credentials and AWS_ENDPOINT_URL_DYNAMODB;
// adjust, if any, changes that configuration first (adding the SDK
// middlewares of a tracer, say).
func DynamoDB(ctx context.Context, adjust ...func(*aws.Config)) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	for _, a := range adjust {
		a(&cfg)
	}
	return dynamodb.NewFromConfig(cfg), nil
}

// ShutdownTimeout bounds a graceful shutdown: the requests under way, then
// [Server.Drain].
const ShutdownTimeout = 10 * time.Second

// Server is a program's HTTP server, with the timeouts of a server on the
// open internet, and its errors logged through slog.
type Server struct {
	Addr    string       // where to listen, as net.Listen takes it
	Handler http.Handler // the program's whole handler
	// TLS, if set, serves HTTPS with its certificates; nil serves plain
	// HTTP.
	TLS *tls.Config
	// Streaming leaves out the write timeout, for responses that stay open
	// as long as their client wants (an MCP session's GET stream).
	Streaming bool
	// OnShutdown, if set, runs when the shutdown begins, beside the wait
	// for the requests under way: it tells the handler's long-lived
	// responses to end.
	OnShutdown func()
	// Drain, if set, runs once every request has finished, and waits for
	// what the handler does after its responses (a session refresh's
	// write), until the context ends.
	Drain func(context.Context) error

	ln  net.Listener
	srv *http.Server
}

// Listen listens on s.Addr and returns the URL it serves, ending in "/",
// which the program prints for its user (and its tests read): on a
// loopback address, at localhost, since browsers make no passkeys for an
// IP address. It checks nothing but the listener: the program checks its
// flags, and builds its handler, before.
func (s *Server) Listen() (string, error) {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return "", err
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.Handler,
		TLSConfig:         s.TLS,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	if s.Streaming {
		s.srv.WriteTimeout = 0
	}
	if s.OnShutdown != nil {
		s.srv.RegisterOnShutdown(s.OnShutdown)
	}
	scheme := "http"
	if s.TLS != nil {
		scheme = "https"
	}
	host := ln.Addr().String()
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		host = net.JoinHostPort("localhost", strconv.Itoa(a.Port))
	}
	return scheme + "://" + host + "/", nil
}

// Serve serves on the listener of Listen until ctx ends, then shuts down
// gracefully within ShutdownTimeout: the listener closes at once, the
// requests under way finish, and then Drain runs. It returns the errors of
// the shutdown and of Drain, or the server's own if it stopped by itself.
func (s *Server) Serve(ctx context.Context) error {
	if s.srv == nil {
		return errors.New("demo: Serve before Listen")
	}
	served := make(chan error, 1)
	go func() {
		if s.TLS != nil {
			served <- s.srv.ServeTLS(s.ln, "", "") // the certificates are in TLSConfig
		} else {
			served <- s.srv.Serve(s.ln)
		}
	}()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(shutdownCtx)
	if s.Drain != nil {
		err = errors.Join(err, s.Drain(shutdownCtx))
	}
	return err
}
