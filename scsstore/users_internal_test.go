package scsstore

import (
	"testing"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// What Login records reads back as it was, for keys and stamps of every
// form; a record of release v0.1.0's format reads as the legacy stamp of
// its version and global generation; nothing else reads as a record.
func TestSignedInRecord(t *testing.T) {
	t.Parallel()
	stamp := func(text string) ddbitem.Stamp {
		t.Helper()
		var s ddbitem.Stamp
		if err := s.UnmarshalText([]byte(text)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		user  ddbsession.UserKey
		stamp ddbitem.Stamp
	}{
		{ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}, stamp("4611686018427400249.4611686018427400249.0.3")},
		{ddbsession.UserKey{PK: "USER#a.b.c"}, stamp("1.2.3.4")}, // a hash-only table's key, dots and all
		{ddbsession.UserKey{PK: "ü", SK: "\x00"}, stamp("-1.9223372036854775807.-9223372036854775808.0")},
	} {
		v, err := encodeSignedIn(tc.user, tc.stamp)
		if err != nil {
			t.Fatal(err)
		}
		user, got, ok := decodeSignedIn(v)
		if !ok || user != tc.user || got != tc.stamp {
			t.Errorf("decodeSignedIn(%q) = %+v, %+v, %v; want %+v, %+v", v, user, got, ok, tc.user, tc.stamp)
		}
	}
	if _, err := encodeSignedIn(ddbsession.UserKey{PK: "A", SK: "B"}, ddbitem.LegacyStamp(1, 2)); err == nil {
		t.Error("encodeSignedIn wrote a legacy stamp anew")
	}

	// As v0.1.0's Login wrote it: "1.<version>.<global>.<PK>.<SK>".
	user, got, ok := decodeSignedIn("1.4611686018427400249.-3.VVNFUiNhbGljZQ.UFJPRklMRQ")
	if want := ddbitem.LegacyStamp(4611686018427400249, -3); !ok || user != (ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}) || got != want {
		t.Errorf("decodeSignedIn of v0.1.0's record = %+v, %+v, %v; want USER#alice PROFILE, %+v", user, got, ok, want)
	}

	for _, v := range []string{
		"", "1", "2", "1.2.3.VQ", "2.1.1.VQ.VQ", "1.x.1.VQ.VQ", "1.1.1.V=.VQ", "1.1.1.VQ.VQ.", "1.1.1.VR.VQ",
		"2.1.2.3.VQ.VQ", "2.1.2.3.4.5.VQ.VQ", "2.1.2.x.4.VQ.VQ", "2.1.2.3.4.VQ.VR", "3.1.2.3.4.VQ.VQ", "1.1.2.3.4.VQ.VQ", "2.1.1.VQ.VQ",
	} {
		if _, _, ok := decodeSignedIn(v); ok {
			t.Errorf("decodeSignedIn(%q) accepted it", v)
		}
	}
}
