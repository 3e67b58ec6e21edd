// Package ddbtest finds the DynamoDB-compatible engine that tests run
// against, in this order:
//
//  1. AWS_ENDPOINT_URL_DYNAMODB, the SDK's own variable, if set (the
//     project's scripts/test starts the pinned dynalite and sets it);
//  2. where a Docker engine answers, amazon/dynamodb-local started through
//     dockertest for the test binary's lifetime;
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

const endpointEnv = "AWS_ENDPOINT_URL_DYNAMODB"

var engine struct {
	endpoint string // set when the engine came from Docker
	err      error  // why there is no engine
}

// Main runs a package's tests with an engine in place: call it from
// TestMain as os.Exit(ddbtest.Main(m)).
func Main(m *testing.M) int {
	if os.Getenv(endpointEnv) == "" {
		purge := startDocker()
		defer purge()
	}
	return m.Run()
}

// startDocker starts DynamoDB Local in Docker, or records why it could not.
func startDocker() (purge func()) {
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		engine.err = fmt.Errorf("%s is not set and Docker is not available (%v)", endpointEnv, err)
		return func() {}
	}
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: "amazon/dynamodb-local",
		Tag:        "latest",
		Cmd:        []string{"-jar", "DynamoDBLocal.jar", "-inMemory", "-sharedDb"},
	}, func(hc *docker.HostConfig) { hc.AutoRemove = true })
	if err != nil {
		engine.err = fmt.Errorf("starting amazon/dynamodb-local in Docker: %v", err)
		return func() {}
	}
	_ = res.Expire(900) // a crashed test binary must not leave it running
	endpoint := "http://" + res.GetHostPort("8000/tcp")
	client := newClient(endpoint)
	pool.MaxWait = time.Minute
	if err := pool.Retry(func() error {
		_, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		return err
	}); err != nil {
		engine.err = fmt.Errorf("DynamoDB Local in Docker did not answer: %v", err)
	}
	engine.endpoint = endpoint
	return func() { _ = pool.Purge(res) }
}

// Client returns a client for the test engine, or fails t with the steps to
// start one.
func Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	if os.Getenv(endpointEnv) == "" && engine.endpoint == "" {
		reason := engine.err
		if reason == nil {
			reason = fmt.Errorf("%s is not set and the package's TestMain does not call ddbtest.Main", endpointEnv)
		}
		t.Fatalf("no DynamoDB engine for this test: %v.\n"+
			"Run ./scripts/test, which installs and starts the pinned dynalite, or start one yourself:\n"+
			"  npm ci && node scripts/dynalite.js 8000 &\n"+
			"  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 go test ./...", reason)
	}
	return newClient(engine.endpoint)
}

// newClient builds a client from the SDK's own configuration, so that
// AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION and credentials in the environment
// count. A local engine needs some region and credentials, so it gets
// placeholders when the environment has none.
func newClient(endpoint string) *dynamodb.Client {
	var opts []func(*config.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		panic(fmt.Sprintf("ddbtest: load AWS config: %v", err))
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
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
