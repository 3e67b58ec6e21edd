// Command migrate is an scs app whose sessions move from Redis (scs's
// redisstore) to DynamoDB (scsstore) without signing anyone out. It is the
// old version of the app and the new one in one program: -phase chooses
// the store, so that instances of the old version and of each phase of
// the new one run side by side on one Redis and one table, as they do in a
// rolling deploy. docs/migrate.md walks through the phases.
//
//	POST /login    form field name: signs in as that name (a demo, without
//	               passwords); 303 to /me
//	GET  /me       200 with the signed-in name, or 401
//	POST /note     form field text: keeps it in the session; 303 to /note
//	GET  /note     200 with the kept text, or 404 when there is none
//	POST /logout   destroys the session; 303 to /me
//
// The flags:
//
//	-redis ADDR    the old store: a Redis server, as scs's redisstore uses it
//	-table NAME    the new store: a DynamoDB table, created if missing
//	-phase P       old (Redis alone, the old version, but for the tombstone
//	               a logout leaves in the table), dual, dynamodb-first or
//	               dynamodb-only (DynamoDB alone: -redis may be left out)
//	-addr, -dev    where to listen; -dev for plain HTTP on localhost
//
// With -from-gorilla KEYHEX beside -table (and no -redis or -phase), it is
// the app on ddbsession's own sessions that takes over from a version on
// gorilla/sessions' CookieStore, keyed with that hash key (hex): a
// browser with that version's cookie "session", whose value "user" names
// a user the table knows, is signed in on its first request
// (ddbsession.Manager.Adopt; docs/migrate.md, "Adopting other sessions").
//
// The DynamoDB client takes the usual AWS environment (AWS_REGION,
// credentials, AWS_ENDPOINT_URL_DYNAMODB for anything but DynamoDB
// itself), as the SDK does. From the repository's root, against dynalite
// and a local redis-server:
//
//	scripts/with-dynalite go run ./example/migrate -dev -redis 127.0.0.1:6379 -phase dual
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/ddbsession/ddbsession/internal/demo"
	"github.com/ddbsession/ddbsession/scsstore"
)

// main serves until Ctrl-C or SIGTERM, then shuts down gracefully (see
// internal/demo, the skeleton the example programs share).
func main() { demo.Main("migrate example", run) }

// run serves the app until ctx is done. It prints the URL it serves on to
// stdout once it is listening, and flag errors and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := demo.NewFlags("migrate", stderr)
	cfg := appConfig{Phase: scsstore.PhaseOld}
	flags.StringVar(&cfg.Redis, "redis", "", "address of the old store's Redis server (host:port)")
	flags.StringVar(&cfg.Table, "table", "ddbsession-migrate-example", "DynamoDB table of the new store; created if missing")
	flags.Func("phase", "old, dual, dynamodb-first or dynamodb-only (default old)", func(s string) error {
		cfg.Phase = scsstore.Phase(s)
		return cfg.checkPhase()
	})
	flags.BoolVar(&cfg.Dev, "dev", false, demo.DevUsage)
	fromGorilla := flags.String("from-gorilla", "", "hash key (hex) of the gorilla/sessions CookieStore to take sessions over from, instead of -redis and -phase")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *fromGorilla != "" {
		return serveAdopting(ctx, cfg, *fromGorilla, flags, stdout)
	}
	if cfg.Redis == "" && cfg.Phase != scsstore.PhaseDynamoDBOnly {
		return fmt.Errorf("-phase %s reads the old store: -redis is required", cfg.Phase)
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
	fmt.Fprintf(stdout, "serving on %s (phase %s)\n", url, cfg.Phase)
	return srv.Serve(ctx)
}

// serveAdopting serves the app on ddbsession's sessions, taking over from
// the gorilla/sessions version keyed with hashKeyHex, until ctx is done.
func serveAdopting(ctx context.Context, cfg appConfig, hashKeyHex string, flags *demo.Flags, stdout io.Writer) error {
	hashKey, err := hex.DecodeString(hashKeyHex)
	if err != nil || len(hashKey) < 32 {
		return errors.New("-from-gorilla: want the CookieStore's hash key in hex, 32 bytes or more")
	}
	if cfg.Redis != "" || cfg.Phase != scsstore.PhaseOld {
		return errors.New("-from-gorilla takes the place of -redis and -phase: the app runs on ddbsession's own sessions")
	}
	if cfg.Client, err = demo.DynamoDB(ctx); err != nil {
		return err
	}
	handler, err := newAdoptingApp(ctx, cfg, hashKey)
	if err != nil {
		return err
	}
	srv := &demo.Server{Addr: flags.Addr, Handler: handler}
	url, err := srv.Listen()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serving on %s (from gorilla/sessions)\n", url)
	return srv.Serve(ctx)
}
