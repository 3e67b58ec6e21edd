package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file reads the user item: the app's own item, in the sessions table
// unless Config.LoadUser says otherwise, that carries the user's
// sessions-valid-after cutoff. The user is decoded into the app's type
// through a pointer (out, an any), as attributevalue decodes, so that
// nothing below the Manager carries its type parameter.

// ErrUserNotFound is returned by a [Config.LoadUser] for a user that does
// not exist, by [Manager.Login] and [Manager.LoginWith] for a user without an
// item (they write nothing then), and by [Manager.RevokeAll] for a user item
// that is not in the table.
//
// A user item must be created with its cutoff set to its creation time, as
// [Manager.CreateUser] does: otherwise, once a deleted user's key is taken
// again (a username registered anew), the old user's sessions, rejected
// while no item existed, would authenticate as the new account.
var ErrUserNotFound = errors.New("ddbsession: user not found")

// ErrUserExists is returned by [Manager.CreateUser] for a key that already
// holds an item.
var ErrUserExists = errors.New("ddbsession: user already exists")

// users loads a session's user and the user's cutoff.
type users struct {
	store *store
	// decoder decodes user items; one for all requests, as
	// attributevalue.UnmarshalMap would make one per call.
	decoder *attributevalue.Decoder
	// custom is Config.LoadUser, adapted to decode into out; nil for the
	// default, the user item in the sessions table.
	custom func(ctx context.Context, key UserKey, out any) (validAfter time.Time, err error)
}

// inTable reports whether users live in the sessions table, where a
// request can read the session and its user together.
func (u *users) inTable() bool { return u.custom == nil }

// load reads user key into out (nil to read the cutoff alone) and returns
// the user's cutoff, or ErrUserNotFound. The default is one strongly
// consistent GetItem of the user item.
func (u *users) load(ctx context.Context, key UserKey, out any) (time.Time, error) {
	if u.custom != nil {
		return u.custom(ctx, key, out)
	}
	av, err := u.store.getUser(ctx, key.PK, key.SK)
	if err != nil {
		return time.Time{}, err
	}
	if av == nil {
		return time.Time{}, ErrUserNotFound
	}
	return u.decode(av, out)
}

// decode decodes a user item into out, unless out is nil, and reads its
// cutoff. An item that does not decode is the app's bug, not an outage: the
// error is a *userDecodeError, which the middleware answers with 500.
func (u *users) decode(av map[string]types.AttributeValue, out any) (time.Time, error) {
	if out != nil {
		if err := u.decoder.Decode(&types.AttributeValueMemberM{Value: av}, out); err != nil {
			return time.Time{}, &userDecodeError{typ: fmt.Sprintf("%T", out)[1:], attr: u.failingAttribute(av, out), err: err}
		}
	}
	validAfter, err := u.store.ValidAfterOf(av)
	if err != nil {
		return time.Time{}, fmt.Errorf("user item's cutoff: %w", err)
	}
	return validAfter, nil
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

// userDecodeError is a user item that does not decode into U.
type userDecodeError struct {
	typ, attr string
	err       error
}

func (e *userDecodeError) Error() string {
	return fmt.Sprintf("ddbsession: the user item's attribute %q does not decode into %s: %v", e.attr, e.typ, e.err)
}

func (e *userDecodeError) Unwrap() error { return e.err }
