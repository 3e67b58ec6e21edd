package ddbsession

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession/internal/item"
)

// Layout is where sessions live in the table: the names of its key
// attributes, the prefixes that keep session items apart from the app's own
// in a shared table, the two attribute names an app may need to choose (the
// TTL attribute, and the user item's cutoff), and the optional expiry
// index. The zero Layout is the default of every field. The scsstore and
// ddbstream modules take the same Layout: give every part of an app that
// shares a table the same value. See "Table layout" in the package
// documentation.
type Layout struct {
	// PartitionKey and SortKey name the table's key attributes. They
	// default to "pk" and "sk". Set HashOnly for a table without a sort
	// key; such a table cannot hold the per-user index, so [Manager.List]
	// and [Manager.Revoke] fail there.
	PartitionKey string
	SortKey      string
	HashOnly     bool

	// SessionPrefix starts the partition key of every session item, which
	// is SessionPrefix followed by base64url(SHA-256(token)). Default
	// "SESSION#". UserSessionsPrefix starts the partition key of the
	// per-user index items, default "USERSESSIONS#". Change them only where
	// the app's own items in a shared table already use these prefixes.
	SessionPrefix      string
	UserSessionsPrefix string

	// TTLAttribute names the Number attribute that holds a session's expiry
	// in epoch seconds and on which the table's TTL is enabled. A table has
	// one TTL attribute, so a shared table may need its existing name.
	// Default "expiresAt".
	TTLAttribute string

	// ValidAfterAttribute names the Number attribute of the user item that
	// holds the user's sessions-valid-after cutoff in epoch milliseconds.
	// [Manager.RevokeAll] sets it. Default "sessionsValidAfter".
	ValidAfterAttribute string

	// ExpiryIndex names an optional global secondary index on
	// (expiryBucket, TTLAttribute) that [Manager.Expiring] queries.
	// Empty (the default) leaves it off, and session writes stay cheaper.
	// ExpiryIndexShards spreads each hour's sessions over that many index
	// partitions; default 8.
	ExpiryIndex       string
	ExpiryIndexShards int
}

// DecodeSession reads a session item of this layout, as a table, a backup
// or a stream record holds it, through the package's own decoder. It
// returns an error for an item of another kind (an index item, the app's
// own, a two-step login's pending item, which is no session yet) and for a
// session item in a format this release cannot read. The ddbstream module
// decodes TTL deletions with it.
func (l Layout) DecodeSession(av map[string]types.AttributeValue) (Session, error) {
	layout, err := item.Layout(l).WithDefaults()
	if err != nil {
		return Session{}, fmt.Errorf("ddbsession: %w", err)
	}
	s, err := layout.Decode(av, item.KindSession)
	if err == nil && s.Pending {
		err = fmt.Errorf("%w: a login waiting for its second factor", item.ErrOtherKind)
	}
	if err != nil {
		return Session{}, fmt.Errorf("ddbsession: decode session item: %w", err)
	}
	return sessionOf(s), nil
}
