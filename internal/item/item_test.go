package item

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

func testSession() Session {
	created := time.UnixMilli(1796040000250)
	return Session{
		ID:          NewID(created),
		UserPK:      "USER#alice",
		UserSK:      "PROFILE",
		CreatedAt:   created,
		RefreshedAt: time.UnixMilli(1796040600250),
		ExpiresAt:   time.Unix(1796044200, 0),
		UserAgent:   "test-agent/1.0",
		AuthAt:      created.Add(time.Second),
		Methods:     []string{"password", "otp"},
	}
}

// The encoder's output is what the decoder reads, for both kinds, and in a
// hash-only table with a custom TTL attribute.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	custom := Default
	custom.SortKey, custom.HashOnly = "", true
	custom.TTLAttribute = "ttl"
	custom.ExpiryIndex, custom.ExpiryIndexShards = "expiry", 4
	for name, l := range map[string]Layout{"default": Default, "hash-only, custom TTL, expiry index": custom} {
		t.Run(name, func(t *testing.T) {
			s := testSession()
			s.Data, s.DataRev = `{"cart":[1,2]}`, 2 // session items only
			if l.HashOnly {
				s.UserSK = ""
			}
			sessionPK := l.SessionPK(NewToken())
			s.SessionPK = sessionPK // the session item's key, the index item's attribute

			got, err := l.Decode(l.EncodeSession(sessionPK, s), KindSession)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s, got); diff != "" {
				t.Errorf("session item (-want +got):\n%s", diff)
			}

			got, err = l.Decode(l.EncodeIndex(sessionPK, s), KindIndex)
			if err != nil {
				t.Fatal(err)
			}
			want := s
			want.Data, want.DataRev = "", 0
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("index item (-want +got):\n%s", diff)
			}
		})
	}
}

// A DPoP-bound session is format 7 in both items; only the session item
// keeps its key's thumbprint, and one read without it (from the expiry
// index) is bound all the same, to no key.
func TestDPoPRoundTrip(t *testing.T) {
	l := Default
	s := testSession()
	s.DPoP, s.DPoPKey = true, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
	s.SessionPK = l.SessionPK(NewToken())
	av := l.EncodeSession(s.SessionPK, s)
	if v := av[AttrVersion].(*types.AttributeValueMemberN).Value; v != "7" {
		t.Fatalf("v = %s, want 7", v)
	}
	got, err := l.Decode(av, KindSession)
	if err != nil || !cmp.Equal(s, got) {
		t.Fatalf("session item: %v (-want +got):\n%s", err, cmp.Diff(s, got))
	}
	index, err := l.Decode(l.EncodeIndex(s.SessionPK, s), KindIndex)
	if err != nil || !index.DPoP || index.DPoPKey != "" {
		t.Fatalf("index item: %+v, %v", index, err)
	}
	delete(av, AttrDPoPKey)
	if got, err := l.Decode(av, KindSession); err != nil || !got.DPoP || got.DPoPKey != "" {
		t.Fatalf("without its thumbprint: %+v, %v", got, err)
	}
}

// A session's authentication time is required, its methods are not; a
// pending login is a version of its own, which no index item has.
func TestDecodeAuthenticationAndPending(t *testing.T) {
	l := Default
	s := testSession()
	av := l.EncodeSession(l.SessionPK(NewToken()), s)
	delete(av, AttrMethods)
	if got, err := l.Decode(av, KindSession); err != nil || got.Methods != nil {
		t.Errorf("item without methods: Methods %v, err %v; want none", got.Methods, err)
	}
	delete(av, AttrAuthAt)
	if _, err := l.Decode(av, KindSession); !errors.Is(err, ErrMalformed) {
		t.Errorf("item without authAt: err %v, want ErrMalformed", err)
	}
	s.Pending = true
	av = l.EncodeSession(l.SessionPK(NewToken()), s)
	if v := av[AttrVersion].(*types.AttributeValueMemberN).Value; v != "6" {
		t.Errorf("pending session item v = %s, want 6", v)
	}
	if got, err := l.Decode(av, KindSession); err != nil || !got.Pending {
		t.Errorf("pending session item: Pending %v, err %v", got.Pending, err)
	}
	if _, err := l.Decode(l.EncodeIndex("SESSION#x", s), KindIndex); !errors.Is(err, ErrMalformed) {
		t.Errorf("pending index item: err %v, want ErrMalformed", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	l := Default
	valid := l.EncodeSession(l.SessionPK(NewToken()), testSession())
	for _, tc := range []struct {
		name   string
		change func(av map[string]types.AttributeValue)
		want   error
	}{
		{"other kind", func(av map[string]types.AttributeValue) { av[AttrKind] = Str(KindIndex) }, ErrOtherKind},
		{"no kind", func(av map[string]types.AttributeValue) { delete(av, AttrKind) }, ErrOtherKind},
		{"unknown version", func(av map[string]types.AttributeValue) { av[AttrVersion] = Num(8) }, ErrMalformed},
		{"format 4 without userGen", func(av map[string]types.AttributeValue) { delete(av, AttrUserGen) }, ErrMalformed},
		{"format 4 without credGen", func(av map[string]types.AttributeValue) { delete(av, AttrCredGen) }, ErrMalformed},
		{"no version", func(av map[string]types.AttributeValue) { delete(av, AttrVersion) }, ErrMalformed},
		{"no refreshedAt", func(av map[string]types.AttributeValue) { delete(av, AttrRefreshedAt) }, ErrMalformed},
		{"no TTL", func(av map[string]types.AttributeValue) { delete(av, l.TTLAttribute) }, ErrMalformed},
		{"fractional TTL", func(av map[string]types.AttributeValue) {
			av[l.TTLAttribute] = &types.AttributeValueMemberN{Value: "1796044200.5"}
		}, ErrMalformed},
		{"empty sid", func(av map[string]types.AttributeValue) { av[AttrID] = Str("") }, ErrMalformed},
		{"userSK a number", func(av map[string]types.AttributeValue) { av[AttrUserSK] = Num(1) }, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			av := maps.Clone(valid)
			tc.change(av)
			if _, err := l.Decode(av, KindSession); !errors.Is(err, tc.want) {
				t.Errorf("Decode error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTokensAndIDs(t *testing.T) {
	token, id := NewToken(), NewID(time.Now())
	if !ValidToken(token) || ValidID(token) {
		t.Errorf("token %q: ValidToken %v, ValidID %v", token, ValidToken(token), ValidID(token))
	}
	if !ValidID(id) || ValidToken(id) {
		t.Errorf("ID %q: ValidID %v, ValidToken %v", id, ValidID(id), ValidToken(id))
	}
	for _, bad := range []string{"", strings.ToLower(token), token + "A", token[:25] + "1", token[:25] + "="} {
		if ValidToken(bad) {
			t.Errorf("ValidToken(%q) = true", bad)
		}
	}
	pk := Default.SessionPK(token)
	if strings.Contains(pk, token) || !strings.HasPrefix(pk, Default.SessionPrefix) || len(pk) != len(Default.SessionPrefix)+43 {
		t.Errorf("SessionPK(%q) = %q, want the prefix and a base64url SHA-256", token, pk)
	}
}

// Index partitions of different users never coincide, whatever their keys
// hold.
func TestIndexPKIsInjective(t *testing.T) {
	a := Default.IndexPK("USER#a", "bPROFILE")
	b := Default.IndexPK("USER#ab", "PROFILE")
	if a == b {
		t.Errorf("two users share index partition %q", a)
	}
}

// IDs sort by creation time, and an index item's sort key is IndexSort and
// the ID.
func TestIDsSortByCreation(t *testing.T) {
	t0 := time.UnixMilli(1796040000250)
	a, b := NewID(t0), NewID(t0.Add(time.Millisecond))
	if a >= b || a[:12] != fmt.Sprintf("%012x", t0.UnixMilli()) {
		t.Errorf("NewID(t0) = %s, NewID(t0+1ms) = %s: want sorted, starting with the time", a, b)
	}
	if from := IndexSortFrom(t0); !(IndexSort+a >= from && IndexSort+a < IndexSortEnd) || IndexSort+NewID(t0.Add(-time.Millisecond)) >= from {
		t.Errorf("IndexSortFrom(t0) = %s does not split IDs at t0", from)
	}
	s := testSession()
	if k := Default.IndexKey(s)["sk"].(*types.AttributeValueMemberS).Value; k != IndexSort+s.ID {
		t.Errorf("index sort key %s, want %s", k, IndexSort+s.ID)
	}
}

// A credential has one spelling: line breaks, which Go's base64 decoders
// skip, make it malformed.
func TestCredentialHasOneSpelling(t *testing.T) {
	l := Default
	keys := testKeys(t, NewCookieKey())
	for _, c := range []string{l.Credential(NewToken(), "USER#alice", "PROFILE", true, new(CookieKeys)), l.Credential(NewToken(), "USER#alice", "PROFILE", true, keys)} {
		if _, ok := l.ParseCredential(c); !ok {
			t.Fatalf("ParseCredential(%q) refused the credential as issued", c)
		}
		for _, bad := range []string{c + "\n", c[:40] + "\r\n" + c[40:], strings.Replace(c, ".", ".\n", 1), strings.Replace(c, "~", "~\n", 1), c + "="} {
			if _, ok := l.ParseCredential(bad); ok && bad != c {
				t.Errorf("ParseCredential(%q) accepted a second spelling", bad)
			}
		}
	}
}

// The library's items beside a user's sessions read back as written, and
// an item of another form under their keys is an error, never a state
// with less in it: their readers fail closed.
func TestStateItems(t *testing.T) {
	l := Default
	for _, tc := range []struct {
		name   string
		valid  map[string]types.AttributeValue
		decode func(map[string]types.AttributeValue) error
	}{
		{"revocation", map[string]types.AttributeValue{AttrVersion: Num(1), AttrKind: Str(KindRevocation), AttrGen: Num(1796040000250)},
			func(av map[string]types.AttributeValue) error { _, err := DecodeRevocation(av); return err }},
		{"end record", l.EncodeEnd(l.SessionPK(NewToken()), NewID(time.Unix(1796040000, 0)), time.Unix(1796044200, 0)),
			func(av map[string]types.AttributeValue) error { _, err := DecodeEnd(av); return err }},
		{"global", map[string]types.AttributeValue{AttrVersion: Num(1), AttrKind: Str(KindGlobal), AttrGen: Num(3)},
			func(av map[string]types.AttributeValue) error { _, err := DecodeGlobal(av); return err }},
	} {
		if err := tc.decode(tc.valid); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		for change, f := range map[string]func(map[string]types.AttributeValue){
			"another kind":    func(av map[string]types.AttributeValue) { av[AttrKind] = Str(KindSession) },
			"unknown version": func(av map[string]types.AttributeValue) { av[AttrVersion] = Num(9) },
			"no kind":         func(av map[string]types.AttributeValue) { delete(av, AttrKind) },
		} {
			av := maps.Clone(tc.valid)
			f(av)
			if err := tc.decode(av); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s, %s: %v, want ErrMalformed", tc.name, change, err)
			}
		}
	}
	if v, err := DecodeRevocation(nil); v != 0 || err != nil {
		t.Errorf("DecodeRevocation(nil) = %d, %v; want 0", v, err)
	}
	if ended, err := DecodeEnd(nil); ended || err != nil {
		t.Errorf("DecodeEnd(nil) = %v, %v; want false", ended, err)
	}
}

// Slots keep their order, their sessions and their creation to the
// millisecond; 100 of them fit one read unit; a slots item that is not one
// is an error.
func TestSlots(t *testing.T) {
	l := Default
	var want []Slot
	for i := range 100 {
		want = append(want, Slot{SessionPK: l.SessionPK(NewToken()), Created: time.UnixMilli(1796040000250 + int64(i))})
	}
	w, err := l.ClaimSlots(Slots{}, want)
	if err != nil {
		t.Fatal(err)
	}
	av := l.SlotsKey("USER#alice", "PROFILE")
	for _, name := range []string{":v", ":kind", ":slots", ":next"} {
		attr := map[string]string{":v": AttrVersion, ":kind": AttrKind, ":slots": AttrSlots, ":next": AttrSlotsRev}[name]
		av[attr] = w.Values[name]
	}
	got, err := l.DecodeSlots(av)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Slots{List: want, Rev: 1}, got); diff != "" {
		t.Errorf("slots read back (-want +got):\n%s", diff)
	}
	if size := itemSize(av); size > 4096 {
		t.Errorf("a slots item of 100 is %d bytes, more than one read unit", size)
	}
	av[AttrSlots] = &types.AttributeValueMemberB{Value: []byte("short")}
	if _, err := l.DecodeSlots(av); !errors.Is(err, ErrMalformed) {
		t.Errorf("slots of the wrong length: %v, want ErrMalformed", err)
	}
	if _, err := l.ClaimSlots(Slots{}, []Slot{{SessionPK: "USER#alice"}}); err == nil {
		t.Error("ClaimSlots took a slot of a key that is no session's")
	}
}

// itemSize is an item's size as DynamoDB bills it: each attribute's name
// and value, a String's UTF-8 bytes, a Number's digits over two and one,
// a List's or Map's three bytes and one per element.
func itemSize(av map[string]types.AttributeValue) int {
	n := 0
	for name, v := range av {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(strings.TrimLeft(v.Value, "-0"))+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + itemSize(v.Value) + len(v.Value)
	}
	return 1
}

// The largest session item, with MaxData of data, every optional attribute
// at its bound, a device binding with an RSA key, user keys of 128 bytes
// each and an expiry index, stays within 4 KB: one read unit per strongly
// consistent read, as UpdateData's documentation says.
func TestSessionItemFitsOneReadUnit(t *testing.T) {
	l := Default
	l.ExpiryIndex = "expiry"
	s := testSession()
	s.UserPK, s.UserSK = strings.Repeat("p", 128), strings.Repeat("s", 128)
	s.UserAgent = strings.Repeat("a", MaxUserAgent)
	s.Methods = []string{strings.Repeat("m", 32), strings.Repeat("m", 32), strings.Repeat("m", 32), strings.Repeat("m", 32)}
	s.BrowserOnly = true
	s.Stamp = Stamp{Revocation: 1<<62 - 1, User: 1<<62 - 1, Credential: 1<<62 - 1, Global: 1<<62 - 1}
	s.Data, s.DataRev = `"`+strings.Repeat("x", MaxData-2)+`"`, 1<<62
	s.DeviceBound = true
	s.Binding.Key = `{"kty":"RSA","n":"` + strings.Repeat("n", 342) + `","e":"AQAB","alg":"RS256"}` // a 2048-bit key
	for i := range s.Binding.Cookies {
		s.Binding.Cookies[i] = BoundCookie{Digest: Digest(NewToken()), Expires: s.ExpiresAt}
	}
	s.Challenge = Challenge{Value: NewToken(), Expires: s.ExpiresAt}
	av := l.EncodeSession(l.SessionPK(NewToken()), s)
	if size := itemSize(av); size > 4096 {
		t.Errorf("the largest session item is %d bytes, more than the 4096 of one read unit", size)
	} else {
		t.Logf("the largest session item: %d bytes of 4096", size)
	}
}
