package item

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The global item holds the table's global revocation generation: one
// Number that RevokeEveryone changes, in one write, to end every session of
// every user. A session copies the generation its login read (Stamp.Global),
// and stands while the generation is still that one; no clock takes part.
// Each change adds a random step, so that two RevokeEveryones in two
// Regions of a global table never write the same generation, and release
// v0.1.0, which holds a session to a generation no lower than the one it
// knows, sees every change as one.
//
//	pk    S  <session prefix>GLOBAL   (no token's digest is 6 characters long)
//	sk    S  STATE                    (absent in a hash-only table)
//	v     N  1
//	kind  S  "sessions-global"
//	gen   N  the generation; an absent item is generation 0
//	at    N  when the last RevokeEveryone wrote it, epoch milliseconds, for users' histories
const (
	KindGlobal = "sessions-global"
	globalPK   = "GLOBAL"
	globalSort = "STATE"
)

// GlobalPK is the global item's partition key.
func (l *Layout) GlobalPK() string { return l.SessionPrefix + globalPK }

// GlobalKey addresses the global item.
func (l *Layout) GlobalKey() map[string]types.AttributeValue {
	return l.Key(l.GlobalPK(), globalSort)
}

// DecodeGlobal reads the global item's generation: 0 for none. An item of
// another form is an error, so that a reader fails closed.
func DecodeGlobal(av map[string]types.AttributeValue) (int64, error) {
	if av == nil {
		return 0, nil
	}
	if err := checkKind(av, KindGlobal); err != nil {
		return 0, err
	}
	d := decoder{av: av}
	return d.num(AttrGen), d.err
}

// RevokeEveryone changes the global generation by a random step (see
// versionStep), creating the item if need be, and never writes over an
// item of another kind. It records now, which users' histories show.
func (l *Layout) RevokeEveryone(now time.Time) Writes {
	w := l.addGen(KindGlobal)
	w.Update = "SET #v = :v, #kind = :kind, #at = :at ADD #gen :step"
	w.Names["#at"] = AttrAt
	w.Values[":at"] = Num(now.UnixMilli())
	return w
}

// GlobalRevokedAt reads when the global item's last RevokeEveryone wrote
// it: zero for none, or one that recorded no time.
func GlobalRevokedAt(av map[string]types.AttributeValue) time.Time {
	if ms, ok, err := GetNum(av, AttrAt); ok && err == nil {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}
