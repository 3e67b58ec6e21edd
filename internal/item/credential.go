package item

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// A credential is what a client presents: the session cookie's value, or a
// bearer token. It is a token, optionally followed by the key of the user
// item the session belongs to, so that the session and the user can be read
// in one round trip:
//
//	<token>                       the token alone (any release)
//	<token>.<b64(userPK)>         hash-only table
//	<token>.<b64(userPK)>.<b64(userSK)>
//
// b64 is unpadded base64url. The user key is no secret from whoever holds the
// token, who holds the session anyway; the table is still addressed by the
// token's digest alone, and the session item names its user, which a reader
// checks against the credential's.
type Credential struct {
	Token  string
	UserPK string // empty when the credential carries no user key
	UserSK string
}

// HasUser reports whether c carries a user key.
func (c Credential) HasUser() bool { return c.UserPK != "" }

// MaxUserKey bounds the bytes of a user key (PK and SK together) that a
// credential carries, so that a cookie stays well under browsers' 4 KB. A
// longer key is left out, and the session costs two reads.
const MaxUserKey = 1024

// Credential returns the credential for token and, if withUser and the key
// fits, the user key.
func (l *Layout) Credential(token, userPK, userSK string, withUser bool) string {
	if !withUser || len(userPK)+len(userSK) > MaxUserKey {
		return token
	}
	enc := base64.RawURLEncoding
	s := token + "." + enc.EncodeToString([]byte(userPK))
	if !l.HashOnly {
		s += "." + enc.EncodeToString([]byte(userSK))
	}
	return s
}

// ParseCredential reads s, and reports false for anything that is not a
// credential this layout could have issued: a malformed token, a user key
// that does not fit the table's key schema, is too long, or lies under the
// prefixes of the session items (which no user item does). Nothing that
// fails here may reach DynamoDB.
func (l *Layout) ParseCredential(s string) (Credential, bool) {
	token, rest, withUser := strings.Cut(s, ".")
	if !ValidToken(token) {
		return Credential{}, false
	}
	c := Credential{Token: token}
	if !withUser {
		return c, true
	}
	if len(rest) > base64.RawURLEncoding.EncodedLen(MaxUserKey)+1 {
		return Credential{}, false
	}
	pk, sk, hasSK := strings.Cut(rest, ".")
	if hasSK == l.HashOnly {
		return Credential{}, false
	}
	var ok bool
	if c.UserPK, ok = decodeKeyPart(pk); !ok || c.UserPK == "" {
		return Credential{}, false
	}
	if hasSK {
		if c.UserSK, ok = decodeKeyPart(sk); !ok || c.UserSK == "" {
			return Credential{}, false
		}
	}
	if len(c.UserPK)+len(c.UserSK) > MaxUserKey ||
		strings.HasPrefix(c.UserPK, l.SessionPrefix) || strings.HasPrefix(c.UserPK, l.UserSessionsPrefix) {
		return Credential{}, false
	}
	return c, true
}

// strictB64 rejects base64 with stray bits, so that each key has one form.
var strictB64 = base64.RawURLEncoding.Strict()

func decodeKeyPart(s string) (string, bool) {
	// Go's base64 decoders skip '\r' and '\n', even strict ones: without
	// this check "key\n" would be a second spelling of "key".
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", false
		}
	}
	var buf [MaxUserKey]byte
	if strictB64.DecodedLen(len(s)) > len(buf) {
		return "", false
	}
	n, err := strictB64.Decode(buf[:], []byte(s))
	b := buf[:n]
	return string(b), err == nil && utf8.Valid(b) // DynamoDB Strings are UTF-8
}
