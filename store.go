package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// store is every write of the library's items, and the reads that serve a
// write rather than decide whether a session stands (those are
// internal/decide's): one method per operation, in terms of the item format
// of internal/item, making its calls through calls.go. Every call runs under
// the caller's context and its one deadline.
//
// Sessions:
//
//	createSession   the index item and the session item of a login
//	createPending   the session item of a login waiting for its second factor
//	takeTry         count one second-factor try of a pending session
//	readSession     a session item, to end it
//	getSession      a session item, to learn whether a write landed
//	deleteSession   a session item and its index item
//	voidSession     a void over a session's key, and its index item gone
//	deleteIndex     a session's index item alone
//	refreshSession  slide a session's expiry
//	getIndex        a session's index item, by its public ID
//	queryIndex      a user's index items
//	putEnd          a session's end record (MREC)
//
// Users and the table:
//
//	createUser      a new user item, with its first sessions version
//	undoUser        a user item createUser made, when what follows failed
//	forgetFormerUser the history and devices a former user of the key left
//	changeVersion   end a user's sessions: their user item's version
//	changeRevocation end a user's sessions (MREC): their revocation item's version
//	revokeEveryone  end every session: the global generation
//
// A user's security history (history.go):
//
//	putHistory      an event
//	countFailed     a failed sign-in, in its hour's item
//	countNone       countFailed's write, refused: an unknown user's
//	queryHistory    a page of events
//	seeDevice       a device a user signs in from, and whether it is new
//	forgetDevice    the record of a new device whose sign-in failed
//	knowsDevice     whether a user signed in from a device
//
// The package uses no transactions (dynalite, a test engine, has no
// TransactWriteItems): writes that touch two items are ordered so that a
// failure in between leaves nothing live that should not be.
type store struct {
	calls
	logger *slog.Logger
}

func newStore(client Client, table string, layout item.Layout, logger *slog.Logger) *store {
	return &store{calls: newCalls(client, table, layout), logger: logger}
}

// Failed conditions that callers act on.
var (
	// errRefreshLost is the refresh write's failed condition: the session
	// was deleted, expired, or refreshed by a concurrent request meanwhile.
	errRefreshLost = errors.New("session changed before its refresh")
	// errChallengeUsed is a device binding write's failed condition: the
	// challenge it answers was used, replaced or expired meanwhile, or the
	// session changed (bound already, or gone).
	errChallengeUsed = errors.New("challenge used or session changed")
	// errTaken is a put that found its key taken.
	errTaken = errors.New("an item with that key exists")
)

// detach keeps ctx's deadline but drops its cancellation, for calls that
// must not be lost to a client that hangs up (Login's undo, a device
// binding's check of a write whose answer was lost) and must still end
// within the request's one bound.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// createSession writes a new session: first its per-user index item, and
// beside it whatever alongside does (a session limit's evictions), then the
// session item itself, which must not exist yet. The index goes first so
// that a session is never live without showing in List. It works under
// work, a context that leaves time for the undo before ctx's deadline
// (core.workContext): if any of it fails, a void goes over the session's
// key (see voidSession), kept until voidUntil, and its index item goes, as
// far as possible. A write that fails may still have been applied, its
// answer lost, or be on its way in a retry: the void stops both, so a
// failed login leaves no session that lives, none that List shows, and no
// slot that a session limit counts.
func (st *store) createSession(ctx, work context.Context, sessionPK string, s item.Session, indexTTL, voidUntil time.Time, alongside func() error) error {
	s.SessionPK = sessionPK
	var err error
	if st.HashOnly {
		if err = alongside(); err == nil {
			err = st.putFresh(work, st.EncodeSession(sessionPK, s))
		}
	} else {
		index := s
		index.ExpiresAt = indexTTL
		var indexErr, alongErr error
		var wg sync.WaitGroup
		wg.Go(func() { indexErr = st.putFresh(work, st.EncodeIndex(sessionPK, index)) })
		wg.Go(func() { alongErr = alongside() })
		wg.Wait()
		if err = errors.Join(indexErr, alongErr); err == nil {
			err = st.putFresh(work, st.EncodeSession(sessionPK, s))
		}
	}
	if err != nil {
		st.undoSession(ctx, s, voidUntil)
	}
	return err
}

// undoSession undoes a failed createSession of s, side by side and
// within ctx's deadline: it puts a void over the session's key, and
// deletes its index item. A failure is logged: the void stops a write on
// its way, and an index item without its session is no session List shows
// (see list).
func (st *store) undoSession(ctx context.Context, s item.Session, voidUntil time.Time) {
	ctx, cancel := detach(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, _, err := st.putOver(ctx, st.EncodeVoid(s.SessionPK, voidUntil), st.VoidOver()); err != nil {
			st.logger.ErrorContext(ctx, "ddbsession: undo a failed login: void its session's key", "sid", s.ID, "err", err)
		}
	})
	if !st.HashOnly {
		wg.Go(func() {
			if err := st.deleteIndex(ctx, s); err != nil {
				st.logger.ErrorContext(ctx, "ddbsession: undo a failed login: delete its index item", "sid", s.ID, "err", err)
			}
		})
	}
	wg.Wait()
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
	items, err := st.reads.BatchGet(ctx, keys)
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

// getSession reads the session item under sessionPK, for a write that
// needs to know whether it landed. It reports false, with no error, for a
// missing item or one it cannot read.
func (st *store) getSession(ctx context.Context, sessionPK string) (item.Session, bool, error) {
	av, err := st.get(ctx, st.SessionKey(sessionPK))
	if err != nil {
		return item.Session{}, false, err
	}
	s, found := st.decodeSession(ctx, av)
	return s, found, nil
}

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

// deleteData deletes the data item of revision rev of the session under
// sessionPK: one that its session no longer names. A failure is only
// logged: no one reads it, and its TTL removes it.
func (st *store) deleteData(ctx context.Context, sessionPK string, rev int64) {
	if _, err := st.delete(ctx, st.DataKey(sessionPK, rev), false); err != nil {
		st.logger.ErrorContext(ctx, "ddbsession: delete a session's data item", "err", err)
	}
}

// voidSession puts a void (see item.EncodeVoid) over session s's item, or
// where no item is, kept until until, and deletes its index item as
// deleteSession does. It returns the session item as the void found it, or
// false if it found none. Unlike a delete, the void stops a write of the
// session still on its way, which needs the key free: a login's whose slot
// a session limit took, or the SDK's retry of one whose answer was lost.
// s may be known by its key alone (SessionPK).
func (st *store) voidSession(ctx context.Context, s item.Session, until time.Time) (item.Session, bool, error) {
	// Refused: a void is there already (this one's, its answer lost), or
	// an item that is no session.
	old, refused, err := st.putOver(ctx, st.EncodeVoid(s.SessionPK, until), st.VoidOver())
	if err != nil {
		return item.Session{}, false, err
	}
	var voided item.Session
	found := false
	if !refused {
		voided, err = st.Decode(old, item.KindSession)
		found = err == nil
	}
	if s.ID == "" && found {
		s = voided
	}
	if s.ID != "" && !s.Pending && !st.HashOnly {
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

// putEnd writes session s's end record (MREC), which TTL removes at until.
// Of two ends of one session, either is as good as the other.
func (st *store) putEnd(ctx context.Context, s item.Session, until time.Time) error {
	return st.put(ctx, st.EncodeEnd(s.SessionPK, s.ID, until))
}

// createUser writes a new user item av with a first sessions version of
// its own (item.NewVersion), unless an item with its key exists: then it
// reports false.
func (st *store) createUser(ctx context.Context, av map[string]types.AttributeValue) (created bool, err error) {
	av[st.VersionAttribute] = item.Num(item.NewVersion())
	taken, err := st.putNew(ctx, av)
	return !taken && err == nil, err
}

// undoUser deletes the user item av that createUser wrote, unless its
// sessions version changed since (a RevokeAll; no other CreateUser could
// give it that random one); a failure is logged.
func (st *store) undoUser(ctx context.Context, av map[string]types.AttributeValue) {
	w := item.Writes{Condition: "#v = :v", Names: map[string]string{"#v": st.VersionAttribute}, Values: map[string]types.AttributeValue{":v": av[st.VersionAttribute]}}
	if _, err := st.deleteIf(ctx, st.Key(attrS(av, st.PartitionKey), attrS(av, st.SortKey)), w); err != nil {
		st.logger.ErrorContext(ctx, "ddbsession: undo a user item whose creation failed", "err", err)
	}
}

// forgetFormerUser has the user made at now under user's key inherit
// nothing that a former user of the key left in its index partition, which
// TTL keeps for months: it deletes their history and device items, written
// before now (a login of the new user's may race this). One Query, which
// finds nothing for a key never used, and a DeleteItem each.
func (st *store) forgetFormerUser(ctx context.Context, user UserKey, now time.Time) error {
	in := &dynamodb.QueryInput{
		TableName:                &st.table,
		ConsistentRead:           consistent,
		KeyConditionExpression:   aws.String("#pk = :pk"),
		FilterExpression:         aws.String("#kind IN (:history, :device)"),
		ProjectionExpression:     aws.String("#pk, #sk, #kind"),
		ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey, "#sk": st.SortKey, "#kind": item.AttrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": item.Str(st.IndexPK(user.PK, user.SK)), ":history": item.Str(item.KindHistory), ":device": item.Str(item.KindDevice),
		},
	}
	for {
		out, err := st.client.Query(ctx, in)
		if err != nil {
			return st.named(err)
		}
		for _, av := range out.Items {
			key := st.Key(attrS(av, st.PartitionKey), attrS(av, st.SortKey))
			if _, err := st.deleteIf(ctx, key, st.WrittenBefore(attrS(av, item.AttrKind), now)); err != nil {
				return err
			}
		}
		if in.ExclusiveStartKey = out.LastEvaluatedKey; len(in.ExclusiveStartKey) == 0 {
			return nil
		}
	}
}

// changeVersion changes a user item's sessions version, which ends every
// session made before: by a random step (one write), or, for a user item
// the app wrote without one, to a first version. It reports false if the
// user has no item.
func (st *store) changeVersion(ctx context.Context, userPK, userSK string, at time.Time) (found bool, err error) {
	key := st.Key(userPK, userSK)
	for _, w := range []item.Writes{st.ChangeVersion(at), st.StartVersion(at), st.ChangeVersion(at)} {
		// The third write is for a racing call that started the version
		// between this one's first and second.
		failed, err := st.update(ctx, key, w)
		if !failed || err != nil {
			return err == nil, err
		}
	}
	return false, nil
}

// changeRevocation changes a user's revocation item's version (MREC),
// which it creates if need be, by a random step, recording a revocation at
// at unless zero.
func (st *store) changeRevocation(ctx context.Context, userPK, userSK string, at time.Time) error {
	taken, err := st.update(ctx, st.RevocationKey(userPK, userSK), st.ChangeRevocation(at))
	if taken {
		err = fmt.Errorf("the user's revocation item's key holds an item of another kind")
	}
	return err
}

// revokeEveryone changes the global revocation generation, at now.
func (st *store) revokeEveryone(ctx context.Context, now time.Time) error {
	taken, err := st.update(ctx, st.GlobalKey(), st.RevokeEveryone(now))
	if taken {
		err = fmt.Errorf("the global revocation item's key holds an item of another kind")
	}
	return err
}

// putHistory writes event e into user's history.
func (st *store) putHistory(ctx context.Context, user UserKey, e item.HistoryEntry) error {
	return st.put(ctx, st.EncodeHistory(user.PK, user.SK, e))
}

// countFailed counts failed sign-in e in user's history.
func (st *store) countFailed(ctx context.Context, user UserKey, e item.HistoryEntry) error {
	key, w := st.CountFailed(user.PK, user.SK, e)
	taken, err := st.update(ctx, key, w)
	if taken {
		err = errors.New("a failed sign-in's history item's key holds an item of another kind")
	}
	return err
}

// countNone makes countFailed's write on a condition that never holds:
// it writes nothing, at the cost of a write (a refused one is billed too).
func (st *store) countNone(ctx context.Context, user UserKey, e item.HistoryEntry) error {
	key, w := st.CountFailed(user.PK, user.SK, e)
	w.Condition = "attribute_exists(#kind) AND attribute_not_exists(#kind)"
	refused, err := st.update(ctx, key, w)
	if err == nil && !refused {
		err = errors.New("a write on a condition that never holds was made")
	}
	return err
}

// seeDevice reports whether user has no live record of the device whose
// ID has digest, and if so records it, first seen at now, until expires:
// one strongly consistent read, and for a new device one conditional
// write, which of racing first sign-ins from one device one makes.
func (st *store) seeDevice(ctx context.Context, user UserKey, digest string, now, expires time.Time) (bool, error) {
	known, err := st.knowsDevice(ctx, user, digest, now)
	if err != nil || known {
		return false, err
	}
	_, raced, err := st.putOver(ctx, st.EncodeDevice(user.PK, user.SK, digest, now, expires), st.DeviceOver(now))
	return err == nil && !raced, err
}

// forgetDevice deletes the record seeDevice made at now, unless a later
// sign-in wrote over it, so that the device is new again; a failure is
// logged, and the device stays known.
func (st *store) forgetDevice(ctx context.Context, user UserKey, digest string, now time.Time) {
	if _, err := st.deleteIf(ctx, st.DeviceKey(user.PK, user.SK, digest), st.DeviceWrittenAt(now)); err != nil {
		st.logger.ErrorContext(ctx, "ddbsession: forget the new device of a failed sign-in", "err", err)
	}
}

// knowsDevice reports whether user has a live record of the device whose
// ID has digest, with one strongly consistent read.
func (st *store) knowsDevice(ctx context.Context, user UserKey, digest string, now time.Time) (bool, error) {
	av, err := st.get(ctx, st.DeviceKey(user.PK, user.SK, digest))
	if err != nil || av == nil {
		return false, err
	}
	expires, err := st.DeviceExpires(av)
	return err == nil && expires.After(now), nil
}

// queryHistory reads up to n of user's history items after cursor (""
// for the newest), newest first, with a strongly consistent Query; next is
// the cursor where it stopped, "" at the end. Items past their TTL cost
// the read but are not sent back, nor are items this release cannot read.
// A Query that found none but expired items goes on, up to
// emptyQueries in all, so that a table where TTL runs late or not at all
// (sweep's) does not hand out empty pages.
func (st *store) queryHistory(ctx context.Context, user UserKey, cursor string, n int32, now time.Time) (page []item.HistoryEntry, next string, err error) {
	in := &dynamodb.QueryInput{
		TableName:                &st.table,
		ConsistentRead:           consistent,
		Limit:                    &n,
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		FilterExpression:         aws.String("#ttl > :now"),
		ScanIndexForward:         aws.Bool(false),
		ExpressionAttributeNames: map[string]string{"#pk": st.PartitionKey, "#sk": st.SortKey, "#ttl": st.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":     item.Str(st.IndexPK(user.PK, user.SK)),
			":prefix": item.Str(item.HistorySort),
			":now":    item.Num(now.Unix()),
		},
	}
	next = cursor
	for range emptyQueries {
		if next != "" {
			in.ExclusiveStartKey = st.HistoryKey(user.PK, user.SK, next)
		}
		out, err := st.client.Query(ctx, in)
		if err != nil {
			return nil, "", st.named(err)
		}
		next = ""
		if last, ok := out.LastEvaluatedKey[st.SortKey].(*types.AttributeValueMemberS); ok {
			next = strings.TrimPrefix(last.Value, item.HistorySort)
		}
		for _, av := range out.Items {
			e, err := st.DecodeHistory(av)
			if err != nil {
				st.logger.WarnContext(ctx, "ddbsession: ignoring a history item in an unknown format", "err", err)
				continue
			}
			page = append(page, e)
		}
		if len(page) > 0 || next == "" {
			break
		}
	}
	return page, next, nil
}

// emptyQueries is how many Queries a page of the history makes at most
// while it finds no live event.
const emptyQueries = 4

// decodeSession decodes a session item read from the table; false for none,
// a void, or one in a format this release cannot read, which is logged.
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

// sameKey reports whether item av is under key.
func (st *store) sameKey(av, key map[string]types.AttributeValue) bool {
	return attrS(av, st.PartitionKey) == attrS(key, st.PartitionKey) && (st.HashOnly || attrS(av, st.SortKey) == attrS(key, st.SortKey))
}

// attrS is av's String attribute name, or "".
func attrS(av map[string]types.AttributeValue, name string) string {
	if s, ok := av[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
