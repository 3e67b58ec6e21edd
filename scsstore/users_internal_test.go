package scsstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
)

// What Login records reads back as it was, for keys and versions of every
// form, and nothing else reads as such a record.
func TestSignedInRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		user ddbsession.UserKey
		rev  ddbitem.Revocation
	}{
		{ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}, ddbitem.Revocation{Version: 1<<62 + 12345, Global: 3}},
		{ddbsession.UserKey{PK: "USER#a.b.c"}, ddbitem.Revocation{}}, // a hash-only table's key, dots and all
		{ddbsession.UserKey{PK: "ü", SK: "\x00"}, ddbitem.Revocation{Version: -1, Global: 1<<63 - 1}},
	} {
		v := encodeSignedIn(tc.user, tc.rev)
		user, rev, ok := decodeSignedIn(v)
		if !ok || user != tc.user || rev != tc.rev {
			t.Errorf("decodeSignedIn(%q) = %+v, %+v, %v; want %+v, %+v", v, user, rev, ok, tc.user, tc.rev)
		}
	}
	for _, v := range []string{"", "1", "1.2.3.VQ", "2.1.1.VQ.VQ", "1.x.1.VQ.VQ", "1.1.1.V=.VQ", "1.1.1.VQ.VQ.", "1.1.1.VR.VQ"} {
		if _, _, ok := decodeSignedIn(v); ok {
			t.Errorf("decodeSignedIn(%q) accepted it", v)
		}
	}
}

// readUser leaves the global item out by dropping the last of
// ddbitem.RevocationKeys: that key must be the global item's, the same for
// every user, on every layout.
func TestGlobalKeyComesLast(t *testing.T) {
	t.Parallel()
	for _, layout := range []ddbsession.Layout{{}, {MREC: true}, {HashOnly: true}, {PartitionKey: "id", SortKey: "type"}} {
		a, err := ddbitem.RevocationKeys(layout, ddbsession.UserKey{PK: "A", SK: "A"})
		if layout.HashOnly {
			a, err = ddbitem.RevocationKeys(layout, ddbsession.UserKey{PK: "A"})
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := ddbitem.RevocationKeys(layout, ddbsession.UserKey{PK: "B", SK: "B"})
		if layout.HashOnly {
			b, err = ddbitem.RevocationKeys(layout, ddbsession.UserKey{PK: "B"})
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a[len(a)-1], b[len(b)-1], avCompare); diff != "" {
			t.Errorf("layout %+v: the last keys of two users differ (-A +B):\n%s", layout, diff)
		}
		for i := range len(a) - 1 {
			if cmp.Equal(a[i], b[i], avCompare) {
				t.Errorf("layout %+v: key %d is the same for two users, want the user's own", layout, i)
			}
		}
	}
}
