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
)

// This file is "table create" and "table check": the library's
// CreateTable and CheckTable, with what they find explained.

var tableCreateCommand = &command{
	path:    "table create",
	summary: "create the table the layout needs, or check the one there is",
	help: `Creates the table as Manager.CreateTable does: on-demand billing, String
keys (-partition-key, -sort-key, or -hash-only), the expiry index if
-expiry-index names one, and TTL on -ttl-attribute; it waits until the
table is ACTIVE. A table that exists already is checked instead, as
'table check' does, and left alone. Engines without TTL (dynalite) get a
warning and a table without it.

Output: what it did. With -json: {"table", "created" (false: it existed),
"ttl" ("on" or "off"), "ttlAttribute", "problems" (as 'table check' has
them)}.

Example:
  ddbsession table create -table app
  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 ddbsession table create -table app -hash-only`,
	run: runTableCreate,
}

var tableCheckCommand = &command{
	path:    "table check",
	summary: "check that the table fits the layout and has TTL on",
	help: `Checks the table as Manager.CheckTable does at an app's startup: its key
schema, the expiry index if configured, that a global table in multi-Region
eventual consistency (MREC) is run with -mrec (the app's Config.MREC), and
that TTL is on -ttl-attribute. Each problem comes with what to do about it,
such as the aws command that turns TTL on. A global table in multi-Region
strong consistency (MRSC) has no TTL: there, 'ddbsession sweep' deletes
expired items instead.

Exits 0 if the table fits, 5 if it does not (the app will fail), 6 if it
fits but TTL is off or on another attribute (the app works; expired items
stay until TTL or a sweep deletes them), 3 if the table does not exist.

Output: the problems. With -json: {"table", "ok", "problems": [{"kind",
"error", "fix", "command"}]}, kind one of "schema", "expiry-index", "mrec",
"ttl-off", "ttl-attribute", "mrsc-no-ttl".

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

// tableReport is the JSON of table create and check.
type tableReport struct {
	Table        string    `json:"table"`
	OK           *bool     `json:"ok,omitempty"`
	Created      *bool     `json:"created,omitempty"`
	TTL          string    `json:"ttl,omitempty"`
	TTLAttribute string    `json:"ttlAttribute,omitempty"`
	Problems     []problem `json:"problems"`
}

func runTableCheck(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, err := e.connect(ctx, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	m, err := e.manager(client, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	v, err := diagnose(ctx, client, o, m.CheckTable(ctx), false)
	if err != nil {
		return e.fail(c, o, err)
	}
	ok := len(v.problems) == 0
	if o.json {
		writeJSON(e.stdout, tableReport{Table: o.table, OK: &ok, Problems: v.problems})
		return v.code
	}
	if ok {
		fmt.Fprintf(e.stdout, "table %q fits: key %s, TTL on %q\n", o.table, keyOf(o.items), o.items.TTLAttribute)
		return v.code
	}
	printProblems(e, o, v.problems)
	return v.code
}

func runTableCreate(ctx context.Context, e *env, c *command, o *options, _ []string) int {
	client, err := e.connect(ctx, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	m, err := e.manager(client, o)
	if err != nil {
		return e.fail(c, o, err)
	}
	_, err = client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &o.table})
	var missing *types.ResourceNotFoundException
	created := errors.As(err, &missing)
	if err != nil && !created {
		return e.fail(c, o, err)
	}
	v, err := diagnose(ctx, client, o, m.CreateTable(ctx), true)
	if err != nil {
		return e.fail(c, o, err)
	}
	ttl := "off"
	if v.ttlOn {
		ttl = "on"
	}
	if o.json {
		writeJSON(e.stdout, tableReport{Table: o.table, Created: &created, TTL: ttl, TTLAttribute: v.ttlAttr, Problems: v.problems})
		return v.code
	}
	switch {
	case len(v.problems) > 0:
		fmt.Fprintf(e.stdout, "table %q exists, and was left as it is:\n", o.table)
		printProblems(e, o, v.problems)
		return v.code
	case created:
		fmt.Fprintf(e.stdout, "created table %q: on-demand, key %s", o.table, keyOf(o.items))
	default:
		fmt.Fprintf(e.stdout, "table %q exists and fits: key %s", o.table, keyOf(o.items))
	}
	if o.items.ExpiryIndex != "" {
		fmt.Fprintf(e.stdout, ", expiry index %q", o.items.ExpiryIndex)
	}
	if v.ttlOn {
		fmt.Fprintf(e.stdout, ", TTL on %q\n", v.ttlAttr)
	} else {
		fmt.Fprintf(e.stdout, ", TTL off: expired items stay until 'ddbsession sweep' deletes them\n")
	}
	return v.code
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

// Kinds of problem, as the JSON names them. The first three mean the
// table does not fit the layout (exit 5), the others that it fits but its
// TTL does not delete expired sessions (exit 6).
const (
	kindSchema       = "schema"
	kindExpiryIndex  = "expiry-index"
	kindMREC         = "mrec"
	kindTTLOff       = "ttl-off"
	kindTTLAttribute = "ttl-attribute"
	kindMRSCNoTTL    = "mrsc-no-ttl"
)

// misfit reports whether p means the table does not fit the layout.
func misfit(p problem) bool {
	return p.Kind == kindSchema || p.Kind == kindExpiryIndex || p.Kind == kindMREC
}

// verdict is what diagnose found: the table's problems, each explained,
// the exit code they call for, and its TTL.
type verdict struct {
	problems []problem // [] in JSON when there are none, never null
	code     int
	ttlAttr  string // "" when TTL is off
	ttlOn    bool
}

// diagnose reads the table's description and TTL, and finds in them each
// way the table differs from the layout and the flags, as the library
// checks them; that is where each problem's kind comes from. checked is
// the library's own verdict, CheckTable's or CreateTable's error: what of
// it the description does not account for is a failure (of DynamoDB, the
// network or the credentials), returned as it is. create leaves out what
// CreateTable sees to itself: a TTL that is off, which it turns on where
// the table fits and the engine can, and warns of where not.
func diagnose(ctx context.Context, client Client, o *options, checked error, create bool) (verdict, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &o.table})
	if err != nil {
		if checked != nil {
			return verdict{}, checked // the library met it first, and says it in its words
		}
		return verdict{}, fmt.Errorf("describe table %q: %w", o.table, err)
	}
	ttlAttr, ttlOn, err := describeTTL(ctx, client, o.table)
	if err != nil {
		if checked != nil {
			return verdict{}, checked
		}
		return verdict{}, err
	}
	problems := findProblems(o, out.Table, ttlAttr, ttlOn)
	if create {
		problems = slices.DeleteFunc(problems, func(p problem) bool { return p.Kind == kindTTLOff || p.Kind == kindMRSCNoTTL })
	}
	if err := unexplained(checked, problems); err != nil {
		return verdict{}, err
	}
	v := verdict{problems: problems, code: exitOK, ttlAttr: ttlAttr, ttlOn: ttlOn}
	switch {
	case slices.ContainsFunc(problems, misfit):
		v.code = exitSchema
	case len(problems) > 0:
		v.code = exitTTL
	}
	return v, nil
}

// unexplained returns what of the library's verdict checked the problems
// found in the table's description do not account for, nil if nothing.
// The library's findings are errors of its own words alone; its failures
// carry their cause (DynamoDB's error, the network's, the decoder's). A
// failure is never accounted for, but one: the ValidationException that
// the check's read with the layout's keys meets on a table that does not
// fit them. A finding is, by any problem: the description says what is
// wrong, and the problem what to do. A finding where the description shows
// nothing wrong is the library's news, and a failure here.
func unexplained(checked error, problems []problem) error {
	if checked == nil {
		return nil
	}
	var failures, findings []error
	for _, leaf := range leaves(checked) {
		if errors.Unwrap(leaf) == nil {
			findings = append(findings, leaf)
		} else {
			failures = append(failures, leaf)
		}
	}
	if slices.ContainsFunc(problems, misfit) {
		failures = slices.DeleteFunc(failures, isValidation)
	}
	if len(problems) == 0 {
		failures = append(failures, findings...)
	}
	return errors.Join(failures...)
}

// isValidation reports whether err is DynamoDB's ValidationException.
func isValidation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}

// leaves are the errors that err joins, each on its own.
func leaves(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range joined.Unwrap() {
			all = append(all, leaves(e)...)
		}
		return all
	}
	// A wrapped join, as "ddbsession: ...: %w" of one.
	if inner := errors.Unwrap(err); inner != nil {
		if _, ok := inner.(interface{ Unwrap() []error }); ok {
			return leaves(inner)
		}
	}
	return []error{err}
}

// keySchema is a key schema's attribute names: a table's, or an index's.
type keySchema struct{ hash, rng string }

func (k keySchema) String() string {
	if k.rng == "" {
		return fmt.Sprintf("(hash %q)", k.hash)
	}
	return fmt.Sprintf("(hash %q, range %q)", k.hash, k.rng)
}

func schemaOf(elems []types.KeySchemaElement) keySchema {
	var k keySchema
	for _, e := range elems {
		switch e.KeyType {
		case types.KeyTypeHash:
			k.hash = aws.ToString(e.AttributeName)
		case types.KeyTypeRange:
			k.rng = aws.ToString(e.AttributeName)
		}
	}
	return k
}

// findProblems finds each way that table t, whose TTL is on ttlAttr if
// ttlOn, differs from what the layout and the flags need, as the library
// checks them, in this order: the key schema and its types, the expiry
// index, a global table's mode, and TTL. Each comes with what to do.
func findProblems(o *options, t *types.TableDescription, ttlAttr string, ttlOn bool) []problem {
	l := o.items
	table := shellQuote(o.table)
	problems := []problem{}
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}

	want, got := keySchema{hash: l.PartitionKey, rng: l.SortKey}, schemaOf(t.KeySchema)
	keyTypes := []types.ScalarAttributeType{attrTypes[got.hash]}
	if got.rng != "" {
		keyTypes = append(keyTypes, attrTypes[got.rng])
	}
	switch {
	case got != want:
		problems = append(problems, problem{Kind: kindSchema,
			Error: fmt.Sprintf("table %q has key %s, and the layout wants %s", o.table, got, want),
			Fix:   schemaFix(got, keyTypes)})
	case slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }):
		problems = append(problems, problem{Kind: kindSchema,
			Error: fmt.Sprintf("table %q has key %s of types %s, and the layout wants String (S)", o.table, got, keyTypes),
			Fix:   schemaFix(got, keyTypes)})
	}

	if l.ExpiryIndex != "" {
		want := keySchema{hash: item.AttrExpiryBucket, rng: l.TTLAttribute}
		var msg string
		i := slices.IndexFunc(t.GlobalSecondaryIndexes, func(gsi types.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(gsi.IndexName) == l.ExpiryIndex
		})
		switch {
		case i < 0:
			msg = fmt.Sprintf("table %q has no expiry index %q", o.table, l.ExpiryIndex)
		case schemaOf(t.GlobalSecondaryIndexes[i].KeySchema) != want:
			msg = fmt.Sprintf("expiry index %q of table %q has key %s, and the layout wants %s",
				l.ExpiryIndex, o.table, schemaOf(t.GlobalSecondaryIndexes[i].KeySchema), want)
		}
		if msg != "" {
			problems = append(problems, problem{Kind: kindExpiryIndex, Error: msg,
				Fix: fmt.Sprintf("The layout names the expiry index %q, which the table lacks or has with\n"+
					"another key. Either leave out -expiry-index (and the app's Layout.ExpiryIndex), or\n"+
					"add the index (a table update; it backfills in the background):", l.ExpiryIndex),
				Command: expiryIndexCommand(table, l)})
		}
	}

	strong := t.MultiRegionConsistency == types.MultiRegionConsistencyStrong
	if len(t.Replicas) > 0 && !strong && !o.mrec {
		problems = append(problems, problem{Kind: kindMREC,
			Error: fmt.Sprintf("table %q is a global table in multi-Region eventual consistency (MREC), and -mrec is not given", o.table),
			Fix: "The table is a global table in multi-Region eventual consistency (MREC). Set\n" +
				"Config.MREC in the app (once every instance runs a release that knows it), and\n" +
				"pass -mrec to this command, so that revocations are kept where no Region's write\n" +
				"can undo them."})
	}

	switch {
	case strong && !ttlOn:
		problems = append(problems, problem{Kind: kindMRSCNoTTL,
			Error: fmt.Sprintf("table %q is a global table in multi-Region strong consistency (MRSC), which has no TTL", o.table),
			Fix: "A global table in multi-Region strong consistency (MRSC) cannot have TTL. Expired\n" +
				"sessions are rejected all the same, but stay in the table: delete them with a\n" +
				"scheduled sweep (hourly, say):",
			Command: "ddbsession sweep -table " + table + layoutArgs(o)})
	case !ttlOn:
		p := problem{Kind: kindTTLOff,
			Error: fmt.Sprintf("TTL is off on table %q", o.table),
			Fix: "Expired sessions are rejected but stay in the table until TTL deletes them. Turn\n" +
				"TTL on (it takes up to an hour to start); 'ddbsession sweep' deletes them meanwhile:",
			Command: ttlCommand(table, l.TTLAttribute, true)}
		if os.Getenv(endpointEnv) != "" {
			p.Fix = "A local engine (dynalite, for one) may have no TTL at all: there, this is\n" +
				"expected, and 'ddbsession sweep' cleans up. Against DynamoDB:\n" + p.Fix
		}
		problems = append(problems, p)
	case ttlAttr != l.TTLAttribute:
		problems = append(problems, problem{Kind: kindTTLAttribute,
			Error: fmt.Sprintf("table %q has TTL on %q, and the layout keeps the expiry in %q", o.table, ttlAttr, l.TTLAttribute),
			Fix: fmt.Sprintf("TTL is on %q, and a table has one TTL attribute. If the app's Layout.TTLAttribute\n"+
				"is %q, pass -ttl-attribute %s here. Otherwise move TTL to %q: disable it, and\n"+
				"enable it on %q once DynamoDB allows (it takes up to an hour, and allows no other\n"+
				"TTL change meanwhile); items stay until then:", ttlAttr, ttlAttr, shellQuote(ttlAttr), l.TTLAttribute, l.TTLAttribute),
			Command: ttlCommand(table, ttlAttr, false) + "\n    " + ttlCommand(table, l.TTLAttribute, true)})
	}
	return problems
}

// ttlCommand is the aws command that enables or disables TTL on attr.
func ttlCommand(table, attr string, enabled bool) string {
	return fmt.Sprintf("aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=%v,AttributeName=%s",
		table, enabled, shellQuote(attr))
}

// expiryIndexCommand is the aws command that adds layout l's expiry index
// to an on-demand table.
func expiryIndexCommand(table string, l item.Layout) string {
	index := map[string]any{"Create": map[string]any{
		"IndexName": l.ExpiryIndex,
		"KeySchema": []map[string]string{
			{"AttributeName": item.AttrExpiryBucket, "KeyType": "HASH"},
			{"AttributeName": l.TTLAttribute, "KeyType": "RANGE"},
		},
		"Projection": map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": item.Projection()},
	}}
	spec, _ := json.Marshal([]any{index})
	return fmt.Sprintf("aws dynamodb update-table --table-name %s --attribute-definitions AttributeName=%s,AttributeType=S AttributeName=%s,AttributeType=N --global-secondary-index-updates %s",
		table, item.AttrExpiryBucket, shellQuote(l.TTLAttribute), shellQuote(string(spec)))
}

// schemaFix says how the layout could fit a table of key got, whose key
// attributes have types keyTypes.
func schemaFix(got keySchema, keyTypes []types.ScalarAttributeType) string {
	if slices.ContainsFunc(keyTypes, func(typ types.ScalarAttributeType) bool { return typ != types.ScalarAttributeTypeS }) {
		return "ddbsession needs String (S) keys, and a table's keys cannot change: give the\n" +
			"sessions a table of their own ('ddbsession table create -table NEW')."
	}
	flags := "-partition-key " + shellQuote(got.hash)
	if got.rng == "" {
		flags += " -hash-only"
	} else {
		flags += " -sort-key " + shellQuote(got.rng)
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
