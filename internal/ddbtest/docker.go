package ddbtest

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

// DynamoDB Local is pinned, never "latest", so that a test run means the
// same thing next month. 3.3.1 is the release of 31 July 2026 in AWS's
// release history for DynamoDB local
// (docs.aws.amazon.com/amazondynamodb/latest/developerguide/DynamoDBLocalHistory.html),
// and a published amazon/dynamodb-local image tag.
const (
	dynamoDBLocalImage = "amazon/dynamodb-local"
	dynamoDBLocalTag   = "3.3.1"
)

// startDocker starts DynamoDB Local in Docker and returns its endpoint and
// a function that removes it, or says why it could not; answered tells
// whether a Docker engine answered at all. purge is never nil.
func startDocker() (endpoint string, purge func(), answered bool, err error) {
	purge = func() {}
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		return "", purge, false, fmt.Errorf("no Docker engine answers (%v)", err)
	}
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: dynamoDBLocalImage,
		Tag:        dynamoDBLocalTag,
		Cmd:        []string{"-jar", "DynamoDBLocal.jar", "-inMemory", "-sharedDb"},
	}, func(hc *docker.HostConfig) { hc.AutoRemove = true })
	if err != nil {
		return "", purge, true, fmt.Errorf("a Docker engine answers, but %s:%s did not start in it (%v)", dynamoDBLocalImage, dynamoDBLocalTag, err)
	}
	purge = func() { _ = pool.Purge(res) }
	_ = res.Expire(900) // a crashed test binary must not leave it running
	endpoint = "http://" + res.GetHostPort("8000/tcp")
	client := newClient(endpoint)
	pool.MaxWait = time.Minute
	if err := pool.Retry(func() error {
		_, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		return err
	}); err != nil {
		return "", purge, true, fmt.Errorf("a Docker engine answers, but %s:%s in it does not (%v)", dynamoDBLocalImage, dynamoDBLocalTag, err)
	}
	return endpoint, purge, true, nil
}
