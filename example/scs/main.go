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
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ddbsession/ddbsession/internal/demo"
)

// main serves until Ctrl-C or SIGTERM, then shuts down gracefully (see
// internal/demo, the skeleton the example programs share).
func main() { demo.Main("scs example", run) }

// run serves the app until ctx is done. It prints the URL it serves on to
// stdout once it is listening, and flag errors and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := demo.NewFlags("scs", stderr)
	var cfg appConfig
	flags.StringVar(&cfg.Table, "table", "ddbsession-scs-example", "DynamoDB table for the sessions; created if missing")
	flags.BoolVar(&cfg.Dev, "dev", false, demo.DevUsage)
	flags.DurationVar(&cfg.IdleTimeout, "idle", 0, "scs IdleTimeout: how long a session lives without requests (0: no idle timeout)")
	flags.DurationVar(&cfg.Lifetime, "lifetime", 24*time.Hour, "scs Lifetime: how long a session lives at most")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if cfg.IdleTimeout < 0 || cfg.Lifetime <= 0 {
		return fmt.Errorf("-idle %v, -lifetime %v: want -idle zero (none) or positive, -lifetime positive", cfg.IdleTimeout, cfg.Lifetime)
	}

	client, err := demo.DynamoDB(ctx)
	if err != nil {
		return err
	}
	cfg.Client = client
	handler, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}

	// scs writes a session within its request: nothing to drain after.
	srv := &demo.Server{Addr: flags.Addr, Handler: handler}
	url, err := srv.Listen()
	if err != nil {
		return err
	}
	if !cfg.Dev {
		slog.Warn("the session cookie is Secure: serve this behind HTTPS, or pass -dev on localhost")
	}
	fmt.Fprintf(stdout, "serving on %s\n", url)
	return srv.Serve(ctx)
}
