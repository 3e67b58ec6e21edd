// Command example is a small web app that keeps its sessions in DynamoDB
// with ddbsession: sign up, log in (for as long as the browser is open, or
// longer), list and revoke sessions, log out everywhere, change the
// password, set up one-time codes (TOTP) as a second factor; and, for
// clients without cookies, log in at POST /api/login and send the token it
// returns as "Authorization: Bearer <token>".
//
// Its routes:
//
//	GET  /                      the account, signed in; the log-in and sign-up forms, signed out
//	GET  /account               the account (signed out: to log in, and back)
//	GET  /login                 the log-in and sign-up forms, for a page that needed a session
//	POST /signup                form: username, password, remember
//	POST /login                 form: username, password, remember; with one-time codes, 200 and the code form
//	POST /login/code            form: username, code; the second step, for the pending login in this browser
//	POST /logout                ends the sessions the request carries; Clear-Site-Data: "cookies", "storage"
//	POST /logout-everywhere     ends every session of the user (recent authentication)
//	POST /sessions/revoke       form: id; ends one of the user's sessions (recent authentication)
//	POST /password              form: current, new, code; signs the other sessions out
//	POST /totp/enrol            starts a set-up of one-time codes: the QR code (recent authentication)
//	POST /totp/confirm          form: code; the first code turns them on (recent authentication)
//	POST /totp/remove           turns them off (recent authentication)
//	GET  /logout-everywhere     and /sessions/revoke?id=, /totp/enrol, /totp/confirm, /totp/remove:
//	                            the action's confirm page, its button the POST above
//	GET  /reauth                the password (and code) form of a re-authentication; query: next
//	POST /reauth                form: password, code, next; a new session, then 303 to next
//	POST /api/login             JSON {"username", "password", "code"}: 200 {"token", "expiresAt"}
//	POST /api/reauth            bearer; JSON {"password", "code"}: 200 {"token", "expiresAt"}, the old token ended
//	GET  /api/me                bearer or cookie: the user, JSON
//	GET  /api/sessions          bearer or cookie: the user's sessions, JSON, with how each signed in
//	DELETE /api/sessions/{id}   bearer or cookie: ends one of the user's sessions, 204 (recent authentication)
//	POST /dbsc/...              device binding's registration and refresh (-dbsc)
//	POST /passkeys/register/begin, /passkeys/register/finish: add a passkey (recent authentication)
//	POST /passkeys/login/begin, /passkeys/login/finish: sign in with a passkey alone
//	POST /reauth/passkey/begin, /reauth/passkey/finish: re-authenticate with one
//	POST /passkeys/rename       form: id, name
//	POST /passkeys/remove       form: id (recent authentication); GET: its confirm page
//	GET  /login/oidc            "Sign in with <provider>": to the provider, and back (-oidc-issuer)
//	GET  /oidc/callback         where the provider sends the browser back (-oidc-redirect-url)
//	POST /oidc/backchannel-logout  the provider's back-channel logout: its sessions end
//
// The actions marked "recent authentication" need a session whose user
// proved themselves within -reauth (default 10m); an older one does
// nothing: a browser gets 303 to /reauth, an API client 401 with
// WWW-Authenticate: Bearer error="insufficient_user_authentication" and
// max_age (RFC 9470), and either re-authenticates on the session it holds,
// at /reauth or /api/reauth, which gives it a new one. The browser then
// comes back to the action's confirm page, which asks for it again, one
// press away (POST /logout-everywhere: /reauth?next=/logout-everywhere).
// A password change asks for the current password, and counts as a
// re-authentication too. -max-sessions N caps a user's sessions: the (N+1)th login ends the
// oldest.
//
// "code" is the six-digit code of the user's authenticator app, for a user
// who has set one-time codes up, and only then: a browser logs in in two
// steps (the password, which ddbsession's BeginLogin checks, then the code,
// which CompleteLogin does), an API client sends both in one request. A
// code works once, on any instance. Sessions record how their user signed
// in ("password", then "otp"), and the sessions list says so.
//
// -debug logs every session event: created, refreshed, ended, rejected and
// why.
//
// Run it against a local engine with ./scripts/demo, or against DynamoDB
// with the usual AWS environment (AWS_REGION, credentials, and
// AWS_ENDPOINT_URL_DYNAMODB for anything but DynamoDB itself):
//
//	go run ./example -table my-sessions
//
// Behind reverse proxies, pass -trusted-proxies with their address ranges
// (-trusted-proxies 10.0.0.0/8,192.168.0.0/16), so that failed logins are
// limited per client, as X-Forwarded-For names it, rather than per proxy.
//
// -metrics-addr serves Prometheus metrics (ddbsession's, see
// ddbsessionotel, and the HTTP server's) at /metrics on a listener of their
// own, on a loopback address only, for a scraper or agent on the same host.
// With OTEL_EXPORTER_OTLP_ENDPOINT set, metrics and traces also go there
// over OTLP/HTTP; the other OTEL_EXPORTER_OTLP_* variables apply as usual.
//
// -oidc-issuer, -oidc-client-id and -oidc-redirect-url, with the client
// secret in $OIDC_CLIENT_SECRET, add single sign-on through an OpenID
// Connect provider (-oidc-name names it on the button); logging out then
// ends the provider's session too (docs/oidc.md).
//
// Passkeys are made for -origin's host (default localhost, on a loopback
// -addr: open http://localhost:8080/, not 127.0.0.1, to use them).
//
// -tls-cert and -tls-key serve HTTPS with that certificate. With HTTPS,
// -dbsc offers device-bound sessions (DBSC) to browsers that support them:
// a bound session needs, besides its cookie, a bound cookie that lives
// -bound (default 10m) and that only the device's key can renew, so a copy
// of the cookies stops working when it expires.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	//lint:ignore SA1019 otelaws is the AWS SDK's OpenTelemetry instrumentation that the module proxy serves; its contrib module has no owner any more (see ddbsessionotel's documentation).
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"

	"github.com/ddbsession/ddbsession/ddbsessionotel"
	"github.com/ddbsession/ddbsession/internal/demo"
)

// main runs the app until Ctrl-C or SIGTERM, then shuts it down
// gracefully: in-flight requests finish, new ones are refused (see
// internal/demo, the skeleton the example programs share).
func main() { demo.Main("example", run) }

// run serves the app until ctx is done. It prints the URL it serves on
// stdout once it is listening, and flag errors and usage on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg := opts.app
	if opts.debug {
		slog.SetLogLoggerLevel(slog.LevelDebug)
	}

	var metricsLn net.Listener
	if opts.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", opts.metricsAddr); err != nil {
			return fmt.Errorf("-metrics-addr: %w", err)
		}
	}
	tel, err := newTelemetry(ctx, metricsLn)
	if err != nil {
		return err
	}
	defer func() { // on an error before the graceful shutdown below, which makes this a no-op
		ctx, cancel := context.WithTimeout(context.Background(), demo.ShutdownTimeout)
		defer cancel()
		tel.shutdown(ctx)
	}()
	cfg.Telemetry = ddbsessionotel.Config{MeterProvider: tel.meters, TracerProvider: tel.tracers}
	client, err := demo.DynamoDB(ctx, func(awsCfg *aws.Config) {
		if tel.tracing {
			// Each DynamoDB call a span, a child of the request's session check.
			otelaws.AppendMiddlewares(&awsCfg.APIOptions, otelaws.WithTracerProvider(tel.tracers))
		}
	})
	if err != nil {
		return err
	}
	cfg.Client = client
	a, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}

	srv := &demo.Server{
		Addr: opts.addr,
		// The server span of each request, the parent of its session check.
		Handler: otelhttp.NewHandler(a, "example", otelhttp.WithTracerProvider(tel.tracers), otelhttp.WithMeterProvider(tel.meters)),
		TLS:     opts.tls,
		// The refreshes' events come before the telemetry's last export.
		Drain: func(ctx context.Context) error { return errors.Join(a.shutdown(ctx), tel.shutdown(ctx)) },
	}
	url, err := srv.Listen()
	if err != nil {
		return err
	}
	if opts.tls == nil && !cfg.Dev {
		slog.Warn("the session cookie is Secure: serve this behind HTTPS, pass -tls-cert and -tls-key, or pass -dev on localhost")
	}
	fmt.Fprintf(stdout, "open %s\n", url)
	if metricsLn != nil {
		fmt.Fprintf(stdout, "metrics http://%s/metrics\n", metricsLn.Addr())
	}
	return srv.Serve(ctx)
}

// options is what run takes from its flags.
type options struct {
	app         appConfig
	addr        string      // -addr
	tls         *tls.Config // -tls-cert and -tls-key, loaded; nil for plain HTTP
	metricsAddr string      // -metrics-addr, checked
	debug       bool
}

// parseFlags reads run's flags, and checks them and how they go together,
// before anything is listened on or read from AWS.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var opts options
	flags := demo.NewFlags("example", stderr)
	cfg := &opts.app
	flags.StringVar(&cfg.Table, "table", "ddbsession-example", "DynamoDB table for users and sessions; created if missing")
	flags.BoolVar(&cfg.Dev, "dev", false, demo.DevUsage)
	flags.DurationVar(&cfg.IdleTimeout, "idle", 0, "session idle timeout (default 24h)")
	flags.DurationVar(&cfg.RefreshInterval, "refresh", 0, "how often a request may extend a session (default idle/24)")
	flags.DurationVar(&cfg.AbsoluteLifetime, "absolute", 0, "longest a session can live (default 720h)")
	flags.DurationVar(&cfg.Reauth, "reauth", defaultReauth, "how recent an authentication the sensitive actions need (logging out everywhere, revoking a session, setting up or removing one-time codes); older, they ask for the password (and code) again")
	flags.BoolVar(&cfg.NewDeviceCode, "new-device-code", false, "a password sign-in from a device new to the account needs a second factor, as Clerk does: an account with one-time codes types its code (as always), one without signs in on a new device with a passkey only, and a program (POST /api/login) needs a code")
	flags.IntVar(&cfg.MaxSessions, "max-sessions", 0, "most sessions a user may have at once, at most 100: a login beyond it ends the user's oldest session (default 0: no limit)")
	flags.BoolVar(&opts.debug, "debug", false, "log at debug level, with every session event (created, refreshed, ended, rejected...)")
	flags.Func("trusted-proxies", "comma-separated address `ranges` of the reverse proxies in front of the app (10.0.0.0/8,192.168.0.0/16): X-Forwarded-For is read only on their connections; without it the header is ignored and failed logins are limited by the connection's address", func(list string) error {
		prefixes, err := parsePrefixes(list)
		cfg.TrustedProxies = append(cfg.TrustedProxies, prefixes...)
		return err
	})
	// A count of proxies, as other servers take it, would trust the Nth
	// entry from the right of any connection's X-Forwarded-For, so a
	// client that reached the app directly would choose its own address.
	// -proxies, the name such a count goes by, is refused with what to
	// pass instead.
	flags.Func("proxies", "not supported: use -trusted-proxies", func(string) error {
		return errors.New("-proxies (a count of proxies) is not supported, since it would believe X-Forwarded-For from any client: pass -trusted-proxies with your proxies' address ranges instead (-trusted-proxies 10.0.0.0/8)")
	})
	certFile := flags.String("tls-cert", "", "serve HTTPS with the certificate (chain) in this PEM `file`; needs -tls-key")
	keyFile := flags.String("tls-key", "", "the private key of -tls-cert, a PEM `file`")
	flags.BoolVar(&cfg.DeviceBinding, "dbsc", false, "offer device-bound sessions (DBSC) to browsers that support them; needs HTTPS (-tls-cert and -tls-key)")
	flags.StringVar(&opts.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics, a loopback address (127.0.0.1:9464, [::1]:9464, localhost:9464); off by default")
	flags.StringVar(&cfg.PasskeyOrigin, "origin", "", "the `URL` browsers open the app at (https://app.example.com), whose host passkeys are made for (default: http://localhost:<port>, or https:// with -tls-cert, for a loopback -addr)")
	flags.DurationVar(&cfg.BoundLifetime, "bound", 0, "with -dbsc, the bound cookie's lifetime: how long a copy of a bound session's cookies works (default 10m, at least 10s)")
	addOIDCFlags(flags.FlagSet, &cfg.OIDC)
	if err := flags.Parse(args); err != nil {
		return opts, err
	}
	opts.addr = flags.Addr
	switch {
	case (*certFile == "") != (*keyFile == ""):
		return opts, errors.New("-tls-cert and -tls-key go together: pass both, or neither")
	case *certFile != "" && cfg.Dev:
		return opts, errors.New("-dev is plain-HTTP mode: drop it to serve HTTPS with -tls-cert and -tls-key")
	case *certFile != "":
		// Loaded now, so that a wrong file is an error at start-up rather
		// than on the first connection.
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return opts, fmt.Errorf("-tls-cert %q, -tls-key %q: %w", *certFile, *keyFile, err)
		}
		opts.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	switch {
	case cfg.DeviceBinding && cfg.Dev:
		return opts, errors.New("-dbsc needs HTTPS, and -dev is plain HTTP: drop -dev and pass -tls-cert and -tls-key")
	case cfg.DeviceBinding && opts.tls == nil:
		// Browsers bind sessions only on secure origins, and the app
		// cannot tell whether a proxy in front of it serves HTTPS, so -dbsc
		// asks for a certificate of its own.
		return opts, errors.New("-dbsc needs HTTPS: pass -tls-cert and -tls-key")
	case cfg.BoundLifetime != 0 && !cfg.DeviceBinding:
		return opts, errors.New("-bound is the lifetime of device binding's cookie: it needs -dbsc")
	case cfg.BoundLifetime != 0 && cfg.BoundLifetime < 10*time.Second:
		return opts, fmt.Errorf("-bound %v: want at least 10s", cfg.BoundLifetime)
	}
	if cfg.PasskeyOrigin == "" {
		cfg.PasskeyOrigin = defaultPasskeyOrigin(opts.addr, opts.tls != nil)
	}
	switch {
	case cfg.Reauth < time.Second:
		return opts, fmt.Errorf("-reauth %v: want a second or more", cfg.Reauth)
	case cfg.MaxSessions < 0 || cfg.MaxSessions > 100:
		return opts, fmt.Errorf("-max-sessions %d: want 0 (no limit) to 100", cfg.MaxSessions)
	}
	if err := cfg.OIDC.check(); err != nil {
		return opts, err
	}
	if opts.metricsAddr != "" {
		if err := checkLoopback(opts.metricsAddr); err != nil {
			return opts, fmt.Errorf("-metrics-addr %q: %w", opts.metricsAddr, err)
		}
	}
	return opts, nil
}
