// Package ddbsessiontest runs an app's integration tests against a local
// DynamoDB-compatible engine, found and started the way this project's own
// tests find theirs, and never against AWS.
//
// Handler unit tests need none of it: [ddbsession.Manager.NewContext] puts a
// signed-in session and user into a request's context without DynamoDB.
//
// # Usage
//
// Call [Main] from the package's TestMain, then take a client and a table
// of the test's own in each test:
//
//	func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }
//
//	func TestAccountPage(t *testing.T) {
//		client := ddbsessiontest.Client(t)
//		sessions, err := ddbsession.New(ddbsession.Config[Account]{
//			Client: client,
//			Table:  ddbsessiontest.TableName(t, client), // deleted when t ends
//		})
//		...
//		if err := sessions.CreateTable(ctx); err != nil { ... }
//	}
//
// Code under test that builds its own client from the SDK's configuration
// (config.LoadDefaultConfig), as an app's main does, reaches the same
// engine: Main publishes it through AWS_ENDPOINT_URL_DYNAMODB.
//
// The app itself runs against such an engine, from its module's directory,
// with the command in ddbsessiontest/run:
//
//	go run github.com/ddbsession/ddbsession/ddbsessiontest/run go run .
//
// # Engines
//
// Main finds the engine in this order:
//
//  1. AWS_ENDPOINT_URL_DYNAMODB, the SDK's own variable, if set: an engine
//     you run yourself;
//  2. with DDBSESSIONTEST_ENGINE=moto, moto_server from PATH (pip install
//     "moto[server]"), an engine with transactions (TransactWriteItems) and
//     TTL, which dynalite lacks, started as dynalite is below;
//  3. where Node.js (20 or later) is on PATH, the pinned dynalite, an
//     open-source DynamoDB engine: installed with npm ci once per machine
//     into the user's cache directory (a directory named after the pin, so
//     a new pin installs anew; npm needs its registry that first time), and
//     started on a free loopback port for the test binary's lifetime. It
//     exits with the test binary however that ends, even killed;
//  4. otherwise no test runs: Main prints what it tried, naming Node.js or
//     npm when they are missing, and how to give the tests an engine, and
//     returns 1. Tests never skip for want of an engine.
//
// Where Main starts the engine, each test binary (each package, under go
// test ./...) starts one of its own.
//
// An operation the engine lacks fails, through [Client]'s client, with an
// UnknownOperationException whose message names the engine and the
// operation, and says how to pick another engine.
//
// # Never AWS
//
// Main refuses an endpoint on an AWS domain, and replaces the process's AWS
// settings with dummy ones (static placeholder credentials, region
// us-east-1, no profile, no shared config files, no instance metadata), so
// that no client in the test binary can reach AWS with your credentials.
//
// # Time to Live
//
// dynalite has no TTL operations, so [ddbsession.Manager.CreateTable] logs
// that TTL is off there. A client wrapped with [WithTTL] emulates the TTL
// setting for tests that check it.
package ddbsessiontest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

var _ ddbsession.Client = (*TTLClient)(nil)

// The one implementation, shared with this project's own tests, under this
// package's name in its messages.
var harness = ddbtest.Harness{Name: "ddbsessiontest"}

// Main finds or starts the test engine, runs the package's tests, and stops
// an engine it started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }
//
// It returns 1 without running any test when there is no engine or
// AWS_ENDPOINT_URL_DYNAMODB names an AWS one.
func Main(m *testing.M) int { return harness.Main(m) }

// Client returns a client for the test engine, with dummy credentials. It
// fails t if the package's TestMain does not call [Main].
func Client(t testing.TB) *dynamodb.Client { return harness.Client(t) }

// TableName returns a table name unique to t, so that tests can run in
// parallel, and deletes that table through client when t ends. It does not
// create the table: [ddbsession.Manager.CreateTable] does.
func TableName(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	return ddbtest.TableName(t, client)
}

// TTLClient is a client whose UpdateTimeToLive and DescribeTimeToLive work
// on engines that lack them, such as dynalite: where the engine answers
// UnknownOperationException, it keeps each table's TTL setting in memory.
// Nothing is deleted by the emulation. Every other method is the wrapped
// client's. It satisfies [ddbsession.Client].
type TTLClient = ddbtest.TTLClient

// WithTTL wraps c so that enabling and checking TTL work on any engine;
// see [TTLClient].
func WithTTL(c *dynamodb.Client) *TTLClient { return ddbtest.WithTTL(c) }
