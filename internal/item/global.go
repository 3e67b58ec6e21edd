package item

import (
	"fmt"

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
)

// GlobalPK is the global item's partition key.
func (l *Layout) GlobalPK() string { return l.SessionPrefix + globalPK }

// GlobalKey addresses the global item.
func (l *Layout) GlobalKey() map[string]types.AttributeValue {
	return l.Key(l.GlobalPK(), stateSort)
}

// DecodeGlobal reads the global item's generation: 0 for none. An item of
// another form is an error, so that a reader fails closed.
func DecodeGlobal(av map[string]types.AttributeValue) (int64, error) {
	if av == nil {
		return 0, nil
	}
	if k, _ := av[AttrKind].(*types.AttributeValueMemberS); k == nil || k.Value != KindGlobal {
		return 0, fmt.Errorf("%w: not a %s item", ErrMalformed, KindGlobal)
	}
	d := decoder{av: av}
	gen := d.num(AttrGen)
	if v := d.num(AttrVersion); d.err == nil && v != Version {
		d.fail("global format version %d is not %d", v, Version)
	}
	return gen, d.err
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
