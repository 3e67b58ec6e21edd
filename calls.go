package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession/internal/decide"
	"github.com/ddbsession/ddbsession/internal/item"
)

// Client is what a [Manager] calls of *dynamodb.Client, which tests may
// wrap; [Manager.CreateTable] needs its table methods besides.
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

// calls makes the DynamoDB calls of one table, in its layout: the reads go
// through internal/decide's Calls (reads), the one place that reads, and
// the writes and the table's own calls are here. Each names the table in
// its error. The store builds its operations on them.
type calls struct {
	item.Layout
	client Client
	reads  decide.Calls
	table  string
}

func newCalls(client Client, table string, layout item.Layout) calls {
	return calls{Layout: layout, client: client, reads: decide.Calls{Client: client, Table: table}, table: table}
}

// consistent asks for a strongly consistent read; shared, since the SDK
// only reads it.
var consistent = aws.Bool(true)

// get reads the item under key with one strongly consistent GetItem; nil
// if there is none.
func (cl *calls) get(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	return cl.reads.Get(ctx, key)
}

// named wraps a call's error, if any, with the name of the table.
func (cl *calls) named(err error) error { return cl.reads.Named(err) }

// putNew writes an item that must not exist yet; taken reports that one
// did.
func (cl *calls) putNew(ctx context.Context, av map[string]types.AttributeValue) (taken bool, err error) {
	err = retryConflicts(ctx, func() error {
		_, err := cl.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                &cl.table,
			Item:                     av,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": cl.PartitionKey},
		})
		return err
	})
	return cl.failed(err)
}

// put writes an item whatever is under its key.
func (cl *calls) put(ctx context.Context, av map[string]types.AttributeValue) error {
	return cl.named(retryConflicts(ctx, func() error {
		_, err := cl.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &cl.table, Item: av})
		return err
	}))
}

// putOver writes av over the item under its key if cond holds, and returns
// what the item held before; refused reports that cond did not hold.
func (cl *calls) putOver(ctx context.Context, av map[string]types.AttributeValue, w item.Writes) (old map[string]types.AttributeValue, refused bool, err error) {
	var out *dynamodb.PutItemOutput
	err = retryConflicts(ctx, func() (err error) {
		out, err = cl.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 &cl.table,
			Item:                      av,
			ConditionExpression:       &w.Condition,
			ExpressionAttributeNames:  w.Names,
			ExpressionAttributeValues: w.Values,
			ReturnValues:              types.ReturnValueAllOld,
		})
		return err
	})
	if refused, err = cl.failed(err); refused || err != nil {
		return nil, refused, err
	}
	return out.Attributes, false, nil
}

// update makes the conditional UpdateItem w of the item under key and
// reports a failed condition as failed, apart from other errors.
func (cl *calls) update(ctx context.Context, key map[string]types.AttributeValue, w item.Writes) (failed bool, err error) {
	err = retryConflicts(ctx, func() error {
		_, err := cl.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &cl.table,
			Key:                       key,
			UpdateExpression:          &w.Update,
			ConditionExpression:       &w.Condition,
			ExpressionAttributeNames:  w.Names,
			ExpressionAttributeValues: w.Values,
		})
		return err
	})
	return cl.failed(err)
}

// delete deletes the item under key and, if old, returns what it held.
func (cl *calls) delete(ctx context.Context, key map[string]types.AttributeValue, old bool) (map[string]types.AttributeValue, error) {
	in := &dynamodb.DeleteItemInput{TableName: &cl.table, Key: key}
	if old {
		in.ReturnValues = types.ReturnValueAllOld
	}
	var out *dynamodb.DeleteItemOutput
	err := retryConflicts(ctx, func() (err error) {
		out, err = cl.client.DeleteItem(ctx, in)
		return err
	})
	if err != nil {
		return nil, cl.named(err)
	}
	return out.Attributes, nil
}

// deleteIf deletes the item under key if w's condition holds; refused
// reports that it did not.
func (cl *calls) deleteIf(ctx context.Context, key map[string]types.AttributeValue, w item.Writes) (refused bool, err error) {
	err = retryConflicts(ctx, func() error {
		_, err := cl.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 &cl.table,
			Key:                       key,
			ConditionExpression:       &w.Condition,
			ExpressionAttributeNames:  w.Names,
			ExpressionAttributeValues: w.Values,
		})
		return err
	})
	return cl.failed(err)
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
func (cl *calls) query(ctx context.Context, kind string, in *dynamodb.QueryInput) ([]item.Session, error) {
	in.TableName = &cl.table
	var found []item.Session
	pages := dynamodb.NewQueryPaginator(cl.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return found, cl.named(err)
		}
		for _, av := range page.Items {
			if s, err := cl.Decode(av, kind); err == nil {
				found = append(found, s)
			}
		}
	}
	return found, nil
}

// failed tells a write's failed condition apart from other errors.
func (cl *calls) failed(err error) (bool, error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, nil
	}
	return false, cl.named(err)
}

// The table's own calls, which CreateTable makes. They name the table in
// their errors, as the calls above do.

// admin is the client's table methods, or an error saying it has none.
func (cl *calls) admin() (tableClient, error) {
	if c, ok := cl.client.(tableClient); ok {
		return c, nil
	}
	return nil, fmt.Errorf("Config.Client (%T) lacks the table methods of *dynamodb.Client (DescribeTable, CreateTable, DescribeTimeToLive, UpdateTimeToLive)", cl.client)
}

// createTable asks for the table in. A table of that name that another
// instance made meanwhile is no error; created says whether this call made
// it.
func (cl *calls) createTable(ctx context.Context, in *dynamodb.CreateTableInput) (created bool, err error) {
	admin, err := cl.admin()
	if err != nil {
		return false, err
	}
	_, err = admin.CreateTable(ctx, in)
	if errors.As(err, new(*types.ResourceInUseException)) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("table %q does not exist, and creating it failed: %w%s", cl.table, err, decide.NoEngineHint(err))
	}
	return true, nil
}

// waitForTable waits until the table is ACTIVE and returns its description.
func (cl *calls) waitForTable(ctx context.Context) (*types.TableDescription, error) {
	admin, err := cl.admin()
	if err != nil {
		return nil, err
	}
	waiter := dynamodb.NewTableExistsWaiter(admin, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: &cl.table}, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("table %q: wait until ACTIVE: %w", cl.table, err)
	}
	return out.Table, nil
}

// describeTable describes the table; a missing one is a
// *types.ResourceNotFoundException.
func (cl *calls) describeTable(ctx context.Context) (*types.TableDescription, error) {
	admin, err := cl.admin()
	if err != nil {
		return nil, err
	}
	out, err := admin.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &cl.table})
	if err != nil {
		return nil, fmt.Errorf("table %q: %w%s", cl.table, err, decide.NoEngineHint(err))
	}
	return out.Table, nil
}

// describeTTL returns the table's TTL attribute and whether TTL is enabled
// (or being enabled); off on an engine without DescribeTimeToLive.
func (cl *calls) describeTTL(ctx context.Context) (string, bool, error) {
	admin, err := cl.admin()
	if err != nil {
		return "", false, err
	}
	out, err := admin.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &cl.table})
	if unsupported(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("table %q: describe TTL: %w", cl.table, err)
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
func (cl *calls) enableTTL(ctx context.Context) (bool, error) {
	admin, err := cl.admin()
	if err != nil {
		return false, err
	}
	_, err = admin.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &cl.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: &cl.TTLAttribute,
			Enabled:       aws.Bool(true),
		},
	})
	if unsupported(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("table %q: TTL is off, and turning it on failed: %w; turn it on with: aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=true,AttributeName=%s",
			cl.table, err, cl.table, cl.TTLAttribute)
	}
	return true, nil
}

// unsupported reports whether err says the engine lacks the operation, as
// dynalite says of UpdateTimeToLive. DynamoDB itself never answers so.
func unsupported(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}
