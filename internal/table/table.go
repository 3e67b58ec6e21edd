// Package table is the one definition of the table that ddbsession's items
// need: the CreateTable input for a layout, and each way an existing table
// can differ from it. The library's Manager.CreateTable and the CLI's
// "table create" and "table check" both use it, each telling its own
// reader what to do about a problem.
package table

import (
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Input is the table that layout l needs: on-demand billing, String keys,
// and the expiry index if l names one. TTL is turned on apart, since
// CreateTable cannot.
func Input(name string, l item.Layout) *dynamodb.CreateTableInput {
	attrs := []types.AttributeDefinition{{AttributeName: &l.PartitionKey, AttributeType: types.ScalarAttributeTypeS}}
	schema := []types.KeySchemaElement{{AttributeName: &l.PartitionKey, KeyType: types.KeyTypeHash}}
	if !l.HashOnly {
		attrs = append(attrs, types.AttributeDefinition{AttributeName: &l.SortKey, AttributeType: types.ScalarAttributeTypeS})
		schema = append(schema, types.KeySchemaElement{AttributeName: &l.SortKey, KeyType: types.KeyTypeRange})
	}
	in := &dynamodb.CreateTableInput{TableName: &name, AttributeDefinitions: attrs, KeySchema: schema, BillingMode: types.BillingModePayPerRequest}
	if l.ExpiryIndex != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(item.AttrExpiryBucket), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: &l.TTLAttribute, AttributeType: types.ScalarAttributeTypeN})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName: &l.ExpiryIndex,
			KeySchema: ExpiryIndexSchema(l),
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: item.Projection(),
			},
		}}
	}
	return in
}

// ExpiryIndexSchema is the key schema of layout l's expiry index.
func ExpiryIndexSchema(l item.Layout) []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: aws.String(item.AttrExpiryBucket), KeyType: types.KeyTypeHash},
		{AttributeName: &l.TTLAttribute, KeyType: types.KeyTypeRange},
	}
}

// Kinds of problem. The first three mean that the library cannot use the
// table (Misfit); the others that it can, but expired items stay in it.
const (
	Schema       = "schema"
	ExpiryIndex  = "expiry-index"
	MREC         = "mrec"
	TTLOff       = "ttl-off"
	TTLAttribute = "ttl-attribute"
	MRSCNoTTL    = "mrsc-no-ttl"
)

// Problem is one way a table differs from what a layout needs.
type Problem struct {
	Kind  string
	Error string // what is wrong, from the table's description
	// Got is what the table has of the key schema (Schema, ExpiryIndex),
	// for a fix to name; Types the types of its key attributes.
	Got   KeySchema
	Types []types.ScalarAttributeType
	// TTLAttribute is the attribute TTL is on (TTLAttribute).
	TTLAttribute string
}

// Misfit reports whether p means that the library cannot use the table.
func (p Problem) Misfit() bool { return p.Kind == Schema || p.Kind == ExpiryIndex || p.Kind == MREC }

// Strong reports whether t is a global table in multi-Region strong
// consistency (MRSC), which has no TTL.
func Strong(t *types.TableDescription) bool {
	return t.MultiRegionConsistency == types.MultiRegionConsistencyStrong
}

// Find finds each way that table t, named name, whose TTL is on ttlAttr if
// ttlOn, differs from what layout l needs, in this order: the key schema
// and its types, the expiry index, a global table's mode, and TTL.
func Find(name string, l item.Layout, t *types.TableDescription, ttlAttr string, ttlOn bool) []Problem {
	var problems []Problem
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	want, got := KeySchema{Hash: l.PartitionKey, Range: l.SortKey}, SchemaOf(t.KeySchema)
	keyTypes := []types.ScalarAttributeType{attrTypes[got.Hash]}
	if got.Range != "" {
		keyTypes = append(keyTypes, attrTypes[got.Range])
	}
	switch {
	case got != want:
		problems = append(problems, Problem{Kind: Schema, Got: got, Types: keyTypes,
			Error: fmt.Sprintf("table %q has key %s, and the layout wants %s", name, got, want)})
	case slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }):
		problems = append(problems, Problem{Kind: Schema, Got: got, Types: keyTypes,
			Error: fmt.Sprintf("table %q has key %s of types %s, and the layout wants String (S)", name, got, keyTypes)})
	}
	if l.ExpiryIndex != "" {
		want := SchemaOf(ExpiryIndexSchema(l))
		i := slices.IndexFunc(t.GlobalSecondaryIndexes, func(gsi types.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(gsi.IndexName) == l.ExpiryIndex
		})
		switch {
		case i < 0:
			problems = append(problems, Problem{Kind: ExpiryIndex,
				Error: fmt.Sprintf("table %q has no expiry index %q", name, l.ExpiryIndex)})
		case SchemaOf(t.GlobalSecondaryIndexes[i].KeySchema) != want:
			got := SchemaOf(t.GlobalSecondaryIndexes[i].KeySchema)
			problems = append(problems, Problem{Kind: ExpiryIndex, Got: got,
				Error: fmt.Sprintf("expiry index %q of table %q has key %s, and the layout wants %s", l.ExpiryIndex, name, got, want)})
		}
	}
	if len(t.Replicas) > 0 && !Strong(t) && !l.MREC {
		problems = append(problems, Problem{Kind: MREC,
			Error: fmt.Sprintf("table %q is a global table in multi-Region eventual consistency (MREC), and the layout does not say so", name)})
	}
	switch {
	case Strong(t) && !ttlOn:
		problems = append(problems, Problem{Kind: MRSCNoTTL,
			Error: fmt.Sprintf("table %q is a global table in multi-Region strong consistency (MRSC), which has no TTL", name)})
	case !ttlOn:
		problems = append(problems, Problem{Kind: TTLOff, Error: fmt.Sprintf("TTL is off on table %q", name)})
	case ttlAttr != l.TTLAttribute:
		problems = append(problems, Problem{Kind: TTLAttribute, TTLAttribute: ttlAttr,
			Error: fmt.Sprintf("table %q has TTL on %q, and the layout keeps the expiry in %q", name, ttlAttr, l.TTLAttribute)})
	}
	return problems
}

// KeySchema is a key schema's attribute names: a table's, or an index's.
type KeySchema struct{ Hash, Range string }

func (k KeySchema) String() string {
	if k.Range == "" {
		return fmt.Sprintf("(hash %q)", k.Hash)
	}
	return fmt.Sprintf("(hash %q, range %q)", k.Hash, k.Range)
}

// SchemaOf reads a key schema.
func SchemaOf(elems []types.KeySchemaElement) KeySchema {
	var k KeySchema
	for _, e := range elems {
		switch e.KeyType {
		case types.KeyTypeHash:
			k.Hash = aws.ToString(e.AttributeName)
		case types.KeyTypeRange:
			k.Range = aws.ToString(e.AttributeName)
		}
	}
	return k
}

// Ref is a Manager's table as the sibling modules take it
// (Manager.Table): its client (a ddbsession.Client, which the siblings'
// narrower Client interfaces take), the table's name, its layout with its
// defaults filled in, and Limits.AbsoluteLifetime, so that they hold no
// copies of the Manager's settings that could disagree with it.
type Ref struct {
	Client           any
	Name             string
	Layout           item.Layout
	AbsoluteLifetime time.Duration
}
