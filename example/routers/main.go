// Command routers serves one sign-in flow, guarded by one ddbsession
// Manager, through the router of your choice: chi, gorilla/mux, echo or
// gin. Each router's file (chi.go, gorillamux.go, echo.go, gin.go) is the
// whole of what that router needs; the handlers they share are in app.go.
//
//	GET  /        a public page
//	POST /login   form fields name and password; 303 to /me, or 401
//	GET  /me      200 "signed in as <name>", or 401 without a session
//	POST /logout  ends the session; 303 to /
//
// The router examples live in a module of their own, so that the core's
// users never download a router they do not use. Against dynalite, from
// the repository's root, in plain-HTTP development mode:
//
//	scripts/with-dynalite go run ./example/routers -router gin -dev
//	curl -c jar -b jar -d name=alice -d password=demo http://127.0.0.1:8080/login
//	curl -c jar -b jar http://127.0.0.1:8080/me
//
// Every user's password is "demo": the check is a stand-in (see app.go).
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
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
)

// routers are the examples, each a function that builds its router's
// handler around one Manager.
var routers = []struct {
	name    string
	handler func(*ddbsession.Manager[User]) http.Handler
}{
	{"chi", chiRouter},
	{"gorillamux", gorillaMuxRouter},
	{"echo", echoRouter},
	{"gin", ginRouter},
}

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
		slog.Error("routers example failed", "err", err)
		os.Exit(1)
	}
}

// run serves the example until ctx is done. It prints the URL it serves on
// to stdout once it is listening, and flag errors and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var names []string
	for _, r := range routers {
		names = append(names, r.name)
	}
	flags := flag.NewFlagSet("routers", flag.ContinueOnError)
	flags.SetOutput(stderr)
	addr := flags.String("addr", "127.0.0.1:8080", "address to listen on")
	routerName := flags.String("router", "chi", "the router: "+strings.Join(names, ", "))
	table := flags.String("table", "ddbsession-routers-example", "DynamoDB table for sessions and users; created if missing")
	dev := flags.Bool("dev", false, "plain-HTTP development mode: the cookie loses Secure and the __Host- prefix")
	user := flags.String("user", "alice", "a user to create, if missing, to sign in as")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	var newHandler func(*ddbsession.Manager[User]) http.Handler
	for _, r := range routers {
		if r.name == *routerName {
			newHandler = r.handler
		}
	}
	if newHandler == nil {
		return fmt.Errorf("-router %q: want one of %s", *routerName, strings.Join(names, ", "))
	}

	// The SDK's own configuration finds the region, the credentials and
	// AWS_ENDPOINT_URL_DYNAMODB, so the example has no endpoint flag.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	sessions, err := newSessions(ctx, ddbsession.Config[User]{
		Client: dynamodb.NewFromConfig(awsCfg),
		Table:  *table,
		Cookie: ddbsession.Cookie{InsecureDevMode: *dev},
	}, *user)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newHandler(sessions),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	if !*dev {
		slog.Warn("the session cookie is Secure: serve this behind HTTPS, or pass -dev on localhost")
	}
	fmt.Fprintf(stdout, "serving %s on http://%s/\n", *routerName, ln.Addr())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The last requests first, then the refreshes they started.
	return errors.Join(srv.Shutdown(shutdownCtx), sessions.Wait(shutdownCtx))
}
