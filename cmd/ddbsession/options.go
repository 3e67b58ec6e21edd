package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
)

// options are the flags of every command; each command registers those
// it takes.
type options struct {
	// The table, as every command takes it.
	table   string
	region  string
	profile string
	layout  ddbsession.Layout
	json    bool

	// A user's key: the USER argument and -sk.
	sk string

	yes       bool          // revoke-everyone, count
	maxWCU    float64       // sweep
	maxRCU    float64       // sweep, count
	segments  int           // sweep, count
	grace     time.Duration // sweep
	dryRun    bool          // sweep
	scsPrefix string        // sweep, import

	redis, redisPrefix, state string // import

	// The window of sessions expiring: -within, or -from and -to.
	within   time.Duration
	from, to timeFlag

	// given names the flags the command line set, for the layout flags
	// that are overrides of the table's record.
	given map[string]bool
	// flagItems is the layout the flags give, with defaults for the rest:
	// validate fills it in. items is the layout the command acts in, as
	// the encoder and decoder take it: the table's record (open), or what
	// table check and create hold the table to (overlay).
	flagItems, items item.Layout
}

// commonFlagNames are the flags that register adds to every command, in
// the order the help lists them.
var commonFlagNames = []string{
	"table", "json", "region", "profile", "mrec",
	"partition-key", "sort-key", "hash-only", "session-prefix", "user-sessions-prefix",
	"ttl-attribute", "version-attribute", "credential-attribute", "expiry-index", "expiry-index-shards",
}

// register adds the table, connection and layout flags to fs.
func (o *options) register(fs *flag.FlagSet) {
	l := &o.layout
	d := item.Default
	fs.StringVar(&o.table, "table", "", "the table's `name` (required)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object on stdout, with the field names the help lists, and no progress")
	fs.StringVar(&o.region, "region", "", "the AWS `Region`; default the SDK's (AWS_REGION, the profile)")
	fs.StringVar(&o.profile, "profile", "", "the shared config `profile`; default the SDK's (AWS_PROFILE)")
	fs.BoolVar(&l.MREC, "mrec", false, "Layout.MREC: the table is a global table in multi-Region eventual consistency")
	fs.StringVar(&l.PartitionKey, "partition-key", "", "Layout.PartitionKey: the partition key's `name` (default \""+d.PartitionKey+"\")")
	fs.StringVar(&l.SortKey, "sort-key", "", "Layout.SortKey: the sort key's `name` (default \""+d.SortKey+"\")")
	fs.BoolVar(&l.HashOnly, "hash-only", false, "Layout.HashOnly: the table has a partition key alone")
	fs.StringVar(&l.SessionPrefix, "session-prefix", "", "Layout.SessionPrefix (default \""+d.SessionPrefix+"\")")
	fs.StringVar(&l.UserSessionsPrefix, "user-sessions-prefix", "", "Layout.UserSessionsPrefix (default \""+d.UserSessionsPrefix+"\")")
	fs.StringVar(&l.TTLAttribute, "ttl-attribute", "", "Layout.TTLAttribute: the expiry's `attribute` (default \""+d.TTLAttribute+"\")")
	fs.StringVar(&l.VersionAttribute, "version-attribute", "", "Layout.VersionAttribute: the user item's sessions version `attribute` (default \""+d.VersionAttribute+"\")")
	fs.StringVar(&l.CredentialAttribute, "credential-attribute", "", "Layout.CredentialAttribute: the user item's credential version `attribute` (default \""+d.CredentialAttribute+"\")")
	fs.StringVar(&l.ExpiryIndex, "expiry-index", "", "Layout.ExpiryIndex: the expiry index's `name`; none by default")
	fs.IntVar(&l.ExpiryIndexShards, "expiry-index-shards", 0, fmt.Sprintf("Layout.ExpiryIndexShards (default %d)", d.ExpiryIndexShards))
}

// userFlags registers -sk, for the commands that take a USER.
func userFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.sk, "sk", "", "the user item's sort key `value` (UserKey.SK), required unless -hash-only")
}

// layoutFlagNames maps the library's names for layout fields, in its
// errors, to the flags that set them.
var layoutFlagNames = strings.NewReplacer(
	"Layout.PartitionKey", "-partition-key",
	"Layout.SortKey", "-sort-key",
	"Layout.HashOnly", "-hash-only",
	"Layout.SessionPrefix", "-session-prefix",
	"Layout.UserSessionsPrefix", "-user-sessions-prefix",
	"Layout.TTLAttribute", "-ttl-attribute",
	"Layout.VersionAttribute", "-version-attribute",
	"Layout.CredentialAttribute", "-credential-attribute",
	"Layout.ExpiryIndexShards", "-expiry-index-shards",
	"Layout.ExpiryIndex", "-expiry-index",
	"Layout:", "layout flags:",
)

// validate checks what the flags cannot check alone, before any call: what
// needs the table's layout is checked again once the table's record gives
// it (checkArgs).
func (o *options) validate(c *command) error {
	if o.table == "" {
		return errors.New("-table is required")
	}
	items, err := item.Layout(o.layout).WithDefaults()
	if err != nil {
		return errors.New(layoutFlagNames.Replace(err.Error()))
	}
	o.flagItems, o.items = items, items
	if o.segments < 0 || o.segments > maxSegments {
		return fmt.Errorf("-segments %d: must be between 1 and %d", o.segments, maxSegments)
	}
	if o.maxWCU < 0 || o.maxRCU < 0 {
		return errors.New("-max-wcu and -max-rcu must not be negative (0 means no limit)")
	}
	if o.grace < 0 {
		return fmt.Errorf("-grace %v: must not be negative", o.grace)
	}
	// Whether the table has a sort key: known now if a key flag says so.
	return o.checkArgs(c, o.given["hash-only"] || o.given["sort-key"])
}

// checkArgs checks the arguments against the layout of o.items; those
// that depend on whether the table has a sort key only if keysKnown.
func (o *options) checkArgs(c *command, keysKnown bool) error {
	l := &o.items
	if keysKnown && l.HashOnly && c.indexOnly != "" {
		return errors.New(c.indexOnly)
	}
	if keysKnown && len(c.args) > 0 && c.args[0] == "USER" {
		switch {
		case l.HashOnly && o.sk != "":
			return errors.New("-sk is set, but a hash-only table's user keys have no sort key")
		case !l.HashOnly && o.sk == "":
			return errors.New("USER needs its sort key in a table with one: add -sk (e.g. -sk PROFILE)")
		}
	}
	if c.path == "sweep" || c.path == "import" {
		if o.scsPrefix == "" || o.scsPrefix == l.SessionPrefix || o.scsPrefix == l.UserSessionsPrefix {
			return fmt.Errorf("-scs-prefix %q: must be set, and differ from the session and user-sessions prefixes", o.scsPrefix)
		}
	}
	return nil
}

// maxSegments bounds -segments: past it, parallel scans only add calls.
const maxSegments = 64

// userKey is the key that USER and -sk name.
func (o *options) userKey(pk string) ddbsession.UserKey {
	return ddbsession.UserKey{PK: pk, SK: o.sk}
}

// userString shows a user key as the command line gives it.
func userString(k ddbsession.UserKey) string {
	if k.SK == "" {
		return k.PK
	}
	return k.PK + " -sk " + k.SK
}
