package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Sentinel errors of [Manager.CheckTable] and [Manager.CreateTable].
var (
	ErrTableSchema = errors.New("ddbsession: table does not match the configured key schema")
	ErrTTLOff      = errors.New("ddbsession: table TTL is not enabled on the configured attribute")
)

// CreateTable creates the table the Manager is configured for, unless it
// exists: on-demand (PAY_PER_REQUEST) billing, string keys PartitionKey and
// SortKey (or a hash key alone), the expiry index if configured, and TTL on
// TTLAttribute. It waits until the table is ACTIVE.
//
// A table that exists already must have the configured key schema and
// expiry index, as [Manager.CheckTable] checks them: otherwise CreateTable
// returns an error wrapping [ErrTableSchema] and leaves the table alone.
//
// Engines that do not implement UpdateTimeToLive, such as dynalite, get a
// logged warning and a table without TTL; the package checks expiry in code
// anyway, so only the clean-up is missing. Against DynamoDB, a failure to
// enable TTL is an error.
func (m *Manager[U]) CreateTable(ctx context.Context) error {
	c := m.cfg
	attrs := []types.AttributeDefinition{{AttributeName: &c.PartitionKey, AttributeType: types.ScalarAttributeTypeS}}
	schema := []types.KeySchemaElement{{AttributeName: &c.PartitionKey, KeyType: types.KeyTypeHash}}
	if !c.HashOnly {
		attrs = append(attrs, types.AttributeDefinition{AttributeName: &c.SortKey, AttributeType: types.ScalarAttributeTypeS})
		schema = append(schema, types.KeySchemaElement{AttributeName: &c.SortKey, KeyType: types.KeyTypeRange})
	}
	in := &dynamodb.CreateTableInput{
		TableName:            &c.Table,
		AttributeDefinitions: attrs,
		KeySchema:            schema,
		BillingMode:          types.BillingModePayPerRequest,
	}
	if c.ExpiryIndex != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(item.AttrExpiryBucket), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: &c.TTLAttribute, AttributeType: types.ScalarAttributeTypeN})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName: &c.ExpiryIndex,
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(item.AttrExpiryBucket), KeyType: types.KeyTypeHash},
				{AttributeName: &c.TTLAttribute, KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: item.Projection(),
			},
		}}
	}
	_, err := c.Client.CreateTable(ctx, in)
	var exists *types.ResourceInUseException
	switch {
	case errors.As(err, &exists):
		// Made by hand, maybe: it must fit the configuration, or the
		// first Login fails with the engine's "Missing the key ...".
		t, err := m.describeTable(ctx)
		if err != nil {
			return err
		}
		if err := m.schemaMismatch(t); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("ddbsession: create table %q: %w", c.Table, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(c.Client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &c.Table}, 5*time.Minute); err != nil {
		return fmt.Errorf("ddbsession: wait for table %q: %w", c.Table, err)
	}
	return m.enableTTL(ctx)
}

func (m *Manager[U]) enableTTL(ctx context.Context) error {
	attr, enabled, err := m.describeTTL(ctx)
	switch {
	case err != nil:
		return err
	case enabled && attr == m.cfg.TTLAttribute:
		return nil
	case enabled:
		return fmt.Errorf("%w: TTL is on %q, not %q", ErrTTLOff, attr, m.cfg.TTLAttribute)
	}
	_, err = m.cfg.Client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &m.cfg.Table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: &m.cfg.TTLAttribute,
			Enabled:       aws.Bool(true),
		},
	})
	if unsupported(err) {
		m.cfg.Logger.WarnContext(ctx, "ddbsession: this DynamoDB engine does not implement UpdateTimeToLive; expired sessions stay in the table (they are still rejected)", "table", m.cfg.Table)
		return nil
	}
	if err != nil {
		return fmt.Errorf("ddbsession: enable TTL on %q: %w", m.cfg.Table, err)
	}
	return nil
}

// unsupported reports whether err says the engine lacks the operation, as
// dynalite says of UpdateTimeToLive. DynamoDB itself never answers so.
func unsupported(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}

// describeTTL returns the table's TTL attribute and whether TTL is enabled
// (or being enabled). An engine without DescribeTimeToLive has TTL off.
func (m *Manager[U]) describeTTL(ctx context.Context) (string, bool, error) {
	out, err := m.cfg.Client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &m.cfg.Table})
	if unsupported(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ddbsession: describe TTL of %q: %w", m.cfg.Table, err)
	}
	d := out.TimeToLiveDescription
	if d == nil {
		return "", false, nil
	}
	on := d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling
	return aws.ToString(d.AttributeName), on, nil
}

// CheckTable reports, at startup, whether the table fits the configuration:
// its key schema must be the configured one (wrapping [ErrTableSchema]), the
// expiry index must exist if configured, and TTL must be enabled on
// TTLAttribute (wrapping [ErrTTLOff]). It joins every problem it finds. An
// engine without TTL, such as dynalite, reports TTL as off; an app may log
// that and carry on, because expiry is always checked in code:
//
//	switch err := sessions.CheckTable(ctx); {
//	case errors.Is(err, ddbsession.ErrTTLOff) && !errors.Is(err, ddbsession.ErrTableSchema):
//		slog.Warn("table TTL is off: expired sessions are not cleaned up", "err", err)
//	case err != nil:
//		log.Fatal(err)
//	}
func (m *Manager[U]) CheckTable(ctx context.Context) error {
	c := m.cfg
	t, err := m.describeTable(ctx)
	if err != nil {
		return err
	}
	errs := []error{m.schemaMismatch(t)}
	attr, enabled, err := m.describeTTL(ctx)
	switch {
	case err != nil:
		errs = append(errs, err)
	case !enabled:
		errs = append(errs, fmt.Errorf("%w: TTL is off on table %q", ErrTTLOff, c.Table))
	case attr != c.TTLAttribute:
		errs = append(errs, fmt.Errorf("%w: TTL is on %q, not %q", ErrTTLOff, attr, c.TTLAttribute))
	}
	return errors.Join(errs...)
}

func (m *Manager[U]) describeTable(ctx context.Context) (*types.TableDescription, error) {
	out, err := m.cfg.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &m.cfg.Table})
	if err != nil {
		return nil, fmt.Errorf("ddbsession: describe table %q: %w", m.cfg.Table, err)
	}
	return out.Table, nil
}

// schemaMismatch tells how table t differs from the configuration in its
// key schema (names and String types) and, if configured, its expiry
// index, in errors wrapping [ErrTableSchema]; nil if it does not.
func (m *Manager[U]) schemaMismatch(t *types.TableDescription) error {
	c := m.cfg
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	want := keySchema{hash: c.PartitionKey, rng: c.SortKey}
	got := schemaOf(t.KeySchema)
	keyTypes := []types.ScalarAttributeType{attrTypes[want.hash]}
	if want.rng != "" {
		keyTypes = append(keyTypes, attrTypes[want.rng])
	}
	var errs []error
	switch {
	case got != want:
		errs = append(errs, fmt.Errorf("%w: table %q has key %s, want %s", ErrTableSchema, c.Table, got, want))
	case slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }):
		errs = append(errs, fmt.Errorf("%w: table %q has key %s of types %s, want String (S)", ErrTableSchema, c.Table, got, keyTypes))
	}
	if c.ExpiryIndex != "" {
		want := keySchema{hash: item.AttrExpiryBucket, rng: c.TTLAttribute}
		var got keySchema
		found := false
		for _, gsi := range t.GlobalSecondaryIndexes {
			if aws.ToString(gsi.IndexName) == c.ExpiryIndex {
				got, found = schemaOf(gsi.KeySchema), true
			}
		}
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("%w: table %q has no expiry index %q", ErrTableSchema, c.Table, c.ExpiryIndex))
		case got != want:
			errs = append(errs, fmt.Errorf("%w: expiry index %q of table %q has key %s, want %s", ErrTableSchema, c.ExpiryIndex, c.Table, got, want))
		}
	}
	return errors.Join(errs...)
}

type keySchema struct{ hash, rng string }

func (k keySchema) String() string {
	if k.rng == "" {
		return fmt.Sprintf("(hash %q)", k.hash)
	}
	return fmt.Sprintf("(hash %q, range %q)", k.hash, k.rng)
}

func schemaOf(elems []types.KeySchemaElement) keySchema {
	var k keySchema
	for _, e := range elems {
		switch e.KeyType {
		case types.KeyTypeHash:
			k.hash = aws.ToString(e.AttributeName)
		case types.KeyTypeRange:
			k.rng = aws.ToString(e.AttributeName)
		}
	}
	return k
}

// namedTableClient is the Client that the store calls through: it names
// the table in every error of the item operations. The engine's errors do
// not, and a Login that fails with "ResourceNotFoundException: Requested
// resource not found" leaves a newcomer to guess which table is missing.
// Naming it here, once, covers every call the store makes, whatever error
// its caller wraps around it. CreateTable and CheckTable, which call the
// configured Client directly, name the table themselves.
type namedTableClient struct {
	Client
	table string
}

func (c namedTableClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, opts...)
	return out, c.named(err)
}

func (c namedTableClient) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.Client.BatchGetItem(ctx, in, opts...)
	return out, c.named(err)
}

func (c namedTableClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, opts...)
	return out, c.named(err)
}

func (c namedTableClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, opts...)
	return out, c.named(err)
}

func (c namedTableClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := c.Client.DeleteItem(ctx, in, opts...)
	return out, c.named(err)
}

func (c namedTableClient) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, opts...)
	return out, c.named(err)
}

// named wraps a call's error, if any, with the name of the table.
func (c namedTableClient) named(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("table %q: %w", c.table, err)
}
