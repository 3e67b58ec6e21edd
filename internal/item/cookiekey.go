package item

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Cookie keys seal the user key that a credential carries, so that the
// credential names its user to the server, which reads the session and the
// user in one round trip, and to no one else: not a log, a proxy or a
// browser extension that sees the cookie. They live in the layout record,
// in attribute cookieKeys, a List of Binary values of 32 bytes: the first
// seals, every one opens. The record gets one when it is written; a table
// whose record has none (one of release v0.2.0) gets credentials with the
// plain user key, which that release reads, until a key is added
// (AddCookieKey). Whoever can read the table can read user keys anyway, so
// a key kept in it hides nothing from them that the seal should.
const attrCookieKeys = "cookieKeys"

// maxCookieKeys is how many keys a record keeps: a rotation drops the
// oldest beyond it, whose cookies then cost the two reads of a token alone
// until their next refresh seals them anew.
const maxCookieKeys = 3

// A sealed user key is keyID(4) || nonce(12) || AES-256-GCM(userKey), the
// token the additional data, so that a seal moved to another credential
// does not open. The plaintext is uvarint(len(userPK)) || userPK || userSK.
// The nonce is synthetic, an HMAC of the token and the plaintext (as in
// SIV): a session's credential is the same at each refresh, so that its
// cookie does not change, and two nonces meet only if their inputs do,
// with the plaintext then the same too. Each key derives its cipher's and
// its HMAC's keys apart (HKDF-SHA256).
const (
	keyIDLen   = 4
	nonceLen   = 12
	sealedMin  = keyIDLen + nonceLen + 1 + 1 + 16 // a one-byte PK
	sealedMax  = keyIDLen + nonceLen + 2 + MaxUserKey + 16
	cookieKeyN = 32
)

// CookieKeys are the keys of a layout record, ready to seal and open. The
// zero value has none.
type CookieKeys struct {
	ids   [][keyIDLen]byte
	aeads []cipher.AEAD
	mac   []byte // the first key's HMAC key, which makes its nonces
}

// NewCookieKey returns a new random cookie key.
func NewCookieKey() []byte {
	key := make([]byte, cookieKeyN)
	rand.Read(key)
	return key
}

// DecodeCookieKeys reads the cookie keys of layout record av; a record
// without any has none.
func DecodeCookieKeys(av map[string]types.AttributeValue) (*CookieKeys, error) {
	k := &CookieKeys{}
	l, ok := av[attrCookieKeys].(*types.AttributeValueMemberL)
	if !ok {
		if av[attrCookieKeys] != nil {
			return nil, fmt.Errorf("%q is not a List", attrCookieKeys)
		}
		return k, nil
	}
	for _, v := range l.Value {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok || len(b.Value) != cookieKeyN {
			return nil, fmt.Errorf("%q holds a value that is not a key of %d bytes", attrCookieKeys, cookieKeyN)
		}
		sealKey, err := hkdf.Key(sha256.New, b.Value, nil, "ddbsession cookie seal", 32)
		if err != nil {
			return nil, err
		}
		if k.mac == nil {
			if k.mac, err = hkdf.Key(sha256.New, b.Value, nil, "ddbsession cookie nonce", 32); err != nil {
				return nil, err
			}
		}
		block, err := aes.NewCipher(sealKey)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b.Value)
		k.ids = append(k.ids, [keyIDLen]byte(sum[:keyIDLen]))
		k.aeads = append(k.aeads, aead)
	}
	return k, nil
}

// Any reports whether k has a key to seal with.
func (k *CookieKeys) Any() bool { return k != nil && len(k.aeads) > 0 }

// seal seals the user key for token under the first key.
func (k *CookieKeys) seal(token, userPK, userSK string) []byte {
	plain := binary.AppendUvarint(make([]byte, 0, 2+len(userPK)+len(userSK)), uint64(len(userPK)))
	plain = append(append(plain, userPK...), userSK...)
	mac := hmac.New(sha256.New, k.mac)
	mac.Write([]byte(token))
	mac.Write(plain)
	out := append(append(make([]byte, 0, sealedMax), k.ids[0][:]...), mac.Sum(nil)[:nonceLen]...)
	return k.aeads[0].Seal(out, out[keyIDLen:], plain, []byte(token))
}

// OpenResult is what opening a sealed user key found.
type OpenResult int

const (
	// Opened: the seal opened, and the credential names its user.
	Opened OpenResult = iota
	// UnknownKey: no key of k has the seal's key id: a key added since k
	// was read (the credential's token alone then decides), or none.
	UnknownKey
	// Forged: a key of k has the seal's id, and the seal does not open
	// with it for this token: altered, or moved from another credential.
	Forged
)

// open opens c's sealed user key into c.UserPK and c.UserSK.
func (k *CookieKeys) open(c *Credential) OpenResult {
	if k == nil {
		return UnknownKey
	}
	token, sealed := c.sealed[:tokenLen], c.sealed[tokenLen:]
	for i, id := range k.ids {
		if [keyIDLen]byte(sealed[:keyIDLen]) != id {
			continue
		}
		ciphertext := sealed[keyIDLen+nonceLen:]
		plain, err := k.aeads[i].Open(ciphertext[:0], sealed[keyIDLen:keyIDLen+nonceLen], ciphertext, token)
		if err != nil {
			return Forged
		}
		n, w := binary.Uvarint(plain)
		if w <= 0 || n > uint64(len(plain)-w) {
			return Forged
		}
		key := string(plain[w:]) // one allocation for both
		c.UserPK, c.UserSK = key[:n], key[n:]
		return Opened
	}
	return UnknownKey
}

// Open opens the user key that c carries sealed, if it does, and clears
// the seal: c then names its user (Opened), or carries the token alone
// (UnknownKey), or must be refused (Forged). A credential that carries no
// seal is Opened as it is.
func (k *CookieKeys) Open(l *Layout, c *Credential) OpenResult {
	if c.sealed == nil {
		return Opened
	}
	r := k.open(c)
	c.sealed = nil
	if r == Opened && !l.userKeyFits(c.UserPK, c.UserSK) {
		r = Forged // no credential this layout issued: a key sealed for another
	}
	if r != Opened {
		c.UserPK, c.UserSK = "", ""
	}
	return r
}

// AddCookieKey returns the record av with key added as the first cookie key,
// keeping at most maxCookieKeys: a rotation, or the first key of a table
// whose record has none.
func AddCookieKey(av map[string]types.AttributeValue, key []byte) map[string]types.AttributeValue {
	keys := []types.AttributeValue{&types.AttributeValueMemberB{Value: key}}
	if l, ok := av[attrCookieKeys].(*types.AttributeValueMemberL); ok {
		keys = append(keys, l.Value...)
	}
	out := make(map[string]types.AttributeValue, len(av)+1)
	for n, v := range av {
		out[n] = v
	}
	out[attrCookieKeys] = &types.AttributeValueMemberL{Value: keys[:min(len(keys), maxCookieKeys)]}
	return out
}
