// Command mcp is a small MCP server that keeps its state in DynamoDB, for
// both MCP revisions in use, at one path, /mcp. Run two of them on one
// table, and call through either.
//
// Revision 2026-07-28 (requests whose Mcp-Protocol-Version header names it
// or a later one) is served by the official Go SDK, statelessly, behind
// bearer tokens (-token SUBJECT:TOKEN, for tests; a real deployment
// verifies its authorization server's tokens in staticTokens' place), with
// state in handles that mcphandle keeps, bound to the caller:
//
//	counter_open  {}                          -> {"handle": "..."}
//	counter_add   {"handle": "...", "n": N}   -> {"value": V}
//	counter_get   {"handle": "..."}           -> {"value": V}
//
// A handle that is not the caller's live one gets the tool error "no such
// handle: open a new one", whatever the reason. The caller SUBJECT is the
// user item USER#SUBJECT / PROFILE, so that
// "ddbsession sessions revoke-all -table NAME -sk PROFILE -- USER#SUBJECT"
// ends their handles.
//
// Revision 2025-11-25 and before is served by github.com/mark3labs/mcp-go's
// streamable HTTP transport, with sessions that mcpsession keeps:
//
//	POST   /mcp   JSON-RPC: initialize (which issues the Mcp-Session-Id),
//	              then tools/list and tools/call with the session's ID
//	GET    /mcp   the session's stream of server messages
//	DELETE /mcp   ends the session, on every instance
//
// Its tools:
//
//	echo     answers with its argument text
//	session  what the session holds, on whichever instance serves it: the
//	         client's name and version and the protocol version from
//	         initialize, the log level, and the session's public ID and expiry
//
// Against dynalite, from the repository's root (the README shows it with
// two instances):
//
//	scripts/with-dynalite go run ./example/mcp
//
// Against DynamoDB, with the usual AWS environment (AWS_REGION,
// credentials, and AWS_ENDPOINT_URL_DYNAMODB for anything but DynamoDB
// itself), behind HTTPS:
//
//	go run ./example/mcp -table my-mcp-sessions -addr :8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func main() {
	// Ctrl-C or SIGTERM cancels ctx, and run shuts the server down
	// gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		slog.Error("mcp example failed", "err", err)
		os.Exit(1)
	}
}

// run serves the MCP server until ctx is done. It prints the URL it serves
// on to stdout once it is listening, and flag errors and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("mcp", flag.ContinueOnError)
	flags.SetOutput(stderr)
	addr := flags.String("addr", "127.0.0.1:8080", "address to listen on")
	var cfg appConfig
	flags.StringVar(&cfg.Table, "table", "ddbsession-mcp-example", "DynamoDB table for the sessions; created if missing")
	flags.DurationVar(&cfg.IdleTimeout, "idle", time.Hour, "how long a session (2025-11-25) lives without requests")
	flags.DurationVar(&cfg.HandleIdle, "handle-idle", time.Hour, "how long a handle (2026-07-28) lives without use")
	cfg.Tokens = map[string]string{}
	flags.Func("token", "`SUBJECT:TOKEN`: accept the bearer token TOKEN as SUBJECT's, at 2026-07-28 (repeatable; for tests)", func(s string) error {
		subject, token, err := parseToken(s)
		cfg.Tokens[token] = subject
		return err
	})
	var level slog.Level
	flags.TextVar(&level, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if cfg.IdleTimeout < time.Minute {
		return fmt.Errorf("-idle %v: want a minute or more", cfg.IdleTimeout)
	}
	if cfg.HandleIdle < time.Minute {
		return fmt.Errorf("-handle-idle %v: want a minute or more", cfg.HandleIdle)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = logger

	// The SDK's own configuration finds the region, the credentials and
	// AWS_ENDPOINT_URL_DYNAMODB, so the app has no endpoint flag.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	cfg.Client = dynamodb.NewFromConfig(awsCfg)
	a, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// No WriteTimeout: a session's GET stream stays open.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for every request, and a GET stream ends only when
	// mcp-go lets it go, which ends nothing in the table: the other
	// instances serve its session on.
	srv.RegisterOnShutdown(func() {
		if err := a.transport.Shutdown(context.Background()); err != nil {
			a.logger.Warn("shut the MCP transport down", "err", err)
		}
	})
	fmt.Fprintf(stdout, "serving on http://%s/mcp\n", ln.Addr())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	a.logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(srv.Shutdown(shutdownCtx), a.sessions.Sessions().Wait(shutdownCtx), a.handles.Sessions().Wait(shutdownCtx))
}
