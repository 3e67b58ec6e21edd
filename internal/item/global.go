package item

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The global item holds the table's global revocation generation: one
// Number that RevokeEveryone raises by one, in one write, to end every
// session of every user. A session copies the generation its login read,
// and is valid while the generation is no higher; no clock takes part.
//
//	pk    S  <session prefix>GLOBAL   (no token's digest is 6 characters long)
//	sk    S  STATE                    (absent in a hash-only table)
//	v     N  1
//	kind  S  "sessions-global"
//	gen   N  the generation; an absent item is generation 0
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

// RevokeEveryone raises the global generation by one, creating the item if
// need be, and never writes over an item of another kind.
func (l *Layout) RevokeEveryone() Writes {
	return Writes{
		Update:    "SET #v = :v, #kind = :kind ADD #gen :one",
		Condition: "attribute_not_exists(#pk) OR #kind = :kind",
		Names:     map[string]string{"#pk": l.PartitionKey, "#v": AttrVersion, "#kind": AttrKind, "#gen": AttrGen},
		Values:    map[string]types.AttributeValue{":v": Num(Version), ":kind": Str(KindGlobal), ":one": Num(1)},
	}
}
