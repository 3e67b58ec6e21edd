package ddbsessionoidc

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// This file holds the module's items, the one format it reads and writes
// (docs/oidc.md, "The items", describes them), and every DynamoDB call it
// makes. The items share the table's Layout with the core's and are told
// apart by the prefix of their partition key, their sort key and their
// kind:
//
//	attempt           pk: Prefix ATTEMPT# b64(sha256(state))       sk: ATTEMPT  bind, returnTo, started, fresh, TTL
//	provider session  pk: Prefix SID# b64(sha256(iss NUL sid))     sk: SID      iss, sub, sessions, loggedOutAt, TTL
//	subject           pk: Prefix SUB# b64(sha256(iss NUL sub))     sk: SUB      iss, sessions, loggedOutAt, TTL
//	session record    pk: Prefix SESSION# <session ID>             sk: SESSION  iss, sub, sid, idToken, user, TTL
//	logout token      pk: Prefix JTI# b64(sha256(iss NUL jti))     sk: JTI      TTL (the token's exp)
//
// No item holds a secret of the browser: an attempt holds digests, and
// its state, its PKCE verifier and its nonce never reach the table.

// Client is the part of the DynamoDB client that a [Provider] uses: the
// Manager's own client. *dynamodb.Client satisfies it; tests wrap it to
// count calls or inject faults. BatchGetItem reads the table's layout
// record, which a Provider checks its Config.Layout against.
type Client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

const (
	attrVersion   = "v"
	attrKind      = "kind"
	attrBind      = "bind"
	attrReturnTo  = "returnTo"
	attrFresh     = "fresh"
	attrStarted   = "started"
	attrIssuer    = "iss"
	attrSubject   = "sub"
	attrSID       = "sid"
	attrSessions  = "sessions"
	attrLoggedOut = "loggedOutAt"
	attrIDToken   = "idToken"
	attrUserPK    = "userPK"
	attrUserSK    = "userSK"

	formatVersion = 1

	kindAttempt         = "oidc-attempt"
	kindProviderSession = "oidc-provider-session"
	kindSubject         = "oidc-subject"
	kindSession         = "oidc-session"
	kindLogoutToken     = "oidc-logout-token"

	sortAttempt         = "ATTEMPT"
	sortProviderSession = "SID"
	sortSubject         = "SUB"
	sortSession         = "SESSION"
	sortLogoutToken     = "JTI"
)

// store makes every DynamoDB call of a Provider, on its table.
type store struct {
	client Client
	table  string
	layout ddbsession.Layout // resolved: every field set
	prefix string
	// records reads the table's layout record, and layoutOK says that it
	// agreed with layout: checked once, at the first call that touches
	// the table, since New makes no call.
	records  *ddbitem.Reader
	layoutOK atomic.Bool
}

// checkLayout checks, until it has once agreed, that the table records
// the layout this store keys its items by, and the Manager its sessions
// (docs/item-format.md#the-layout-record): a Config.Layout that differs
// from the Manager's would key the links and records where no session
// is, and a back-channel logout would end nothing. A mismatch is an error
// that names each field with both values; a store error is tried again by
// the next call. A table without a record gets this layout's.
func (s *store) checkLayout(ctx context.Context) error {
	if s.layoutOK.Load() {
		return nil
	}
	if err := s.records.CheckLayout(ctx); err != nil {
		return fmt.Errorf("check the table's layout: %w", err)
	}
	s.layoutOK.Store(true)
	return nil
}

// digest is base64url(SHA-256) of parts joined by NUL, which no issuer
// URL holds: the key of an item named by values the table must not hold
// (a state) or that may be long (a provider's identifiers).
func digest(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// key addresses the item of kind word whose partition key ends in id.
func (s *store) key(word, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		s.layout.PartitionKey: str(s.prefix + word + "#" + id),
		s.layout.SortKey:      str(word),
	}
}

func (s *store) attemptKey(state string) map[string]types.AttributeValue {
	return s.key(sortAttempt, digest(state))
}

func (s *store) providerSessionKey(issuer, sid string) map[string]types.AttributeValue {
	return s.key(sortProviderSession, digest(issuer, sid))
}

func (s *store) subjectKey(issuer, subject string) map[string]types.AttributeValue {
	return s.key(sortSubject, digest(issuer, subject))
}

func (s *store) sessionKey(sessionID string) map[string]types.AttributeValue {
	return s.key(sortSession, sessionID)
}

func (s *store) logoutTokenKey(issuer, jti string) map[string]types.AttributeValue {
	return s.key(sortLogoutToken, digest(issuer, jti))
}

// withKey returns key with attributes added: a whole item to put.
func withKey(key map[string]types.AttributeValue, attrs map[string]types.AttributeValue) map[string]types.AttributeValue {
	for k, v := range key {
		attrs[k] = v
	}
	return attrs
}

// named says which table an error of DynamoDB came from, once.
func (s *store) named(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("table %q: %w", s.table, err)
}

// conditionFailed reports whether err is a write's condition that did not
// hold.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// attempt is a sign-in on its way: the digest of the secret in the
// browser's cookie, where to send the browser once signed in, when it
// started, and until when it may complete.
type attempt struct {
	bind     string
	returnTo string
	// started is when SignIn wrote the attempt, in whole seconds: the
	// zero time for an attempt of v0.1.0, which wrote none and whose
	// logins therefore never count as its own.
	started time.Time
	expires time.Time
	// fresh: a re-authentication, which the provider must have made the
	// user go through again (Reauthenticate).
	fresh bool
}

// putAttempt writes the attempt whose state is state. The state is fresh,
// 256 random bits: the condition only keeps a write from ever replacing
// another's.
func (s *store) putAttempt(ctx context.Context, state string, a attempt) error {
	item := withKey(s.attemptKey(state), map[string]types.AttributeValue{
		attrVersion:           num(formatVersion),
		attrKind:              str(kindAttempt),
		attrBind:              str(a.bind),
		attrReturnTo:          str(a.returnTo),
		attrStarted:           num(a.started.Unix()),
		s.layout.TTLAttribute: num(a.expires.Unix()),
	})
	if a.fresh {
		item[attrFresh] = &types.AttributeValueMemberBOOL{Value: true}
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": s.layout.PartitionKey},
	})
	return s.named(err)
}

// takeAttempt deletes the attempt of state, if it is this browser's (bind)
// and has not expired at now, and returns it: one conditional delete, which
// one of racing callbacks alone wins. An attempt of another browser stays
// for its own. found is false for an unknown, used, expired or another
// browser's attempt alike.
func (s *store) takeAttempt(ctx context.Context, state, bind string, now time.Time) (a attempt, found bool, err error) {
	out, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           aws.String(s.table),
		Key:                 s.attemptKey(state),
		ConditionExpression: aws.String("#kind = :kind AND #bind = :bind AND #ttl > :now"),
		ExpressionAttributeNames: map[string]string{
			"#kind": attrKind, "#bind": attrBind, "#ttl": s.layout.TTLAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":kind": str(kindAttempt), ":bind": str(bind), ":now": num(now.Unix()),
		},
		ReturnValues: types.ReturnValueAllOld,
	})
	switch {
	case conditionFailed(err):
		return attempt{}, false, nil
	case err != nil:
		return attempt{}, false, s.named(err)
	}
	d := decoder{av: out.Attributes}
	a = attempt{bind: d.str(attrBind), returnTo: d.str(attrReturnTo), expires: time.Unix(d.num(s.layout.TTLAttribute), 0)}
	if f, ok := out.Attributes[attrFresh].(*types.AttributeValueMemberBOOL); ok {
		a.fresh = f.Value
	}
	if _, ok := out.Attributes[attrStarted]; ok {
		a.started = time.Unix(d.num(attrStarted), 0)
	}
	if d.num(attrVersion) != formatVersion || d.err != nil {
		return attempt{}, false, nil // not a format this release wrote: no attempt
	}
	return a, true, nil
}

// link is one of the app's sessions that a provider session or a subject
// signed in: what [ddbsession.Manager.Revoke] needs to end it, the iat of
// the ID token it rests on, and, in epoch seconds, the latest it can live.
// It is stored as JSON in a string set, which one UpdateItem adds to.
type link struct {
	ID    string `json:"id"`
	PK    string `json:"pk"`
	SK    string `json:"sk,omitempty"`
	IAT   int64  `json:"iat"`
	Until int64  `json:"until"`
}

func (l link) encode() string {
	b, _ := json.Marshal(l) // strings and numbers: never fails
	return string(b)
}

// decodeLinks reads a set of links; an element that does not decode is
// skipped, and returned among stale for its removal.
func decodeLinks(av types.AttributeValue) (links []link, raw []string) {
	ss, _ := av.(*types.AttributeValueMemberSS)
	if ss == nil {
		return nil, nil
	}
	for _, v := range ss.Value {
		var l link
		if json.Unmarshal([]byte(v), &l) != nil || l.ID == "" || l.PK == "" {
			l = link{} // dropped as stale by its zero Until
		}
		links = append(links, l)
		raw = append(raw, v)
	}
	return links, raw
}

// errEnded is addLink's answer for a provider session or a subject that a
// back-channel logout ended after the ID token was issued.
var errEnded = errors.New("the provider has ended this sign-in's session")

// addLink records l under the provider session or subject at key, unless
// a logout has ended it: a provider session at any time, a subject at or
// after the ID token's iat (the provider's clock against itself). The
// condition and the add are one write, so a back-channel logout that
// reads the item either sees l or leaves a mark that refuses it. It
// returns the links as they stand, for the caller to drop those past
// their life, or errEnded.
func (s *store) addLink(ctx context.Context, key map[string]types.AttributeValue, kind string, l link, set map[string]types.AttributeValue) ([]link, []string, error) {
	names := map[string]string{"#v": attrVersion, "#kind": attrKind, "#sessions": attrSessions, "#out": attrLoggedOut, "#ttl": s.layout.TTLAttribute}
	values := map[string]types.AttributeValue{
		":v": num(formatVersion), ":kind": str(kind), ":l": &types.AttributeValueMemberSS{Value: []string{l.encode()}}, ":until": num(l.Until),
	}
	update := "ADD #sessions :l SET #v = :v, #kind = :kind, #ttl = :until"
	for _, name := range slices.Sorted(maps.Keys(set)) {
		names["#"+name], values[":"+name] = name, set[name]
		update += ", #" + name + " = :" + name
	}
	condition := "attribute_not_exists(#out)"
	if kind == kindSubject {
		condition += " OR #out < :iat"
		values[":iat"] = num(l.IAT)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key,
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(condition),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	switch {
	case conditionFailed(err):
		return nil, nil, errEnded
	case err != nil:
		return nil, nil, s.named(err)
	}
	links, raw := decodeLinks(out.Attributes[attrSessions])
	return links, raw, nil
}

// dropLinks removes the links raw from the item at key.
func (s *store) dropLinks(ctx context.Context, key map[string]types.AttributeValue, raw []string) error {
	if len(raw) == 0 {
		return nil
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key,
		UpdateExpression:          aws.String("DELETE #sessions :l"),
		ConditionExpression:       aws.String("attribute_exists(#sessions)"),
		ExpressionAttributeNames:  map[string]string{"#sessions": attrSessions},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberSS{Value: raw}},
	})
	if conditionFailed(err) {
		return nil // gone already
	}
	return s.named(err)
}

// errOtherSubject is endProviderSession's answer for a logout token whose
// sub is not the subject that signed in with its sid.
var errOtherSubject = errors.New("the logout token's sub is not the subject of its sid")

// endProviderSession marks the provider session at key as logged out by a
// token issued at iat, so that no sign-in of it is recorded from now on,
// and returns the links recorded before, in one write. With subject set
// (the token's sub), a provider session of another subject is left alone,
// with errOtherSubject. A provider session never seen gets a mark too,
// kept until keep, for a sign-in still on its way.
func (s *store) endProviderSession(ctx context.Context, key map[string]types.AttributeValue, iat int64, subject string, keep time.Time) ([]link, []string, error) {
	names := map[string]string{"#v": attrVersion, "#kind": attrKind, "#out": attrLoggedOut, "#ttl": s.layout.TTLAttribute}
	values := map[string]types.AttributeValue{":v": num(formatVersion), ":kind": str(kindProviderSession), ":iat": num(iat), ":keep": num(keep.Unix())}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key,
		UpdateExpression:          aws.String("SET #v = :v, #kind = :kind, #out = :iat, #ttl = if_not_exists(#ttl, :keep)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	}
	if subject != "" {
		names["#sub"], values[":sub"] = attrSubject, str(subject)
		in.ConditionExpression = aws.String("attribute_not_exists(#sub) OR #sub = :sub")
	}
	out, err := s.client.UpdateItem(ctx, in)
	switch {
	case conditionFailed(err):
		return nil, nil, errOtherSubject
	case err != nil:
		return nil, nil, s.named(err)
	}
	links, raw := decodeLinks(out.Attributes[attrSessions])
	return links, raw, nil
}

// endSubject marks the subject at key as logged out by a token issued at
// iat, so that no sign-in whose ID token was issued at or before it is
// recorded from now on, and returns the links recorded before, in one
// write. A mark of a later logout stays: the links are read then.
func (s *store) endSubject(ctx context.Context, key map[string]types.AttributeValue, iat int64, keep time.Time) ([]link, []string, error) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 key,
		UpdateExpression:    aws.String("SET #v = :v, #kind = :kind, #out = :iat, #ttl = if_not_exists(#ttl, :keep)"),
		ConditionExpression: aws.String("attribute_not_exists(#out) OR #out < :iat"),
		ExpressionAttributeNames: map[string]string{
			"#v": attrVersion, "#kind": attrKind, "#out": attrLoggedOut, "#ttl": s.layout.TTLAttribute,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":v": num(formatVersion), ":kind": str(kindSubject), ":iat": num(iat), ":keep": num(keep.Unix()),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if conditionFailed(err) {
		got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, nil, s.named(err)
		}
		links, raw := decodeLinks(got.Item[attrSessions])
		return links, raw, nil
	}
	if err != nil {
		return nil, nil, s.named(err)
	}
	links, raw := decodeLinks(out.Attributes[attrSessions])
	return links, raw, nil
}

// record is what the module keeps of one of the app's sessions that
// signed in through the provider: whose it is at the provider, the ID
// token for the end-session request's id_token_hint, and the app's user.
type record struct {
	issuer, subject, sid string
	idToken              string
	user                 ddbsession.UserKey
	until                time.Time
}

func (s *store) putRecord(ctx context.Context, sessionID string, r record) error {
	item := withKey(s.sessionKey(sessionID), map[string]types.AttributeValue{
		attrVersion:           num(formatVersion),
		attrKind:              str(kindSession),
		attrIssuer:            str(r.issuer),
		attrSubject:           str(r.subject),
		attrIDToken:           str(r.idToken),
		attrUserPK:            str(r.user.PK),
		s.layout.TTLAttribute: num(r.until.Unix()),
	})
	if r.sid != "" {
		item[attrSID] = str(r.sid)
	}
	if r.user.SK != "" {
		item[attrUserSK] = str(r.user.SK)
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return s.named(err)
}

// getRecord reads the record of session sessionID; found is false for
// none, one past its life at now, and one of another form.
func (s *store) getRecord(ctx context.Context, sessionID string, now time.Time) (r record, found bool, err error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: s.sessionKey(sessionID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return record{}, false, s.named(err)
	}
	if out.Item == nil {
		return record{}, false, nil
	}
	d := decoder{av: out.Item}
	r = record{
		issuer: d.str(attrIssuer), subject: d.str(attrSubject), idToken: d.str(attrIDToken),
		user:  ddbsession.UserKey{PK: d.str(attrUserPK), SK: d.optStr(attrUserSK)},
		sid:   d.optStr(attrSID),
		until: time.Unix(d.num(s.layout.TTLAttribute), 0),
	}
	if d.err != nil || d.num(attrVersion) != formatVersion || d.str(attrKind) != kindSession || !r.until.After(now) {
		return record{}, false, nil
	}
	return r, true, nil
}

func (s *store) deleteRecord(ctx context.Context, sessionID string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: s.sessionKey(sessionID)})
	return s.named(err)
}

// seeLogoutToken records the logout token jti of issuer until exp, when
// it expires and no verifier accepts it any longer. fresh is false if it
// was recorded before: a replay.
func (s *store) seeLogoutToken(ctx context.Context, issuer, jti string, exp time.Time) (fresh bool, err error) {
	item := withKey(s.logoutTokenKey(issuer, jti), map[string]types.AttributeValue{
		attrVersion:           num(formatVersion),
		attrKind:              str(kindLogoutToken),
		s.layout.TTLAttribute: num(exp.Unix() + 1),
	})
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": s.layout.PartitionKey},
	})
	switch {
	case conditionFailed(err):
		return false, nil
	case err != nil:
		return false, s.named(err)
	}
	return true, nil
}

// forgetLogoutToken deletes the record of a logout token whose logout did
// not complete, so that the provider's retry of it is not a replay.
func (s *store) forgetLogoutToken(ctx context.Context, issuer, jti string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: s.logoutTokenKey(issuer, jti)})
	return s.named(err)
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// decoder reads attributes of one item; the first missing or mistyped one
// sets err, and the item counts as absent.
type decoder struct {
	av  map[string]types.AttributeValue
	err error
}

func (d *decoder) str(name string) string {
	s, ok := d.av[name].(*types.AttributeValueMemberS)
	if !ok {
		d.fail(name)
		return ""
	}
	return s.Value
}

func (d *decoder) optStr(name string) string {
	if _, present := d.av[name]; !present {
		return ""
	}
	return d.str(name)
}

func (d *decoder) num(name string) int64 {
	n, ok := d.av[name].(*types.AttributeValueMemberN)
	if !ok {
		d.fail(name)
		return 0
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		d.fail(name)
	}
	return v
}

func (d *decoder) fail(name string) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %q missing or mistyped", name)
	}
}
