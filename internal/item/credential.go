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
//	<token>~<b64(sealed user key)> (see CookieKeys)
//
// b64 is unpadded base64url. The plain user key is no secret from whoever
// holds the token, who holds the session anyway, but is from whoever sees
// the cookie go by: credentials carry it sealed where the table has cookie
// keys. The table is still addressed by the token's digest alone, and the
// session item names its user, which a reader checks against the
// credential's. Release v0.2.0 reads a sealed credential as malformed,
// since "~" is no character of a token.
type Credential struct {
	Token  string
	UserPK string // empty when the credential carries no user key
	UserSK string
	// sealed is the token, then the sealed user key, until
	// CookieKeys.Open: one buffer, which Open opens in place, so that
	// the hot path allocates no more than for a plain key.
	sealed []byte
}

// HasUser reports whether c carries a user key, in the plain or opened.
func (c Credential) HasUser() bool { return c.UserPK != "" }

// Sealed reports whether c carries a sealed user key, not opened yet.
func (c Credential) Sealed() bool { return c.sealed != nil }

// MaxUserKey bounds the bytes of a user key (PK and SK together) that a
// credential carries, so that a cookie stays well under browsers' 4 KB. A
// longer key is left out, and the session costs two reads.
const MaxUserKey = 1024

// Credential returns the credential for token and, if withUser and the key
// fits, the user key: sealed under keys if it has any, plain if keys is
// the none of a table without keys, and left out if keys is nil, not known
// yet.
func (l *Layout) Credential(token, userPK, userSK string, withUser bool, keys *CookieKeys) string {
	if !withUser || len(userPK)+len(userSK) > MaxUserKey || keys == nil {
		return token
	}
	enc := base64.RawURLEncoding
	if keys.Any() {
		return token + "~" + enc.EncodeToString(keys.seal(token, userPK, userSK))
	}
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
//
// A sealed user key is checked for its length alone: CookieKeys.Open
// opens it, once the keys are known.
func (l *Layout) ParseCredential(s string) (Credential, bool) {
	if token, sealed, ok := strings.Cut(s, "~"); ok {
		c := Credential{Token: token}
		if !ValidToken(token) || len(sealed) < strictB64.EncodedLen(sealedMin) || len(sealed) > strictB64.EncodedLen(sealedMax) {
			return Credential{}, false
		}
		c.sealed = make([]byte, tokenLen+strictB64.DecodedLen(len(sealed)))
		copy(c.sealed, token)
		if _, err := strictB64.Decode(c.sealed[tokenLen:], []byte(sealed)); err != nil || strings.ContainsAny(sealed, "\r\n") {
			return Credential{}, false
		}
		return c, true
	}
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
	if !l.userKeyFits(c.UserPK, c.UserSK) {
		return Credential{}, false
	}
	return c, true
}

// userKeyFits reports whether a credential of this layout may name user
// key (pk, sk): not too long, and not under the prefixes of the session
// items, which no user item is.
func (l *Layout) userKeyFits(pk, sk string) bool {
	return pk != "" && (sk == "") == l.HashOnly && len(pk)+len(sk) <= MaxUserKey &&
		!strings.HasPrefix(pk, l.SessionPrefix) && !strings.HasPrefix(pk, l.UserSessionsPrefix)
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
