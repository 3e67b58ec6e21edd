package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file is about the user item: the app's own item, in the sessions
// table unless Config.LoadUser says otherwise, that carries the user's
// sessions-valid-after cutoff.

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

// CreateUser writes a new user item: item is the app's own value (a struct
// or a map, encoded with attributevalue.MarshalMap, holding the table's key
// attributes), and CreateUser adds the sessions-valid-after cutoff at the
// current time, so that no session created before this user existed, such as
// one of a deleted user with the same key, is valid for it. It returns
// [ErrUserExists], and writes nothing, if an item with that key exists.
//
// An app that writes user items itself must do the same: set
// [Config.ValidAfterAttribute] to the creation time in epoch milliseconds.
func (m *Manager[U]) CreateUser(ctx context.Context, item any) error {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return fmt.Errorf("ddbsession: CreateUser: encode %T: %w", item, err)
	}
	for _, key := range []string{m.cfg.PartitionKey, m.cfg.SortKey} {
		if _, ok := av[key].(*types.AttributeValueMemberS); key != "" && !ok {
			return fmt.Errorf("ddbsession: CreateUser: %T has no String attribute %q, the table's key", item, key)
		}
	}
	ctx, cancel := m.storeContext(ctx)
	defer cancel()
	err = m.store.createUser(ctx, av, m.cfg.Now().UnixMilli())
	if err != nil && !errors.Is(err, ErrUserExists) {
		return fmt.Errorf("ddbsession: CreateUser: %w", err)
	}
	return err
}

// loadUserItem is the default [Config.LoadUser]: one strongly consistent
// GetItem of the user's item in the sessions table.
func (m *Manager[U]) loadUserItem(ctx context.Context, key UserKey) (u U, validAfter time.Time, err error) {
	av, err := m.store.getUser(ctx, key.PK, key.SK)
	if err != nil {
		return u, validAfter, err
	}
	if av == nil {
		return u, validAfter, ErrUserNotFound
	}
	return m.decodeUser(av)
}

// decodeUser decodes a user item into U and reads its cutoff. An item that
// does not decode is the app's bug, not an outage: the error is a
// *userDecodeError, which the middleware answers with 500.
func (m *Manager[U]) decodeUser(av map[string]types.AttributeValue) (u U, validAfter time.Time, err error) {
	if err := m.decoder.Decode(&types.AttributeValueMemberM{Value: av}, &u); err != nil {
		return u, validAfter, &userDecodeError{typ: fmt.Sprintf("%T", u), attr: m.failingAttribute(av), err: err}
	}
	validAfter, err = m.store.ValidAfterOf(av)
	if err != nil {
		return u, validAfter, fmt.Errorf("user item's cutoff: %w", err)
	}
	return u, validAfter, nil
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

// failingAttribute names the first attribute of av that does not decode
// into U on its own: the one to fix. It runs on the error path only.
func (m *Manager[U]) failingAttribute(av map[string]types.AttributeValue) string {
	for name, v := range av {
		var u U
		if m.decoder.Decode(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{name: v}}, &u) != nil {
			return name
		}
	}
	return "?"
}
