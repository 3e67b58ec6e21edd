package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file holds what each read and write of an item is: the session and
// its index item, the user and the library's items beside the user's
// sessions (see internal/item's state.go), the global item. Each goes
// through the calls of store.go, which this file names in terms of the item
// format of internal/item.

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

// getSessionEnded reads the session item under sessionPK as getSession
// does, and in MREC its end record with it, in one BatchGetItem.
func (st *store) getSessionEnded(ctx context.Context, sessionPK string) (s item.Session, found bool, ended map[string]types.AttributeValue, err error) {
	if !st.MREC {
		s, found, err = st.getSession(ctx, sessionPK)
		return s, found, nil, err
	}
	items, err := st.batchGet(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		st.table: {Keys: []map[string]types.AttributeValue{st.SessionKey(sessionPK), st.EndKey(sessionPK)}, ConsistentRead: consistent},
	}})
	if err != nil {
		return s, false, nil, err
	}
	var session map[string]types.AttributeValue
	for _, av := range items {
		if st.sameKey(av, st.EndKey(sessionPK)) {
			ended = av
		} else {
			session = av
		}
	}
	s, found = st.decodeSession(ctx, session)
	return s, found, ended, nil
}

// userItems are what a read of a session's user brings: the user item and,
// as asked, the user's revocation item (MREC), slots item (a login under a
// session limit), the table's global item, and the read session's end
// record (MREC); nil for one that is not there or was not asked for.
type userItems struct {
	user, revocation, slots, global, end map[string]types.AttributeValue
	globalRead                           bool // the global item was asked for
}

// pairRead is the hot path's BatchGetItem input, built once and reused
// through store.pairs: a request sets its key values, so that the read
// builds no maps. The SDK only reads an input, and is done with it when the
// call returns.
type pairRead struct {
	in                                             dynamodb.BatchGetItemInput
	sessionPK, userPK, userSK, endPK, revocationPK types.AttributeValueMemberS
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
	if st.MREC {
		end := st.EndKey("")
		end[st.PartitionKey] = &r.endPK
		revocation := st.RevocationKey("", "")
		revocation[st.PartitionKey] = &r.revocationPK
		keys = append(keys, end, revocation)
	}
	r.in.RequestItems = map[string]types.KeysAndAttributes{st.table: {Keys: keys, ConsistentRead: consistent}}
	return r
}

// getSessionAndUser reads the session item under sessionPK and the user
// item under (userPK, userSK), in MREC the session's end record and the
// user's revocation item, and with withGlobal the global item, in one
// strongly consistent BatchGetItem: one round trip. The session is reported
// as getSession reports it.
func (st *store) getSessionAndUser(ctx context.Context, sessionPK, userPK, userSK string, withGlobal bool) (s item.Session, found bool, u userItems, err error) {
	read, ok := st.pairs.Get().(*pairRead)
	if !ok {
		read = st.newPairRead()
	}
	defer st.pairs.Put(read)
	read.sessionPK.Value, read.userPK.Value, read.userSK.Value = sessionPK, userPK, userSK
	if st.MREC {
		read.endPK.Value = attrS(st.EndKey(sessionPK), st.PartitionKey)
		read.revocationPK.Value = st.IndexPK(userPK, userSK)
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
		if !st.MREC && !withGlobal { // the hot path: the session's partition key tells the two apart
			if attrS(av, st.PartitionKey) == sessionPK {
				sessionItem = av
			} else {
				u.user = av
			}
			continue
		}
		if st.sort(&u, av, sessionPK, userPK, userSK) {
			sessionItem = av
		}
	}
	u.globalRead = withGlobal
	s, found = st.decodeSession(ctx, sessionItem)
	return s, found, u, nil
}

// sort files an item read with the user (userPK, userSK), and the session
// under sessionPK if any, under what it is, by its key.
func (st *store) sort(u *userItems, av map[string]types.AttributeValue, sessionPK, userPK, userSK string) (session bool) {
	switch {
	case sessionPK != "" && st.sameKey(av, st.SessionKey(sessionPK)):
		return true
	case sessionPK != "" && st.sameKey(av, st.EndKey(sessionPK)):
		u.end = av
	case st.sameKey(av, st.Key(userPK, userSK)):
		u.user = av
	case st.sameKey(av, st.RevocationKey(userPK, userSK)):
		u.revocation = av
	case st.sameKey(av, st.SlotsKey(userPK, userSK)):
		u.slots = av
	case st.sameKey(av, st.GlobalKey()):
		u.global = av
	}
	return false
}

// sameKey reports whether item av is under key.
func (st *store) sameKey(av, key map[string]types.AttributeValue) bool {
	return attrS(av, st.PartitionKey) == attrS(key, st.PartitionKey) && (st.HashOnly || attrS(av, st.SortKey) == attrS(key, st.SortKey))
}

// batchGetMany reads the items under keys with strongly consistent
// BatchGetItems of at most 100 keys each, side by side: one round trip.
func (st *store) batchGetMany(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	const perCall = 100 // BatchGetItem's limit
	var chunks [][]map[string]types.AttributeValue
	for len(keys) > 0 {
		n := min(len(keys), perCall)
		chunks, keys = append(chunks, keys[:n]), keys[n:]
	}
	found := make([][]map[string]types.AttributeValue, len(chunks))
	errs := make([]error, len(chunks))
	var wg sync.WaitGroup
	for i, chunk := range chunks {
		wg.Go(func() {
			found[i], errs[i] = st.batchGet(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				st.table: {Keys: chunk, ConsistentRead: consistent},
			}})
		})
	}
	wg.Wait()
	return slices.Concat(found...), errors.Join(errs...)
}

// sessionPKOfEnd is the partition key of the session whose end record is
// av.
func (st *store) sessionPKOfEnd(av map[string]types.AttributeValue) string {
	return strings.TrimSuffix(attrS(av, st.PartitionKey), "#ENDED")
}

// attrS is av's String attribute name, or "".
func attrS(av map[string]types.AttributeValue, name string) string {
	if s, ok := av[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// decodeSession decodes a session item read from the table; false for none,
// or one in a format this release cannot read, which is logged.
func (st *store) decodeSession(ctx context.Context, av map[string]types.AttributeValue) (item.Session, bool) {
	if av == nil || attrS(av, item.AttrKind) == item.KindVoid { // a void is no session
		return item.Session{}, false
	}
	s, err := st.Decode(av, item.KindSession)
	if err != nil {
		st.logger.WarnContext(ctx, "ddbsession: ignoring a session item in an unknown format", "err", err)
		return item.Session{}, false
	}
	return s, true
}

// userKeys are the keys of a user item and, as asked, the user's slots
// item and the global item, and in MREC the user's revocation item.
func (st *store) userKeys(pk, sk string, withSlots, withGlobal bool) []map[string]types.AttributeValue {
	keys := []map[string]types.AttributeValue{st.Key(pk, sk)}
	if st.MREC {
		keys = append(keys, st.RevocationKey(pk, sk))
	}
	return append(keys, st.besideKeys(pk, sk, withSlots, withGlobal)...)
}

// besideKeys are the keys of the items read beside a user, as asked: the
// user's slots item and the global item.
func (st *store) besideKeys(pk, sk string, withSlots, withGlobal bool) []map[string]types.AttributeValue {
	var keys []map[string]types.AttributeValue
	if withSlots {
		keys = append(keys, st.SlotsKey(pk, sk))
	}
	if withGlobal {
		keys = append(keys, st.GlobalKey())
	}
	return keys
}

// getUser reads the items of userKeys: one strongly consistent GetItem for
// the user alone, one BatchGetItem for more.
func (st *store) getUser(ctx context.Context, pk, sk string, withSlots, withGlobal bool) (userItems, error) {
	return st.getItems(ctx, pk, sk, st.userKeys(pk, sk, withSlots, withGlobal), withGlobal)
}

// getBeside reads the items of besideKeys alone, for a user whose item is
// the app's to read (Config.LoadUser).
func (st *store) getBeside(ctx context.Context, pk, sk string, withSlots, withGlobal bool) (userItems, error) {
	return st.getItems(ctx, pk, sk, st.besideKeys(pk, sk, withSlots, withGlobal), withGlobal)
}

// getItems reads the items under keys of user pk, sk, strongly
// consistently, in one GetItem or one BatchGetItem.
func (st *store) getItems(ctx context.Context, pk, sk string, keys []map[string]types.AttributeValue, withGlobal bool) (u userItems, err error) {
	var items []map[string]types.AttributeValue
	switch len(keys) {
	case 0:
	case 1:
		var av map[string]types.AttributeValue
		if av, err = st.get(ctx, keys[0]); av != nil {
			items = append(items, av)
		}
	default:
		items, err = st.batchGet(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			st.table: {Keys: keys, ConsistentRead: consistent},
		}})
	}
	if err != nil {
		return userItems{}, err
	}
	for _, av := range items {
		st.sort(&u, av, "", pk, sk)
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

// raiseRevocation changes a user's revocation item's version (MREC), which
// it creates if need be: to ms, or one on from where it is.
func (st *store) raiseRevocation(ctx context.Context, userPK, userSK string, ms int64) error {
	key := st.RevocationKey(userPK, userSK)
	failed, err := st.update(ctx, key, st.RaiseRevocation(ms))
	if failed {
		_, err = st.update(ctx, key, st.BumpRevocation())
	}
	return err
}

// putEnd writes session s's end record (MREC), which TTL removes at until.
// Of two ends of one session, either is as good as the other.
func (st *store) putEnd(ctx context.Context, s item.Session, until time.Time) error {
	_, err := st.put(ctx, st.EncodeEnd(s.SessionPK, s.ID, until))
	return err
}

// createSession writes a new session: first its per-user index item, and
// beside it whatever alongside does (a session limit's evictions), then the
// session item itself, which must not exist yet. The index goes first so
// that a session is never live without showing in List. If any of it
// fails, the index item is deleted again as far as possible (a failed write
// may still have been applied, its answer lost), on a deadline of its own
// if the call's has passed: a failed Login leaves nothing that List shows.
// The index item expires with the session's absolute lifetime, indexTTL:
// List reads the session items themselves, so a refresh leaves it alone.
func (st *store) createSession(ctx context.Context, sessionPK string, s item.Session, indexTTL time.Time, alongside func() error, undoTimeout time.Duration) error {
	if st.HashOnly {
		if err := alongside(); err != nil {
			return err
		}
		return st.putFresh(ctx, st.EncodeSession(sessionPK, s))
	}
	index := s
	index.ExpiresAt = indexTTL
	var indexErr, alongErr error
	var wg sync.WaitGroup
	wg.Go(func() { indexErr = st.putFresh(ctx, st.EncodeIndex(sessionPK, index)) })
	wg.Go(func() { alongErr = alongside() })
	wg.Wait()
	err := errors.Join(indexErr, alongErr)
	if err == nil {
		err = st.putFresh(ctx, st.EncodeSession(sessionPK, s))
	}
	if err != nil {
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
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

// takeTry counts one more second-factor try of the pending session under
// sessionPK, if it is there, pending and unexpired at now and has had
// fewer than max tries: it reads the session and its tries' records in one
// BatchGetItem, and writes the record of the next try, which must not
// exist yet, so that racing tries never count as fewer than they are. It
// returns the pending session and the try's number, or false.
func (st *store) takeTry(ctx context.Context, sessionPK string, max int, now time.Time) (item.Session, int, bool, error) {
	keys := []map[string]types.AttributeValue{st.SessionKey(sessionPK)}
	for n := 1; n <= max; n++ {
		keys = append(keys, st.TryKey(sessionPK, n))
	}
	items, err := st.batchGet(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		st.table: {Keys: keys, ConsistentRead: consistent},
	}})
	if err != nil {
		return item.Session{}, 0, false, err
	}
	var p item.Session
	found := false
	taken := map[int]bool{}
	for _, av := range items {
		for n := 1; n <= max; n++ {
			if st.sameKey(av, st.TryKey(sessionPK, n)) {
				taken[n] = true
			}
		}
		if st.sameKey(av, st.SessionKey(sessionPK)) {
			p, found = st.decodeSession(ctx, av)
		}
	}
	if !found || !p.Pending || !p.ExpiresAt.After(now) {
		return item.Session{}, 0, false, nil
	}
	for n := 1; n <= max; n++ {
		if taken[n] {
			continue
		}
		taken, err := st.putNew(ctx, st.EncodeTry(sessionPK, n, p.ExpiresAt))
		switch {
		case err != nil:
			return item.Session{}, 0, false, err
		case !taken:
			return p, n, true, nil
		}
		// A racing try took n: the next one, then.
	}
	return item.Session{}, 0, false, nil
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
	if av == nil || attrS(av, item.AttrKind) == item.KindVoid { // a void stays
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

// voidSession puts a void (see item.EncodeVoid) over session s's item, or
// where no item is, kept until until, and deletes its index item as
// deleteSession does. It returns the session item as the void found it, or
// false if it found none. Unlike a delete, the void stops a write of the
// session still on its way, which needs the key free: a login's whose slot
// a session limit took, or the SDK's retry of one whose answer was lost.
// s may be known by its key alone (SessionPK).
func (st *store) voidSession(ctx context.Context, s item.Session, until time.Time) (item.Session, bool, error) {
	var out *dynamodb.PutItemOutput
	err := retryConflicts(ctx, func() (err error) {
		out, err = st.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 &st.table,
			Item:                      st.EncodeVoid(s.SessionPK, until),
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #kind = :session"),
			ExpressionAttributeNames:  map[string]string{"#pk": st.PartitionKey, "#kind": item.AttrKind},
			ExpressionAttributeValues: map[string]types.AttributeValue{":session": item.Str(item.KindSession)},
			ReturnValues:              types.ReturnValueAllOld,
		})
		return err
	})
	// Refused: a void is there already (this one's, its answer lost), or
	// an item that is no session.
	refused, err := st.failed(err)
	if err != nil {
		return item.Session{}, false, err
	}
	var voided item.Session
	found := false
	if !refused {
		voided, err = st.Decode(out.Attributes, item.KindSession)
		found = err == nil
	}
	if s.ID == "" && found {
		s = voided
	}
	if s.ID != "" && !s.Pending {
		if _, err := st.delete(ctx, st.IndexKey(s), false); err != nil {
			st.logger.ErrorContext(ctx, "ddbsession: delete session index item", "sid", s.ID, "err", err)
		}
	}
	return voided, found, nil
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

// createUser writes a new user item av with its sessions version at
// version, unless an item with its key exists: then it reports false.
func (st *store) createUser(ctx context.Context, av map[string]types.AttributeValue, version int64) (created bool, err error) {
	av[st.VersionAttribute] = item.Num(version)
	taken, err := st.putNew(ctx, av)
	return !taken && err == nil, err
}

// bumpVersion changes a user item's sessions version: one on, the one
// write it takes for a user of CreateUser, or, for a user item the app wrote
// without one, to ms. It never moves back, and each call ends the sessions
// created up to it. It reports false if the user has no item.
func (st *store) bumpVersion(ctx context.Context, userPK, userSK string, ms int64) (found bool, err error) {
	key := st.Key(userPK, userSK)
	for _, w := range []item.Writes{st.BumpVersion(), st.StartVersion(ms), st.BumpVersion()} {
		// The third write is for a racing call that started the version
		// between this one's first and second.
		failed, err := st.update(ctx, key, w)
		if !failed || err != nil {
			return err == nil, err
		}
	}
	return false, nil
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

// queryIndex reads a user's index items, newest first, with a strongly
// consistent Query of the user's index partition. Items past the sessions'
// absolute lifetime cost the read but are not sent back.
func (st *store) queryIndex(ctx context.Context, userPK, userSK string, now time.Time) ([]item.Session, error) {
	return st.query(ctx, item.KindIndex, &dynamodb.QueryInput{
		ConsistentRead:           consistent,
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		FilterExpression:         aws.String("#ttl > :now"),
		ScanIndexForward:         aws.Bool(false),
		ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey, "#sk": st.SortKey, "#ttl": st.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":     item.Str(st.IndexPK(userPK, userSK)),
			":prefix": item.Str(item.IndexSort),
			":now":    item.Num(now.Unix()),
		},
	})
}
