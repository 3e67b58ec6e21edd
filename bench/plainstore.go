package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// plainStore is an scs.Store written the way community DynamoDB stores for
// scs and similar libraries are: one item per session keyed by the raw
// token, read with GetItem, written whole with PutItem on every commit,
// removed with DeleteItem, with the expiry checked in code since TTL
// deletes late. It is the peer that the benchmark measures ddbsession
// against, not a store to use: the table holds live tokens.
//
// Its read is strongly consistent, as ddbsession's are, so that the two
// are compared for the same guarantee and the same read units. (Many
// community stores read eventually consistently, which halves the read
// units and can miss a session written a moment before.)
type plainStore struct {
	client plainClient
	table  string
}

func newPlainStore(c ddbsession.Client, table string) (scs.Store, error) {
	return &plainStore{client: c, table: table}, nil
}

// plainClient is the part of the DynamoDB client that plainStore uses.
type plainClient interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// plainSK is the sort key of plainStore's items in the benchmark's shared
// table; a table of their own would key them by the token alone.
const plainSK = "scs"

func (s *plainStore) key(token string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		tablePK: &types.AttributeValueMemberS{Value: token},
		tableSK: &types.AttributeValueMemberS{Value: plainSK},
	}
}

func (s *plainStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            s.key(token),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, false, fmt.Errorf("plain store: find: %w", err)
	}
	data, _ := out.Item["data"].(*types.AttributeValueMemberB)
	expires, _ := out.Item["expiresAt"].(*types.AttributeValueMemberN)
	if data == nil || expires == nil {
		return nil, false, nil
	}
	if sec, err := strconv.ParseInt(expires.Value, 10, 64); err != nil || sec <= time.Now().Unix() {
		return nil, false, nil
	}
	return data.Value, true, nil
}

func (s *plainStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	av := s.key(token)
	av["data"] = &types.AttributeValueMemberB{Value: b}
	av["expiresAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(expiry.Unix(), 10)}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: av}); err != nil {
		return fmt.Errorf("plain store: commit: %w", err)
	}
	return nil
}

func (s *plainStore) DeleteCtx(ctx context.Context, token string) error {
	if _, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: s.key(token)}); err != nil {
		return fmt.Errorf("plain store: delete: %w", err)
	}
	return nil
}

func (s *plainStore) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}

func (s *plainStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}

func (s *plainStore) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }
