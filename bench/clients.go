package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// newClient returns a DynamoDB client for endpoint with fixed dummy
// credentials: the benchmark never reads the caller's AWS configuration,
// so it can reach nothing but the endpoint it is given. The connection
// pool holds enough idle connections for the highest concurrency, so that
// no variant pays for new connections in the middle of a run.
func newClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("bench", "bench", ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = 256
			t.MaxIdleConnsPerHost = 256
		}),
	})
}

// replay is a client that answers from memory: while recording it passes
// every call to the engine and keeps the answer to each read, by the
// partition key it read; once replaying it gives those answers back and
// answers writes as the engine does (an empty output), without a call. A
// request served through it costs only the code under test's own work,
// without the SDK's and the network's.
type replay struct {
	ddbsession.Client

	mu        sync.Mutex
	replaying bool
	gets      map[string]*dynamodb.GetItemOutput
	batches   map[string]*dynamodb.BatchGetItemOutput
}

func newReplay(c ddbsession.Client) *replay {
	return &replay{Client: c, gets: map[string]*dynamodb.GetItemOutput{}, batches: map[string]*dynamodb.BatchGetItemOutput{}}
}

// startReplaying stops recording.
func (c *replay) startReplaying() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replaying = true
}

var errNotRecorded = errors.New("replay: no answer recorded for this key")

// partitionKey is the benchmark table's partition key, which tells the
// recorded answers apart.
func partitionKey(key map[string]types.AttributeValue) string {
	s, _ := key[tablePK].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

func (c *replay) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	key := partitionKey(in.Key)
	c.mu.Lock()
	out, ok := c.gets[key]
	replaying := c.replaying
	c.mu.Unlock()
	if replaying {
		if !ok {
			return nil, fmt.Errorf("GetItem %q: %w", key, errNotRecorded)
		}
		return out, nil
	}
	out, err := c.Client.GetItem(ctx, in, o...)
	if err == nil {
		c.mu.Lock()
		c.gets[key] = out
		c.mu.Unlock()
	}
	return out, err
}

func (c *replay) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	var key string
	for _, keys := range in.RequestItems {
		if len(keys.Keys) > 0 {
			key = partitionKey(keys.Keys[0])
		}
	}
	c.mu.Lock()
	out, ok := c.batches[key]
	replaying := c.replaying
	c.mu.Unlock()
	if replaying {
		if !ok {
			return nil, fmt.Errorf("BatchGetItem %q: %w", key, errNotRecorded)
		}
		return out, nil
	}
	out, err := c.Client.BatchGetItem(ctx, in, o...)
	if err == nil {
		c.mu.Lock()
		c.batches[key] = out
		c.mu.Unlock()
	}
	return out, err
}

func (c *replay) isReplaying() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replaying
}

func (c *replay) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.isReplaying() {
		return &dynamodb.PutItemOutput{}, nil
	}
	return c.Client.PutItem(ctx, in, o...)
}

func (c *replay) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.isReplaying() {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *replay) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if c.isReplaying() {
		return &dynamodb.DeleteItemOutput{}, nil
	}
	return c.Client.DeleteItem(ctx, in, o...)
}
