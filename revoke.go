package ddbsession

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrSessionNotFound is returned by [Manager.Revoke] for a session ID that is
// unknown, malformed or another user's: the three are not told apart.
var ErrSessionNotFound = errors.New("ddbsession: session not found")

// ErrNoSortKey is returned by [Manager.List] and [Manager.Revoke] in a
// hash-only table, which cannot hold the per-user index they read.
var ErrNoSortKey = errors.New("ddbsession: listing and revoking single sessions need a table with a sort key")

// RevokeAll logs user out everywhere: it sets the user item's
// sessions-valid-after cutoff to now, in epoch milliseconds. Every session
// created before it is rejected on its next request, on any instance, with
// no scan and no query; a session created from now on is valid.
//
// The cutoff never moves backwards, so of two racing calls the later one
// wins. RevokeAll returns [ErrUserNotFound] if the user has no item in the
// table; with a custom [Config.LoadUser], keep the cutoff where the loader
// reads it instead.
//
// The cutoff is compared with createdAt values written by other instances,
// so RevokeAll assumes that the instances' clocks agree to well within a
// second, as NTP or the Amazon Time Sync Service keep them. An instance whose
// clock runs ahead by d sets a cutoff that also rejects sessions created in
// the d after the call.
func (m *Manager[U]) RevokeAll(ctx context.Context, user UserKey) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	_, err := m.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &m.cfg.Table,
		Key:                       m.userKey(user),
		UpdateExpression:          aws.String("SET #cutoff = :now"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND (attribute_not_exists(#cutoff) OR #cutoff < :now)"),
		ExpressionAttributeNames:  map[string]string{"#pk": m.cfg.PartitionKey, "#cutoff": m.cfg.ValidAfterAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(m.cfg.Now().UnixMilli())},
	})
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		if err != nil {
			return fmt.Errorf("ddbsession: revoke all sessions: %w", err)
		}
		return nil
	}
	// Either the user is missing or a later cutoff is already in place.
	out, err := m.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                &m.cfg.Table,
		Key:                      m.userKey(user),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#pk"),
		ExpressionAttributeNames: map[string]string{"#pk": m.cfg.PartitionKey},
	})
	switch {
	case err != nil:
		return fmt.Errorf("ddbsession: revoke all sessions: %w", err)
	case out.Item == nil:
		return ErrUserNotFound
	}
	return nil
}

// Revoke ends one of user's sessions by its public ID, as a "sign out that
// device" button does. The session dies on its next request. Pass the
// signed-in user's key from [Manager.Session], never one taken from the
// request: an ID that is not one of user's sessions gets
// [ErrSessionNotFound], exactly as an unknown one does.
//
//	s, _ := sessions.Session(r.Context())
//	err := sessions.Revoke(r.Context(), s.User, r.FormValue("id"))
//	if errors.Is(err, ddbsession.ErrSessionNotFound) { /* 404 */ }
func (m *Manager[U]) Revoke(ctx context.Context, user UserKey, id string) error {
	if m.cfg.HashOnly {
		return ErrNoSortKey
	}
	if !validSessionID(id) {
		return ErrSessionNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	// The index item lives in user's own index partition, so finding it
	// there is what proves the session is theirs.
	out, err := m.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &m.cfg.Table,
		Key:            m.indexKey(user, id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("ddbsession: revoke session: %w", err)
	}
	sessionPK, ok := getStr(out.Item, attrSessionPK)
	if !ok {
		return ErrSessionNotFound
	}
	if _, found, err := m.deleteSession(ctx, sessionPK); err != nil || found {
		return err
	}
	// The session item was already gone; drop its stale index item too.
	if _, err := m.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &m.cfg.Table, Key: m.indexKey(user, id)}); err != nil {
		return fmt.Errorf("ddbsession: revoke session: %w", err)
	}
	return nil
}
