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

// CreateTable creates the table the Manager is configured for, unless it
// exists: on-demand (PAY_PER_REQUEST) billing, string keys PartitionKey and
// SortKey (or a hash key alone), the expiry index if configured, and TTL on
// TTLAttribute. It waits until the table is ACTIVE.
//
// A table that exists already must have the configured key schema and
// expiry index, as [Manager.CheckTable] checks them: otherwise CreateTable
// returns an error that says how it differs, and leaves the table alone.
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
		if err := m.mismatch(t); err != nil {
			return err
		}
		if strong(t) {
			m.logger.WarnContext(ctx, "ddbsession: the table is a global table in multi-Region strong consistency (MRSC), which has no TTL: expired sessions stay in the table until a sweep removes them (they are still rejected)", "table", m.store.table)
			if err := m.store.waitForTable(ctx); err != nil {
				return err
			}
			return m.readEveryone(ctx)
		}
	}
	if err := m.store.waitForTable(ctx); err != nil {
		return err
	}
	// The first request need not read the global generation: start with it.
	if err := m.readEveryone(ctx); err != nil {
		return err
	}
	attr, enabled, err := m.store.describeTTL(ctx)
	switch {
	case errors.Is(err, errUnsupported):
		// enableTTL finds the same, and says so.
	case err != nil:
		return err
	case enabled && attr == m.store.TTLAttribute:
		return nil
	case enabled:
		return m.ttlElsewhere(attr)
	}
	supported, err := m.store.enableTTL(ctx)
	if err == nil && !supported {
		m.noTTL.Store(true)
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

// CheckTable reports, at startup, whether the table fits the configuration,
// in an error that says each way it does not and what to do: its key schema
// must be the configured one, the expiry index must exist if configured, a
// global table must be in the mode [Config.MREC] says, and TTL must be
// enabled on TTLAttribute. Two tables cannot have TTL, and get a logged
// warning instead of an error: one in multi-Region strong consistency
// (MRSC), and one on an engine without UpdateTimeToLive, such as dynalite,
// once this Manager's CreateTable has found that out (dynalite describes
// TTL as off, as DynamoDB describes a table whose TTL is off: only the
// attempt to enable it tells them apart). Expiry is checked in code all
// the same; only the clean-up of expired items is missing there.
func (m *Manager[U]) CheckTable(ctx context.Context) error {
	table := m.store.table
	t, err := m.store.describeTable(ctx)
	if err != nil {
		return err
	}
	errs := []error{m.mismatch(t), m.readEveryone(ctx)}
	attr, enabled, err := m.store.describeTTL(ctx)
	switch {
	case strong(t) && !enabled && (err == nil || errors.Is(err, errUnsupported)):
		m.logger.WarnContext(ctx, "ddbsession: the table is a global table in multi-Region strong consistency (MRSC), which has no TTL: expired sessions stay in the table until a sweep removes them (they are still rejected)", "table", table)
	case errors.Is(err, errUnsupported) || (!enabled && m.noTTL.Load()):
		m.logger.WarnContext(ctx, "ddbsession: this DynamoDB engine does not implement TTL; expired sessions stay in the table (they are still rejected)", "table", table)
	case err != nil:
		errs = append(errs, err)
	case !enabled:
		errs = append(errs, fmt.Errorf("ddbsession: TTL is off on table %q, so expired sessions are rejected but never deleted: "+
			"call CreateTable, which enables it, or run: aws dynamodb update-time-to-live --table-name %s --time-to-live-specification \"Enabled=true, AttributeName=%s\"",
			table, table, m.store.TTLAttribute))
	case attr != m.store.TTLAttribute:
		errs = append(errs, m.ttlElsewhere(attr))
	}
	return errors.Join(errs...)
}

// ttlElsewhere is the error for a table whose TTL is on attr, which is not
// the layout's TTL attribute: a table has one TTL attribute.
func (c *core) ttlElsewhere(attr string) error {
	return fmt.Errorf("ddbsession: table %q has TTL on %q, not on %q, where sessions keep their expiry: "+
		"a table has one TTL attribute, so set Layout.TTLAttribute to %q, or use another table", c.store.table, attr, c.store.TTLAttribute, attr)
}

// mismatch tells how table t differs from the configuration: its schema,
// and whether it is replicated in the way Config.MREC says.
func (c *core) mismatch(t *types.TableDescription) error {
	err := schemaMismatch(c.store.table, c.store.Layout, t)
	if len(t.Replicas) > 0 && !strong(t) && !c.users.mrec {
		err = errors.Join(err, fmt.Errorf("ddbsession: table %q is a global table in multi-Region eventual consistency (MREC), "+
			"where a write in one Region can undo a RevokeAll or a Logout in another: set Config.MREC", c.store.table))
	}
	return err
}

// strong reports whether t is a global table in multi-Region strong
// consistency.
func strong(t *types.TableDescription) bool {
	return t.MultiRegionConsistency == types.MultiRegionConsistencyStrong
}

// schemaMismatch tells how table t differs from layout l in its key schema
// (names and String types) and, if configured, its expiry index; nil if it
// does not.
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
		errs = append(errs, fmt.Errorf("ddbsession: table %q has key %s, want %s (Config.Layout)", table, got, want))
	case slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }):
		errs = append(errs, fmt.Errorf("ddbsession: table %q has key %s of types %s, want String (S)", table, got, keyTypes))
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
			errs = append(errs, fmt.Errorf("ddbsession: table %q has no expiry index %q (Layout.ExpiryIndex)", table, l.ExpiryIndex))
		case got != want:
			errs = append(errs, fmt.Errorf("ddbsession: expiry index %q of table %q has key %s, want %s", l.ExpiryIndex, table, got, want))
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
