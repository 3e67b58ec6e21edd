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
// expiry, exactly one writes; the others see a failed condition and stop.
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
		if !errors.As(err, &lost) {
			m.cfg.Logger.ErrorContext(ctx, "ddbsession: refresh session", "sid", s.ID, "err", err)
		}
		return s, false
	}
	if !m.cfg.HashOnly {
		m.refreshIndex(ctx, next)
	}
	return next, true
}

// refreshIndex copies a refreshed expiry to the session's index item, so
// that List shows it and TTL removes both items together. The condition keeps
// a concurrent Logout's delete from being undone.
func (m *Manager[U]) refreshIndex(ctx context.Context, s Session) {
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
	if err != nil && !errors.As(err, &gone) {
		m.cfg.Logger.ErrorContext(ctx, "ddbsession: refresh session index item", "sid", s.ID, "err", err)
	}
}
