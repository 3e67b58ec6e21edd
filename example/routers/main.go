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
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/demo"
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

// main serves until Ctrl-C or SIGTERM, then shuts down gracefully (see
// internal/demo, the skeleton the example programs share).
func main() { demo.Main("routers example", run) }

// run serves the example until ctx is done. It prints the URL it serves on
// to stdout once it is listening, and flag errors and usage to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var names []string
	for _, r := range routers {
		names = append(names, r.name)
	}
	flags := demo.NewFlags("routers", stderr)
	routerName := flags.String("router", "chi", "the router: "+strings.Join(names, ", "))
	table := flags.String("table", "ddbsession-routers-example", "DynamoDB table for sessions and users; created if missing")
	dev := flags.Bool("dev", false, demo.DevUsage)
	user := flags.String("user", "alice", "a user to create, if missing, to sign in as")
	if err := flags.Parse(args); err != nil {
		return err
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

	client, err := demo.DynamoDB(ctx)
	if err != nil {
		return err
	}
	sessions, err := newSessions(ctx, ddbsession.Config[User]{
		Client: client,
		Table:  *table,
		Cookie: ddbsession.Cookie{InsecureDevMode: *dev},
	}, *user)
	if err != nil {
		return err
	}

	// The last requests first, then the refreshes they started.
	srv := &demo.Server{Addr: flags.Addr, Handler: newHandler(sessions), Drain: sessions.Wait}
	url, err := srv.Listen()
	if err != nil {
		return err
	}
	if !*dev {
		slog.Warn("the session cookie is Secure: serve this behind HTTPS, or pass -dev on localhost")
	}
	fmt.Fprintf(stdout, "serving %s on %s\n", *routerName, url)
	return srv.Serve(ctx)
}
