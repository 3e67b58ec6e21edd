// Command mcp is a small MCP server on github.com/mark3labs/mcp-go's
// streamable HTTP transport that keeps its sessions in DynamoDB with
// mcpsession. Run two of them on one table, initialize through one, and
// call its tools through the other.
//
//	POST   /mcp   JSON-RPC: initialize (which issues the Mcp-Session-Id),
//	              then tools/list and tools/call with the session's ID
//	GET    /mcp   the session's stream of server messages
//	DELETE /mcp   ends the session, on every instance
//
// Tools:
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
	flags.DurationVar(&cfg.IdleTimeout, "idle", time.Hour, "how long a session lives without requests")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if cfg.IdleTimeout < time.Minute {
		return fmt.Errorf("-idle %v: want a minute or more", cfg.IdleTimeout)
	}

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
		ErrorLog:    slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	// Shutdown waits for every request, and a GET stream ends only when
	// mcp-go lets it go, which ends nothing in the table: the other
	// instances serve its session on.
	srv.RegisterOnShutdown(func() {
		if err := a.transport.Shutdown(context.Background()); err != nil {
			slog.Warn("shut the MCP transport down", "err", err)
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
	slog.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(srv.Shutdown(shutdownCtx), a.sessions.Sessions().Wait(shutdownCtx))
}
