package ddbsession_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// A table created by hand with other keys than the configured ones is a
// mistake CreateTable reports, instead of the first Login failing with
// "Missing the key id".
func TestCreateTableOnOtherSchema(t *testing.T) {
	t.Parallel()
	s, n := types.ScalarAttributeTypeS, types.ScalarAttributeTypeN
	cases := []struct {
		name   string
		keys   []tableKey // of the existing table
		mutate func(*ddbsession.Config[User])
	}{
		{"hash key id", []tableKey{{"id", s, types.KeyTypeHash}}, nil},
		{"other key names", []tableKey{{"PK", s, types.KeyTypeHash}, {"SK", s, types.KeyTypeRange}}, nil},
		{"Number partition key", []tableKey{{"pk", n, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}}, nil},
		{"sort key, hash-only config", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			func(c *ddbsession.Config[User]) { c.HashOnly = true }},
		{"no expiry index", []tableKey{{"pk", s, types.KeyTypeHash}, {"sk", s, types.KeyTypeRange}},
			withExpiryIndex},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := ddbtest.Client(t)
			table := ddbtest.TableName(t, client)
			createTable(t, client, table, tc.keys)
			cfg := ddbsession.Config[User]{Client: client, Table: table}
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			m, err := ddbsession.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = m.CreateTable(context.Background())
			if !errors.Is(err, ddbsession.ErrTableSchema) {
				t.Fatalf("CreateTable on an existing table with other keys = %v, want ErrTableSchema", err)
			}
			if !strings.Contains(err.Error(), table) {
				t.Errorf("CreateTable's error does not name table %q: %v", table, err)
			}
		})
	}
}

type tableKey struct {
	name     string
	attrType types.ScalarAttributeType
	keyType  types.KeyType
}

// createTable creates a table with the given keys behind the Manager's
// back, as a newcomer might by hand.
func createTable(t *testing.T, client *dynamodb.Client, table string, keys []tableKey) {
	t.Helper()
	in := &dynamodb.CreateTableInput{TableName: &table, BillingMode: types.BillingModePayPerRequest}
	for _, k := range keys {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k.name), AttributeType: k.attrType})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k.name), KeyType: k.keyType})
	}
	if _, err := client.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := waiter.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		t.Fatal(err)
	}
}
