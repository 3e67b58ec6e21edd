package ddbsession

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// formatVersion is the item format this release writes, in attribute "v".
// Additive changes keep it; an incompatible change bumps it, and a release
// that reads the new format ships before one that writes it. A reader that
// meets a version it does not know treats the session as absent: failing
// closed is safer than misreading an item.
const formatVersion = 1

// Attribute names of session and index items. They are part of the stable
// item format documented in the package comment.
const (
	attrVersion      = "v"
	attrKind         = "kind"
	attrID           = "sid"
	attrUserPK       = "userPK"
	attrUserSK       = "userSK"
	attrCreatedAt    = "createdAt"
	attrRefreshedAt  = "refreshedAt"
	attrUserAgent    = "userAgent"
	attrSessionPK    = "sessionPK"
	attrExpiryBucket = "expiryBucket"

	kindSession = "session"
	kindIndex   = "session-index"
)

var reservedAttributes = map[string]bool{
	attrVersion: true, attrKind: true, attrID: true, attrUserPK: true, attrUserSK: true,
	attrCreatedAt: true, attrRefreshedAt: true, attrUserAgent: true, attrSessionPK: true,
	attrExpiryBucket: true,
}

// maxUserAgent bounds the stored User-Agent, which the client controls.
const maxUserAgent = 256

// UserKey is the primary key of the user's item: the app's own PK and, in a
// table with a sort key, SK. A session stores it so that authenticating a
// request needs no secondary index.
type UserKey struct {
	PK string
	SK string
}

// Session describes one signed-in session. It never holds the token.
type Session struct {
	// ID is the session's public identifier: random, unrelated to the
	// token and its hash, and safe to show on a "your devices" page.
	ID          string
	User        UserKey
	CreatedAt   time.Time
	RefreshedAt time.Time
	ExpiresAt   time.Time // whole seconds, as stored for TTL
	UserAgent   string
}

// ErrUserNotFound is returned by a [Config.LoadUser] for a user that does not
// exist, and by [Manager.RevokeAll] for a user item that is not in the table.
var ErrUserNotFound = errors.New("ddbsession: user not found")

// key builds a primary key; sk is dropped in a hash-only table.
func (m *Manager[U]) key(pk, sk string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{m.cfg.PartitionKey: &types.AttributeValueMemberS{Value: pk}}
	if !m.cfg.HashOnly {
		k[m.cfg.SortKey] = &types.AttributeValueMemberS{Value: sk}
	}
	return k
}

func (m *Manager[U]) sessionKey(sessionPK string) map[string]types.AttributeValue {
	return m.key(sessionPK, m.cfg.SessionSortValue)
}

// indexKey addresses the per-user index item of session id. The user's key
// is length-prefixed so that no two users share an index partition, whatever
// characters their keys hold.
func (m *Manager[U]) indexKey(user UserKey, id string) map[string]types.AttributeValue {
	return m.key(m.userSessionsPK(user), "SID#"+id)
}

func (m *Manager[U]) userSessionsPK(user UserKey) string {
	return m.cfg.UserSessionsPrefix + strconv.Itoa(len(user.PK)) + "#" + user.PK + user.SK
}

func (m *Manager[U]) userKey(user UserKey) map[string]types.AttributeValue {
	return m.key(user.PK, user.SK)
}

// sessionItem encodes s as the session item stored under sessionPK.
func (m *Manager[U]) sessionItem(sessionPK string, s Session) map[string]types.AttributeValue {
	item := m.sessionKey(sessionPK)
	m.putCommon(item, kindSession, s)
	if m.cfg.ExpiryIndex != "" {
		item[attrExpiryBucket] = str(m.expiryBucket(s.ID, s.ExpiresAt))
	}
	return item
}

// indexItem encodes s as its per-user index item, which points back at the
// session item so that [Manager.Revoke] can delete it.
func (m *Manager[U]) indexItem(sessionPK string, s Session) map[string]types.AttributeValue {
	item := m.indexKey(s.User, s.ID)
	m.putCommon(item, kindIndex, s)
	item[attrSessionPK] = str(sessionPK)
	return item
}

func (m *Manager[U]) putCommon(item map[string]types.AttributeValue, kind string, s Session) {
	item[attrVersion] = num(formatVersion)
	item[attrKind] = str(kind)
	item[attrID] = str(s.ID)
	item[attrUserPK] = str(s.User.PK)
	if s.User.SK != "" {
		item[attrUserSK] = str(s.User.SK)
	}
	item[attrCreatedAt] = num(s.CreatedAt.UnixMilli())
	item[attrRefreshedAt] = num(s.RefreshedAt.UnixMilli())
	item[m.cfg.TTLAttribute] = num(s.ExpiresAt.Unix())
	if s.UserAgent != "" {
		item[attrUserAgent] = str(s.UserAgent)
	}
}

// decodeSession reads the fields every session and index item carries. It
// reports false for an item that is not in a format this release knows.
func (m *Manager[U]) decodeSession(item map[string]types.AttributeValue, kind string) (Session, bool) {
	var s Session
	v, ok1 := getNum(item, attrVersion)
	k, _ := getStr(item, attrKind)
	id, ok2 := getStr(item, attrID)
	upk, ok3 := getStr(item, attrUserPK)
	created, ok4 := getNum(item, attrCreatedAt)
	refreshed, ok5 := getNum(item, attrRefreshedAt)
	expires, ok6 := getNum(item, m.cfg.TTLAttribute)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || v != formatVersion || k != kind {
		return s, false
	}
	s.ID = id
	s.User.PK = upk
	s.User.SK, _ = getStr(item, attrUserSK)
	s.CreatedAt = time.UnixMilli(created)
	s.RefreshedAt = time.UnixMilli(refreshed)
	s.ExpiresAt = time.Unix(expires, 0)
	s.UserAgent, _ = getStr(item, attrUserAgent)
	return s, true
}

// getSession reads the session item under sessionPK with one strongly
// consistent GetItem. It reports false, with no error, for a missing or
// malformed item.
func (m *Manager[U]) getSession(ctx context.Context, sessionPK string) (Session, bool, error) {
	out, err := m.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &m.cfg.Table,
		Key:            m.sessionKey(sessionPK),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Session{}, false, fmt.Errorf("ddbsession: get session: %w", err)
	}
	if out.Item == nil {
		return Session{}, false, nil
	}
	s, ok := m.decodeSession(out.Item, kindSession)
	if !ok {
		m.cfg.Logger.WarnContext(ctx, "ddbsession: ignoring session item in an unknown format")
	}
	return s, ok, nil
}

// createSession writes a new session: first its per-user index item, then
// the session item itself, which must not exist yet. The index goes first so
// that a session is never live without showing in [Manager.List]; if the
// second write fails, the first is undone as far as possible, and its TTL
// removes it otherwise. (A refresh keeps the index item in step, and
// rewrites it if it went missing.)
func (m *Manager[U]) createSession(ctx context.Context, sessionPK string, s Session) error {
	if !m.cfg.HashOnly {
		_, err := m.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                &m.cfg.Table,
			Item:                     m.indexItem(sessionPK, s),
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": m.cfg.PartitionKey},
		})
		if err != nil {
			return fmt.Errorf("ddbsession: create session index item: %w", err)
		}
	}
	_, err := m.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &m.cfg.Table,
		Item:                     m.sessionItem(sessionPK, s),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": m.cfg.PartitionKey},
	})
	if err != nil {
		if !m.cfg.HashOnly {
			undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
			defer cancel()
			m.deleteItem(undo, m.indexKey(s.User, s.ID), "undo session index item")
		}
		return fmt.Errorf("ddbsession: create session: %w", err)
	}
	return nil
}

// deleteSession deletes the session item under sessionPK and, once it is
// gone, its index item. It returns the deleted session, or false if there
// was none. Once the session item is gone its token is dead, so a failure
// to delete the index item is only logged: the item lingers in List until
// TTL or a Revoke removes it.
func (m *Manager[U]) deleteSession(ctx context.Context, sessionPK string) (Session, bool, error) {
	out, err := m.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:    &m.cfg.Table,
		Key:          m.sessionKey(sessionPK),
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		return Session{}, false, fmt.Errorf("ddbsession: delete session: %w", err)
	}
	s, ok := m.decodeSession(out.Attributes, kindSession)
	if !ok {
		return Session{}, false, nil
	}
	if !m.cfg.HashOnly {
		m.deleteItem(ctx, m.indexKey(s.User, s.ID), "delete session index item")
	}
	return s, true, nil
}

// deleteItem deletes an item on a best-effort path and logs a failure.
func (m *Manager[U]) deleteItem(ctx context.Context, key map[string]types.AttributeValue, what string) {
	if _, err := m.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &m.cfg.Table, Key: key}); err != nil {
		m.cfg.Logger.ErrorContext(ctx, "ddbsession: "+what, "err", err)
	}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getStr(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// getNum reads an integer Number attribute. A fractional or out-of-range
// value is reported as missing rather than rounded.
func getNum(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}
