package ddbsession

import (
	"context"
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file reads the user item: the app's own item, in the sessions table
// unless Config.LoadUser says otherwise, that carries the user's
// sessions version, the user's revocation version. The user is
// decoded into the app's type through a pointer (out, an any), as
// attributevalue decodes, so that nothing below the Manager carries its
// type parameter.

// checkKey refuses a user key that no item of the table can have, before
// any call: an empty one is what a handler gets from Session outside
// RequireSession, and DynamoDB would answer it with a validation error that
// says nothing of that.
func (u *users) checkKey(user UserKey) error {
	switch {
	case user.PK == "":
		return fmt.Errorf("user key %+v has no PK: pass the signed-in user's key (Session(ctx).User, inside RequireSession)", user)
	case u.store.HashOnly && user.SK != "":
		return fmt.Errorf("user key %+v has an SK, but the table has no sort key (Layout.HashOnly)", user)
	case !u.store.HashOnly && user.SK == "":
		return fmt.Errorf("user key %+v has no SK, which the table's sort key needs", user)
	}
	return nil
}

// users loads a session's user and the user's revocation state.
type users struct {
	store *store
	// decoder decodes user items; one for all requests, as
	// attributevalue.UnmarshalMap would make one per call.
	decoder *attributevalue.Decoder
	// custom is Config.LoadUser, adapted to decode into out; nil for the
	// default, the user item in the sessions table. The slots and global
	// items are read apart then.
	custom func(ctx context.Context, key UserKey, out any) (version int64, err error)
	// mrec is Layout.MREC: the user's version is in the revocation item,
	// and a session's end record counts.
	mrec bool
	// newUser returns a new *U, for the reads whose caller wants no user:
	// every read of a user item decodes it, so that an item the app's type
	// does not fit fails each of them alike.
	newUser func() any
}

// inTable reports whether users live in the sessions table, where a
// request can read the session and its user together.
func (u *users) inTable() bool { return u.custom == nil }

// revocation is what a read of a user says of the user's sessions: the
// user's sessions version, in MREC whether the session read with it has
// ended, for a login under a session limit the user's slots, and, where the
// read took it, the table's global generation.
type revocation struct {
	version    int64
	ended      bool
	slots      item.Slots
	global     int64
	globalRead bool
}

// load reads user key into out (nil for a caller that wants the
// revocation state alone) and returns the user's revocation state, with
// the slots if withSlots and the global generation if withGlobal, or
// ErrUserNotFound. The default is one strongly consistent read of the user
// item and the items asked for with it (in MREC the revocation item too).
func (u *users) load(ctx context.Context, key UserKey, out any, withSlots, withGlobal bool) (revocation, error) {
	if out == nil {
		out = u.newUser()
	}
	if u.custom == nil {
		items, err := u.store.getUser(ctx, key.PK, key.SK, withSlots, withGlobal)
		if err != nil {
			return revocation{}, err
		}
		if items.user == nil {
			return revocation{}, ErrUserNotFound
		}
		return u.decode(items, out)
	}
	version, err := u.custom(ctx, key, out)
	if err != nil {
		return revocation{}, err
	}
	items := userItems{globalRead: withGlobal}
	if withSlots || withGlobal {
		beside, err := u.store.getBeside(ctx, key.PK, key.SK, withSlots, withGlobal)
		if err != nil {
			return revocation{}, err
		}
		items.slots, items.global = beside.slots, beside.global
	}
	return u.revocationOf(version, items)
}

// decode decodes the user item of items into out (a new one for nil) and
// returns the revocation state that it and the other items read with it
// give. An item that does not decode is the app's bug, not an outage: the
// error is a *userDecodeError, which the middleware answers with 500.
func (u *users) decode(items userItems, out any) (revocation, error) {
	if out == nil {
		out = u.newUser()
	}
	if err := u.decoder.Decode(&types.AttributeValueMemberM{Value: items.user}, out); err != nil {
		return revocation{}, &userDecodeError{typ: fmt.Sprintf("%T", out)[1:], attr: u.failingAttribute(items.user, out), err: err}
	}
	version, err := u.store.VersionOf(items.user)
	if err != nil {
		return revocation{}, fmt.Errorf("the user item's version: %w", err)
	}
	if u.mrec {
		// The user item is the app's, which a Region's write settles
		// whole: the version that counts is the revocation item's.
		if version, err = item.DecodeRevocation(items.revocation); err != nil {
			return revocation{}, fmt.Errorf("the user's revocation item: %w", err)
		}
	}
	return u.revocationOf(version, items)
}

// revocationOf is the revocation state of a user whose version is version,
// with the other items of items.
func (u *users) revocationOf(version int64, items userItems) (revocation, error) {
	rev := revocation{version: version}
	var err error
	if rev.ended, err = item.DecodeEnd(items.end); err != nil {
		return rev, fmt.Errorf("the session's end record: %w", err)
	}
	if rev.slots, err = u.store.DecodeSlots(items.slots); err != nil {
		return rev, fmt.Errorf("the user's slots item: %w", err)
	}
	if items.globalRead {
		if rev.global, err = item.DecodeGlobal(items.global); err != nil {
			return rev, fmt.Errorf("the global revocation item: %w", err)
		}
		rev.globalRead = true
	}
	return rev, nil
}

// failingAttribute names the first attribute of av that does not decode
// on its own into what out points to: the one to fix. It runs on the error
// path only.
func (u *users) failingAttribute(av map[string]types.AttributeValue, out any) string {
	typ := reflect.TypeOf(out).Elem()
	for name, v := range av {
		fresh := reflect.New(typ).Interface()
		if u.decoder.Decode(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{name: v}}, fresh) != nil {
			return name
		}
	}
	return "?"
}

// userDecodeError is a user item that does not decode into the app's type.
type userDecodeError struct {
	typ, attr string
	err       error
}

func (e *userDecodeError) Error() string {
	return fmt.Sprintf("the user item's attribute %q does not decode into %s: %v", e.attr, e.typ, e.err)
}

func (e *userDecodeError) Unwrap() error { return e.err }
