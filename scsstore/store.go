package scsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/ddbitem"
)

// Store keeps scs sessions in DynamoDB. It implements scs.Store and
// scs.CtxStore; scs uses the context methods, with the request's context.
// It is safe for concurrent use, and any number of instances may share a
// table.
type Store struct {
	client   Client
	items    itemLayout
	interval int64 // MinCommitInterval in seconds
	codec    scs.Codec
	now      func() time.Time
	records  *records
	users    *ddbitem.Reader         // reads what decides a signed-in session
	decoder  *attributevalue.Decoder // decodes user items into the app's type
}

var _ scs.CtxStore = (*Store)(nil)

// tombstoneLife is how long a deleted session's tombstone stays, at least,
// before TTL removes it: far longer than any request that loaded the
// session before the delete can take to commit it.
const tombstoneLife = time.Hour

// FindCtx returns the data of the session behind token. A missing, expired,
// deleted or malformed session, and a malformed token, are not found
// (found false, err nil); err is for failures of DynamoDB only. It costs one
// strongly consistent GetItem, and nothing for a malformed token.
func (s *Store) FindCtx(ctx context.Context, token string) (b []byte, found bool, err error) {
	if !validToken(token) {
		return nil, false, nil
	}
	sess, st, err := s.lookup(ctx, s.items.pk(token))
	return sess.data, st == live, err
}

// itemState is what the table says of a session.
type itemState int

const (
	free  itemState = iota // no item: a key no store of this table ever wrote
	live                   // a live session, its expiry ahead
	ended                  // a tombstone, an expired or malformed session, an item of another kind
)

// lookup reads the item under pk and judges it.
func (s *Store) lookup(ctx context.Context, pk string) (session, itemState, error) {
	start := s.records.begin()
	out, err := s.client.GetItem(ctx, s.items.get(pk))
	if err != nil {
		s.records.end(pk, start, state{})
		return session{}, ended, fmt.Errorf("scsstore: find session: %w", err)
	}
	// TTL deletes expired items up to days late: presence is not validity.
	sess, ok := s.items.decode(out.Item)
	if !ok || !s.now().Before(time.Unix(sess.expires, 0)) {
		s.records.end(pk, start, state{})
		if len(out.Item) == 0 {
			return session{}, free, nil
		}
		return session{}, ended, nil
	}
	s.records.end(pk, start, state{known: true, data: bytes.Clone(sess.data), expires: sess.expires})
	return sess, live, nil
}

// put makes a conditional write of sess under pk (move, mirror), and
// reports whether its condition held.
func (s *Store) put(ctx context.Context, pk string, in *dynamodb.PutItemInput, sess session) (bool, error) {
	start := s.records.begin()
	_, err := s.client.PutItem(ctx, in)
	var refused *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		s.records.end(pk, start, state{known: true, data: bytes.Clone(sess.data), expires: sess.expires})
		return true, nil
	case errors.As(err, &refused):
		s.records.end(pk, start, state{})
		return false, nil
	default:
		s.records.end(pk, start, state{})
		return false, fmt.Errorf("scsstore: commit session: %w", err)
	}
}

// bury turns the item under pk into a tombstone until the given time,
// whatever it held: see itemLayout.bury.
func (s *Store) bury(ctx context.Context, pk string, until time.Time) error {
	start := s.records.begin()
	_, err := s.client.PutItem(ctx, s.items.bury(pk, until.Unix()))
	s.records.end(pk, start, state{})
	var other *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &other) { // an item of another kind stays as it is
		return fmt.Errorf("scsstore: delete session: %w", err)
	}
	return nil
}

// CommitCtx writes the session's data and expiry, unless the data is what
// the table already holds and the expiry moves forward by less than
// MinCommitInterval. The expiry is stored in whole epoch seconds, rounded
// down. A commit for a session that was deleted since scs loaded it is
// dropped, so that a request racing a logout cannot bring the old token
// back.
func (s *Store) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if !validToken(token) {
		// scs commits only tokens it made or found: a bug, not a visitor.
		return errors.New("scsstore: commit session: the token is not an scs token")
	}
	pk := s.items.pk(token)
	expires := expiry.Unix()
	if s.unchanged(pk, b, expires) {
		return nil
	}
	start := s.records.begin()
	_, err := s.client.PutItem(ctx, s.items.commit(pk, session{data: b, expires: expires}))
	var deleted *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		s.records.end(pk, start, state{known: true, data: bytes.Clone(b), expires: expires})
		return nil
	case errors.As(err, &deleted):
		s.records.end(pk, start, state{})
		return nil
	default:
		s.records.end(pk, start, state{})
		return fmt.Errorf("scsstore: commit session: %w", err)
	}
}

// unchanged reports whether a commit of data b with expiry expires may be
// skipped: b holds the same session as the record, and the expiry moves
// forward by less than the interval. An expiry that moves back is written,
// so that the store never keeps a session longer than scs asks.
func (s *Store) unchanged(pk string, b []byte, expires int64) bool {
	rec := s.records.get(pk)
	if !rec.known || expires < rec.expires || expires-rec.expires >= s.interval {
		return false
	}
	if bytes.Equal(rec.data, b) {
		return true
	}
	deadline1, values1, err := s.codec.Decode(rec.data)
	if err != nil {
		return false
	}
	deadline2, values2, err := s.codec.Decode(b)
	if err != nil {
		return false
	}
	// DeepEqual errs only towards "changed" (a NaN, a time.Time decoded
	// into a fresh *Location): that costs a write, never data.
	return deadline1.Equal(deadline2) && reflect.DeepEqual(values1, values2)
}

// DeleteCtx deletes the session behind token; a missing one, or a
// malformed token, is a no-op. The item becomes a tombstone without data,
// which Find does not find and a late Commit cannot overwrite, and which
// TTL removes after an hour.
func (s *Store) DeleteCtx(ctx context.Context, token string) error {
	if !validToken(token) {
		return nil
	}
	pk := s.items.pk(token)
	start := s.records.begin()
	_, err := s.client.UpdateItem(ctx, s.items.destroy(pk, s.now().Add(tombstoneLife).Unix()))
	s.records.end(pk, start, state{})
	var missing *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("scsstore: delete session: %w", err)
	}
	return nil
}

// Find is FindCtx without a context.
func (s *Store) Find(token string) (b []byte, found bool, err error) {
	return s.FindCtx(context.Background(), token)
}

// Commit is CommitCtx without a context.
func (s *Store) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}

// Delete is DeleteCtx without a context.
func (s *Store) Delete(token string) error {
	return s.DeleteCtx(context.Background(), token)
}
