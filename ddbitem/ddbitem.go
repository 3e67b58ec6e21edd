// Package ddbitem reads the items that ddbsession keeps in a DynamoDB
// table, for code that meets them outside a Manager: a stream's records
// (the ddbstream module), a backup or an export, and ddbsession's own
// modules, which share the table. docs/item-format.md describes the items;
// this package decodes them with the library's one decoder, so that every
// reader agrees with the middleware on what a session item holds.
//
//	layout, err := ddbitem.Resolve(ddbsession.Layout{}) // the app's Config.Layout
//	if err != nil {
//		log.Fatal(err)
//	}
//	s, err := ddbitem.DecodeSession(layout, image)
//	switch {
//	case errors.Is(err, ddbitem.ErrOtherKind): // an index item, a user, the app's own
//	case err != nil: // a session item this release cannot read
//	default:
//		fmt.Println(s.ID, s.User, s.ExpiresAt)
//	}
//
// From v0.1.0 on, the format changes only as CHANGELOG.md records.
package ddbitem

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
)

// Errors of DecodeSession.
var (
	// ErrOtherKind is returned for an item that is not a session item: an
	// index item, a user's state, a login waiting for its second factor,
	// an scs session, the app's own items.
	ErrOtherKind = item.ErrOtherKind
	// ErrMalformed is wrapped by the error for a session item that this
	// release cannot read: an unknown version, a missing or mistyped
	// attribute. A reader treats it as absent, failing closed.
	ErrMalformed = item.ErrMalformed
)

// MaxData is the most JSON that a session's data, which
// ddbsession.Manager.UpdateData writes, may hold: it keeps the largest
// session item within the 4 KB of one read unit.
const MaxData = item.MaxData

// Resolve returns l with every unset field at its default, or an error
// naming the first invalid field as "Layout.<Field>", for the caller to
// prefix with its own package and Config, as ddbsession.New does: the one
// validation of a layout, for every module that shares the table.
func Resolve(l ddbsession.Layout) (ddbsession.Layout, error) {
	resolved, err := item.Layout(l).WithDefaults()
	if err != nil {
		return l, err
	}
	return ddbsession.Layout(resolved), nil
}

// DecodeSession reads a session item of layout l, as the table, a stream
// record or a backup holds it: [ErrOtherKind] for an item of another kind,
// an error wrapping [ErrMalformed] for a session item it cannot read.
func DecodeSession(l ddbsession.Layout, av map[string]types.AttributeValue) (ddbsession.Session, error) {
	resolved, err := item.Layout(l).WithDefaults()
	if err != nil {
		return ddbsession.Session{}, fmt.Errorf("ddbitem: %w", err)
	}
	s, err := resolved.Decode(av, item.KindSession)
	if err == nil && s.Pending {
		err = ErrOtherKind // a login waiting for its second factor is no session yet
	}
	if errors.Is(err, ErrOtherKind) {
		return ddbsession.Session{}, ErrOtherKind
	}
	if err != nil {
		return ddbsession.Session{}, fmt.Errorf("ddbitem: decode session item: %w", err)
	}
	return item.Public(s).(ddbsession.Session), nil
}

// Revocation is what a session copies at its login and must still match
// to be valid: the user's sessions version, which RevokeAll changes, and
// the table's global revocation generation, which RevokeEveryone raises.
// A store of sessions other than ddbsession's own (scsstore's, say) keeps
// its sessions to the same rules by copying it too.
type Revocation struct {
	Version int64
	Global  int64
}

// RevocationKeys are the keys of the items that hold user's Revocation: the
// user item, in MREC the user's revocation item, and the global item. Read
// them with one strongly consistent BatchGetItem, and hand what it found to
// ReadRevocation.
func RevocationKeys(l ddbsession.Layout, user ddbsession.UserKey) ([]map[string]types.AttributeValue, error) {
	resolved, err := item.Layout(l).WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("ddbitem: %w", err)
	}
	keys := []map[string]types.AttributeValue{resolved.Key(user.PK, user.SK)}
	if resolved.MREC {
		keys = append(keys, resolved.RevocationKey(user.PK, user.SK))
	}
	return append(keys, resolved.GlobalKey()), nil
}

// ReadRevocation reads user's Revocation from the items that a read of
// RevocationKeys found, in any order, and returns the user item among them
// for the caller to decode; nil if the user has none, which no session of
// it survives. An item of another form under one of the keys is an error,
// so that its reader fails closed.
func ReadRevocation(l ddbsession.Layout, user ddbsession.UserKey, items []map[string]types.AttributeValue) (Revocation, map[string]types.AttributeValue, error) {
	resolved, err := item.Layout(l).WithDefaults()
	if err != nil {
		return Revocation{}, nil, fmt.Errorf("ddbitem: %w", err)
	}
	same := func(av, key map[string]types.AttributeValue) bool {
		for name, v := range key {
			if s, ok := av[name].(*types.AttributeValueMemberS); !ok || s.Value != v.(*types.AttributeValueMemberS).Value {
				return false
			}
		}
		return true
	}
	var rev Revocation
	var userItem, revocation map[string]types.AttributeValue
	for _, av := range items {
		switch {
		case same(av, resolved.Key(user.PK, user.SK)):
			userItem = av
		case resolved.MREC && same(av, resolved.RevocationKey(user.PK, user.SK)):
			revocation = av
		case same(av, resolved.GlobalKey()):
			if rev.Global, err = item.DecodeGlobal(av); err != nil {
				return Revocation{}, nil, fmt.Errorf("ddbitem: the global revocation item: %w", err)
			}
		}
	}
	if userItem == nil {
		return rev, nil, nil
	}
	if resolved.MREC {
		rev.Version, err = item.DecodeRevocation(revocation)
	} else {
		rev.Version, err = resolved.VersionOf(userItem)
	}
	if err != nil {
		return Revocation{}, nil, fmt.Errorf("ddbitem: the user's sessions version: %w", err)
	}
	return rev, userItem, nil
}
