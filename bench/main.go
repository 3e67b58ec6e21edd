// Command bench measures ddbsession next to its peers, in one process
// against one DynamoDB engine, and prints the tables of the README's
// "Speed" section in Markdown. Run it through the project's script, which
// starts the pinned dynalite:
//
//	./scripts/bench              # the README's table
//	./scripts/bench -rounds 3    # flags as below
//
// It serves authenticated requests of every variant in [variants]:
// ddbsession with its one-round-trip read, the same with a refresh due on
// every request, ddbsession's two-read path (HideUserKey), scs with a plain
// DynamoDB store that commits every request, and the bare SDK floors (two
// GetItems in turn; one BatchGetItem). Every call goes through a proxy on
// 127.0.0.1 in this process, which holds it for a fixed delay (2 ms is
// close to DynamoDB's latency within a region) and counts calls, writes and
// capacity units per operation. Variants alternate round by round (ABCABC),
// at each delay and concurrency, so that the engine's drift touches them
// alike; p50 and p99 are over all of a variant's requests at one delay and
// concurrency, and counts are medians over rounds.
//
// Allocations per request are counted apart, against the engine without the
// proxy (which would count its own), one request at a time: once with the
// engine's answers, and once with a client that replays them from memory,
// which leaves the code under test's own work.
//
// The engine is AWS_ENDPOINT_URL_DYNAMODB, which must be a local one: the
// command refuses AWS endpoints and uses dummy credentials.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func main() {
	if err := mainErr(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func mainErr(args []string) error {
	opts, engine, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		return errors.New("AWS_ENDPOINT_URL_DYNAMODB is not set: run ./scripts/bench, which starts the pinned dynalite")
	}
	if err := ddbtest.CheckEndpoint(endpoint); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	mach := thisMachine(engine)
	res, err := run(ctx, endpoint, opts, os.Stderr)
	if err != nil {
		return err
	}
	return writeReport(os.Stdout, res, mach)
}

func parseFlags(args []string) (options, string, error) {
	flags := flag.NewFlagSet("bench", flag.ContinueOnError)
	delays := flags.String("delays", "0,2ms", "delays the proxy holds each DynamoDB call for, comma-separated")
	conc := flags.String("concurrency", "1,8,32", "requests in flight at once, comma-separated")
	opts := options{}
	flags.IntVar(&opts.rounds, "rounds", 7, "alternating rounds per delay and concurrency")
	flags.IntVar(&opts.requests, "requests", 300, "requests per variant per round")
	flags.IntVar(&opts.sessions, "sessions", 512, "signed-in users per variant; requests go round them")
	flags.IntVar(&opts.allocRounds, "alloc-rounds", 5, "rounds of the allocation count, each over half the sessions")
	engine := flags.String("engine", "", `the engine's name and version for the report, e.g. "dynalite 4.0.0"`)
	if err := flags.Parse(args); err != nil {
		return opts, "", err
	}
	if flags.NArg() > 0 {
		return opts, "", fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	var err error
	if opts.delays, err = parseList(*delays, time.ParseDuration); err != nil {
		return opts, "", fmt.Errorf("-delays: %w", err)
	}
	if opts.concurrency, err = parseList(*conc, strconv.Atoi); err != nil {
		return opts, "", fmt.Errorf("-concurrency: %w", err)
	}
	for _, c := range opts.concurrency {
		if c < 1 {
			return opts, "", fmt.Errorf("-concurrency %d: must be at least 1", c)
		}
	}
	for _, d := range opts.delays {
		if d < 0 {
			return opts, "", fmt.Errorf("-delays %v: must not be negative", d)
		}
	}
	if opts.rounds < 1 || opts.requests < 1 || opts.allocRounds < 1 || opts.sessions < 2 {
		return opts, "", errors.New("-rounds, -requests and -alloc-rounds must be at least 1, -sessions at least 2")
	}
	return opts, *engine, nil
}

func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
