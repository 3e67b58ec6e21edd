package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/table"
)

// This file is "table create" and "table check": the table that
// internal/table defines for the library, created with the library's
// CreateTable, its layout record, and each way it differs explained.

var tableCreateCommand = &command{
	path:    "table create",
	summary: "create the table if it is missing, record its layout, then check it",
	help: `Creates the table if it is missing, as Manager.CreateTable does: on-demand
billing, String keys (-partition-key, -sort-key, or -hash-only), the expiry
index if -expiry-index names one, and TTL on -ttl-attribute; it waits until
the table is ACTIVE, and records the layout that the layout flags give (the
app's Config.Layout) in the table, where every app and command on it reads
it. Then it checks the table as 'table check' does. A table that exists is
left as it is, but for TTL, which it turns on where it is off and the table
fits, and for the layout, which it records where the table fits and records
none (a table of release v0.1.0: give the layout flags of its apps'
Config.Layout). A layout flag that disagrees with the table's record is a
problem, and nothing is changed.

Exits as 'table check' does, but for TTL that is off, which is no problem
here (the warning says why), and a layout it records.

Output: what it did. With -json: {"table", "created" (false: it existed),
"ttl" ("on" or "off"), "ttlAttribute", "problems" (as 'table check' has
them), "layout", "recordedLayout" (true: it recorded the layout now),
"layoutFlags" (as 'table check' has them)}.

Example:
  ddbsession table create -table app
  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 ddbsession table create -table app -hash-only`,
	run: runTableCreate,
}

var tableCheckCommand = &command{
	path:    "table check",
	summary: "check that the table fits the layout and has TTL on; changes nothing",
	help: `Checks the table against its layout, and changes nothing. The layout is the
one the table records (which the app, or 'table create', writes there), with
the layout flags given in place of its fields; without a record, the flags'.
It checks the key schema, the expiry index if the layout names one, that a
global table in multi-Region eventual consistency (MREC) has a layout that
says MREC (the app's Config.Layout.MREC), that TTL is on the layout's TTL
attribute, that the table records its layout and that each layout flag given
agrees with it, and that the app's startup can read the table's global
revocation item. Each problem comes with what to do about it, such as the
aws command that turns TTL on. A global table in multi-Region strong
consistency (MRSC) has no TTL: there, 'ddbsession sweep' deletes expired
items instead.

Exits 0 if the table fits, 5 if it does not or a layout flag disagrees with
its record (the app will fail), 6 if it fits but TTL is off or on another
attribute (the app works; expired items stay until TTL or a sweep deletes
them) or it records no layout yet (the app records its own; the other
commands refuse until it does), 3 if the table does not exist.

Output: the problems, and the layout the table records. With -json:
{"table", "ok", "problems": [{"kind", "error", "fix", "command"}], "layout"
(the recorded layout, absent without one: {"partitionKey", "sortKey",
"hashOnly", "sessionPrefix", "userSessionsPrefix", "ttlAttribute",
"versionAttribute", "credentialAttribute", "expiryIndex",
"expiryIndexShards", "mrec"}), "layoutFlags" (those that disagree with it:
[{"flag", "table", "given"}])}, kind one of "schema", "expiry-index",
"mrec", "ttl-off", "ttl-attribute", "mrsc-no-ttl", "layout-missing",
"layout-mismatch".

Example:
  ddbsession table check -table app
  ddbsession table check -table app -json | jq -r '.problems[].command'`,
	run: runTableCheck,
}

// problem is one way the table does not fit, and what to do.
type problem struct {
	Kind    string `json:"kind"`
	Error   string `json:"error"`             // what is wrong, from the table's description
	Fix     string `json:"fix"`               // what to do, in words
	Command string `json:"command,omitempty"` // a command that does it
}

// Kinds of problem of the layout record, besides internal/table's.
const (
	layoutMissing  = "layout-missing"  // the table records no layout
	layoutMismatch = "layout-mismatch" // a layout flag disagrees with the record
)

// tableReport is the JSON of table create and check.
type tableReport struct {
	Table        string    `json:"table"`
	OK           *bool     `json:"ok,omitempty"`
	Created      *bool     `json:"created,omitempty"`
	TTL          string    `json:"ttl,omitempty"`
	TTLAttribute string    `json:"ttlAttribute,omitempty"`
	Problems     []problem `json:"problems"`
	// Layout is the layout the table records; absent without a record.
	// RecordedLayout, of table create, says whether it recorded it now.
	// LayoutFlags are the layout flags that disagree with the record.
	Layout         *layoutJSON `json:"layout,omitempty"`
	RecordedLayout *bool       `json:"recordedLayout,omitempty"`
	LayoutFlags    []flagDiff  `json:"layoutFlags,omitempty"`
}

func runTableCheck(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, err := e.connect(ctx, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	st, err := inspect(ctx, client, o)
	if err == nil && !st.misfit() {
		// What the app's CreateTable reads at startup, besides the
		// description: a role that may not, or an item of another form
		// under its key, fails the app.
		if _, err = globalGeneration(ctx, client, o); err != nil {
			err = fmt.Errorf("read the global revocation item: %w", err)
		}
	}
	if err != nil {
		return e.fail(c, o, err)
	}
	problems := st.explained(o)
	ok := len(problems) == 0
	if o.json {
		writeJSON(e.stdout, tableReport{Table: o.table, OK: &ok, Problems: problems, Layout: layoutJSONOf(st.recorded), LayoutFlags: st.differs})
		return st.code()
	}
	if ok {
		fmt.Fprintf(e.stdout, "table %q fits: key %s, TTL on %q\n", o.table, keyOf(o.items), o.items.TTLAttribute)
		printLayout(e, st.recorded)
		return st.code()
	}
	printProblems(e, o, problems)
	printLayout(e, st.recorded)
	return st.code()
}

func runTableCreate(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, err := e.connect(ctx, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	_, err = client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &o.table})
	var missing *types.ResourceNotFoundException
	created := errors.As(err, &missing)
	if err != nil && !created {
		return e.fail(c, o, err)
	}
	var st tableState
	if !created {
		st, err = inspect(ctx, client, o)
		if err != nil {
			return e.fail(c, o, err)
		}
		st = st.forCreate()
	}
	// The library creates the table, waits for it, turns TTL on and
	// records the layout where there is none, but only on a table that
	// fits: on another, it would say in its words what the problems say
	// in the command's.
	recorded := false
	if len(st.found) == 0 && len(st.differs) == 0 {
		m, err := e.manager(client, o)
		if err == nil {
			err = m.CreateTable(ctx)
		}
		if err != nil {
			return e.fail(c, o, err)
		}
		recorded = created || st.recorded == nil
		if st, err = inspect(ctx, client, o); err != nil {
			return e.fail(c, o, err)
		}
		st = st.forCreate()
	}
	problems := st.explained(o)
	ttl := "off"
	if st.ttlOn {
		ttl = "on"
	}
	if o.json {
		writeJSON(e.stdout, tableReport{Table: o.table, Created: &created, TTL: ttl, TTLAttribute: st.ttlAttr, Problems: problems,
			Layout: layoutJSONOf(st.recorded), RecordedLayout: &recorded, LayoutFlags: st.differs})
		return st.code()
	}
	switch {
	case len(problems) > 0:
		fmt.Fprintf(e.stdout, "table %q exists, and was left as it is:\n", o.table)
		printProblems(e, o, problems)
		printLayout(e, st.recorded)
		return st.code()
	case created:
		fmt.Fprintf(e.stdout, "created table %q: on-demand, key %s", o.table, keyOf(o.items))
	default:
		fmt.Fprintf(e.stdout, "table %q exists and fits: key %s", o.table, keyOf(o.items))
	}
	if o.items.ExpiryIndex != "" {
		fmt.Fprintf(e.stdout, ", expiry index %q", o.items.ExpiryIndex)
	}
	if st.ttlOn {
		fmt.Fprintf(e.stdout, ", TTL on %q\n", st.ttlAttr)
	} else {
		fmt.Fprintf(e.stdout, ", TTL off: expired items stay until 'ddbsession sweep' deletes them\n")
	}
	if recorded {
		fmt.Fprintf(e.stdout, "recorded its layout in the table, which every app and command on it now shares:\n  %s\n", showLayout(st.recorded))
	} else {
		printLayout(e, st.recorded)
	}
	return st.code()
}

// printProblems writes problems for a reader.
func printProblems(e *env, o *options, problems []problem) {
	fmt.Fprintf(e.stdout, "table %q: %d problem(s)\n", o.table, len(problems))
	for _, p := range problems {
		fmt.Fprintf(e.stdout, "\n- %s\n  %s\n", p.Error, strings.ReplaceAll(p.Fix, "\n", "\n  "))
		if p.Command != "" {
			fmt.Fprintf(e.stdout, "    %s\n", p.Command)
		}
	}
}

// printLayout writes the layout the table records, if any.
func printLayout(e *env, l *item.Layout) {
	if l != nil {
		fmt.Fprintf(e.stdout, "the table records its layout:\n  %s\n", showLayout(l))
	}
}

// tableState is what the table's description, TTL and layout record say:
// each way the table differs from the layout, as internal/table finds them
// for the library and the command alike, its TTL, and the layout flags
// that disagree with the record.
type tableState struct {
	found   []table.Problem
	ttlAttr string // "" when TTL is off
	ttlOn   bool
	// recorded is the layout the table records, nil for none; unrecorded
	// says that a record was looked for and not found.
	recorded   *item.Layout
	unrecorded bool
	differs    []flagDiff
}

// inspect reads the table's description, TTL and layout record, and finds
// in them each way the table differs from the layout: the flags given, and
// the record's for the rest (overlay), which becomes o.items.
func inspect(ctx context.Context, client Client, o *options) (tableState, error) {
	r, err := readLayout(ctx, client, o)
	if err != nil {
		return tableState{}, err
	}
	if o.items, err = o.overlay(r.layout); err != nil {
		return tableState{}, err
	}
	ttlAttr, ttlOn, err := describeTTL(ctx, client, o.table)
	if err != nil {
		return tableState{}, err
	}
	st := tableState{found: table.Find(o.table, o.items, r.desc, ttlAttr, ttlOn), ttlAttr: ttlAttr, ttlOn: ttlOn,
		recorded: r.layout, unrecorded: r.readable && r.layout == nil}
	if r.layout != nil {
		st.differs = o.disagreements(r.layout)
	}
	return st, nil
}

// forCreate leaves out what table create sees to itself: a TTL that is
// off, which it turns on where the engine can, and warns of where not.
func (st tableState) forCreate() tableState {
	st.found = slices.DeleteFunc(slices.Clone(st.found), func(p table.Problem) bool {
		return p.Kind == table.TTLOff || p.Kind == table.MRSCNoTTL
	})
	return st
}

// misfit reports whether a problem means the table does not fit the
// layout, or a layout flag disagrees with the one it records.
func (st tableState) misfit() bool {
	return slices.ContainsFunc(st.found, table.Problem.Misfit) || len(st.differs) > 0
}

// code is the exit code the problems call for.
func (st tableState) code() int {
	switch {
	case st.misfit():
		return exitSchema
	case len(st.found) > 0 || st.unrecorded:
		return exitTTL
	}
	return exitOK
}

// explained is each problem with what to do about it; [] when there are
// none, never null in JSON.
func (st tableState) explained(o *options) []problem {
	problems := []problem{}
	for _, p := range st.found {
		problems = append(problems, explainProblem(o, p, st.recorded != nil))
	}
	for _, d := range st.differs {
		problems = append(problems, problem{
			Kind:  layoutMismatch,
			Error: fmt.Sprintf("table %q records %s %s in its layout, and the flag gives %s", o.table, d.Flag, d.Table, d.Given),
			Fix: "Every app, store and command on a table must use the layout it records, or it reads and\n" +
				"writes other items than the rest: an app whose Config.Layout differs is refused at start.\n" +
				"Leave the flag out: the commands take the layout from the table. To change a table's\n" +
				"layout, see docs/item-format.md#the-layout-record.",
		})
	}
	if st.unrecorded {
		problems = append(problems, problem{
			Kind:  layoutMissing,
			Error: fmt.Sprintf("table %q records no layout", o.table),
			Fix: "The table is of release v0.1.0, and no app of a later release has started on it yet: each\n" +
				"records its Config.Layout at its first read, and the other ddbsession commands refuse to act\n" +
				"until the table records one. Record the one its apps use (give the layout flags of their\n" +
				"Config.Layout):",
			Command: "ddbsession table create -table " + shellQuote(o.table) + layoutArgs(o),
		})
	}
	return problems
}

// explainProblem says what an operator does about p, on a table that
// records its layout or not.
func explainProblem(o *options, p table.Problem, recorded bool) problem {
	l := o.items
	name := shellQuote(o.table)
	out := problem{Kind: p.Kind, Error: p.Error}
	switch {
	case p.Kind == table.Schema:
		out.Fix = schemaFix(p.Got, p.Types)
	case p.Kind == table.ExpiryIndex:
		out.Fix = fmt.Sprintf("The layout names the expiry index %q, which the table lacks or has with\n"+
			"another key. Either leave out -expiry-index (and the app's Layout.ExpiryIndex), or\n"+
			"add the index (a table update; it backfills in the background):", l.ExpiryIndex)
		out.Command = expiryIndexCommand(o)
	case p.Kind == table.MREC && recorded:
		out.Fix = "The table is a global table in multi-Region eventual consistency (MREC), and the layout\n" +
			"it records says otherwise. Every app on it must set Config.Layout.MREC, so that revocations\n" +
			"are kept where no Region's write can undo them; then record that layout in the table\n" +
			"(docs/item-format.md#the-layout-record)."
	case p.Kind == table.MREC:
		out.Fix = "The table is a global table in multi-Region eventual consistency (MREC). Set\n" +
			"Config.Layout.MREC in the app, and pass -mrec to this command, so that\n" +
			"revocations are kept where no Region's write can undo them."
	case p.Kind == table.MRSCNoTTL:
		out.Fix = "A global table in multi-Region strong consistency (MRSC) cannot have TTL. Expired\n" +
			"sessions are rejected all the same, but stay in the table: delete them with a\n" +
			"scheduled sweep (hourly, say):"
		out.Command = "ddbsession sweep -table " + name + layoutArgs(o)
	case p.Kind == table.TTLOff:
		out.Fix = "Expired sessions are rejected but stay in the table until TTL deletes them. Turn\n" +
			"TTL on (it takes up to an hour to start); 'ddbsession sweep' deletes them meanwhile:"
		if os.Getenv(endpointEnv) != "" {
			out.Fix = "A local engine (dynalite, for one) may have no TTL at all: there, this is\n" +
				"expected, and 'ddbsession sweep' cleans up. Against DynamoDB:\n" + out.Fix
		}
		out.Command = ttlCommand(name, l.TTLAttribute, true)
	case p.Kind == table.TTLAttribute && recorded:
		out.Fix = fmt.Sprintf("TTL is on %q, and the layout the table records keeps the expiry in %q, as every app on\n"+
			"it does: move TTL to %q. Disable it, and enable it on %q once DynamoDB allows (it takes up\n"+
			"to an hour, and allows no other TTL change meanwhile); items stay until then:", p.TTLAttribute, l.TTLAttribute, l.TTLAttribute, l.TTLAttribute)
		out.Command = ttlCommand(name, p.TTLAttribute, false) + "\n    " + ttlCommand(name, l.TTLAttribute, true)
	case p.Kind == table.TTLAttribute:
		out.Fix = fmt.Sprintf("TTL is on %q, and a table has one TTL attribute. If the app's Layout.TTLAttribute\n"+
			"is %q, pass -ttl-attribute %s here. Otherwise move TTL to %q: disable it, and\n"+
			"enable it on %q once DynamoDB allows (it takes up to an hour, and allows no other\n"+
			"TTL change meanwhile); items stay until then:", p.TTLAttribute, p.TTLAttribute, shellQuote(p.TTLAttribute), l.TTLAttribute, l.TTLAttribute)
		out.Command = ttlCommand(name, p.TTLAttribute, false) + "\n    " + ttlCommand(name, l.TTLAttribute, true)
	}
	return out
}

// ttlCommand is the aws command that enables or disables TTL on attr.
func ttlCommand(table, attr string, enabled bool) string {
	return fmt.Sprintf("aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=%v,AttributeName=%s",
		table, enabled, shellQuote(attr))
}

// expiryIndexCommand is the aws command that adds the layout's expiry
// index to an on-demand table: the index, and its key attributes, that
// the table's CreateTable input has.
func expiryIndexCommand(o *options) string {
	in := table.Input(o.table, o.items)
	gsi := in.GlobalSecondaryIndexes[0]
	attrTypes := map[string]string{}
	for _, a := range in.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	var keys []map[string]string
	var defs []string
	for _, k := range gsi.KeySchema {
		name := aws.ToString(k.AttributeName)
		keys = append(keys, map[string]string{"AttributeName": name, "KeyType": string(k.KeyType)})
		defs = append(defs, shellQuote("AttributeName="+name+",AttributeType="+attrTypes[name]))
	}
	spec, _ := json.Marshal([]any{map[string]any{"Create": map[string]any{
		"IndexName":  aws.ToString(gsi.IndexName),
		"KeySchema":  keys,
		"Projection": map[string]any{"ProjectionType": gsi.Projection.ProjectionType, "NonKeyAttributes": gsi.Projection.NonKeyAttributes},
	}}})
	return fmt.Sprintf("aws dynamodb update-table --table-name %s --attribute-definitions %s --global-secondary-index-updates %s",
		shellQuote(o.table), strings.Join(defs, " "), shellQuote(string(spec)))
}

// schemaFix says how the layout could fit a table of key got, whose key
// attributes have types keyTypes.
func schemaFix(got table.KeySchema, keyTypes []types.ScalarAttributeType) string {
	if slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }) {
		return "ddbsession needs String (S) keys, and a table's keys cannot change: give the\n" +
			"sessions a table of their own ('ddbsession table create -table NEW')."
	}
	flags := "-partition-key " + shellQuote(got.Hash)
	if got.Range == "" {
		flags += " -hash-only"
	} else {
		flags += " -sort-key " + shellQuote(got.Range)
	}
	return "If the app's Config.Layout names these keys, pass the same here:\n  " + flags +
		"\nIf it does not, the app fails on this table: give it the table its layout needs\n" +
		"('ddbsession table create' with its layout flags and another -table)."
}

// describeTTL returns the table's TTL attribute and whether TTL is on
// (or being turned on); off on an engine without TTL.
func describeTTL(ctx context.Context, client Client, table string) (string, bool, error) {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException" {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("describe TTL of %q: %w", table, err)
	}
	d := out.TimeToLiveDescription
	if d == nil {
		return "", false, nil
	}
	on := d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling
	if !on {
		return "", false, nil
	}
	return aws.ToString(d.AttributeName), true, nil
}

// keyOf shows layout l's key schema.
func keyOf(l item.Layout) string {
	if l.HashOnly {
		return fmt.Sprintf("(%s)", l.PartitionKey)
	}
	return fmt.Sprintf("(%s, %s)", l.PartitionKey, l.SortKey)
}
