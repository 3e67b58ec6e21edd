package scsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/table"
)

// Client is the part of the DynamoDB client that a [Store] uses.
// *dynamodb.Client satisfies it; tests may wrap it to count calls or inject
// faults. [Store.Login] and [Store.LoadUser] read a signed-in user with
// GetItem or BatchGetItem, and record the table's layout with PutItem in a
// table that has no record of it.
type Client interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Config configures a [Store]. Client and Table have no default and must be
// set, unless Sessions gives them; every other field may be left zero for
// its default, which [New] fills in when it validates the Config, once.
type Config struct {
	// Sessions, set to ddbsession's Manager.Table() where the store shares
	// the Manager's table, gives the Client, Table and Layout below their
	// defaults: the Manager's. Set as well, Table and Layout must be the
	// Manager's, or New fails naming the field.
	//
	//	store, err := scsstore.New(scsstore.Config{Sessions: sessions.Table()})
	Sessions table.Ref

	// Client talks to DynamoDB. Build it from the SDK's own configuration
	// (config.LoadDefaultConfig), which also honours AWS_ENDPOINT_URL_DYNAMODB.
	Client Client

	// Table is the name of the table that holds the sessions.
	Table string

	// Layout is the table's layout, the same value as ddbsession's
	// Config.Layout where both share a table: its key names (or a hash key
	// alone), its TTL attribute, and the core's prefixes, which Prefix must
	// not be. The zero Layout is the default of each.
	Layout ddbsession.Layout

	// Prefix starts the partition key of every scs session item, which is
	// Prefix followed by base64url(SHA-256(token)). Default "SCS#". Change
	// it only where the app's own items in a shared table already use it.
	Prefix string

	// MinCommitInterval is how far, at least, a commit must move a
	// session's expiry forward to be written when its data did not change.
	// scs commits every request when its IdleTimeout is set; this makes an
	// idle timeout cost at most one write per interval per session. The
	// price is that a session may expire up to MinCommitInterval before
	// IdleTimeout has passed without requests, so keep it well below
	// IdleTimeout. A commit whose data changed is always written. Default
	// one minute; at least a second, the resolution of the TTL attribute.
	MinCommitInterval time.Duration

	// Codec is the SessionManager's Codec, default scs.GobCodec{}. The
	// store decodes data only to tell whether a commit changed it, because
	// gob encodes a map in random order: the same session data gives other
	// bytes from one request to the next. A Codec that does not match the
	// SessionManager's costs writes, never data: data it cannot decode
	// counts as changed.
	Codec scs.Codec

	// RecordBytes bounds the memory in which the store keeps, per session,
	// what it last read from or wrote to the table, so that it can skip an
	// unchanged commit without reading first. A session whose record was
	// evicted is written on its next commit. Default 4 MiB.
	RecordBytes int

	// RevokeEveryoneWithin bounds how long after ddbsession's
	// Manager.RevokeEveryone a session signed in before it is still loaded
	// by [Store.LoadUser] on this instance: the store keeps a copy of the
	// table's global revocation generation and reads it again, with a
	// user, once the copy is this old, one read at a time, so that no item
	// is read by every request. Default 10 seconds, ddbsession's own; at
	// least a second.
	RevokeEveryoneWithin time.Duration

	// Now is the clock of the expiry check. Default time.Now. Tests inject
	// their own.
	Now func() time.Time
}

// New validates cfg once, fills in its defaults and returns a Store. The
// error names the first invalid field. New makes no DynamoDB call: the
// first Login or LoadUser checks Config.Layout against the table's.
func New(cfg Config) (*Store, error) { return newStore(cfg, options{}) }

// options are what tests change of how New builds a Store.
type options struct {
	// monotonic is the clock that ages the copy of the global revocation
	// generation (nanoseconds, never 0); nil for the machine's.
	monotonic func() int64
}

func newStore(cfg Config, o options) (*Store, error) {
	ref := cfg.Sessions
	if ref.Name != "" {
		if cfg.Client == nil {
			cfg.Client, _ = ref.Client.(Client)
		}
		if cfg.Table != "" && cfg.Table != ref.Name {
			return nil, fmt.Errorf("scsstore: Config.Table %q is not the Manager's %q (Config.Sessions): leave it unset", cfg.Table, ref.Name)
		}
		cfg.Table = ref.Name
		if cfg.Layout == (ddbsession.Layout{}) {
			cfg.Layout = ddbsession.Layout(ref.Layout)
		}
	}
	if cfg.Client == nil {
		return nil, errors.New("scsstore: Config.Client is nil")
	}
	if cfg.Table == "" {
		return nil, errors.New("scsstore: Config.Table is empty")
	}
	layout, err := ddbitem.Resolve(cfg.Layout)
	if err != nil {
		return nil, fmt.Errorf("scsstore: Config.%w", err) // Resolve names the field as "Layout.<Field>"
	}
	if ref.Name != "" && layout != ddbsession.Layout(ref.Layout) {
		return nil, fmt.Errorf("scsstore: Config.Layout %+v is not the Manager's %+v (Config.Sessions): leave it unset", layout, ref.Layout)
	}
	setDefault(&cfg.Prefix, defaultPrefix)
	if cfg.Prefix == layout.SessionPrefix || cfg.Prefix == layout.UserSessionsPrefix {
		return nil, fmt.Errorf("scsstore: Config.Prefix %q is one of the core's own prefixes", cfg.Prefix)
	}
	if cfg.MinCommitInterval == 0 {
		cfg.MinCommitInterval = time.Minute
	}
	if cfg.MinCommitInterval < time.Second {
		return nil, fmt.Errorf("scsstore: Config.MinCommitInterval %v: must be at least a second", cfg.MinCommitInterval)
	}
	if cfg.Codec == nil {
		cfg.Codec = scs.GobCodec{}
	}
	if cfg.RecordBytes == 0 {
		cfg.RecordBytes = 4 << 20
	}
	if cfg.RecordBytes < 0 {
		return nil, fmt.Errorf("scsstore: Config.RecordBytes %d: must not be negative", cfg.RecordBytes)
	}
	if cfg.RevokeEveryoneWithin == 0 {
		cfg.RevokeEveryoneWithin = 10 * time.Second
	}
	if cfg.RevokeEveryoneWithin < time.Second {
		return nil, fmt.Errorf("scsstore: Config.RevokeEveryoneWithin %v: must be at least a second", cfg.RevokeEveryoneWithin)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	users, err := ddbitem.NewReader(ddbitem.ReaderConfig{
		Client: cfg.Client, Table: cfg.Table, Layout: layout,
		RevokeEveryoneWithin: cfg.RevokeEveryoneWithin, Monotonic: o.monotonic,
	})
	if err != nil {
		return nil, fmt.Errorf("scsstore: %w", err) // Config was checked above: a bug
	}
	return &Store{
		client:   cfg.Client,
		items:    itemLayout{table: cfg.Table, Layout: layout, prefix: cfg.Prefix},
		interval: int64(cfg.MinCommitInterval / time.Second),
		codec:    cfg.Codec,
		now:      cfg.Now,
		records:  newRecords(cfg.RecordBytes),
		users:    users,
		decoder:  attributevalue.NewDecoder(),
	}, nil
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}
