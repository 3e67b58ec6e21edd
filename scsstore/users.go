package scsstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// This file signs users in on scs sessions and loads them back, under the
// core's revocation rules: a session copies, at its login, the user's
// ddbitem.Revocation read with the credential, and is valid while the
// user's sessions version is still that one and no RevokeEveryone came
// after it.

// signedInKey is the scs session key under which Login records who signed
// in and the Revocation read with the credential.
const signedInKey = "scsstore.user"

// Login signs user in on the scs session of ctx, once verify accepts the
// user as read: it reads the user's item into u (a pointer, decoded with
// attributevalue as ddbsession decodes users; nil for none) with the
// user's revocation state, in one strongly consistent BatchGetItem (the
// user item, on a Layout.MREC table the user's revocation item, and, once
// per Config.RevokeEveryoneWithin, the global revocation item); has verify, if not nil, check the credential in
// u, and returns its error as it is, to refuse; then renews the session's
// token (scs's RenewToken, against session fixation) and records in the
// session the user's key and what the read found. [Store.LoadUser] loads
// the user back, and refuses the session once ddbsession's
// Manager.RevokeAll or RevokeEveryone comes after that read, whatever any
// clock says. It returns ddbsession.ErrUserNotFound if the user has no
// item. Call it inside the SessionManager's LoadAndSave.
func (s *Store) Login(ctx context.Context, sm *scs.SessionManager, user ddbsession.UserKey, u any, verify func() error) error {
	if err := s.items.checkUser(user); err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	// As a request does, Login reads the global item only when the copy is
	// stale, so that no item is read by every login; otherwise the
	// session copies the copy as it was before verify ran.
	withGlobal, gen, began := s.everyone.stale(), s.everyone.gen.Load(), s.everyone.mono()
	rev, userItem, err := s.readUser(ctx, user, withGlobal)
	if err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	if withGlobal {
		s.everyone.seen(rev.Global, began)
	} else {
		rev.Global = gen
	}
	if userItem == nil {
		return ddbsession.ErrUserNotFound
	}
	if err := s.decodeUser(userItem, u); err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	if verify != nil {
		if err := verify(); err != nil {
			return err
		}
	}
	if err := sm.RenewToken(ctx); err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	sm.Put(ctx, signedInKey, encodeSignedIn(user, rev))
	return nil
}

// LoadUser reads the user that [Store.Login] signed in on the scs session
// of ctx into u (as Login does; nil for none) and returns the user's key,
// with ok true while the session holds: the user's item is there, its
// sessions version is the one the login read, and no RevokeEveryone came
// after the login. It costs one strongly consistent BatchGetItem of the
// user item (and, on a Layout.MREC table, the user's revocation item, which
// holds the version there), which also takes the global revocation item
// once per Config.RevokeEveryoneWithin; a session that nobody signed in on
// costs nothing. A session that no longer holds is destroyed (scs's
// Destroy): its token is dead on every instance, its data gone, and its
// cookie cleared. On a Layout.MREC table a session whose login read a
// version that this Region has not yet seen (a login in another Region
// after a RevokeAll there) is refused, not destroyed, until replication
// brings the version. err is for DynamoDB failures and a user item that
// does not decode into u; the request must fail then. Call it inside the
// SessionManager's LoadAndSave.
func (s *Store) LoadUser(ctx context.Context, sm *scs.SessionManager, u any) (user ddbsession.UserKey, ok bool, err error) {
	recorded := sm.GetString(ctx, signedInKey)
	if recorded == "" {
		return ddbsession.UserKey{}, false, nil
	}
	user, signed, valid := decodeSignedIn(recorded)
	if valid {
		valid = s.items.checkUser(user) == nil
	}
	if !valid {
		return ddbsession.UserKey{}, false, s.destroy(ctx, sm) // no Login wrote it
	}
	withGlobal, began := s.everyone.stale(), s.everyone.mono()
	rev, userItem, err := s.readUser(ctx, user, withGlobal)
	if err != nil {
		return ddbsession.UserKey{}, false, fmt.Errorf("scsstore: load user: %w", err)
	}
	if withGlobal {
		s.everyone.seen(rev.Global, began)
	}
	switch {
	case userItem == nil, signed.Global < s.everyone.gen.Load():
		// The user is gone, or a RevokeEveryone came after the login.
		return ddbsession.UserKey{}, false, s.destroy(ctx, sm)
	case signed.Version == rev.Version:
	case signed.Version > rev.Version && s.items.MREC:
		// A login in another Region after a RevokeAll there: the raised
		// version has not come here yet.
		return ddbsession.UserKey{}, false, nil
	default:
		// RevokeAll since the login (or, for a version the login read
		// above this one, a user item made anew under the same key).
		return ddbsession.UserKey{}, false, s.destroy(ctx, sm)
	}
	if err := s.decodeUser(userItem, u); err != nil {
		return ddbsession.UserKey{}, false, fmt.Errorf("scsstore: load user: %w", err)
	}
	return user, true, nil
}

// destroy ends the scs session of ctx, which no longer holds.
func (s *Store) destroy(ctx context.Context, sm *scs.SessionManager) error {
	if err := sm.Destroy(ctx); err != nil {
		return fmt.Errorf("scsstore: load user: destroy a revoked session: %w", err)
	}
	return nil
}

// checkUser refuses a user key that no item of the table can have.
func (l *itemLayout) checkUser(user ddbsession.UserKey) error {
	switch {
	case user.PK == "":
		return fmt.Errorf("user key %+v has no PK", user)
	case l.HashOnly && user.SK != "":
		return fmt.Errorf("user key %+v has an SK, but the table has no sort key (Layout.HashOnly)", user)
	case !l.HashOnly && user.SK == "":
		return fmt.Errorf("user key %+v has no SK, which the table's sort key needs", user)
	}
	return nil
}

// unprocessedAttempts bounds how many times readUser asks again for keys
// that DynamoDB left unprocessed (it does under throttling) before it
// fails: scs calls the store without a deadline of its own.
const unprocessedAttempts = 5

// readUser reads user's item and Revocation with one strongly consistent
// BatchGetItem of ddbitem.RevocationKeys, leaving out the global item
// unless withGlobal (rev.Global is 0 then). userItem is nil if the user has
// no item.
func (s *Store) readUser(ctx context.Context, user ddbsession.UserKey, withGlobal bool) (rev ddbitem.Revocation, userItem map[string]types.AttributeValue, err error) {
	keys, err := ddbitem.RevocationKeys(s.items.Layout, user)
	if err != nil {
		return rev, nil, err
	}
	if !withGlobal {
		keys = keys[:len(keys)-1] // the global item's key comes last
	}
	in := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		s.items.table: {Keys: keys, ConsistentRead: aws.Bool(true)},
	}}
	var found []map[string]types.AttributeValue
	for attempt, pause := 1, 5*time.Millisecond; ; attempt, pause = attempt+1, 2*pause {
		out, err := s.client.BatchGetItem(ctx, in)
		if err != nil {
			return rev, nil, fmt.Errorf("read the user: %w", err)
		}
		found = append(found, out.Responses[s.items.table]...)
		left := out.UnprocessedKeys[s.items.table].Keys
		if len(left) == 0 {
			break
		}
		if attempt == unprocessedAttempts {
			return rev, nil, fmt.Errorf("read the user: %d keys still unprocessed after %d attempts", len(left), attempt)
		}
		in = &dynamodb.BatchGetItemInput{RequestItems: out.UnprocessedKeys}
		select {
		case <-ctx.Done():
			return rev, nil, fmt.Errorf("read the user: unprocessed keys: %w", ctx.Err())
		case <-time.After(pause):
		}
	}
	return ddbitem.ReadRevocation(s.items.Layout, user, found)
}

// decodeUser decodes userItem into u, unless u is nil.
func (s *Store) decodeUser(userItem map[string]types.AttributeValue, u any) error {
	if u == nil {
		return nil
	}
	if err := s.users.Decode(&types.AttributeValueMemberM{Value: userItem}, u); err != nil {
		return fmt.Errorf("decode the user item into %T: %w", u, err)
	}
	return nil
}

// signedInFormat starts the value that Login records, so that a later
// format can be told apart.
const signedInFormat = "1"

// encodeSignedIn is what Login records in the scs session: user's key and
// the Revocation read with the credential, as a string, which every scs
// Codec keeps as it is (a JSON codec would round numbers this large):
// "1.<version>.<global>.<base64url PK>.<base64url SK>".
func encodeSignedIn(user ddbsession.UserKey, rev ddbitem.Revocation) string {
	b64 := base64.RawURLEncoding.EncodeToString
	return strings.Join([]string{signedInFormat, strconv.FormatInt(rev.Version, 10), strconv.FormatInt(rev.Global, 10), b64([]byte(user.PK)), b64([]byte(user.SK))}, ".")
}

// decodeSignedIn reads what encodeSignedIn wrote; false for anything else.
func decodeSignedIn(v string) (user ddbsession.UserKey, rev ddbitem.Revocation, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != signedInFormat {
		return user, rev, false
	}
	version, errVersion := strconv.ParseInt(parts[1], 10, 64)
	global, errGlobal := strconv.ParseInt(parts[2], 10, 64)
	pk, errPK := base64.RawURLEncoding.Strict().DecodeString(parts[3])
	sk, errSK := base64.RawURLEncoding.Strict().DecodeString(parts[4])
	if errors.Join(errVersion, errGlobal, errPK, errSK) != nil {
		return user, rev, false
	}
	return ddbsession.UserKey{PK: string(pk), SK: string(sk)}, ddbitem.Revocation{Version: version, Global: global}, true
}
