package decide

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Client is the part of the DynamoDB client that a Reader uses: its reads,
// and the one write that records a table's layout.
type Client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Calls makes strongly consistent reads of one table, and names the table
// in every error: the engine's errors do not, and a Login that fails with
// "ResourceNotFoundException: Requested resource not found" leaves a
// newcomer to guess which table is missing.
type Calls struct {
	Client Client
	Table  string
}

// consistent asks for a strongly consistent read; shared, since the SDK
// only reads it.
var consistent = aws.Bool(true)

// Get reads the item under key with one strongly consistent GetItem; nil
// if there is none.
func (c *Calls) Get(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := c.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.Table, Key: key, ConsistentRead: consistent})
	if err != nil {
		return nil, c.Named(err)
	}
	return out.Item, nil
}

// perBatch is BatchGetItem's limit of keys per call.
const perBatch = 100

// BatchGet reads the items under keys, strongly consistently, in one
// round trip: one GetItem for one key, BatchGetItems of at most 100 keys
// side by side for more. It returns the items found, in no order.
func (c *Calls) BatchGet(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	switch {
	case len(keys) == 0:
		return nil, nil
	case len(keys) == 1:
		av, err := c.Get(ctx, keys[0])
		if av == nil {
			return nil, err
		}
		return []map[string]types.AttributeValue{av}, err
	case len(keys) <= perBatch:
		return c.BatchGetInput(ctx, c.batchInput(keys))
	}
	var chunks [][]map[string]types.AttributeValue
	for len(keys) > 0 {
		n := min(len(keys), perBatch)
		chunks, keys = append(chunks, keys[:n]), keys[n:]
	}
	found := make([][]map[string]types.AttributeValue, len(chunks))
	errs := make([]error, len(chunks))
	var wg sync.WaitGroup
	for i, chunk := range chunks {
		wg.Go(func() { found[i], errs[i] = c.BatchGetInput(ctx, c.batchInput(chunk)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []map[string]types.AttributeValue
	for _, f := range found {
		all = append(all, f...)
	}
	return all, nil
}

func (c *Calls) batchInput(keys []map[string]types.AttributeValue) *dynamodb.BatchGetItemInput {
	return &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{c.Table: {Keys: keys, ConsistentRead: consistent}}}
}

// BatchGetInput makes the BatchGetItem in, one call, unless DynamoDB leaves
// keys unprocessed (under throttling); those are asked for again, after a
// short pause, until ctx ends. It returns the items found, in no order.
func (c *Calls) BatchGetInput(ctx context.Context, in *dynamodb.BatchGetItemInput) ([]map[string]types.AttributeValue, error) {
	var found []map[string]types.AttributeValue
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		out, err := c.Client.BatchGetItem(ctx, in)
		if err != nil {
			return nil, c.Named(err)
		}
		found = append(found, out.Responses[c.Table]...)
		if len(out.UnprocessedKeys[c.Table].Keys) == 0 {
			return found, nil
		}
		in = &dynamodb.BatchGetItemInput{RequestItems: out.UnprocessedKeys}
		select {
		case <-ctx.Done():
			return nil, c.Named(fmt.Errorf("unprocessed keys: %w", ctx.Err()))
		case <-time.After(pause):
		}
	}
}

// Named wraps a call's error, if any, with the name of the table, and says
// what to do about a table that does not exist.
func (c *Calls) Named(err error) error {
	if err == nil {
		return nil
	}
	if errors.As(err, new(*types.ResourceNotFoundException)) {
		return fmt.Errorf("table %q: %w (no such table: call Manager.CreateTable at startup, or run: ddbsession table create -table %s)", c.Table, err, c.Table)
	}
	return fmt.Errorf("table %q: %w%s", c.Table, err, NoEngineHint(err))
}

// NoEngineHint is what to add to err, a call's, when it says there is no
// DynamoDB to talk to: no credentials, no Region, nothing listening at the
// endpoint, an endpoint that is no URL, or one that does not answer as
// DynamoDB does. "" otherwise.
func NoEngineHint(err error) string {
	var region *aws.MissingRegionError
	var dial *net.OpError
	var resp *smithyhttp.ResponseError
	msg := err.Error()
	switch {
	case errors.As(err, &region), strings.Contains(msg, "Missing Region"), strings.Contains(msg, "get identity: "), errors.As(err, &dial) && dial.Op == "dial":
		return " (no DynamoDB to talk to: for a local engine, set AWS_ENDPOINT_URL_DYNAMODB (http://127.0.0.1:8000, say), AWS_REGION and dummy " +
			"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; for DynamoDB, configure AWS credentials and a Region)"
	case strings.Contains(msg, "failed to resolve service endpoint"), strings.Contains(msg, "unsupported protocol scheme"):
		return " (the endpoint is not a URL: AWS_ENDPOINT_URL_DYNAMODB needs a scheme, as in http://127.0.0.1:8000)"
	case errors.As(err, &resp) && resp.HTTPStatusCode() != 0 && !errors.As(err, new(smithy.APIError)):
		return fmt.Sprintf(" (the endpoint answered HTTP %d in a form DynamoDB never does: is AWS_ENDPOINT_URL_DYNAMODB a DynamoDB endpoint?)", resp.HTTPStatusCode())
	}
	return ""
}
