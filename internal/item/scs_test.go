package item

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// avCompare lets cmp look into the SDK's attribute value types.
var avCompare = cmp.AllowUnexported(types.AttributeValueMemberS{}, types.AttributeValueMemberN{}, types.AttributeValueMemberB{})

func scsToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// The scs item is written in the form the package comment documents, and
// read back by the same decoder, in a table with a sort key and in a
// hash-only one with another TTL attribute.
func TestSCSEncodeDecode(t *testing.T) {
	hashOnly := SCSLayout{Layout: Default, Prefix: "S#"}
	hashOnly.SortKey, hashOnly.HashOnly = "", true
	hashOnly.TTLAttribute = "ttl"
	for _, tc := range []struct {
		name   string
		layout SCSLayout
		want   func(pk string) map[string]types.AttributeValue
	}{
		{"default", SCSLayout{Layout: Default, Prefix: DefaultSCSPrefix}, func(pk string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{
				"pk": Str(pk), "sk": Str("SCS"), "v": Num(1), "kind": Str("scs-session"),
				"data": &types.AttributeValueMemberB{Value: []byte("gob")}, "expiresAt": Num(1796044200),
			}
		}},
		{"hash-only", hashOnly, func(pk string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{
				"pk": Str(pk), "v": Num(1), "kind": Str("scs-session"),
				"data": &types.AttributeValueMemberB{Value: []byte("gob")}, "ttl": Num(1796044200),
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := scsToken()
			pk := tc.layout.PK(token)
			sum := sha256.Sum256([]byte(token))
			if want := tc.layout.Prefix + base64.RawURLEncoding.EncodeToString(sum[:]); pk != want {
				t.Fatalf("PK = %q, want %q", pk, want)
			}
			s := SCSSession{Data: []byte("gob"), ExpiresAt: time.Unix(1796044200, 0)}
			av := tc.layout.Encode(pk, s)
			if diff := cmp.Diff(tc.want(pk), av, avCompare); diff != "" {
				t.Errorf("Encode (-documented +got):\n%s", diff)
			}
			got, err := tc.layout.Decode(av)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

// One table holds both kinds: neither decoder takes the other's item, and
// the same token never addresses both.
func TestSCSAndCoreItemsApart(t *testing.T) {
	l := SCSLayout{Layout: Default, Prefix: DefaultSCSPrefix}
	token := scsToken()
	if l.PK(token) == Default.SessionPK(token) {
		t.Errorf("scs and core partition keys agree for one token")
	}
	scsItem := l.Encode(l.PK(token), SCSSession{Data: []byte("x"), ExpiresAt: time.Unix(1796044200, 0)})
	if _, err := Default.Decode(scsItem, KindSession); !errors.Is(err, ErrOtherKind) {
		t.Errorf("core Decode of an scs item: %v, want ErrOtherKind", err)
	}
	coreItem := Default.EncodeSession(Default.SessionPK(NewToken()), testSession())
	if _, err := l.Decode(coreItem); !errors.Is(err, ErrOtherKind) {
		t.Errorf("scs Decode of a core session item: %v, want ErrOtherKind", err)
	}
	tombstone := l.Encode(l.PK(token), SCSSession{Data: []byte("x"), ExpiresAt: time.Unix(1796044200, 0)})
	tombstone[AttrKind] = Str(KindSCSDestroyed)
	delete(tombstone, AttrData)
	if _, err := l.Decode(tombstone); !errors.Is(err, ErrOtherKind) {
		t.Errorf("Decode of a tombstone: %v, want ErrOtherKind", err)
	}
}

func TestSCSDecodeMalformed(t *testing.T) {
	l := SCSLayout{Layout: Default, Prefix: DefaultSCSPrefix}
	good := func() map[string]types.AttributeValue {
		return l.Encode(l.PK(scsToken()), SCSSession{Data: []byte("x"), ExpiresAt: time.Unix(1796044200, 0)})
	}
	for name, mutate := range map[string]func(map[string]types.AttributeValue){
		"no data":        func(av map[string]types.AttributeValue) { delete(av, "data") },
		"string data":    func(av map[string]types.AttributeValue) { av["data"] = Str("x") },
		"no expiry":      func(av map[string]types.AttributeValue) { delete(av, "expiresAt") },
		"fractional":     func(av map[string]types.AttributeValue) { av["expiresAt"] = &types.AttributeValueMemberN{Value: "1.5"} },
		"other version":  func(av map[string]types.AttributeValue) { av["v"] = Num(2) },
		"no version":     func(av map[string]types.AttributeValue) { delete(av, "v") },
		"string version": func(av map[string]types.AttributeValue) { av["v"] = Str("1") },
	} {
		t.Run(name, func(t *testing.T) {
			av := good()
			mutate(av)
			if _, err := l.Decode(av); !errors.Is(err, ErrMalformed) {
				t.Errorf("Decode: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestValidSCSToken(t *testing.T) {
	good := scsToken()
	if !ValidSCSToken(good) {
		t.Fatalf("ValidSCSToken(%q) = false for a token as scs makes them", good)
	}
	sum := sha256.Sum256([]byte(good))
	if hashed := base64.RawURLEncoding.EncodeToString(sum[:]); !ValidSCSToken(hashed) {
		t.Errorf("ValidSCSToken rejects scs's HashTokenInStore form %q", hashed)
	}
	// The last character of a 43-character token carries 4 bits and 2
	// spare ones; "B" sets a spare bit.
	spare := good[:42] + "B"
	for name, token := range map[string]string{
		"empty":         "",
		"short":         good[:42],
		"long":          good + "A",
		"padded":        good[:42] + "=",
		"std alphabet":  strings.Repeat("+", 43),
		"space":         good[:42] + " ",
		"spare bit set": spare,
		"core token":    NewToken(),
	} {
		if ValidSCSToken(token) {
			t.Errorf("%s: ValidSCSToken(%q) = true", name, token)
		}
	}
}

// Whatever the cookie holds, ValidSCSToken accepts only strings that decode
// to 32 bytes and encode back to themselves.
func FuzzValidSCSToken(f *testing.F) {
	f.Add(scsToken())
	f.Add("")
	f.Add(strings.Repeat("A", 43))
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidSCSToken(s) {
			return
		}
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 32 || base64.RawURLEncoding.EncodeToString(b) != s {
			t.Errorf("ValidSCSToken(%q) = true, but it is not the encoding of 32 bytes", s)
		}
	})
}
