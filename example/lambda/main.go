// Command lambda is the example app's sign-in and account pages served as
// an AWS Lambda function behind a Function URL, with its sessions in
// DynamoDB through ddbsession. docs/lambda.md explains the deployment
// (template.yaml), its least-privilege policy, what a cold start costs and
// what a frozen environment can lose.
//
// Its routes, cookies and answers are the example server's (../main.go),
// for the part of it a function serves:
//
//	GET  /                      the account, signed in; the log-in and sign-up forms, signed out
//	GET  /account               the account (signed out: to log in, and back)
//	GET  /login                 the log-in and sign-up forms, for a page that needed a session
//	POST /signup                form: username, password, remember
//	POST /login                 form: username, password, remember
//	POST /logout                ends the sessions the request carries
//	POST /logout-everywhere     ends every session of the user (recent authentication)
//	POST /sessions/revoke       form: id; ends one of the user's sessions (recent authentication)
//	GET  /reauth                the password form of a re-authentication; query: next
//	POST /reauth                form: password, next; a new session, then 303 to next
//	POST /api/login             JSON {"username", "password"}: 200 {"token", "expiresAt"}
//	POST /api/reauth            bearer; JSON {"password"}: 200 {"token", "expiresAt"}, the old token ended
//	GET  /api/me                bearer or cookie: the user, JSON
//	GET  /api/sessions          bearer or cookie: the user's sessions, JSON
//	DELETE /api/sessions/{id}   bearer or cookie: ends one of the user's sessions, 204 (recent authentication)
//
// It leaves out what the server has beyond these: one-time codes (an account
// that has them is refused here, not let in on its password alone), the
// password change, device binding, the per-address limits of failed logins
// (an environment lives too briefly to count them; put AWS WAF in front for
// those) and the check of look-alike usernames (usernames here are ASCII).
//
// Its settings come from the environment, as Lambda sets it:
//
//	TABLE              the DynamoDB table (required)
//	IDLE_TIMEOUT       ddbsession's Limits.IdleTimeout, a Go duration (default 24h)
//	REFRESH_INTERVAL   Limits.RefreshInterval (default IDLE_TIMEOUT/24)
//	ABSOLUTE_LIFETIME  Limits.AbsoluteLifetime (default 720h)
//	STORE_TIMEOUT      Limits.StoreTimeout, and the app's own DynamoDB calls (default 2s)
//	REAUTH             how recent an authentication the sensitive actions need (default 10m)
//
// and the AWS SDK's own: AWS_REGION, the role's credentials, and
// AWS_ENDPOINT_URL_DYNAMODB for an engine other than DynamoDB. Build it as
// Lambda's provided.al2023 runtime wants:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap .
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// main is the function's Init phase, once per execution environment: the
// SDK's configuration, the client and the Manager are made here and serve
// every invocation the environment gets. Nothing per request is made here,
// and nothing made here is made again per request.
func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(os.Getenv("AWS_LAMBDA_LOG_LEVEL"))}))
	began := time.Now()
	s, err := settingsFrom(os.Getenv)
	if err != nil {
		log.Error("settings", "err", err)
		os.Exit(1) // Lambda reports the Init error, and tries again on the next invocation
	}
	testHooks()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // Lambda's Init phase is 10s at most
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("load AWS configuration", "err", err)
		os.Exit(1)
	}
	loaded := time.Now()
	a, err := newApp(ctx, appConfig{Client: dynamodb.NewFromConfig(awsCfg), Settings: s, Now: now, Logger: log})
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	// What a cold start costs, in the function's logs: docs/lambda.md.
	log.Info("cold start",
		"config_ms", ms(loaded.Sub(began)),
		"new_ms", ms(a.startup.newTook),
		"table_check_ms", ms(a.startup.checkTook),
		"init_ms", ms(time.Since(began)))
	cancel()
	lambda.StartHandlerFunc(functionHandler(a))
}

// ms is d in milliseconds, to a tenth.
func ms(d time.Duration) float64 { return float64(d.Microseconds()/100) / 10 }

// logLevel is AWS_LAMBDA_LOG_LEVEL's level, INFO by default.
func logLevel(name string) slog.Level {
	var l slog.Level
	if l.UnmarshalText([]byte(name)) != nil {
		return slog.LevelInfo
	}
	return l
}
