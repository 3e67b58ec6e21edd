package ddbsession

import (
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/decide"
)

// This file holds what the library asks of a user item: the app's own
// item, in the sessions table unless Config.LoadUser says otherwise, which
// internal/decide reads with the sessions. It checks a user's key, decodes
// the item into the app's type through a pointer (out, an any), as
// attributevalue decodes, so that nothing below the Manager carries its
// type parameter, and refuses a user whose item lacks a sessions version.

// users decodes user items, and checks what a login needs of them.
type users struct {
	store *store
	// decoder decodes user items; one for all requests, as
	// attributevalue.UnmarshalMap would make one per call.
	decoder *attributevalue.Decoder
	// custom says that users come from Config.LoadUser, which decodes
	// them itself.
	custom bool
	// newUser returns a new *U, for the reads whose caller wants no user:
	// every read of a user item decodes it, so that an item the app's type
	// does not fit fails each of them alike.
	newUser func() any
}

// inTable reports whether users live in the sessions table, where a
// request can read the session and its user together.
func (u *users) inTable() bool { return !u.custom }

// checkKey refuses a user key that no item of the table can have, before
// any call: an empty one is what a handler gets from Session outside
// RequireSession, and DynamoDB would answer it with a validation error that
// says nothing of that. A login's or CreateUser's request is not signed in
// (yet), so its error points at the key the user entered, not at Session.
func (u *users) checkKey(user UserKey, login bool) error {
	switch {
	case user.PK == "" && login:
		return fmt.Errorf("user key %+v has no PK: pass the key of the user signing up or in, from what they entered (UserKey{PK: \"USER#\" + name, SK: ...}, say)", user)
	case user.PK == "":
		return fmt.Errorf("user key %+v has no PK: pass the user's key (UserKey{PK: ..., SK: ...}, or Session(ctx).User of a signed-in request)", user)
	case u.store.HashOnly && user.SK != "":
		return fmt.Errorf("user key %+v has an SK, but the table has no sort key (Layout.HashOnly)", user)
	case !u.store.HashOnly && user.SK == "":
		return fmt.Errorf("user key %+v has no SK, which the table's sort key needs", user)
	}
	return nil
}

// decode decodes the user item of f into out (a new one for nil), unless
// users come from Config.LoadUser, which decoded it. An item that does not
// decode is the app's bug, not an outage: the error is a
// *userDecodeError, which the middleware answers with 500.
func (u *users) decode(f *decide.Facts, out any) error {
	if !u.inTable() {
		return nil
	}
	if out == nil {
		out = u.newUser()
	}
	if err := u.decoder.Decode(&types.AttributeValueMemberM{Value: f.User}, out); err != nil {
		return &userDecodeError{typ: fmt.Sprintf("%T", out)[1:], attr: u.failingAttribute(f.User, out), err: err}
	}
	return nil
}

// keyString shows a user key in an error.
func keyString(k UserKey) string {
	if k.SK == "" {
		return fmt.Sprintf("(%q)", k.PK)
	}
	return fmt.Sprintf("(%q, %q)", k.PK, k.SK)
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
