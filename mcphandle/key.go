package mcphandle

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
)

// This file is the handles' key, which seals a session's token into its
// handle, so that a handle is never a credential anywhere else.
//
// A handle travels through a model's context, where it is less guarded
// than a bearer token, and its session is one of the caller's own user
// item, beside their web sessions. Were the handle the session's token,
// a leaked handle would sign its finder in, as the caller, to any Manager
// on the table (as a cookie, or a bearer token). So the handle is the
// token sealed with AES-256-GCM under a key that lives in one item of the
// table, with the caller as additional data: whoever holds a handle but
// cannot read the table holds nothing a Manager accepts; a handle opens
// only for its caller, so another caller's is refused before any call;
// and the table holds the token's SHA-256 alone, as for every session.

// keyPK and keySK are the key item's key: no user item's, no session's.
const (
	keyPK = "MCPHANDLE#KEY"
	keySK = "KEY"
)

// keyAttr holds the key, 32 random bytes.
const keyAttr = "handleKey"

// handleKey reads the table's handle key once per process, and creates it
// the first time a handle is opened on the table.
type handleKey struct {
	client ddbsession.Client
	table  string
	pkName string                          // the table's partition key
	key    map[string]types.AttributeValue // the key item's key

	mu  sync.Mutex
	val []byte // nil until read
}

func newHandleKey(client ddbsession.Client, table string, layout ddbsession.Layout) *handleKey {
	key := map[string]types.AttributeValue{layout.PartitionKey: &types.AttributeValueMemberS{Value: keyPK}}
	if !layout.HashOnly {
		key[layout.SortKey] = &types.AttributeValueMemberS{Value: keySK}
	}
	return &handleKey{client: client, table: table, pkName: layout.PartitionKey, key: key}
}

// errNoKey is a table on which no handle was ever opened.
var errNoKey = errors.New("mcphandle: the table has no handle key yet")

// get returns the key: this process's copy, or one strongly consistent
// GetItem; if the table has none, errNoKey, or, with create, a new key,
// written only if no other instance wrote one first (else theirs, read
// again). The first calls of a process wait for each other here.
func (k *handleKey) get(ctx context.Context, create bool) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.val != nil {
		return k.val, nil
	}
	val, err := k.read(ctx)
	if errors.Is(err, errNoKey) && create {
		val = randomKey()
		item := map[string]types.AttributeValue{keyAttr: &types.AttributeValueMemberB{Value: val}}
		maps.Copy(item, k.key)
		_, err = k.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(k.table), Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": k.pkName},
		})
		if lost := new(types.ConditionalCheckFailedException); errors.As(err, &lost) {
			val, err = k.read(ctx) // another instance wrote it first
		} else if err != nil {
			err = fmt.Errorf("mcphandle: create the handle key of table %q: %w", k.table, err)
		}
	}
	if err != nil {
		return nil, err
	}
	k.val = val
	return val, nil
}

// read reads the key item: its key, or errNoKey.
func (k *handleKey) read(ctx context.Context) ([]byte, error) {
	out, err := k.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(k.table), Key: k.key, ConsistentRead: aws.Bool(true)})
	switch {
	case err != nil:
		return nil, fmt.Errorf("mcphandle: read the handle key of table %q: %w", k.table, err)
	case out.Item == nil:
		return nil, errNoKey
	}
	if b, ok := out.Item[keyAttr].(*types.AttributeValueMemberB); ok && len(b.Value) == sha256.Size {
		return b.Value, nil
	}
	return nil, fmt.Errorf("mcphandle: the handle key item %s of table %q holds no 32-byte %q", keyPK, k.table, keyAttr)
}

func randomKey() []byte {
	b := make([]byte, sha256.Size)
	rand.Read(b) // never fails (crypto/rand)
	return b
}

// seal returns the handle of the session token: token, sealed with
// AES-256-GCM under key, with the caller as additional data, in base64url.
func seal(key []byte, token, caller string) string {
	aead := newAEAD(key)
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(token)+aead.Overhead())
	rand.Read(nonce) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(token), []byte(caller)))
}

// openHandle returns the session token that handle seals for caller, and
// false for anything else: a made-up handle, one changed by a bit, or
// another caller's.
func openHandle(key []byte, handle, caller string) (string, bool) {
	if len(handle) > maxHandle {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(handle)
	aead := newAEAD(key)
	if err != nil || len(b) < aead.NonceSize() {
		return "", false
	}
	token, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(caller))
	return string(token), err == nil
}

// tokenLen is the length of a ddbsession token: 26 characters of base32.
const tokenLen = 26

// maxHandle bounds a handle's length: a token of 26 characters, a 12-byte
// nonce and a 16-byte tag, in base64url, are 72 characters.
const maxHandle = 72

func newAEAD(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // unreachable: the key has 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err) // unreachable: AES has GCM's block size
	}
	return aead
}
