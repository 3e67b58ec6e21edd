package scsstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// This file signs users in on scs sessions and loads them back, under the
// core's revocation rules: a session copies, at its login, the user's
// ddbitem.Stamp read with the credential, and holds while the stamp does
// (ddbitem.User.Holds), as the core's own sessions do.

// signedInKey is the scs session key under which Login records who signed
// in and the stamp read with the credential.
const signedInKey = "scsstore.user"

// Login signs user in on the scs session of ctx, once verify accepts the
// user as read: it reads the user's item into u (a pointer, decoded with
// attributevalue as ddbsession decodes users; nil for none) with what can
// end the user's sessions, in one strongly consistent read (see the
// package doc's costs); has verify, if not nil, check the credential in u,
// and returns its error as it is, to refuse; then renews the session's
// token (scs's RenewToken, against session fixation) and records in the
// session the user's key and the user's [ddbitem.Stamp] as read.
// [Store.LoadUser] loads the user back, and refuses the session once
// ddbsession's Manager.RevokeAll or RevokeEveryone, a new credential
// version or a user item made anew comes after that read, whatever any
// clock says. It returns ddbsession.ErrUserNotFound if the user has no
// item, and an error for a user item without a sessions version
// (Layout.VersionAttribute), which no session may copy. Call it inside
// the SessionManager's LoadAndSave.
func (s *Store) Login(ctx context.Context, sm *scs.SessionManager, user ddbsession.UserKey, u any, verify func() error) error {
	if err := s.items.checkUser(user); err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	found, err := s.users.User(ctx, user)
	if err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	stamp, err := found.Stamp()
	if errors.Is(err, ddbsession.ErrUserNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	recorded, err := encodeSignedIn(user, stamp)
	if err != nil {
		return fmt.Errorf("scsstore: login: %w", err)
	}
	if err := s.decodeUser(found.Item(), u); err != nil {
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
	sm.Put(ctx, signedInKey, recorded)
	return nil
}

// LoadUser reads the user that [Store.Login] signed in on the scs session
// of ctx into u (as Login does; nil for none) and returns the user's key,
// with ok true while the session holds: the user's item is there, and
// nothing that Login stamped has changed since (no RevokeAll, no
// RevokeEveryone, no new credential version, no user item made anew). A
// session that nobody signed in on costs nothing. A session that no
// longer holds is destroyed (scs's Destroy): its token is dead on every
// instance, its data gone, and its cookie cleared. On a Layout.MREC table
// a session whose login read a version that this Region has not yet seen
// (a login in another Region after a RevokeAll there) is refused, not
// destroyed, until replication brings the version. err is for DynamoDB
// failures, a layout other than the table's, and a user item that does
// not decode into u; the request must fail then. Call it inside the
// SessionManager's LoadAndSave.
func (s *Store) LoadUser(ctx context.Context, sm *scs.SessionManager, u any) (user ddbsession.UserKey, ok bool, err error) {
	recorded := sm.GetString(ctx, signedInKey)
	if recorded == "" {
		return ddbsession.UserKey{}, false, nil
	}
	user, stamp, valid := decodeSignedIn(recorded)
	if valid {
		valid = s.items.checkUser(user) == nil
	}
	if !valid {
		return ddbsession.UserKey{}, false, s.destroy(ctx, sm) // no Login wrote it
	}
	found, err := s.users.User(ctx, user)
	if err != nil {
		return ddbsession.UserKey{}, false, fmt.Errorf("scsstore: load user: %w", err)
	}
	switch holds, notHereYet := found.Holds(stamp); {
	case notHereYet:
		// A login in another Region after a RevokeAll there: the version
		// it read has not come here yet.
		return ddbsession.UserKey{}, false, nil
	case !holds:
		return ddbsession.UserKey{}, false, s.destroy(ctx, sm)
	}
	if err := s.decodeUser(found.Item(), u); err != nil {
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

// decodeUser decodes userItem into u, unless u is nil.
func (s *Store) decodeUser(userItem map[string]types.AttributeValue, u any) error {
	if u == nil {
		return nil
	}
	if err := s.decoder.Decode(&types.AttributeValueMemberM{Value: userItem}, u); err != nil {
		return fmt.Errorf("decode the user item into %T: %w", u, err)
	}
	return nil
}

// What Login records is a string, which every scs Codec keeps as it is (a
// JSON codec would round numbers this large), in one of two formats, told
// apart by their first field:
//
//	2.<stamp text>.<base64url PK>.<base64url SK>   Login writes it
//	1.<version>.<global>.<base64url PK>.<base64url SK>   release v0.1.0 wrote it
//
// The stamp's text is itself four dot-separated numbers. A record of
// format 1 holds the user's sessions version and the global generation
// alone, which hold its session as v0.1.0 held it (ddbitem.LegacyStamp):
// its users stay signed in across the upgrade.
const (
	signedInFormat       = "2"
	signedInFormatLegacy = "1"
)

// encodeSignedIn is what Login records in the scs session: user's key and
// the stamp read with the credential.
func encodeSignedIn(user ddbsession.UserKey, stamp ddbitem.Stamp) (string, error) {
	text, err := stamp.MarshalText()
	if err != nil {
		return "", err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	return strings.Join([]string{signedInFormat, string(text), b64([]byte(user.PK)), b64([]byte(user.SK))}, "."), nil
}

// decodeSignedIn reads what encodeSignedIn wrote, or what v0.1.0's Login
// wrote; false for anything else.
func decodeSignedIn(v string) (user ddbsession.UserKey, stamp ddbitem.Stamp, ok bool) {
	parts := strings.Split(v, ".")
	var errStamp error
	switch {
	case len(parts) == 7 && parts[0] == signedInFormat:
		errStamp = stamp.UnmarshalText([]byte(strings.Join(parts[1:5], ".")))
	case len(parts) == 5 && parts[0] == signedInFormatLegacy:
		version, errVersion := strconv.ParseInt(parts[1], 10, 64)
		global, errGlobal := strconv.ParseInt(parts[2], 10, 64)
		stamp, errStamp = ddbitem.LegacyStamp(version, global), errors.Join(errVersion, errGlobal)
	default:
		return user, stamp, false
	}
	pk, errPK := base64.RawURLEncoding.Strict().DecodeString(parts[len(parts)-2])
	sk, errSK := base64.RawURLEncoding.Strict().DecodeString(parts[len(parts)-1])
	if errors.Join(errStamp, errPK, errSK) != nil {
		return user, ddbitem.Stamp{}, false
	}
	return ddbsession.UserKey{PK: string(pk), SK: string(sk)}, stamp, true
}
