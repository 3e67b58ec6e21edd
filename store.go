package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// store makes the DynamoDB calls, and nothing else: the rules that decide
// what to call are in session.go, and the items' format is in internal/item.
// Every call runs under the caller's context and its one deadline.
//
// The package uses no transactions (dynalite, a test engine, has no
// TransactWriteItems): writes that touch two items are ordered so that a
// failure in between leaves nothing live that should not be.
type store struct {
	item.Layout
	client Client
	table  string
	logger *slog.Logger
	pairs  sync.Pool // of *pairRead
}

// errRefreshLost is the refresh write's failed condition: the session was
// deleted, expired, or refreshed by a concurrent request meanwhile.
var errRefreshLost = errors.New("ddbsession: session changed before its refresh")

// getSession reads the session item under sessionPK with one strongly
// consistent GetItem. It reports false, with no error, for a missing item or
// one it cannot read.
func (st *store) getSession(ctx context.Context, sessionPK string) (item.Session, bool, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &st.table,
		Key:            st.SessionKey(sessionPK),
		ConsistentRead: consistent,
	})
	if err != nil {
		return item.Session{}, false, fmt.Errorf("ddbsession: get session: %w", err)
	}
	if out.Item == nil {
		return item.Session{}, false, nil
	}
	s, err := st.Decode(out.Item, item.KindSession)
	if err != nil {
		st.logger.WarnContext(ctx, "ddbsession: ignoring a session item in an unknown format", "err", err)
		return item.Session{}, false, nil
	}
	return s, true, nil
}

// getSessionAndUser reads the session item under sessionPK and the user
// item under (userPK, userSK) in one strongly consistent BatchGetItem: one
// round trip. The session is reported as getSession reports it; the user
// item is nil if there is none.
func (st *store) getSessionAndUser(ctx context.Context, sessionPK, userPK, userSK string) (s item.Session, found bool, user map[string]types.AttributeValue, err error) {
	read := st.pairs.Get().(*pairRead)
	defer st.pairs.Put(read)
	read.sessionPK.Value, read.userPK.Value, read.userSK.Value = sessionPK, userPK, userSK
	items, err := st.batchGet(ctx, &read.in)
	if err != nil {
		return s, false, nil, fmt.Errorf("ddbsession: get session and user: %w", err)
	}
	var sessionItem map[string]types.AttributeValue
	for _, av := range items {
		// The credential's user key never lies under the session prefix,
		// so the partition key tells the two items apart.
		if pk, _ := av[st.PartitionKey].(*types.AttributeValueMemberS); pk != nil && pk.Value == sessionPK {
			sessionItem = av
		} else {
			user = av
		}
	}
	if sessionItem == nil {
		return s, false, user, nil
	}
	s, err = st.Decode(sessionItem, item.KindSession)
	if err != nil {
		st.logger.WarnContext(ctx, "ddbsession: ignoring a session item in an unknown format", "err", err)
		return s, false, user, nil
	}
	return s, true, user, nil
}

// pairRead is the hot path's BatchGetItem input, built once and reused
// through store.pairs: a request sets its three key values, so that the
// read builds no maps. The SDK only reads an input, and is done with it when
// the call returns.
type pairRead struct {
	in                        dynamodb.BatchGetItemInput
	sessionPK, userPK, userSK types.AttributeValueMemberS
}

func (st *store) newPairRead() *pairRead {
	r := &pairRead{}
	session := map[string]types.AttributeValue{st.PartitionKey: &r.sessionPK}
	user := map[string]types.AttributeValue{st.PartitionKey: &r.userPK}
	if !st.HashOnly() {
		session[st.SortKey] = st.SessionKey("")[st.SortKey]
		user[st.SortKey] = &r.userSK
	}
	r.in.RequestItems = map[string]types.KeysAndAttributes{
		st.table: {Keys: []map[string]types.AttributeValue{session, user}, ConsistentRead: consistent},
	}
	return r
}

// batchGet reads items with strongly consistent BatchGetItems: one call,
// unless DynamoDB leaves keys unprocessed (under throttling); those are
// asked for again, after a short pause, until ctx ends. It returns the
// items found, in no particular order.
func (st *store) batchGet(ctx context.Context, in *dynamodb.BatchGetItemInput) ([]map[string]types.AttributeValue, error) {
	var found []map[string]types.AttributeValue
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		out, err := st.client.BatchGetItem(ctx, in)
		if err != nil {
			return nil, err
		}
		found = append(found, out.Responses[st.table]...)
		if len(out.UnprocessedKeys[st.table].Keys) == 0 {
			return found, nil
		}
		in = &dynamodb.BatchGetItemInput{RequestItems: out.UnprocessedKeys}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("unprocessed keys: %w", ctx.Err())
		case <-time.After(pause):
		}
	}
}

// batchInput asks for keys of the table, strongly consistent.
func (st *store) batchInput(keys ...map[string]types.AttributeValue) *dynamodb.BatchGetItemInput {
	return &dynamodb.BatchGetItemInput{
		RequestItems: map[string]types.KeysAndAttributes{st.table: {Keys: keys, ConsistentRead: consistent}},
	}
}

// consistent asks for a strongly consistent read; shared, since the SDK
// only reads it.
var consistent = aws.Bool(true)

// getUser reads a user item with one strongly consistent GetItem; nil if
// there is none.
func (st *store) getUser(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &st.table,
		Key:            st.Key(pk, sk),
		ConsistentRead: consistent,
	})
	if err != nil {
		return nil, fmt.Errorf("get user item: %w", err)
	}
	return out.Item, nil
}

// createSession writes a new session: first its per-user index item, then
// the session item itself, which must not exist yet. The index goes first so
// that a session is never live without showing in List. If either write
// fails, the index item is deleted again as far as possible (a failed write
// may still have been applied, its answer lost), and its TTL removes it
// otherwise: a failed Login leaves nothing that List shows.
func (st *store) createSession(ctx context.Context, sessionPK string, s item.Session) error {
	if st.HashOnly() {
		if err := st.putNew(ctx, st.EncodeSession(sessionPK, s)); err != nil {
			return fmt.Errorf("ddbsession: create session: %w", err)
		}
		return nil
	}
	err := st.putNew(ctx, st.EncodeIndex(sessionPK, s))
	if err != nil {
		err = fmt.Errorf("ddbsession: create session index item: %w", err)
	} else if err = st.putNew(ctx, st.EncodeSession(sessionPK, s)); err != nil {
		err = fmt.Errorf("ddbsession: create session: %w", err)
	}
	if err != nil {
		undo, cancel := detach(ctx)
		defer cancel()
		if uerr := st.deleteItem(undo, st.IndexKey(s)); uerr != nil {
			st.logger.ErrorContext(ctx, "ddbsession: undo session index item", "sid", s.ID, "err", uerr)
		}
	}
	return err
}

// putNew writes an item that must not exist yet.
func (st *store) putNew(ctx context.Context, av map[string]types.AttributeValue) error {
	_, err := st.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &st.table,
		Item:                     av,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey},
	})
	return err
}

// deleteSession deletes the session item under sessionPK and, once it is
// gone, its index item. It returns the deleted session, or false if there
// was none. Once the session item is gone its token is dead, so a failure
// to delete the index item is only logged: the item lingers in List until
// TTL or a Revoke removes it.
func (st *store) deleteSession(ctx context.Context, sessionPK string) (item.Session, bool, error) {
	out, err := st.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:    &st.table,
		Key:          st.SessionKey(sessionPK),
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		return item.Session{}, false, fmt.Errorf("ddbsession: delete session: %w", err)
	}
	s, err := st.Decode(out.Attributes, item.KindSession)
	if err != nil {
		return item.Session{}, false, nil
	}
	if !st.HashOnly() {
		if err := st.deleteItem(ctx, st.IndexKey(s)); err != nil {
			st.logger.ErrorContext(ctx, "ddbsession: delete session index item", "sid", s.ID, "err", err)
		}
	}
	return s, true, nil
}

func (st *store) deleteItem(ctx context.Context, key map[string]types.AttributeValue) error {
	_, err := st.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key})
	return err
}

// refreshSession writes next's expiry over old's. The write is conditional
// on the expiry old was read with, and on that expiry still being ahead of
// now. So it never revives an item that was deleted or has expired
// meanwhile, and of concurrent writers that read the same expiry at most one
// writes; the others get errRefreshLost.
func (st *store) refreshSession(ctx context.Context, sessionPK string, old, next item.Session, now time.Time) error {
	set := "SET #ttl = :exp, #refreshed = :refreshed"
	names := map[string]string{"#pk": st.PartitionKey, "#ttl": st.TTL, "#refreshed": item.AttrRefreshedAt}
	values := map[string]types.AttributeValue{
		":exp":       item.Num(next.ExpiresAt.Unix()),
		":refreshed": item.Num(next.RefreshedAt.UnixMilli()),
		":old":       item.Num(old.ExpiresAt.Unix()),
		":now":       item.Num(now.Unix()),
	}
	if st.ExpiryShards > 0 {
		set += ", #bucket = :bucket"
		names["#bucket"] = item.AttrExpiryBucket
		values[":bucket"] = item.Str(st.ExpiryBucket(next.ID, next.ExpiresAt))
	}
	_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &st.table,
		Key:                       st.SessionKey(sessionPK),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #ttl = :old AND #ttl > :now"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var lost *types.ConditionalCheckFailedException
	if errors.As(err, &lost) {
		return errRefreshLost
	}
	return err
}

// refreshIndex copies a refreshed session's expiry to its index item, so
// that List shows it and TTL removes both items together. An index item
// that is missing (TTL removed it after an earlier failure here) is written
// anew, but a session deleted meanwhile (a Logout or Revoke racing the
// refresh) must not get it back: after writing it, the session item is read
// again, and if it is gone the index item goes too. So List may show such a
// session for the moment between the two, never after.
func (st *store) refreshIndex(ctx context.Context, sessionPK string, next item.Session) error {
	_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &st.table,
		Key:                      st.IndexKey(next),
		UpdateExpression:         aws.String("SET #ttl = :exp, #refreshed = :refreshed"),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey, "#ttl": st.TTL, "#refreshed": item.AttrRefreshedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":exp":       item.Num(next.ExpiresAt.Unix()),
			":refreshed": item.Num(next.RefreshedAt.UnixMilli()),
		},
	})
	var missing *types.ConditionalCheckFailedException
	if !errors.As(err, &missing) {
		return err
	}
	if err := st.putNew(ctx, st.EncodeIndex(sessionPK, next)); err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("repair: %w", err)
	}
	if _, live, err := st.getSession(ctx, sessionPK); err != nil || live {
		return err
	}
	return st.deleteItem(ctx, st.IndexKey(next))
}

// createUser writes a new user item av with its cutoff at ms, unless an
// item with its key exists (ErrUserExists).
func (st *store) createUser(ctx context.Context, av map[string]types.AttributeValue, ms int64) error {
	av[st.ValidAfter] = item.Num(ms)
	err := st.putNew(ctx, av)
	var exists *types.ConditionalCheckFailedException
	if errors.As(err, &exists) {
		return ErrUserExists
	}
	return err
}

// raiseCutoff moves a user item's sessions-valid-after cutoff forward to ms
// (epoch milliseconds), or, if it is already there or later, by one
// millisecond: it never moves back, and each call ends the sessions created
// up to it even where a clock lags the cutoff. It returns ErrUserNotFound if
// the user has no item.
func (st *store) raiseCutoff(ctx context.Context, userPK, userSK string, ms int64) error {
	update := func(set, condition string, values map[string]types.AttributeValue) error {
		_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &st.table,
			Key:                       st.Key(userPK, userSK),
			UpdateExpression:          aws.String(set),
			ConditionExpression:       aws.String(condition),
			ExpressionAttributeNames:  map[string]string{"#pk": st.PartitionKey, "#cutoff": st.ValidAfter},
			ExpressionAttributeValues: values,
		})
		return err
	}
	now := map[string]types.AttributeValue{":now": item.Num(ms)}
	var failed *types.ConditionalCheckFailedException
	err := update("SET #cutoff = :now", "attribute_exists(#pk) AND (attribute_not_exists(#cutoff) OR #cutoff < :now)", now)
	if !errors.As(err, &failed) {
		return err
	}
	// Either the user is missing, or a cutoff at or after ms is in place.
	err = update("SET #cutoff = #cutoff + :one", "attribute_exists(#pk) AND attribute_exists(#cutoff)",
		map[string]types.AttributeValue{":one": item.Num(1)})
	if errors.As(err, &failed) {
		return ErrUserNotFound
	}
	return err
}

// getIndex reads the index item of session id in a user's own index
// partition, where this release or an earlier one put it, in one
// BatchGetItem; false if there is none, or none this release can read.
func (st *store) getIndex(ctx context.Context, userPK, userSK, id string) (item.Session, bool, error) {
	keys := st.IndexKeys(userPK, userSK, id)
	items, err := st.batchGet(ctx, st.batchInput(keys[0], keys[1]))
	if err != nil || len(items) == 0 {
		return item.Session{}, false, err
	}
	s, err := st.Decode(items[0], item.KindIndex)
	return s, err == nil, nil
}

// queryIndex reads a user's sessions created at or after from, newest
// first, with strongly consistent Queries of the user's index partition.
// The sort key starts with the creation time, so sessions before from,
// such as those that RevokeAll ended, are not read at all. Expired items
// cost the read but are not sent back.
//
// Index items of earlier releases, keyed by random IDs, are read with a
// second Query of their own prefix (which costs one call and no items once
// they have expired) and merged in by creation time.
func (st *store) queryIndex(ctx context.Context, userPK, userSK string, from, now time.Time) ([]item.Session, error) {
	query := func(keyCondition string, values map[string]types.AttributeValue, newestFirst bool) ([]item.Session, error) {
		values[":pk"] = item.Str(st.IndexPK(userPK, userSK))
		values[":now"] = item.Num(now.Unix())
		return st.query(ctx, item.KindIndex, &dynamodb.QueryInput{
			TableName:                 &st.table,
			ConsistentRead:            consistent,
			KeyConditionExpression:    aws.String(keyCondition),
			FilterExpression:          aws.String("#ttl > :now"),
			ScanIndexForward:          aws.Bool(!newestFirst),
			ExpressionAttributeNames:  map[string]string{"#pk": st.PartitionKey, "#sk": st.SortKey, "#ttl": st.TTL},
			ExpressionAttributeValues: values,
		})
	}
	found, err := query("#pk = :pk AND #sk BETWEEN :from AND :end", map[string]types.AttributeValue{
		":from": item.Str(item.IndexSortFrom(from)),
		":end":  item.Str(item.IndexSortEnd),
	}, true)
	if err != nil {
		return nil, err
	}
	legacy, err := query("#pk = :pk AND begins_with(#sk, :legacy)", map[string]types.AttributeValue{
		":legacy": item.Str(item.LegacyIndexSort),
	}, true)
	if err != nil || len(legacy) == 0 {
		return found, err
	}
	found = append(found, legacy...)
	slices.SortStableFunc(found, func(a, b item.Session) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return found, nil
}

// queryExpiry reads one partition of the expiry index: the sessions whose
// expiry in epoch seconds is in [from, to].
func (st *store) queryExpiry(ctx context.Context, index, bucket string, from, to int64) ([]item.Session, error) {
	return st.query(ctx, item.KindSession, &dynamodb.QueryInput{
		TableName:                &st.table,
		IndexName:                &index,
		KeyConditionExpression:   aws.String("#bucket = :bucket AND #ttl BETWEEN :from AND :to"),
		ExpressionAttributeNames: map[string]string{"#bucket": item.AttrExpiryBucket, "#ttl": st.TTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":bucket": item.Str(bucket), ":from": item.Num(from), ":to": item.Num(to),
		},
	})
}

// query runs in through every page and decodes the items of kind; items it
// cannot read are left out.
func (st *store) query(ctx context.Context, kind string, in *dynamodb.QueryInput) ([]item.Session, error) {
	var found []item.Session
	pages := dynamodb.NewQueryPaginator(st.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return found, err
		}
		for _, av := range page.Items {
			if s, err := st.Decode(av, kind); err == nil {
				found = append(found, s)
			}
		}
	}
	return found, nil
}

// errChallengeUsed is a device binding write's failed condition: the
// challenge it answers was used, replaced or expired meanwhile, or the
// session changed (bound already, or gone).
var errChallengeUsed = errors.New("ddbsession: challenge used or session changed")

// bind binds session s to a device key: it answers the challenge jti,
// which must still be the session's and unexpired, and the session must
// not be bound yet, so that a challenge binds once and a bound session is
// never bound to another key. The session item becomes VersionBound with
// the key, its first bound cookie and the next challenge; markIndexBound
// then follows.
func (st *store) bind(ctx context.Context, sessionPK string, s item.Session, jti, key string, cookie item.BoundCookie, next item.Challenge, now time.Time) error {
	_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &st.table,
		Key:       st.SessionKey(sessionPK),
		UpdateExpression: aws.String("SET #v = :bound, #key = :key, #cookie = :cookie, #cookieExp = :cookieExp, " +
			"#challenge = :next, #challengeExp = :nextExp"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND #v = :unbound AND #challenge = :jti AND #challengeExp > :now AND #ttl > :now"),
		ExpressionAttributeNames: map[string]string{
			"#pk": st.PartitionKey, "#v": item.AttrVersion, "#ttl": st.TTL, "#key": item.AttrBoundKey,
			"#cookie": item.AttrBoundCookie, "#cookieExp": item.AttrBoundExpires,
			"#challenge": item.AttrChallenge, "#challengeExp": item.AttrChallengeExpires,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":bound": item.Num(item.VersionBound), ":unbound": item.Num(item.Version),
			":key": item.Str(key), ":cookie": item.Str(cookie.Digest), ":cookieExp": item.Num(cookie.Expires.Unix()),
			":next": item.Str(next.Value), ":nextExp": item.Num(next.Expires.Unix()),
			":jti": item.Str(jti), ":now": item.Num(now.Unix()),
		},
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return errChallengeUsed
	}
	if err != nil {
		return fmt.Errorf("ddbsession: bind session: %w", err)
	}
	return nil
}

// markIndexBound makes bound session s's index item VersionBound, so that
// List shows it bound. A failure is only logged: the session is bound
// either way, and an index item that is gone stays gone.
func (st *store) markIndexBound(ctx context.Context, s item.Session) {
	if st.HashOnly() {
		return
	}
	_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &st.table,
		Key:                       st.IndexKey(s),
		UpdateExpression:          aws.String("SET #v = :bound"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": st.PartitionKey, "#v": item.AttrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":bound": item.Num(item.VersionBound)},
	})
	var gone *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &gone) {
		st.logger.ErrorContext(ctx, "ddbsession: mark session index item bound", "sid", s.ID, "err", err)
	}
}

// rebind gives bound session s a fresh bound cookie for the challenge jti,
// which must still be the session's and unexpired: a challenge is answered
// once. The cookie s was read with stays valid until its own expiry, for
// requests already on their way with it; the one before it is dropped.
func (st *store) rebind(ctx context.Context, sessionPK string, s item.Session, jti string, cookie item.BoundCookie, next item.Challenge, now time.Time) error {
	prev := s.Binding.Cookies[0]
	set := "SET #cookie = :cookie, #cookieExp = :cookieExp, #challenge = :next, #challengeExp = :nextExp"
	values := map[string]types.AttributeValue{
		":bound": item.Num(item.VersionBound), ":key": item.Str(s.Binding.Key),
		":cookie": item.Str(cookie.Digest), ":cookieExp": item.Num(cookie.Expires.Unix()),
		":next": item.Str(next.Value), ":nextExp": item.Num(next.Expires.Unix()),
		":jti": item.Str(jti), ":now": item.Num(now.Unix()),
	}
	if prev.Digest != "" {
		set += ", #prev = :prev, #prevExp = :prevExp"
		values[":prev"], values[":prevExp"] = item.Str(prev.Digest), item.Num(prev.Expires.Unix())
	}
	_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &st.table,
		Key:                 st.SessionKey(sessionPK),
		UpdateExpression:    aws.String(set),
		ConditionExpression: aws.String("attribute_exists(#pk) AND #v = :bound AND #key = :key AND #challenge = :jti AND #challengeExp > :now AND #ttl > :now"),
		ExpressionAttributeNames: map[string]string{
			"#pk": st.PartitionKey, "#v": item.AttrVersion, "#ttl": st.TTL, "#key": item.AttrBoundKey,
			"#cookie": item.AttrBoundCookie, "#cookieExp": item.AttrBoundExpires,
			"#prev": item.AttrBoundPrev, "#prevExp": item.AttrBoundPrevExpires,
			"#challenge": item.AttrChallenge, "#challengeExp": item.AttrChallengeExpires,
		},
		ExpressionAttributeValues: values,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return errChallengeUsed
	}
	if err != nil {
		return fmt.Errorf("ddbsession: refresh bound cookie: %w", err)
	}
	return nil
}

// setChallenge makes next the challenge that bound session id awaits, with
// one write and no read: the condition finds the session bound, live, of
// that ID, and with no challenge open (none, or expired), or the write
// fails with errChallengeUsed. Whether the user revoked the session
// meanwhile is for the answer to the challenge to find out.
func (st *store) setChallenge(ctx context.Context, sessionPK, id string, next item.Challenge, now time.Time) error {
	_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &st.table,
		Key:              st.SessionKey(sessionPK),
		UpdateExpression: aws.String("SET #challenge = :next, #challengeExp = :nextExp"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND #v = :bound AND #sid = :sid AND #ttl > :now AND " +
			"(attribute_not_exists(#challenge) OR #challengeExp <= :now)"),
		ExpressionAttributeNames: map[string]string{
			"#pk": st.PartitionKey, "#v": item.AttrVersion, "#ttl": st.TTL, "#sid": item.AttrID,
			"#challenge": item.AttrChallenge, "#challengeExp": item.AttrChallengeExpires,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":bound": item.Num(item.VersionBound), ":sid": item.Str(id),
			":next": item.Str(next.Value), ":nextExp": item.Num(next.Expires.Unix()), ":now": item.Num(now.Unix()),
		},
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return errChallengeUsed
	}
	if err != nil {
		return fmt.Errorf("ddbsession: set challenge: %w", err)
	}
	return nil
}
