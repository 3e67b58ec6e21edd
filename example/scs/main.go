// Command scs is a small app on github.com/alexedwards/scs/v2 that keeps its
// sessions in DynamoDB with scsstore. Run two of them on one table, and a
// session put through one is read through the other.
//
//	POST /put                form field msg: stores it in the session; 204
//	GET  /get                200 with the stored message, or 404 when there is none
//	POST /renew              RenewToken: a new token, the data kept; 204
//	POST /destroy            Destroy; 204
//	POST /login              form field user: signs that user in (signed up on first
//	                         login: a demo, without passwords); 204
//	GET  /me                 200 with the signed-in user's name, or 401
//	POST /logout-everywhere  ends every session of the signed-in user, on every
//	                         instance, and signs this browser in again; 204
//
// Against dynalite, from the repository's root (the README shows it with
// two instances):
//
//	scripts/with-dynalite go run ./example/scs -dev -idle 20m
//
// Against DynamoDB, with the usual AWS environment (AWS_REGION,
// credentials, and AWS_ENDPOINT_URL_DYNAMODB for anything but DynamoDB
// itself), behind HTTPS:
//
//	go run ./example/scs -table my-sessions
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
		slog.Error("scs example failed", "err", err)
		os.Exit(1)
	}
}

// run serves the app until ctx is done. It prints the URL it serves on to
// stdout once it is listening, and flag errors and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("scs", flag.ContinueOnError)
	flags.SetOutput(stderr)
	addr := flags.String("addr", "127.0.0.1:8080", "address to listen on")
	var cfg appConfig
	flags.StringVar(&cfg.Table, "table", "ddbsession-scs-example", "DynamoDB table for the sessions; created if missing")
	flags.BoolVar(&cfg.Dev, "dev", false, "plain-HTTP development mode: the cookie loses Secure and the __Host- prefix")
	flags.DurationVar(&cfg.IdleTimeout, "idle", 0, "scs IdleTimeout: how long a session lives without requests (0: no idle timeout)")
	flags.DurationVar(&cfg.Lifetime, "lifetime", 24*time.Hour, "scs Lifetime: how long a session lives at most")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if cfg.IdleTimeout < 0 || cfg.Lifetime <= 0 {
		return fmt.Errorf("-idle %v, -lifetime %v: want -idle zero (none) or positive, -lifetime positive", cfg.IdleTimeout, cfg.Lifetime)
	}

	// The SDK's own configuration finds the region, the credentials and
	// AWS_ENDPOINT_URL_DYNAMODB, so the app has no endpoint flag.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	cfg.Client = dynamodb.NewFromConfig(awsCfg)
	handler, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	if !cfg.Dev {
		slog.Warn("the session cookie is Secure: serve this behind HTTPS, or pass -dev on localhost")
	}
	fmt.Fprintf(stdout, "serving on http://%s/\n", ln.Addr())

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
	return srv.Shutdown(shutdownCtx)
}
