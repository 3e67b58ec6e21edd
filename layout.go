package ddbsession

// Layout is the table's shape: its key names, the prefixes that keep the
// library's items apart from the app's own, the attribute names an app may
// need to choose, the optional expiry index, and its replication. The zero
// Layout is the default of every field. Give every module that shares the
// table (scsstore, ddbstream) the same value; docs/item-format.md describes
// the items.
type Layout struct {
	// PartitionKey and SortKey name the table's key attributes. They
	// default to "pk" and "sk". Set HashOnly for a table without a sort
	// key; such a table cannot hold the per-user index, so [Manager.List]
	// and [Manager.Revoke] fail there.
	PartitionKey string
	SortKey      string
	HashOnly     bool

	// SessionPrefix starts the partition key of every session item, before
	// base64url(SHA-256(token)): default "SESSION#". UserSessionsPrefix
	// starts that of the per-user items: default "USERSESSIONS#".
	SessionPrefix      string
	UserSessionsPrefix string

	// TTLAttribute names the Number attribute, in epoch seconds, on which
	// the table's TTL is enabled. Default "expiresAt".
	TTLAttribute string

	// VersionAttribute names the Number attribute of the user item that
	// holds the user's sessions version, which [Manager.CreateUser] sets
	// and [Manager.RevokeAll] changes. Default "sessionsVersion".
	// CredentialAttribute names the Number attribute in which the app
	// changes the user's credential version, in the write that changes the
	// credential. Default "credentialVersion". A login copies both, and a
	// session ends when either changes: docs/item-format.md#user-items.
	VersionAttribute    string
	CredentialAttribute string

	// ExpiryIndex names an optional global secondary index on
	// (expiryBucket, TTLAttribute) that finds the sessions about to expire
	// (the CLI's "sessions expiring"), at two index writes per refresh.
	// ExpiryIndexShards spreads each hour over that many partitions (8).
	ExpiryIndex       string
	ExpiryIndexShards int

	// MREC says that the table is a global table in multi-Region eventual
	// consistency, where concurrent writes of an item in two Regions are
	// settled whole, last writer wins: revocation state then lives in items
	// only the library writes. Leave it off for one Region and for MRSC.
	// See docs/multi-region.md.
	MREC bool
}
