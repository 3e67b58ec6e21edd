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

	"github.com/ddbsession/ddbsession"
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
	Error   string `json:"error"`             // the library's words
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
	problems, code, err := diagnose(ctx, client, o, m.CheckTable(ctx))
	if err != nil {
		return e.fail(c, o, err)
	}
	ok := len(problems) == 0
	if o.json {
		writeJSON(e.stdout, tableReport{Table: o.table, OK: &ok, Problems: problems})
		return code
	}
	if ok {
		fmt.Fprintf(e.stdout, "table %q fits: key %s, TTL on %q\n", o.table, keyOf(o.items), o.items.TTLAttribute)
		return code
	}
	printProblems(e, o, problems)
	return code
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
	problems, code, err := diagnose(ctx, client, o, m.CreateTable(ctx))
	if err != nil {
		return e.fail(c, o, err)
	}
	ttlAttr, ttlOn, err := describeTTL(ctx, client, o.table)
	if err != nil {
		return e.fail(c, o, err)
	}
	ttl := "off"
	if ttlOn {
		ttl = "on"
	}
	if o.json {
		writeJSON(e.stdout, tableReport{Table: o.table, Created: &created, TTL: ttl, TTLAttribute: ttlAttr, Problems: problems})
		return code
	}
	switch {
	case len(problems) > 0:
		fmt.Fprintf(e.stdout, "table %q exists, and was left as it is:\n", o.table)
		printProblems(e, o, problems)
		return code
	case created:
		fmt.Fprintf(e.stdout, "created table %q: on-demand, key %s", o.table, keyOf(o.items))
	default:
		fmt.Fprintf(e.stdout, "table %q exists and fits: key %s", o.table, keyOf(o.items))
	}
	if o.items.ExpiryIndex != "" {
		fmt.Fprintf(e.stdout, ", expiry index %q", o.items.ExpiryIndex)
	}
	if ttlOn {
		fmt.Fprintf(e.stdout, ", TTL on %q\n", ttlAttr)
	} else {
		fmt.Fprintf(e.stdout, ", TTL off: expired items stay until 'ddbsession sweep' deletes them\n")
	}
	return code
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

// diagnose turns CheckTable's or CreateTable's error into problems, each
// explained, and the exit code they call for. An error that is not about
// the table's fit is returned as it is.
func diagnose(ctx context.Context, client Client, o *options, checked error) ([]problem, int, error) {
	if checked == nil {
		return []problem{}, exitOK, nil // [] in JSON, never null
	}
	var fits, other []error
	for _, leaf := range leaves(checked) {
		if errors.Is(leaf, ddbsession.ErrTableSchema) || errors.Is(leaf, ddbsession.ErrTTLOff) {
			fits = append(fits, leaf)
		} else {
			other = append(other, leaf)
		}
	}
	// A layout whose keys do not fit the table also fails the reads that
	// the check makes with them: only the fit is news then.
	if slices.ContainsFunc(fits, func(err error) bool { return errors.Is(err, ddbsession.ErrTableSchema) }) {
		other = slices.DeleteFunc(other, isValidation)
	}
	if len(other) > 0 {
		return nil, exitFailure, errors.Join(other...)
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &o.table})
	if err != nil {
		return nil, exitFailure, fmt.Errorf("describe table %q: %w", o.table, err)
	}
	t := out.Table
	ttlAttr, ttlOn, err := describeTTL(ctx, client, o.table)
	if err != nil {
		return nil, exitFailure, err
	}
	code := exitTTL
	var problems []problem
	for _, leaf := range fits {
		p := explainProblem(o, t, ttlAttr, ttlOn, leaf)
		if errors.Is(leaf, ddbsession.ErrTableSchema) {
			code = exitSchema
		}
		problems = append(problems, p)
	}
	return problems, code, nil
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

// explainProblem says what to do about leaf, one problem that CheckTable
// found, from the table's description t and its TTL.
func explainProblem(o *options, t *types.TableDescription, ttlAttr string, ttlOn bool, leaf error) problem {
	l := o.items
	msg := strings.TrimPrefix(leaf.Error(), "ddbsession: ")
	p := problem{Error: msg}
	table := shellQuote(o.table)
	switch {
	case errors.Is(leaf, ddbsession.ErrTTLOff) && t.MultiRegionConsistency == types.MultiRegionConsistencyStrong:
		p.Kind = "mrsc-no-ttl"
		p.Fix = "A global table in multi-Region strong consistency (MRSC) cannot have TTL. Expired\n" +
			"sessions are rejected all the same, but stay in the table: delete them with a\n" +
			"scheduled sweep (hourly, say):"
		p.Command = "ddbsession sweep -table " + table + layoutArgs(o)
	case errors.Is(leaf, ddbsession.ErrTTLOff) && ttlOn:
		p.Kind = "ttl-attribute"
		p.Fix = fmt.Sprintf("TTL is on %q, and a table has one TTL attribute. If the app's Layout.TTLAttribute\n"+
			"is %q, pass -ttl-attribute %s here. Otherwise move TTL to %q: disable it, and\n"+
			"enable it on %q once DynamoDB allows (it takes up to an hour, and allows no other\n"+
			"TTL change meanwhile); items stay until then:", ttlAttr, ttlAttr, shellQuote(ttlAttr), l.TTLAttribute, l.TTLAttribute)
		p.Command = ttlCommand(table, ttlAttr, false) + "\n    " + ttlCommand(table, l.TTLAttribute, true)
	case errors.Is(leaf, ddbsession.ErrTTLOff):
		p.Kind = "ttl-off"
		p.Fix = "Expired sessions are rejected but stay in the table until TTL deletes them. Turn\n" +
			"TTL on (it takes up to an hour to start); 'ddbsession sweep' deletes them meanwhile:"
		if os.Getenv(endpointEnv) != "" {
			p.Fix = "A local engine (dynalite, for one) may have no TTL at all: there, this is\n" +
				"expected, and 'ddbsession sweep' cleans up. Against DynamoDB:\n" + p.Fix
		}
		p.Command = ttlCommand(table, l.TTLAttribute, true)
	case strings.Contains(msg, "multi-Region eventual consistency"):
		p.Kind = "mrec"
		p.Fix = "The table is a global table in multi-Region eventual consistency (MREC). Set\n" +
			"Config.MREC in the app (once every instance runs a release that knows it), and\n" +
			"pass -mrec to this command, so that revocations are kept where no Region's write\n" +
			"can undo them."
	case strings.Contains(msg, "expiry index"):
		p.Kind = "expiry-index"
		p.Fix = fmt.Sprintf("The layout names the expiry index %q, which the table lacks or has with\n"+
			"another key. Either leave out -expiry-index (and the app's Layout.ExpiryIndex), or\n"+
			"add the index (a table update; it backfills in the background):", l.ExpiryIndex)
		p.Command = expiryIndexCommand(table, l)
	default:
		p.Kind = "schema"
		p.Fix = schemaFix(o, t)
	}
	return p
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

// schemaFix says how the layout could fit table t's key schema.
func schemaFix(o *options, t *types.TableDescription) string {
	keyTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		keyTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	var hash, rng string
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	if keyTypes[hash] != types.ScalarAttributeTypeS || (rng != "" && keyTypes[rng] != types.ScalarAttributeTypeS) {
		return "ddbsession needs String (S) keys, and a table's keys cannot change: give the\n" +
			"sessions a table of their own ('ddbsession table create -table NEW')."
	}
	flags := "-partition-key " + shellQuote(hash)
	if rng == "" {
		flags += " -hash-only"
	} else {
		flags += " -sort-key " + shellQuote(rng)
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
