package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Client is the part of the DynamoDB client that a [Manager] uses for its
// items. *dynamodb.Client satisfies it; tests may wrap it to count calls or
// inject faults. [Manager.CreateTable] needs the table methods of
// *dynamodb.Client besides.
type Client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// tableClient is what CreateTable needs of a Client besides.
type tableClient interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// store makes the DynamoDB calls, and nothing else: every call to the
// client is in this file. What each read and write of an item is lies in
// items.go, the rules that decide what to call in the files above, and the
// items' format in internal/item. Every call runs under the caller's
// context and its one deadline.
//
// Every call on items goes through one of the primitives at the end of
// this file, which name the table in their errors: the engine's do not, and a Login
// that fails with "ResourceNotFoundException: Requested resource not found"
// leaves a newcomer to guess which table is missing.
//
// The package uses no transactions (dynalite, a test engine, has no
// TransactWriteItems): writes that touch two items are ordered so that a
// failure in between leaves nothing live that should not be.
type store struct {
	item.Layout
	client Client
	table  string
	logger *slog.Logger
	pairs  sync.Pool // of *pairRead
}

func newStore(client Client, table string, layout item.Layout, logger *slog.Logger) *store {
	return &store{Layout: layout, client: client, table: table, logger: logger}
}

// Failed conditions that callers act on.
var (
	// errRefreshLost is the refresh write's failed condition: the session
	// was deleted, expired, or refreshed by a concurrent request meanwhile.
	errRefreshLost = errors.New("session changed before its refresh")
	// errChallengeUsed is a device binding write's failed condition: the
	// challenge it answers was used, replaced or expired meanwhile, or the
	// session changed (bound already, or gone).
	errChallengeUsed = errors.New("challenge used or session changed")
)

// detach keeps ctx's deadline but drops its cancellation, for calls that
// must not be lost to a client that hangs up (Login's undo, a device
// binding's check of a write whose answer was lost) and must still end
// within the request's one bound.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// consistent asks for a strongly consistent read; shared, since the SDK
// only reads it.
var consistent = aws.Bool(true)

// get reads the item under key with one strongly consistent GetItem; nil
// if there is none.
func (st *store) get(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key, ConsistentRead: consistent})
	if err != nil {
		return nil, st.named(err)
	}
	return out.Item, nil
}

// batchGet reads items with strongly consistent BatchGetItems: one call,
// unless DynamoDB leaves keys unprocessed (under throttling); those are
// asked for again, after a short pause, until ctx ends. It returns the
// items found, in no particular order.
func (st *store) batchGet(ctx context.Context, in *dynamodb.BatchGetItemInput) ([]map[string]types.AttributeValue, error) {
	var found []map[string]types.AttributeValue
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		out, err := st.client.BatchGetItem(ctx, in)
		if err != nil {
			return nil, st.named(err)
		}
		found = append(found, out.Responses[st.table]...)
		if len(out.UnprocessedKeys[st.table].Keys) == 0 {
			return found, nil
		}
		in = &dynamodb.BatchGetItemInput{RequestItems: out.UnprocessedKeys}
		select {
		case <-ctx.Done():
			return nil, st.named(fmt.Errorf("unprocessed keys: %w", ctx.Err()))
		case <-time.After(pause):
		}
	}
}

// putNew writes an item that must not exist yet; taken reports that one
// did.
func (st *store) putNew(ctx context.Context, av map[string]types.AttributeValue) (taken bool, err error) {
	err = retryConflicts(ctx, func() error {
		_, err := st.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                &st.table,
			Item:                     av,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey},
		})
		return err
	})
	return st.failed(err)
}

// put writes an item whatever is under its key.
func (st *store) put(ctx context.Context, av map[string]types.AttributeValue) (bool, error) {
	err := retryConflicts(ctx, func() error {
		_, err := st.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &st.table, Item: av})
		return err
	})
	return err == nil, st.named(err)
}

// update makes the conditional UpdateItem w of the item under key and
// reports a failed condition as failed, apart from other errors.
func (st *store) update(ctx context.Context, key map[string]types.AttributeValue, w item.Writes) (failed bool, err error) {
	_, failed, err = st.write(ctx, key, w, types.ReturnValueNone)
	return failed, err
}

func (st *store) write(ctx context.Context, key map[string]types.AttributeValue, w item.Writes, rv types.ReturnValue) (map[string]types.AttributeValue, bool, error) {
	var out *dynamodb.UpdateItemOutput
	err := retryConflicts(ctx, func() (err error) {
		out, err = st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &st.table,
			Key:                       key,
			UpdateExpression:          &w.Update,
			ConditionExpression:       &w.Condition,
			ExpressionAttributeNames:  w.Names,
			ExpressionAttributeValues: w.Values,
			ReturnValues:              rv,
		})
		return err
	})
	failed, err := st.failed(err)
	if failed || err != nil {
		return nil, failed, err
	}
	return out.Attributes, false, nil
}

// delete deletes the item under key and, if old, returns what it held.
func (st *store) delete(ctx context.Context, key map[string]types.AttributeValue, old bool) (map[string]types.AttributeValue, error) {
	in := &dynamodb.DeleteItemInput{TableName: &st.table, Key: key}
	if old {
		in.ReturnValues = types.ReturnValueAllOld
	}
	var out *dynamodb.DeleteItemOutput
	err := retryConflicts(ctx, func() (err error) {
		out, err = st.client.DeleteItem(ctx, in)
		return err
	})
	if err != nil {
		return nil, st.named(err)
	}
	return out.Attributes, nil
}

// retryConflicts makes a write and, while it fails because another Region
// is writing the same item (ReplicatedWriteConflictException, which only a
// global table in multi-Region strong consistency answers, and which the
// SDK's retryer does not retry), makes it again after a short pause, until
// ctx ends. The write did not happen when that is its answer, so making it
// again is safe, conditions and all.
func retryConflicts(ctx context.Context, write func() error) error {
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		err := write()
		var conflict *types.ReplicatedWriteConflictException
		if !errors.As(err, &conflict) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (retried until the call's deadline: another Region kept writing the item)", err)
		case <-time.After(pause):
		}
	}
}

// query runs in through every page and decodes the items of kind; items it
// cannot read are left out.
func (st *store) query(ctx context.Context, kind string, in *dynamodb.QueryInput) ([]item.Session, error) {
	in.TableName = &st.table
	var found []item.Session
	pages := dynamodb.NewQueryPaginator(st.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return found, st.named(err)
		}
		for _, av := range page.Items {
			if s, err := st.Decode(av, kind); err == nil {
				found = append(found, s)
			}
		}
	}
	return found, nil
}

// failed tells a write's failed condition apart from other errors.
func (st *store) failed(err error) (bool, error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, nil
	}
	return false, st.named(err)
}

// named wraps a call's error, if any, with the name of the table, and says
// what to do about a table that does not exist.
func (st *store) named(err error) error {
	if err == nil {
		return nil
	}
	if errors.As(err, new(*types.ResourceNotFoundException)) {
		return fmt.Errorf("table %q: %w (no such table: call Manager.CreateTable at startup, or run: ddbsession table create -table %s)", st.table, err, st.table)
	}
	return fmt.Errorf("table %q: %w%s", st.table, err, noEngineHint(err))
}

// The table's own calls, which CreateTable makes. They name the table in
// their errors, as the primitives above do.

// admin is the client's table methods, or an error saying it has none.
func (st *store) admin() (tableClient, error) {
	if c, ok := st.client.(tableClient); ok {
		return c, nil
	}
	return nil, fmt.Errorf("Config.Client (%T) lacks the table methods of *dynamodb.Client (DescribeTable, CreateTable, DescribeTimeToLive, UpdateTimeToLive)", st.client)
}

// createTable asks for the table in. A table of that name that another
// instance made meanwhile is no error.
func (st *store) createTable(ctx context.Context, in *dynamodb.CreateTableInput) error {
	admin, err := st.admin()
	if err != nil {
		return err
	}
	_, err = admin.CreateTable(ctx, in)
	if errors.As(err, new(*types.ResourceInUseException)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("table %q does not exist, and creating it failed: %w%s", st.table, err, noEngineHint(err))
	}
	return nil
}

// waitForTable waits until the table is ACTIVE and returns its description.
func (st *store) waitForTable(ctx context.Context) (*types.TableDescription, error) {
	admin, err := st.admin()
	if err != nil {
		return nil, err
	}
	waiter := dynamodb.NewTableExistsWaiter(admin, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: &st.table}, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("table %q: wait until ACTIVE: %w", st.table, err)
	}
	return out.Table, nil
}

// describeTable describes the table; a missing one is a
// *types.ResourceNotFoundException.
func (st *store) describeTable(ctx context.Context) (*types.TableDescription, error) {
	admin, err := st.admin()
	if err != nil {
		return nil, err
	}
	out, err := admin.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &st.table})
	if err != nil {
		return nil, fmt.Errorf("table %q: %w%s", st.table, err, noEngineHint(err))
	}
	return out.Table, nil
}

// describeTTL returns the table's TTL attribute and whether TTL is enabled
// (or being enabled); off on an engine without DescribeTimeToLive.
func (st *store) describeTTL(ctx context.Context) (string, bool, error) {
	admin, err := st.admin()
	if err != nil {
		return "", false, err
	}
	out, err := admin.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &st.table})
	if unsupported(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("table %q: describe TTL: %w", st.table, err)
	}
	d := out.TimeToLiveDescription
	if d == nil {
		return "", false, nil
	}
	on := d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling
	return aws.ToString(d.AttributeName), on, nil
}

// enableTTL turns TTL on for the layout's TTL attribute. It reports false,
// with no error, on an engine that lacks UpdateTimeToLive.
func (st *store) enableTTL(ctx context.Context) (bool, error) {
	admin, err := st.admin()
	if err != nil {
		return false, err
	}
	_, err = admin.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &st.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: &st.TTLAttribute,
			Enabled:       aws.Bool(true),
		},
	})
	if unsupported(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("table %q: TTL is off, and turning it on failed: %w; turn it on with: aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=true,AttributeName=%s",
			st.table, err, st.table, st.TTLAttribute)
	}
	return true, nil
}

// noEngineHint is what to add to err, a call's, when it says there is no
// DynamoDB to talk to: no credentials, no Region, nothing listening at the
// endpoint, an endpoint that is no URL, or one that does not answer as
// DynamoDB does. "" otherwise.
func noEngineHint(err error) string {
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

// unsupported reports whether err says the engine lacks the operation, as
// dynalite says of UpdateTimeToLive. DynamoDB itself never answers so.
func unsupported(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}
