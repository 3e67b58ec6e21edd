// Package ddbtest finds the DynamoDB-compatible engine that tests run
// against, in this order:
//
//  1. AWS_ENDPOINT_URL_DYNAMODB, the SDK's own variable, if set (the
//     project's scripts/test starts the pinned dynalite and sets it);
//  2. where a Docker engine answers, amazon/dynamodb-local started through
//     dockertest for the test binary's lifetime (users with Docker; this
//     project's own scripts and CI use dynalite);
//  3. otherwise every test that asks for a client fails, saying how to start
//     an engine. Tests never skip for want of one.
package ddbtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

const endpointEnv = "AWS_ENDPOINT_URL_DYNAMODB"

// noEngine says why there is no engine, once Main has looked for one.
var noEngine error

// Main runs a package's tests with an engine in place: call it from
// TestMain as os.Exit(ddbtest.Main(m)). An engine it starts in Docker is
// published through AWS_ENDPOINT_URL_DYNAMODB, so that code under test finds
// it the way an app finds any engine: through the SDK's own configuration.
func Main(m *testing.M) int {
	if os.Getenv(endpointEnv) == "" {
		purge := startDocker()
		defer purge()
	}
	// A local engine needs some region and credentials; placeholders do.
	setDefaultEnv("AWS_REGION", "us-east-1")
	if os.Getenv("AWS_PROFILE") == "" {
		setDefaultEnv("AWS_ACCESS_KEY_ID", "local")
		setDefaultEnv("AWS_SECRET_ACCESS_KEY", "local")
	}
	return m.Run()
}

func setDefaultEnv(name, value string) {
	if os.Getenv(name) == "" {
		os.Setenv(name, value)
	}
}

// startDocker starts DynamoDB Local in Docker, or records why it could not.
func startDocker() (purge func()) {
	purge = func() {}
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		noEngine = fmt.Errorf("%s is not set and Docker is not available (%v)", endpointEnv, err)
		return purge
	}
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: "amazon/dynamodb-local",
		Tag:        "latest",
		Cmd:        []string{"-jar", "DynamoDBLocal.jar", "-inMemory", "-sharedDb"},
	}, func(hc *docker.HostConfig) { hc.AutoRemove = true })
	if err != nil {
		noEngine = fmt.Errorf("starting amazon/dynamodb-local in Docker: %v", err)
		return purge
	}
	purge = func() { _ = pool.Purge(res) }
	_ = res.Expire(900) // a crashed test binary must not leave it running
	os.Setenv(endpointEnv, "http://"+res.GetHostPort("8000/tcp"))
	setDefaultEnv("AWS_REGION", "us-east-1")
	setDefaultEnv("AWS_ACCESS_KEY_ID", "local")
	setDefaultEnv("AWS_SECRET_ACCESS_KEY", "local")
	client := newClient()
	pool.MaxWait = time.Minute
	if err := pool.Retry(func() error {
		_, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		return err
	}); err != nil {
		os.Unsetenv(endpointEnv)
		noEngine = fmt.Errorf("DynamoDB Local in Docker did not answer: %v", err)
	}
	return purge
}

// Client returns a client for the test engine, or fails t with the steps to
// start one.
func Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	if os.Getenv(endpointEnv) == "" {
		reason := noEngine
		if reason == nil {
			reason = fmt.Errorf("%s is not set and the package's TestMain does not call ddbtest.Main", endpointEnv)
		}
		t.Fatalf("no DynamoDB engine for this test: %v.\n"+
			"Run ./scripts/test, which installs and starts the pinned dynalite, or start one yourself:\n"+
			"  npm ci && node scripts/dynalite.js 8000 &\n"+
			"  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 go test ./...", reason)
	}
	return newClient()
}

// newClient builds a client from the SDK's own configuration, the way an
// app does: AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION and credentials from the
// environment.
func newClient() *dynamodb.Client {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		panic(fmt.Sprintf("ddbtest: load AWS config: %v", err))
	}
	return dynamodb.NewFromConfig(cfg)
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// TableName returns a table name unique to t, so that tests can run in
// parallel, and deletes the table when t ends.
func TableName(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 200 {
		name = name[:200]
	}
	name = "t-" + name + "-" + strings.ToLower(rand.Text()[:8])
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}
