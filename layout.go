package ddbsession

// Layout is the table's shape: the names of its key attributes, the
// prefixes that keep the library's items apart from the app's own in a
// shared table, the attribute names an app may need to choose, the
// optional expiry index, and how the table is replicated. The zero Layout
// is the default of every field. The scsstore and ddbstream modules take
// the same Layout: give every part of an app that shares a table the same
// value. The items themselves are described in docs/item-format.md.
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
	// per-user items, default "USERSESSIONS#". Change them only where the
	// app's own items in a shared table already use these prefixes.
	SessionPrefix      string
	UserSessionsPrefix string

	// TTLAttribute names the Number attribute that holds a session's expiry
	// in epoch seconds and on which the table's TTL is enabled. A table has
	// one TTL attribute, so a shared table may need its existing name.
	// Default "expiresAt".
	TTLAttribute string

	// VersionAttribute names the Number attribute of the user item that
	// holds the user's sessions version, which [Manager.CreateUser] sets
	// and [Manager.RevokeAll] changes. Default "sessionsVersion".
	VersionAttribute string

	// ExpiryIndex names an optional global secondary index on
	// (expiryBucket, TTLAttribute), for finding the sessions that expire in
	// a window (the CLI's "sessions expiring"). Empty (the default) leaves
	// it off, and refreshes stay cheaper. ExpiryIndexShards spreads each
	// hour's sessions over that many index partitions; default 8.
	ExpiryIndex       string
	ExpiryIndexShards int

	// MREC says that the table is a DynamoDB global table in multi-Region
	// eventual consistency, where concurrent writes of one item in two
	// Regions are settled whole, last writer wins. The user's revocation
	// state then lives in items only the library writes, and each request
	// reads them with its session, in the same round trip. Leave it off for
	// a single-Region table and for multi-Region strong consistency (MRSC).
	// See docs/multi-region.md.
	MREC bool
}
