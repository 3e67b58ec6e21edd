package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// This file reads the user item: the app's own item, in the sessions table
// unless Config.LoadUser says otherwise, that carries the user's
// sessions-valid-after cutoff, the user's revocation version. The user is
// decoded into the app's type through a pointer (out, an any), as
// attributevalue decodes, so that nothing below the Manager carries its
// type parameter.

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

// users loads a session's user and the user's revocation state.
type users struct {
	store *store
	// decoder decodes user items; one for all requests, as
	// attributevalue.UnmarshalMap would make one per call.
	decoder *attributevalue.Decoder
	// custom is Config.LoadUser, adapted to decode into out; nil for the
	// default, the user item in the sessions table.
	custom func(ctx context.Context, key UserKey, out any) (cutoff int64, err error)
	// mrec is Config.MREC: the revocation state is the user item's cutoff
	// and the state item's together.
	mrec bool
	// newUser returns a new *U, for the reads whose caller wants no user:
	// every read of a user item decodes it, so that an item the app's type
	// does not fit fails each of them alike.
	newUser func() any
}

// inTable reports whether users live in the sessions table, where a
// request can read the session and its user together.
func (u *users) inTable() bool { return u.custom == nil }

// load reads user key into out (nil for a caller that wants the
// revocation state alone) and returns the user's revocation state, or
// ErrUserNotFound. The default is one strongly consistent read of the user
// item, and in MREC mode of the state item with it.
func (u *users) load(ctx context.Context, key UserKey, out any) (item.State, error) {
	if out == nil {
		out = u.newUser()
	}
	if u.custom != nil {
		cutoff, err := u.custom(ctx, key, out)
		if err != nil {
			return item.State{}, err
		}
		return u.withState(ctx, key, cutoff, nil, false)
	}
	av, state, err := u.store.getUser(ctx, key.PK, key.SK, u.mrec)
	if err != nil {
		return item.State{}, err
	}
	if av == nil {
		return item.State{}, ErrUserNotFound
	}
	return u.decode(ctx, key, av, state, out)
}

// decode decodes user item av into out (a new one for nil) and returns the
// revocation state that av and, in MREC mode, the state item read with it
// give. An item that does not decode is the app's bug, not an outage: the
// error is a *userDecodeError, which the middleware answers with 500.
func (u *users) decode(ctx context.Context, key UserKey, av, state map[string]types.AttributeValue, out any) (item.State, error) {
	if out == nil {
		out = u.newUser()
	}
	if err := u.decoder.Decode(&types.AttributeValueMemberM{Value: av}, out); err != nil {
		return item.State{}, &userDecodeError{typ: fmt.Sprintf("%T", out)[1:], attr: u.failingAttribute(av, out), err: err}
	}
	cutoff, err := u.store.CutoffOf(av)
	if err != nil {
		return item.State{}, fmt.Errorf("user item's cutoff: %w", err)
	}
	return u.withState(ctx, key, cutoff, state, true)
}

// withState returns the revocation state of a user whose cutoff is cutoff:
// in MREC mode with the state item's, av if read already, or read now.
func (u *users) withState(ctx context.Context, key UserKey, cutoff int64, av map[string]types.AttributeValue, read bool) (item.State, error) {
	if !u.mrec {
		return item.State{Cutoff: cutoff}, nil
	}
	if !read {
		var err error
		if av, err = u.store.getState(ctx, key.PK, key.SK); err != nil {
			return item.State{}, err
		}
	}
	state, err := item.DecodeState(av)
	if err != nil {
		return item.State{}, fmt.Errorf("ddbsession: the user's state item: %w", err)
	}
	state.Cutoff = max(state.Cutoff, cutoff)
	return state, nil
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
	return fmt.Sprintf("ddbsession: the user item's attribute %q does not decode into %s: %v", e.attr, e.typ, e.err)
}

func (e *userDecodeError) Unwrap() error { return e.err }
