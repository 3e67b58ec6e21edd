package item

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// testKeys are the cookie keys of a layout record that holds keys, the
// first first.
func testKeys(t *testing.T, keys ...[]byte) *CookieKeys {
	t.Helper()
	av := Default.EncodeLayout()
	for i := len(keys) - 1; i >= 0; i-- {
		av = AddCookieKey(av, keys[i])
	}
	k, err := DecodeCookieKeys(av)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// open parses and opens credential c under keys.
func open(t *testing.T, l *Layout, keys *CookieKeys, c string) (Credential, OpenResult) {
	t.Helper()
	cred, ok := l.ParseCredential(c)
	if !ok {
		t.Fatalf("ParseCredential(%q) refused it", c)
	}
	return cred, keys.Open(l, &cred)
}

// A sealed credential names its user to the keys' holder only: it opens to
// the key sealed, for its token alone, under any of the record's keys.
func TestCookieKeysSealAndOpen(t *testing.T) {
	for _, l := range []Layout{Default, hashOnly(t)} {
		sk := "PROFILE"
		if l.HashOnly {
			sk = ""
		}
		old, cur := NewCookieKey(), NewCookieKey()
		token := NewToken()
		sealedOld := l.Credential(token, "USER#alice", sk, true, testKeys(t, old))
		rotated := testKeys(t, cur, old)
		sealedNew := l.Credential(token, "USER#alice", sk, true, rotated)
		if strings.Contains(sealedNew, ".") || ValidToken(sealedNew) {
			// Release v0.2.0 cuts a credential at its first "." and
			// wants a token before it: it refuses this one as malformed.
			t.Errorf("%q is a credential that v0.2.0 would read", sealedNew)
		}
		for _, c := range []string{sealedOld, sealedNew} {
			cred, r := open(t, &l, rotated, c)
			if r != Opened || cred.UserPK != "USER#alice" || cred.UserSK != sk || cred.Token != token || cred.Sealed() {
				t.Errorf("%v: Open = %v, %+v; want the sealed key", l.HashOnly, r, cred)
			}
		}
		if _, r := open(t, &l, testKeys(t, old), sealedNew); r != UnknownKey {
			t.Errorf("a key the keys lack: %v, want UnknownKey", r)
		}
		if _, r := open(t, &l, nil, sealedNew); r != UnknownKey {
			t.Errorf("keys not known: %v, want UnknownKey", r)
		}
		// Moved to another token, or altered anywhere past the key id.
		moved := NewToken() + sealedNew[len(token):]
		if cred, r := open(t, &l, rotated, moved); r != Forged || cred.HasUser() {
			t.Errorf("a seal moved to another token: %v, %+v; want Forged", r, cred)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(sealedNew[len(token)+1:])
		for i := keyIDLen; i < len(raw); i++ {
			b := append([]byte(nil), raw...)
			b[i] ^= 1
			if _, r := open(t, &l, rotated, token+"~"+base64.RawURLEncoding.EncodeToString(b)); r != Forged {
				t.Fatalf("byte %d flipped: %v, want Forged", i, r)
			}
		}
	}
}

// A table without keys (one of v0.2.0) gets the plain key that v0.2.0
// reads; keys not known yet, the token alone.
func TestCredentialWithoutKeys(t *testing.T) {
	l := Default
	token := NewToken()
	if c := l.Credential(token, "USER#alice", "PROFILE", true, new(CookieKeys)); c != token+".VVNFUiNhbGljZQ.UFJPRklMRQ" {
		t.Errorf("no keys: %q", c)
	}
	if c := l.Credential(token, "USER#alice", "PROFILE", true, nil); c != token {
		t.Errorf("keys not known: %q, want the token alone", c)
	}
}

// A record keeps maxCookieKeys keys, the newest first, and refuses to read
// a key of another length.
func TestAddCookieKey(t *testing.T) {
	av := Default.EncodeLayout()
	var added [][]byte
	for range maxCookieKeys + 1 {
		k := NewCookieKey()
		added = append(added, k)
		av = AddCookieKey(av, k)
	}
	l := av[attrCookieKeys].(*types.AttributeValueMemberL).Value
	if len(l) != maxCookieKeys || string(l[0].(*types.AttributeValueMemberB).Value) != string(added[maxCookieKeys]) {
		t.Errorf("after %d additions the record holds %d keys, first %x", maxCookieKeys+1, len(l), l[0])
	}
	av[attrCookieKeys] = &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{Value: []byte("short")}}}
	if _, err := DecodeCookieKeys(av); err == nil {
		t.Error("DecodeCookieKeys read a key of 5 bytes")
	}
}

func hashOnly(t *testing.T) Layout {
	t.Helper()
	l, err := Layout{HashOnly: true}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return l
}
