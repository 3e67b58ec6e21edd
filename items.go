package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds what each read and write of an item is: the session and
// its index item, the user and the user's state item, the global item. Each
// goes through the calls of store.go, which this file names in terms of the
// item format of internal/item.

// getSession reads the session item under sessionPK with one strongly
// consistent GetItem. It reports false, with no error, for a missing item or
// one it cannot read.
func (st *store) getSession(ctx context.Context, sessionPK string) (item.Session, bool, error) {
	av, err := st.get(ctx, st.SessionKey(sessionPK))
	if err != nil {
		return item.Session{}, false, err
	}
	s, found := st.decodeSession(ctx, av)
	return s, found, nil
}

// userItems are what a read of a session's user brings: the user item and,
// as asked, the user's state item (MREC) and the table's global item; nil
// for one that is not there or was not asked for.
type userItems struct {
	user, state, global map[string]types.AttributeValue
	globalRead          bool // the global item was asked for
}

// pairRead is the hot path's BatchGetItem input, built once and reused
// through store.pairs: a request sets its three key values, so that the
// read builds no maps. The SDK only reads an input, and is done with it when
// the call returns.
type pairRead struct {
	in                                 dynamodb.BatchGetItemInput
	sessionPK, userPK, userSK, statePK types.AttributeValueMemberS
}

func (st *store) newPairRead() *pairRead {
	r := &pairRead{}
	session := map[string]types.AttributeValue{st.PartitionKey: &r.sessionPK}
	user := map[string]types.AttributeValue{st.PartitionKey: &r.userPK}
	keys := []map[string]types.AttributeValue{session, user}
	if !st.HashOnly {
		session[st.SortKey] = st.SessionKey("")[st.SortKey]
		user[st.SortKey] = &r.userSK
	}
	if st.withState {
		state := st.StateKey("", "")
		state[st.PartitionKey] = &r.statePK
		keys = append(keys, state)
	}
	r.in.RequestItems = map[string]types.KeysAndAttributes{st.table: {Keys: keys, ConsistentRead: consistent}}
	return r
}

// getSessionAndUser reads the session item under sessionPK and the user
// item under (userPK, userSK), the user's state item where it counts, and with
// withGlobal the global item, in one strongly consistent BatchGetItem: one
// round trip. The session is reported as getSession reports it.
func (st *store) getSessionAndUser(ctx context.Context, sessionPK, userPK, userSK string, withGlobal bool) (s item.Session, found bool, u userItems, err error) {
	read, ok := st.pairs.Get().(*pairRead)
	if !ok {
		read = st.newPairRead()
	}
	defer st.pairs.Put(read)
	read.sessionPK.Value, read.userPK.Value, read.userSK.Value = sessionPK, userPK, userSK
	if st.withState {
		read.statePK.Value = st.IndexPK(userPK, userSK)
	}
	in := &read.in
	if withGlobal {
		// Once per RevokeEveryoneWithin: a map of its own, not the pool's.
		keys := append(slices.Clone(in.RequestItems[st.table].Keys), st.GlobalKey())
		in = &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{st.table: {Keys: keys, ConsistentRead: consistent}}}
	}
	items, err := st.batchGet(ctx, in)
	if err != nil {
		return s, false, u, err
	}
	var sessionItem map[string]types.AttributeValue
	for _, av := range items {
		// The credential's user key never lies under the session or index
		// prefix, so the partition key tells the items apart.
		switch pk, _ := av[st.PartitionKey].(*types.AttributeValueMemberS); {
		case pk != nil && pk.Value == sessionPK:
			sessionItem = av
		case !st.withState && !withGlobal: // the hot path: nothing else to tell apart
			u.user = av
		default:
			st.sort(&u, av, userPK, userSK)
		}
	}
	u.globalRead = withGlobal
	s, found = st.decodeSession(ctx, sessionItem)
	return s, found, u, nil
}

// sort files an item read with the user (userPK, userSK) under what it
// is, by its partition key: the user's own key never lies under the
// session or index prefix.
func (st *store) sort(u *userItems, av map[string]types.AttributeValue, userPK, userSK string) {
	pk, _ := av[st.PartitionKey].(*types.AttributeValueMemberS)
	switch {
	case pk == nil:
	case pk.Value == st.IndexPK(userPK, userSK):
		u.state = av
	case pk.Value == st.GlobalPK():
		u.global = av
	default:
		u.user = av
	}
}

// decodeSession decodes a session item read from the table; false for none,
// or one in a format this release cannot read, which is logged.
func (st *store) decodeSession(ctx context.Context, av map[string]types.AttributeValue) (item.Session, bool) {
	if av == nil {
		return item.Session{}, false
	}
	s, err := st.Decode(av, item.KindSession)
	if err != nil {
		st.logger.WarnContext(ctx, "ddbsession: ignoring a session item in an unknown format", "err", err)
		return item.Session{}, false
	}
	return s, true
}

// getUser reads a user item and, as asked, the user's state item and the
// global item: one strongly consistent GetItem for the user alone, one
// BatchGetItem for more.
func (st *store) getUser(ctx context.Context, pk, sk string, withState, withGlobal bool) (u userItems, err error) {
	keys := []map[string]types.AttributeValue{st.Key(pk, sk)}
	if withState {
		keys = append(keys, st.StateKey(pk, sk))
	}
	if withGlobal {
		keys = append(keys, st.GlobalKey())
	}
	if len(keys) == 1 {
		u.user, err = st.get(ctx, keys[0])
	} else {
		var items []map[string]types.AttributeValue
		items, err = st.batchGet(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			st.table: {Keys: keys, ConsistentRead: consistent},
		}})
		for _, av := range items {
			st.sort(&u, av, pk, sk)
		}
	}
	if err != nil {
		return userItems{}, err
	}
	u.globalRead = withGlobal
	return u, nil
}

// getGlobal reads the global item; nil if there is none.
func (st *store) getGlobal(ctx context.Context) (map[string]types.AttributeValue, error) {
	return st.get(ctx, st.GlobalKey())
}

// revokeEveryone raises the global revocation generation by one.
func (st *store) revokeEveryone(ctx context.Context) error {
	taken, err := st.update(ctx, st.GlobalKey(), st.RevokeEveryone())
	if taken {
		err = fmt.Errorf("the global revocation item's key holds an item of another kind")
	}
	return err
}

// getState reads a user's state item (MREC); nil if there is none.
func (st *store) getState(ctx context.Context, userPK, userSK string) (map[string]types.AttributeValue, error) {
	return st.get(ctx, st.StateKey(userPK, userSK))
}

// raiseStateCutoff is raiseCutoff for a user's state item, which it
// creates if need be.
func (st *store) raiseStateCutoff(ctx context.Context, userPK, userSK string, ms int64) error {
	key := st.StateKey(userPK, userSK)
	failed, err := st.update(ctx, key, st.RaiseStateCutoff(ms))
	if failed {
		_, err = st.update(ctx, key, st.BumpStateCutoff())
	}
	return err
}

// recordEnd notes in the user's state item that session s stays ended
// until until (epoch seconds), reading the item and writing it back on the
// condition that no other end came between; a loser reads again.
func (st *store) recordEnd(ctx context.Context, s item.Session, until int64, now time.Time) error {
	for {
		av, err := st.getState(ctx, s.UserPK, s.UserSK)
		if err != nil {
			return err
		}
		state, err := item.DecodeState(av)
		if err != nil {
			return fmt.Errorf("the user's state item: %w", err)
		}
		lost, err := st.update(ctx, st.StateKey(s.UserPK, s.UserSK), st.End(state, s.ID, until, now))
		switch {
		case err != nil:
			return err
		case !lost:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

// createSession writes a new session: first its per-user index item, then
// the session item itself, which must not exist yet. The index goes first so
// that a session is never live without showing in List. If either write
// fails, the index item is deleted again as far as possible (a failed write
// may still have been applied, its answer lost), and its TTL removes it
// otherwise: a failed Login leaves nothing that List shows.
func (st *store) createSession(ctx context.Context, sessionPK string, s item.Session) error {
	if st.HashOnly {
		return st.putFresh(ctx, st.EncodeSession(sessionPK, s))
	}
	err := st.putFresh(ctx, st.EncodeIndex(sessionPK, s))
	if err == nil {
		err = st.putFresh(ctx, st.EncodeSession(sessionPK, s))
	}
	if err != nil {
		undo, cancel := detach(ctx)
		defer cancel()
		if _, uerr := st.delete(undo, st.IndexKey(s), false); uerr != nil {
			st.logger.ErrorContext(ctx, "ddbsession: undo session index item", "sid", s.ID, "err", uerr)
		}
	}
	return err
}

// createPending writes the session item of a login waiting for its second
// factor. It has no index item: List does not show it, and no session
// limit counts it.
func (st *store) createPending(ctx context.Context, sessionPK string, s item.Session) error {
	return st.putFresh(ctx, st.EncodeSession(sessionPK, s))
}

// takeAttempt counts one more second-factor attempt of the pending session
// under sessionPK, unless it is gone, expired at now, not pending, or has
// had max attempts, and returns it as counted: one UpdateItem, so that
// racing attempts never count as fewer than they are.
func (st *store) takeAttempt(ctx context.Context, sessionPK string, max int64, now time.Time) (item.Session, bool, error) {
	av, failed, err := st.updateReturning(ctx, st.SessionKey(sessionPK), st.TakeAttempt(max, now))
	if err != nil {
		return item.Session{}, false, err
	}
	if failed {
		return item.Session{}, false, nil
	}
	s, found := st.decodeSession(ctx, av)
	return s, found && s.Pending, nil
}

// putFresh writes a session's item, which must not exist: an item already
// under its key is an error, whether a collision or the SDK's retry of a
// put whose answer was lost meeting its own write. Login fails closed
// either way, and undoes what it wrote.
func (st *store) putFresh(ctx context.Context, av map[string]types.AttributeValue) error {
	taken, err := st.putNew(ctx, av)
	if err == nil && taken {
		err = st.named(errTaken)
	}
	return err
}

// errTaken is a put that found its key taken.
var errTaken = errors.New("an item with that key exists")

// readSession reads the session item under sessionPK for its deletion.
// present says whether there is one; s decodes it, but for one in a format
// this release cannot read, whose s has its SessionPK alone.
func (st *store) readSession(ctx context.Context, sessionPK string) (s item.Session, present bool, err error) {
	av, err := st.get(ctx, st.SessionKey(sessionPK))
	if err != nil {
		return s, false, err
	}
	if av == nil {
		return s, false, nil
	}
	if s, present = st.decodeSession(ctx, av); !present {
		s = item.Session{SessionPK: sessionPK}
	}
	return s, true, nil
}

// deleteSession deletes session s's item and, once it is gone, its index
// item. It returns the session item as the delete found it, or false if
// the delete found nothing.
//
// s is the caller's copy, read before: a session's index key never
// changes, so the copy names the index item. The delete's own answer
// cannot be relied on for it: it can be lost, the SDK retries the call,
// the retry finds nothing, and the index item would linger in List with
// nothing logged. A copy without an ID (an item of a format this release
// cannot read) leaves the index item to the delete's answer. Once the
// session item is gone its token is dead, so a failure to delete the index
// item is only logged: it lingers in List until TTL or a Revoke removes it.
func (st *store) deleteSession(ctx context.Context, s item.Session) (item.Session, bool, error) {
	old, err := st.delete(ctx, st.SessionKey(s.SessionPK), true)
	if err != nil {
		return item.Session{}, false, err
	}
	deleted, err := st.Decode(old, item.KindSession)
	found := err == nil
	if s.ID == "" && found {
		s = deleted
	}
	if st.HashOnly || s.ID == "" || s.Pending { // a pending session has no index item
		return deleted, found, nil
	}
	if _, err := st.delete(ctx, st.IndexKey(s), false); err != nil {
		st.logger.ErrorContext(ctx, "ddbsession: delete session index item", "sid", s.ID, "err", err)
	}
	return deleted, found, nil
}

// deleteIndex deletes session s's index item, where nothing else is left
// of the session.
func (st *store) deleteIndex(ctx context.Context, s item.Session) error {
	_, err := st.delete(ctx, st.IndexKey(s), false)
	return err
}

// refreshSession writes next's expiry over old's, unless the session was
// deleted, expired or refreshed meanwhile (see item.Layout.Refresh): then
// it returns errRefreshLost.
func (st *store) refreshSession(ctx context.Context, sessionPK string, old, next item.Session, now time.Time) error {
	lost, err := st.update(ctx, st.SessionKey(sessionPK), st.Refresh(old, next, now))
	if lost {
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
	missing, err := st.update(ctx, st.IndexKey(next), st.RefreshIndex(next))
	if !missing {
		return err
	}
	if _, err := st.putNew(ctx, st.EncodeIndex(sessionPK, next)); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	if _, live, err := st.getSession(ctx, sessionPK); err != nil || live {
		return err
	}
	return st.deleteIndex(ctx, next)
}

// createUser writes a new user item av with its cutoff at ms, unless an
// item with its key exists: then it reports false.
func (st *store) createUser(ctx context.Context, av map[string]types.AttributeValue, ms int64) (created bool, err error) {
	av[st.VersionAttribute] = item.Num(ms)
	taken, err := st.putNew(ctx, av)
	return !taken && err == nil, err
}

// raiseCutoff moves a user item's sessions version forward to ms
// (epoch milliseconds), or, if it is already there or later, by one
// millisecond: it never moves back, and each call ends the sessions created
// up to it even where a clock lags the cutoff. It reports false if the user
// has no item.
func (st *store) raiseCutoff(ctx context.Context, userPK, userSK string, ms int64) (found bool, err error) {
	key := st.Key(userPK, userSK)
	failed, err := st.update(ctx, key, st.RaiseCutoff(ms))
	if !failed {
		return err == nil, err
	}
	// Either the user is missing, or a cutoff at or after ms is in place.
	failed, err = st.update(ctx, key, st.BumpCutoff())
	return !failed && err == nil, err
}

// getIndex reads the index item of session id in a user's own index
// partition; false if there is none, or none it can read.
func (st *store) getIndex(ctx context.Context, userPK, userSK, id string) (item.Session, bool, error) {
	av, err := st.get(ctx, st.IndexKeyOf(userPK, userSK, id))
	if err != nil || av == nil {
		return item.Session{}, false, err
	}
	s, err := st.Decode(av, item.KindIndex)
	return s, err == nil, nil
}

// queryIndex reads a user's sessions created at or after from, newest
// first, with a strongly consistent Query of the user's index partition.
// The sort key starts with the creation time, so sessions before from are
// not read at all. Expired items cost the read but are not sent back.
func (st *store) queryIndex(ctx context.Context, userPK, userSK string, from, now time.Time) ([]item.Session, error) {
	return st.query(ctx, item.KindIndex, &dynamodb.QueryInput{
		ConsistentRead:           consistent,
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :from AND :end"),
		FilterExpression:         aws.String("#ttl > :now"),
		ScanIndexForward:         aws.Bool(false),
		ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey, "#sk": st.SortKey, "#ttl": st.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":   item.Str(st.IndexPK(userPK, userSK)),
			":from": item.Str(item.IndexSortFrom(from)),
			":end":  item.Str(item.IndexSortEnd),
			":now":  item.Num(now.Unix()),
		},
	})
}
