package ddbsession

// Layout is the table's shape: key names, the prefixes that keep the
// library's items apart from the app's, attribute names, the optional
// expiry index, and replication; zero fields take their defaults. The table
// records it, and all that use the table must use the same
// (docs/item-format.md).
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

	// TTLAttribute names the TTL's Number attribute (epoch seconds): "expiresAt".
	TTLAttribute string

	// VersionAttribute ("sessionsVersion") and CredentialAttribute
	// ("credentialVersion") name the user item's Number attributes that a
	// login copies, and that end the session when they change: the sessions
	// version, which [Manager.CreateUser] sets and [Manager.RevokeAll]
	// changes, and the credential version, which the app changes with the
	// credential (docs/item-format.md#user-items).
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
	// only the library writes (docs/multi-region.md). Off for MRSC.
	MREC bool
}
