package ddbsession

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// refresh slides the expiry of a valid session s forward to now+IdleTimeout,
// capped by its AbsoluteLifetime, at most once per RefreshInterval. It
// returns the session as refreshed and true if the expiry moved. A failed
// write is logged and leaves the session as it was: the request goes on.
//
// The write is conditional on the expiry this request read, and on that
// expiry still being ahead. So it never revives an item that was deleted or
// has expired meanwhile, and of concurrent requests that saw the same
// expiry, at most one writes; the others see a failed condition and stop.
func (m *Manager[U]) refresh(ctx context.Context, pk string, s Session, now time.Time) (Session, bool) {
	if now.Sub(s.RefreshedAt) < m.cfg.RefreshInterval {
		return s, false
	}
	expires := now.Add(m.cfg.IdleTimeout)
	if limit := s.CreatedAt.Add(m.cfg.AbsoluteLifetime); expires.After(limit) {
		expires = limit
	}
	expires = time.Unix(expires.Unix(), 0)
	if !expires.After(s.ExpiresAt) {
		return s, false // at the absolute cap: nothing to write
	}
	next := s
	next.ExpiresAt = expires
	next.RefreshedAt = time.UnixMilli(now.UnixMilli())

	set := "SET #ttl = :exp, #refreshed = :refreshed"
	values := map[string]types.AttributeValue{
		":exp":       num(expires.Unix()),
		":refreshed": num(next.RefreshedAt.UnixMilli()),
		":old":       num(s.ExpiresAt.Unix()),
		":now":       num(now.Unix()),
	}
	names := map[string]string{"#pk": m.cfg.PartitionKey, "#ttl": m.cfg.TTLAttribute, "#refreshed": attrRefreshedAt}
	if m.cfg.ExpiryIndex != "" {
		set += ", #bucket = :bucket"
		values[":bucket"] = str(m.expiryBucket(s.ID, expires))
		names["#bucket"] = attrExpiryBucket
	}
	_, err := m.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &m.cfg.Table,
		Key:                       m.sessionKey(pk),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #ttl = :old AND #ttl > :now"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		var lost *types.ConditionalCheckFailedException
		if !errors.As(err, &lost) && !errors.Is(err, context.Canceled) {
			m.cfg.Logger.ErrorContext(ctx, "ddbsession: refresh session", "sid", s.ID, "err", err)
		}
		return s, false
	}
	if !m.cfg.HashOnly {
		m.refreshIndex(ctx, pk, next)
	}
	return next, true
}

// refreshIndex copies a refreshed expiry to the session's index item, so
// that List shows it and TTL removes both items together. The session write
// has just succeeded, so the session is live: this write must not be lost to
// a client that hangs up, and an index item that is missing (removed by TTL
// after an earlier failure here) is written anew. A failure is logged; the
// next refresh repairs it.
func (m *Manager[U]) refreshIndex(ctx context.Context, sessionPK string, s Session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
	defer cancel()
	_, err := m.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &m.cfg.Table,
		Key:                 m.indexKey(s.User, s.ID),
		UpdateExpression:    aws.String("SET #ttl = :exp, #refreshed = :refreshed"),
		ConditionExpression: aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{
			"#pk": m.cfg.PartitionKey, "#ttl": m.cfg.TTLAttribute, "#refreshed": attrRefreshedAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":exp":       num(s.ExpiresAt.Unix()),
			":refreshed": num(s.RefreshedAt.UnixMilli()),
		},
	})
	var gone *types.ConditionalCheckFailedException
	if errors.As(err, &gone) {
		_, err = m.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &m.cfg.Table, Item: m.indexItem(sessionPK, s)})
	}
	if err != nil {
		m.cfg.Logger.ErrorContext(ctx, "ddbsession: refresh session index item", "sid", s.ID, "err", err)
	}
}
