package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/table"
)

// This file reads the layout a command acts in from the table: its key
// schema, from DescribeTable, and the layout record that CreateTable (or
// table create) writes there. A layout flag is an override that must agree
// with the record: a command that acted in a layout of its own would read
// and write other items than the apps' (a revoke without -mrec on an MREC
// app's table writes no end record, and another Region's refresh brings
// the session back).

// layoutFlags are the layout flags, each with its field of a layout as
// the messages show it.
var layoutFlags = []struct {
	name  string
	value func(l *item.Layout) string
}{
	{"mrec", func(l *item.Layout) string { return strconv.FormatBool(l.MREC) }},
	{"partition-key", func(l *item.Layout) string { return strconv.Quote(l.PartitionKey) }},
	{"sort-key", func(l *item.Layout) string { return strconv.Quote(l.SortKey) }},
	{"hash-only", func(l *item.Layout) string { return strconv.FormatBool(l.HashOnly) }},
	{"session-prefix", func(l *item.Layout) string { return strconv.Quote(l.SessionPrefix) }},
	{"user-sessions-prefix", func(l *item.Layout) string { return strconv.Quote(l.UserSessionsPrefix) }},
	{"ttl-attribute", func(l *item.Layout) string { return strconv.Quote(l.TTLAttribute) }},
	{"version-attribute", func(l *item.Layout) string { return strconv.Quote(l.VersionAttribute) }},
	{"credential-attribute", func(l *item.Layout) string { return strconv.Quote(l.CredentialAttribute) }},
	{"expiry-index", func(l *item.Layout) string { return strconv.Quote(l.ExpiryIndex) }},
	{"expiry-index-shards", func(l *item.Layout) string { return strconv.Itoa(l.ExpiryIndexShards) }},
}

// flagDiff is a layout flag that disagrees with the table's record.
type flagDiff struct {
	Flag  string `json:"flag"`  // its name, with the dash
	Table string `json:"table"` // the record's value
	Given string `json:"given"` // the flag's
}

func (d flagDiff) String() string {
	return fmt.Sprintf("%s %s, and the table records %s", d.Flag, d.Given, d.Table)
}

// recordedLayout is what readLayout found of the table's layout.
type recordedLayout struct {
	desc *types.TableDescription
	// layout is the layout the table records, with its defaults; nil for
	// a table without a record, or whose keys cannot hold one (not
	// String keys: the table fits no layout).
	layout   *item.Layout
	readable bool // the keys are String keys, so the record was looked for
}

// readLayout reads the table's description and its layout record, under
// the table's own key names: the record's key moves with them alone.
func readLayout(ctx context.Context, client Client, o *options) (recordedLayout, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &o.table})
	if err != nil {
		return recordedLayout{}, fmt.Errorf("describe table %q: %w", o.table, err)
	}
	r := recordedLayout{desc: out.Table}
	keys := table.SchemaOf(out.Table.KeySchema)
	for _, a := range out.Table.AttributeDefinitions {
		name := aws.ToString(a.AttributeName)
		if (name == keys.Hash || name == keys.Range) && a.AttributeType != types.ScalarAttributeTypeS {
			return r, nil
		}
	}
	r.readable = true
	at := item.Layout{PartitionKey: keys.Hash, SortKey: keys.Range, HashOnly: keys.Range == ""}
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &o.table, Key: at.LayoutKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return r, fmt.Errorf("read the layout record of table %q: %w", o.table, err)
	}
	if got.Item == nil {
		return r, nil
	}
	l, err := item.DecodeLayout(got.Item)
	if err == nil {
		l, err = l.WithDefaults()
	}
	if err != nil {
		return r, &layoutError{msg: fmt.Sprintf("table %q holds a layout record that this release cannot read (%v): see docs/item-format.md#the-layout-record", o.table, err)}
	}
	r.layout = &l
	return r, nil
}

// layoutError is a table whose layout a command cannot act in: none
// recorded, one the flags disagree with, or one it cannot read.
type layoutError struct{ msg string }

func (e *layoutError) Error() string { return e.msg }

// disagreements are the layout flags given that differ from layout rec.
func (o *options) disagreements(rec *item.Layout) []flagDiff {
	var diffs []flagDiff
	for _, f := range layoutFlags {
		if !o.given[f.name] {
			continue
		}
		if table, given := f.value(rec), f.value(&o.flagItems); table != given {
			diffs = append(diffs, flagDiff{Flag: "-" + f.name, Table: table, Given: given})
		}
	}
	return diffs
}

// adopt makes the layout that r records the command's, or says why it
// cannot: a table without a record, or a layout flag that disagrees.
func (o *options) adopt(r recordedLayout) error {
	if !r.readable {
		return &layoutError{msg: fmt.Sprintf("table %q has keys that are not Strings, which no layout has ('ddbsession table check -table %s' says more)",
			o.table, shellQuote(o.table))}
	}
	if r.layout == nil {
		return &layoutError{msg: fmt.Sprintf("table %q records no layout, so this command cannot know which items to act on:\n"+
			"it is a table of release v0.1.0 on which no app of a later release has started yet (each\n"+
			"records its Config.Layout). Record the one its apps use, giving the layout flags of their\n"+
			"Config.Layout:\n"+
			"  ddbsession table create -table %s%s", o.table, shellQuote(o.table), layoutArgs(o))}
	}
	if diffs := o.disagreements(r.layout); len(diffs) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "table %q records its layout, and layout flags disagree with it:\n", o.table)
		for _, d := range diffs {
			fmt.Fprintf(&b, "  %s\n", d)
		}
		fmt.Fprintf(&b, "Leave the layout flags out: the command takes the layout from the table. An app whose\n"+
			"Config.Layout differs is refused at start too ('ddbsession table check -table %s' shows the layout).", shellQuote(o.table))
		return &layoutError{msg: b.String()}
	}
	if len(r.desc.Replicas) > 0 && !table.Strong(r.desc) && !r.layout.MREC {
		// An app whose Config.Layout lacks MREC recorded it: the record
		// cannot be trusted, and acting in it would write revocations
		// that another Region's writes undo.
		return &layoutError{msg: fmt.Sprintf("table %q is a global table in multi-Region eventual consistency (MREC), and the layout it records\n"+
			"says otherwise, so no command can act on it safely ('ddbsession table check -table %s' says how to fix it).",
			o.table, shellQuote(o.table))}
	}
	o.items = *r.layout
	return nil
}

// overlay is the layout that table check and create hold the table to:
// the flags given, and for the rest the table's record (or, without one,
// the defaults). The key flags go together: -sort-key and -hash-only
// decide between them whether there is a sort key.
func (o *options) overlay(rec *item.Layout) (item.Layout, error) {
	if rec == nil {
		return o.flagItems, nil
	}
	l, f, given := ddbsession.Layout(*rec), o.layout, o.given
	if given["hash-only"] || given["sort-key"] {
		l.HashOnly, l.SortKey = f.HashOnly, f.SortKey
	}
	for _, s := range []struct {
		name      string
		dst, from *string
	}{
		{"partition-key", &l.PartitionKey, &f.PartitionKey},
		{"session-prefix", &l.SessionPrefix, &f.SessionPrefix},
		{"user-sessions-prefix", &l.UserSessionsPrefix, &f.UserSessionsPrefix},
		{"ttl-attribute", &l.TTLAttribute, &f.TTLAttribute},
		{"version-attribute", &l.VersionAttribute, &f.VersionAttribute},
		{"credential-attribute", &l.CredentialAttribute, &f.CredentialAttribute},
		{"expiry-index", &l.ExpiryIndex, &f.ExpiryIndex},
	} {
		if given[s.name] {
			*s.dst = *s.from
		}
	}
	if given["expiry-index-shards"] {
		l.ExpiryIndexShards = f.ExpiryIndexShards
	}
	if given["mrec"] {
		l.MREC = f.MREC
	}
	items, err := item.Layout(l).WithDefaults()
	if err != nil {
		return items, fmt.Errorf("the layout flags with table %q's record: %s", o.table, layoutFlagNames.Replace(err.Error()))
	}
	return items, nil
}

// open connects and takes the layout from the table, for every command
// but table create and check: it returns the client and the table's
// description, or the exit code of what went wrong, said on stderr.
func (e *env) open(ctx context.Context, c *command, o *options) (Client, *types.TableDescription, int) {
	client, err := e.connect(ctx, o)
	if err != nil {
		return nil, nil, e.fail(c, o, err)
	}
	r, err := readLayout(ctx, client, o)
	if err == nil {
		err = o.adopt(r)
	}
	if err != nil {
		return nil, nil, e.fail(c, o, err)
	}
	if err := o.checkArgs(c, true); err != nil {
		return nil, nil, e.usageError(c, err)
	}
	return client, r.desc, exitOK
}

// layoutJSON is a recorded layout in JSON: the record's own names.
type layoutJSON struct {
	PartitionKey        string `json:"partitionKey"`
	SortKey             string `json:"sortKey,omitempty"`
	HashOnly            bool   `json:"hashOnly"`
	SessionPrefix       string `json:"sessionPrefix"`
	UserSessionsPrefix  string `json:"userSessionsPrefix"`
	TTLAttribute        string `json:"ttlAttribute"`
	VersionAttribute    string `json:"versionAttribute"`
	CredentialAttribute string `json:"credentialAttribute"`
	ExpiryIndex         string `json:"expiryIndex,omitempty"`
	ExpiryIndexShards   int    `json:"expiryIndexShards"`
	MREC                bool   `json:"mrec"`
}

// layoutJSONOf is l in JSON; nil for nil.
func layoutJSONOf(l *item.Layout) *layoutJSON {
	if l == nil {
		return nil
	}
	return &layoutJSON{
		PartitionKey: l.PartitionKey, SortKey: l.SortKey, HashOnly: l.HashOnly,
		SessionPrefix: l.SessionPrefix, UserSessionsPrefix: l.UserSessionsPrefix,
		TTLAttribute: l.TTLAttribute, VersionAttribute: l.VersionAttribute, CredentialAttribute: l.CredentialAttribute,
		ExpiryIndex: l.ExpiryIndex, ExpiryIndexShards: l.ExpiryIndexShards, MREC: l.MREC,
	}
}

// showLayout is l for a reader, on two lines.
func showLayout(l *item.Layout) string {
	mode, index := "one Region or MRSC", "no expiry index"
	if l.MREC {
		mode = "MREC"
	}
	if l.ExpiryIndex != "" {
		index = fmt.Sprintf("expiry index %q in %d shards", l.ExpiryIndex, l.ExpiryIndexShards)
	}
	return fmt.Sprintf("key %s, %s, %s;\n  prefixes %q and %q, TTL on %q, user versions in %q and %q",
		keyOf(*l), mode, index, l.SessionPrefix, l.UserSessionsPrefix, l.TTLAttribute, l.VersionAttribute, l.CredentialAttribute)
}
