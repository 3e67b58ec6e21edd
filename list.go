package ddbsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SessionInfo is one entry of [Manager.List].
type SessionInfo struct {
	Session
	// Current is true for the session of the request whose context was
	// passed to List.
	Current bool
}

// List returns user's live sessions, newest first, for a "where you're
// signed in" page. It leaves out sessions that have expired but that TTL has
// not deleted yet, and sessions older than the user's sessions-valid-after
// cutoff. A session created a moment ago is in the list: it is one strongly
// consistent Query on the user's own index partition, plus the user read
// that yields the cutoff. Never a Scan.
//
//	s, _ := sessions.Session(r.Context())
//	list, err := sessions.List(r.Context(), s.User)
//	for _, e := range list {
//		fmt.Fprintln(w, e.ID, e.UserAgent, e.ExpiresAt, e.Current)
//	}
func (m *Manager[U]) List(ctx context.Context, user UserKey) ([]SessionInfo, error) {
	if m.cfg.HashOnly {
		return nil, ErrNoSortKey
	}
	current, _ := m.Session(ctx)
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	_, validAfter, err := m.cfg.LoadUser(ctx, user)
	if errors.Is(err, ErrUserNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ddbsession: list sessions: load user: %w", err)
	}

	now := m.cfg.Now()
	var list []SessionInfo
	pages := dynamodb.NewQueryPaginator(m.cfg.Client, &dynamodb.QueryInput{
		TableName:              &m.cfg.Table,
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("#pk = :pk"),
		// Expired items cost the read but are not sent back.
		FilterExpression:         aws.String("#ttl > :now"),
		ExpressionAttributeNames: map[string]string{"#pk": m.cfg.PartitionKey, "#ttl": m.cfg.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":  str(m.userSessionsPK(user)),
			":now": num(now.Unix()),
		},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ddbsession: list sessions: %w", err)
		}
		for _, item := range page.Items {
			s, ok := m.decodeSession(item, kindIndex)
			// The filter ran at the engine's "now"; this check runs at ours,
			// and also drops sessions that RevokeAll has ended.
			if !ok || s.User != user || s.ExpiresAt.Unix() <= now.Unix() || s.CreatedAt.Before(validAfter) {
				continue
			}
			list = append(list, SessionInfo{Session: s, Current: s.ID == current.ID})
		}
	}
	slices.SortFunc(list, func(a, b SessionInfo) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return list, nil
}
