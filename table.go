package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file creates the table a Manager needs, and checks one at startup.

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
	created, err := m.store.createTable(ctx, tableInput(m.store.Layout))
	if err != nil {
		return err
	}
	if !created {
		// Made by hand, maybe: it must fit the configuration, or the
		// first Login fails with the engine's "Missing the key ...".
		t, err := m.store.describeTable(ctx)
		if err != nil {
			return err
		}
		if err := schemaMismatch(m.store.table, m.store.Layout, t); err != nil {
			return err
		}
	}
	if err := m.store.waitForTable(ctx); err != nil {
		return err
	}
	attr, enabled, err := m.store.describeTTL(ctx)
	switch {
	case err != nil:
		return err
	case enabled && attr == m.store.TTLAttribute:
		return nil
	case enabled:
		return fmt.Errorf("%w: TTL is on %q, not %q", ErrTTLOff, attr, m.store.TTLAttribute)
	}
	supported, err := m.store.enableTTL(ctx)
	if err == nil && !supported {
		m.logger.WarnContext(ctx, "ddbsession: this DynamoDB engine does not implement UpdateTimeToLive; expired sessions stay in the table (they are still rejected)", "table", m.store.table)
	}
	return err
}

// tableInput is the table that layout l needs.
func tableInput(l item.Layout) *dynamodb.CreateTableInput {
	attrs := []types.AttributeDefinition{{AttributeName: &l.PartitionKey, AttributeType: types.ScalarAttributeTypeS}}
	schema := []types.KeySchemaElement{{AttributeName: &l.PartitionKey, KeyType: types.KeyTypeHash}}
	if !l.HashOnly {
		attrs = append(attrs, types.AttributeDefinition{AttributeName: &l.SortKey, AttributeType: types.ScalarAttributeTypeS})
		schema = append(schema, types.KeySchemaElement{AttributeName: &l.SortKey, KeyType: types.KeyTypeRange})
	}
	in := &dynamodb.CreateTableInput{AttributeDefinitions: attrs, KeySchema: schema, BillingMode: types.BillingModePayPerRequest}
	if l.ExpiryIndex != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(item.AttrExpiryBucket), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: &l.TTLAttribute, AttributeType: types.ScalarAttributeTypeN})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName: &l.ExpiryIndex,
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(item.AttrExpiryBucket), KeyType: types.KeyTypeHash},
				{AttributeName: &l.TTLAttribute, KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: item.Projection(),
			},
		}}
	}
	return in
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
	table := m.store.table
	t, err := m.store.describeTable(ctx)
	if err != nil {
		return err
	}
	errs := []error{schemaMismatch(table, m.store.Layout, t)}
	attr, enabled, err := m.store.describeTTL(ctx)
	switch {
	case err != nil:
		errs = append(errs, err)
	case !enabled:
		errs = append(errs, fmt.Errorf("%w: TTL is off on table %q", ErrTTLOff, table))
	case attr != m.store.TTLAttribute:
		errs = append(errs, fmt.Errorf("%w: TTL is on %q, not %q", ErrTTLOff, attr, m.store.TTLAttribute))
	}
	return errors.Join(errs...)
}

// schemaMismatch tells how table t differs from layout l in its key schema
// (names and String types) and, if configured, its expiry index, in errors
// wrapping [ErrTableSchema]; nil if it does not.
func schemaMismatch(table string, l item.Layout, t *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	want := keySchema{hash: l.PartitionKey, rng: l.SortKey}
	got := schemaOf(t.KeySchema)
	keyTypes := []types.ScalarAttributeType{attrTypes[want.hash]}
	if want.rng != "" {
		keyTypes = append(keyTypes, attrTypes[want.rng])
	}
	var errs []error
	switch {
	case got != want:
		errs = append(errs, fmt.Errorf("%w: table %q has key %s, want %s", ErrTableSchema, table, got, want))
	case slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }):
		errs = append(errs, fmt.Errorf("%w: table %q has key %s of types %s, want String (S)", ErrTableSchema, table, got, keyTypes))
	}
	if l.ExpiryIndex != "" {
		want := keySchema{hash: item.AttrExpiryBucket, rng: l.TTLAttribute}
		var got keySchema
		found := false
		for _, gsi := range t.GlobalSecondaryIndexes {
			if aws.ToString(gsi.IndexName) == l.ExpiryIndex {
				got, found = schemaOf(gsi.KeySchema), true
			}
		}
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("%w: table %q has no expiry index %q", ErrTableSchema, table, l.ExpiryIndex))
		case got != want:
			errs = append(errs, fmt.Errorf("%w: expiry index %q of table %q has key %s, want %s", ErrTableSchema, l.ExpiryIndex, table, got, want))
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
