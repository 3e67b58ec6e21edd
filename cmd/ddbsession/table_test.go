package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/table"
)

// table create makes the table the layout needs, as the library's
// CreateTable does, and table check then finds it fit; on an engine
// without TTL, both say TTL is off, with the command that turns it on.
// The engine without TTL is a stand-in for one on any engine; the engine
// as it is comes next, with or without TTL (moto has it, dynalite not).
func TestTableCreateAndCheck(t *testing.T) {
	t.Parallel()
	engine := ddbtest.Client(t)
	table := ddbtest.TableName(t, engine)
	f := &fixture{t: t, engine: engine, table: table}
	yes, no := true, false

	t.Run("on an engine without TTL", func(t *testing.T) {
		f.probe = withoutTTL(ddbtest.NewProbe(engine))
		wantWithoutTTL(t, f, &yes)
	})

	t.Run("on the engine as it is", func(t *testing.T) {
		f.probe = ddbtest.NewProbe(engine)
		if !engineHasTTL(t) {
			wantWithoutTTL(t, f, &no)
			return
		}
		// The table exists with TTL off: table create turns it on.
		code, stdout, stderr := f.run("table", "create", "-json")
		wantCode(t, code, exitOK, stdout, stderr)
		var created tableReport
		decode(t, stdout, &created)
		if diff := cmp.Diff(tableReport{Table: table, Created: &no, TTL: "on", TTLAttribute: "expiresAt", Problems: []problem{}, Layout: layoutJSONOf(&layout), RecordedLayout: &no}, created); diff != "" {
			t.Errorf("table create -json (-want +got):\n%s", diff)
		}
		if strings.Contains(stderr, "UpdateTimeToLive") {
			t.Errorf("a warning about TTL, on an engine that has it:\n%s", stderr)
		}
		code, stdout, stderr = f.run("table", "check")
		wantCode(t, code, exitOK, stdout, stderr)
		if !strings.Contains(stdout, "fits") {
			t.Errorf("table check:\n%s", stdout)
		}
	})

	t.Run("with TTL", func(t *testing.T) {
		// The engine's TTL, or where it has none, TTLClient's emulation
		// of DynamoDB's.
		f.probe = ddbtest.NewProbe(ddbtest.WithTTL(engine))
		code, stdout, stderr := f.run("table", "create")
		wantCode(t, code, exitOK, stdout, stderr)
		if !strings.Contains(stdout, "exists and fits") || !strings.Contains(stdout, `TTL on "expiresAt"`) {
			t.Errorf("table create on the existing table:\n%s", stdout)
		}
		code, stdout, stderr = f.run("table", "check", "-json")
		wantCode(t, code, exitOK, stdout, stderr)
		var checked tableReport
		decode(t, stdout, &checked)
		ok := true
		if diff := cmp.Diff(tableReport{Table: table, OK: &ok, Problems: []problem{}, Layout: layoutJSONOf(&layout)}, checked); diff != "" {
			t.Errorf("table check -json (-want +got):\n%s", diff)
		}
		code, stdout, stderr = f.run("table", "check")
		wantCode(t, code, exitOK, stdout, stderr)
		if !strings.Contains(stdout, "fits") {
			t.Errorf("table check:\n%s", stdout)
		}

		// TTL on another attribute than the layout's: move it. The table's
		// record says where its apps keep the expiry, with the flag or
		// without it.
		validUntil := layout
		validUntil.TTLAttribute = "validUntil"
		f.put(validUntil.EncodeLayout())
		defer f.put(layout.EncodeLayout())
		for _, args := range [][]string{nil, {"-ttl-attribute", "validUntil"}} {
			code, stdout, stderr = f.run(append([]string{"table", "check", "-json"}, args...)...)
			wantCode(t, code, exitTTL, stdout, stderr)
			decode(t, stdout, &checked)
			if len(checked.Problems) != 1 || checked.Problems[0].Kind != "ttl-attribute" ||
				!strings.Contains(checked.Problems[0].Fix, `move TTL to "validUntil"`) ||
				!strings.Contains(checked.Problems[0].Command, "Enabled=false,AttributeName=expiresAt") ||
				!strings.Contains(checked.Problems[0].Command, "Enabled=true,AttributeName=validUntil") {
				t.Errorf("%v: TTL on another attribute: %+v", args, checked.Problems)
			}
		}
		// Without a record, the flags are the layout: the app's may keep
		// it where TTL is.
		f.delete(layout.LayoutKey())
		code, stdout, stderr = f.run("table", "check", "-ttl-attribute", "validUntil", "-json")
		wantCode(t, code, exitTTL, stdout, stderr)
		decode(t, stdout, &checked)
		if diff := cmp.Diff([]string{"ttl-attribute", "layout-missing"}, kindsOf(checked.Problems)); diff != "" ||
			!strings.Contains(checked.Problems[0].Fix, "-ttl-attribute expiresAt") ||
			!strings.Contains(checked.Problems[1].Command, "ddbsession table create -table "+table+" -ttl-attribute validUntil") {
			t.Errorf("TTL on another attribute, without a record: %+v", checked.Problems)
		}
	})

	t.Run("with another layout", func(t *testing.T) {
		f.probe = ddbtest.NewProbe(engine)
		for _, tc := range []struct {
			args     []string
			kind     string
			says     string
			exitCode int
		}{
			{[]string{"-hash-only"}, "schema", `has key (hash "pk", range "sk"), and the layout wants (hash "pk")` + "If the app's Config.Layout names these keys, pass the same here:\n  -partition-key pk -sort-key sk", exitSchema},
			{[]string{"-partition-key", "id", "-sort-key", "type"}, "schema", "-partition-key pk -sort-key sk", exitSchema},
			{[]string{"-expiry-index", "expiring"}, "expiry-index", `aws dynamodb update-table --table-name ` + table, exitSchema},
		} {
			for _, verb := range []string{"check", "create"} {
				code, stdout, stderr := f.run(append([]string{"table", verb, "-json"}, tc.args...)...)
				wantCode(t, code, tc.exitCode, stdout, stderr)
				var got tableReport
				decode(t, stdout, &got)
				found := false
				for _, p := range got.Problems {
					found = found || (p.Kind == tc.kind && strings.Contains(p.Error+p.Fix+p.Command, tc.says))
				}
				if !found {
					t.Errorf("table %s %v: problems %+v, want one of kind %q saying %q", verb, tc.args, got.Problems, tc.kind, tc.says)
				}
			}
		}
	})

	t.Run("missing", func(t *testing.T) {
		f.probe = ddbtest.NewProbe(engine)
		code, stdout, stderr := f.runBare("table", "check", "-table", table+"-missing", "-hash-only")
		wantCode(t, code, exitNotFound, stdout, stderr)
		if !strings.Contains(stderr, "ddbsession table create -table "+table+"-missing -hash-only") {
			t.Errorf("stderr does not say how to create it:\n%s", stderr)
		}
		// table check never creates.
		_, err := engine.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table + "-missing")})
		if !errors.As(err, new(*types.ResourceNotFoundException)) {
			t.Errorf("after table check, DescribeTable of the missing table: %v, want ResourceNotFoundException", err)
		}
	})
}

// wantWithoutTTL runs table create and table check through f's probe,
// an engine without TTL: the table is there (created says whether table
// create made it), fits, and has TTL off, which both say, with the command
// that turns TTL on.
func wantWithoutTTL(t *testing.T, f *fixture, created *bool) {
	t.Helper()
	code, stdout, stderr := f.run("table", "create", "-json")
	wantCode(t, code, exitOK, stdout, stderr)
	var got tableReport
	decode(t, stdout, &got)
	if diff := cmp.Diff(tableReport{Table: f.table, Created: created, TTL: "off", Problems: []problem{}, Layout: layoutJSONOf(&layout), RecordedLayout: created}, got); diff != "" {
		t.Errorf("table create -json (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr, "does not implement UpdateTimeToLive") {
		t.Errorf("no warning that TTL is off:\n%s", stderr)
	}
	code, stdout, stderr = f.run("table", "check")
	wantCode(t, code, exitTTL, stdout, stderr)
	want := "aws dynamodb update-time-to-live --table-name " + f.table + " --time-to-live-specification Enabled=true,AttributeName=expiresAt"
	if !strings.Contains(stdout, want) {
		t.Errorf("table check does not say %q:\n%s", want, stdout)
	}
}

// table check changes nothing: on a table whose TTL is off, where the
// engine has TTL, and which records no layout (release v0.1.0's), it says
// so each time, and TTL stays off, the layout unrecorded; table create
// then turns TTL on and records the layout.
func TestTableCheckChangesNothing(t *testing.T) {
	t.Parallel()
	engine := ddbtest.Client(t)
	withTTL := ddbtest.WithTTL(engine)
	table := ddbtest.TableName(t, engine)
	ctx := context.Background()
	if _, err := engine.CreateTable(ctx, tableInput(table)); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, engine: engine, table: table, probe: ddbtest.NewProbe(withTTL)}
	for range 2 {
		code, stdout, stderr := f.run("table", "check", "-json")
		wantCode(t, code, exitTTL, stdout, stderr)
		var got tableReport
		decode(t, stdout, &got)
		if len(got.Problems) != 2 || got.Problems[0].Kind != "ttl-off" || got.Problems[0].Error != fmt.Sprintf("TTL is off on table %q", table) ||
			got.Problems[1].Kind != "layout-missing" || got.Problems[1].Command != "ddbsession table create -table "+table || got.Layout != nil {
			t.Errorf("table check: %+v, layout %+v", got.Problems, got.Layout)
		}
	}
	if _, on, err := describeTTL(ctx, f.probe, table); on || err != nil {
		t.Fatalf("after table check, TTL on %v, %v; want off", on, err)
	}
	if av := f.item(layout.LayoutKey()); av != nil {
		t.Fatalf("after table check, a layout record: %v", av)
	}
	code, stdout, stderr := f.run("table", "create")
	wantCode(t, code, exitOK, stdout, stderr)
	if attr, on, err := describeTTL(ctx, f.probe, table); !on || attr != "expiresAt" || err != nil {
		t.Errorf("after table create, TTL on %v (%q), %v; want on expiresAt", on, attr, err)
	}
	if !strings.Contains(stdout, "recorded its layout in the table") {
		t.Errorf("table create does not say it recorded the layout:\n%s", stdout)
	}
	if recorded, err := item.DecodeLayout(f.item(layout.LayoutKey())); err != nil || recorded != layout {
		t.Errorf("after table create, the layout record: %+v, %v; want %+v", recorded, err, layout)
	}
}

// kindsOf is the kinds of problems, in order.
func kindsOf(problems []problem) []string {
	var kinds []string
	for _, p := range problems {
		kinds = append(kinds, p.Kind)
	}
	return kinds
}

// tableInput is the table of the default layout, as the library makes it.
func tableInput(name string) *dynamodb.CreateTableInput { return table.Input(name, layout) }

// table create makes the expiry index that -expiry-index names, which
// table check then finds; on a table without it, the command that table
// check prints adds the index the layout needs.
func TestTableExpiryIndex(t *testing.T) {
	t.Parallel()
	engine := ddbtest.Client(t)
	f := &fixture{t: t, engine: engine, table: ddbtest.TableName(t, engine), probe: ddbtest.NewProbe(engine)}
	code, stdout, stderr := f.run("table", "create", "-expiry-index", "expiring")
	wantCode(t, code, exitOK, stdout, stderr)
	if !strings.Contains(stdout, `created table`) || !strings.Contains(stdout, `expiry index "expiring"`) {
		t.Errorf("table create -expiry-index:\n%s", stdout)
	}
	// The index fits; TTL is on where the engine has it (table create
	// turned it on), and a problem of its own where not.
	ttl := engineHasTTL(t)
	wantKinds := func(kinds ...string) []string {
		if !ttl {
			kinds = append(kinds, "ttl-off")
		}
		return kinds
	}
	code, stdout, stderr = f.run("table", "check", "-expiry-index", "expiring", "-json")
	want := exitTTL
	if ttl {
		want = exitOK
	}
	wantCode(t, code, want, stdout, stderr)
	var got tableReport
	decode(t, stdout, &got)
	if diff := cmp.Diff(wantKinds(), kindsOf(got.Problems), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("table check of the new table, on an engine with TTL %v: %+v (-want +got kinds):\n%s", ttl, got.Problems, diff)
	}

	// Without the flag, the table's record names the index.
	code, stdout, stderr = f.run("table", "check", "-json")
	wantCode(t, code, want, stdout, stderr)
	decode(t, stdout, &got)
	if diff := cmp.Diff(wantKinds(), kindsOf(got.Problems), cmpopts.EquateEmpty()); diff != "" || got.Layout == nil || got.Layout.ExpiryIndex != "expiring" {
		t.Errorf("table check without -expiry-index: %+v, layout %+v (-want +got kinds):\n%s", got.Problems, got.Layout, diff)
	}

	// Another index than the record's: the table lacks it, and the flag
	// disagrees with the record.
	code, stdout, stderr = f.run("table", "check", "-expiry-index", "other", "-json")
	wantCode(t, code, exitSchema, stdout, stderr)
	decode(t, stdout, &got)
	if !slices.Equal(kindsOf(got.Problems), append(wantKinds("expiry-index"), "layout-mismatch")) || got.Problems[0].Error != fmt.Sprintf("table %q has no expiry index %q", f.table, "other") {
		t.Fatalf("table check -expiry-index other, on an engine with TTL %v: %+v", ttl, got.Problems)
	}
	command := got.Problems[0].Command
	l := layout
	l.ExpiryIndex = "other"
	in := table.Input(f.table, l)
	wantDefs := "--attribute-definitions AttributeName=expiryBucket,AttributeType=S AttributeName=expiresAt,AttributeType=N --global-secondary-index-updates "
	before, spec, ok := strings.Cut(command, wantDefs)
	if !ok || before != "aws dynamodb update-table --table-name "+f.table+" " {
		t.Fatalf("the command: %s", command)
	}
	var updates []struct{ Create types.GlobalSecondaryIndex }
	if err := json.Unmarshal([]byte(strings.Trim(spec, "'")), &updates); err != nil || len(updates) != 1 {
		t.Fatalf("the command's index spec %s: %v", spec, err)
	}
	if diff := cmp.Diff(in.GlobalSecondaryIndexes[0], updates[0].Create, cmpopts.IgnoreUnexported(types.GlobalSecondaryIndex{}, types.KeySchemaElement{}, types.Projection{})); diff != "" {
		t.Errorf("the command's index, and the one CreateTable makes (-want +got):\n%s", diff)
	}
}

// A global table: MREC where the table's layout record (or without one,
// the flags) does not say MREC does not fit (the app needs Config.MREC),
// and MRSC has no TTL, for which the fix is a sweep. The engine has no
// global tables: the probe describes the table, and its TTL, as DynamoDB
// describes them. An MREC table has TTL on or off; an MRSC table cannot
// have it, and says DISABLED ("Global tables: how it works", consistency
// modes:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html).
func TestTableCheckGlobalTables(t *testing.T) {
	t.Parallel()
	off := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	on := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String("expiresAt")}
	const (
		noRecord = iota
		recordedPlain
		recordedMREC
	)
	for _, tc := range []struct {
		name        string
		consistency types.MultiRegionConsistency
		record      int
		ttl         *types.TimeToLiveDescription
		args        []string
		exitCode    int
		kinds       []string
		says        string
	}{
		{"MREC recorded without MREC", types.MultiRegionConsistencyEventual, recordedPlain, off, nil, exitSchema, []string{"mrec", "ttl-off"}, "must set Config.Layout.MREC"},
		{"MREC recorded without MREC, TTL on", types.MultiRegionConsistencyEventual, recordedPlain, on, nil, exitSchema, []string{"mrec"}, "must set Config.Layout.MREC"},
		{"MREC recorded without MREC, -mrec", types.MultiRegionConsistencyEventual, recordedPlain, on, []string{"-mrec"}, exitSchema, []string{"layout-mismatch"}, "Leave the flag out"},
		{"MREC recorded", types.MultiRegionConsistencyEventual, recordedMREC, off, nil, exitTTL, []string{"ttl-off"}, "update-time-to-live"},
		{"MREC recorded, TTL on", types.MultiRegionConsistencyEventual, recordedMREC, on, nil, exitOK, nil, ""},
		{"MREC recorded, TTL on, -mrec", types.MultiRegionConsistencyEventual, recordedMREC, on, []string{"-mrec"}, exitOK, nil, ""},
		{"MREC without a record, without -mrec", types.MultiRegionConsistencyEventual, noRecord, on, nil, exitSchema, []string{"mrec", "layout-missing"}, "pass -mrec"},
		{"MREC without a record, with -mrec", types.MultiRegionConsistencyEventual, noRecord, on, []string{"-mrec"}, exitTTL, []string{"layout-missing"}, "ddbsession table create -table"},
		{"MRSC", types.MultiRegionConsistencyStrong, recordedPlain, off, nil, exitTTL, []string{"mrsc-no-ttl"}, "ddbsession sweep -table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var f *fixture
			if tc.record == noRecord {
				f = unrecordedFixture(t)
			} else {
				f = newFixture(t, func(c *ddbsession.Config[testUser]) { c.Layout.MREC = tc.record == recordedMREC })
			}
			describeAs(f.probe, func(d *types.TableDescription) {
				d.MultiRegionConsistency = tc.consistency
				d.Replicas = []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("eu-west-1")}}
			})
			answerTTL(f.probe, tc.ttl)
			code, stdout, stderr := f.run(append([]string{"table", "check", "-json"}, tc.args...)...)
			wantCode(t, code, tc.exitCode, stdout, stderr)
			var got tableReport
			decode(t, stdout, &got)
			text := ""
			for _, p := range got.Problems {
				text += p.Fix + p.Command
			}
			if diff := cmp.Diff(tc.kinds, kindsOf(got.Problems)); diff != "" || !strings.Contains(text, tc.says) {
				t.Errorf("problems %+v: want kinds %v (-want +got:\n%s) and words %q", got.Problems, tc.kinds, diff, tc.says)
			}
		})
	}
}

// unrecordedFixture is a table of the default layout that records none,
// as release v0.1.0 made them, and no app on it.
func unrecordedFixture(t *testing.T) *fixture {
	t.Helper()
	engine := ddbtest.Client(t)
	f := &fixture{t: t, engine: engine, table: ddbtest.TableName(t, engine)}
	f.probe = ddbtest.NewProbe(engine)
	if _, err := engine.CreateTable(context.Background(), tableInput(f.table)); err != nil {
		t.Fatal(err)
	}
	ddbtest.WaitActive(t, engine, f.table)
	return f
}

// A failure of the library's check is a failure (exit 1), told as
// DynamoDB's, never a problem of the table's: here its read of the global
// revocation item is refused, on a table whose TTL is off besides.
func TestTableCheckFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:GetItem"}
	f.probe.Fail = func(_ context.Context, op string, _ any) error {
		if op == "GetItem" {
			return denied
		}
		return nil
	}
	for _, verb := range []string{"check", "create"} {
		code, stdout, stderr := f.run("table", verb, "-json")
		wantCode(t, code, exitFailure, stdout, stderr)
		if stdout != "" || !strings.Contains(stderr, "the credentials may not do this (not authorized to perform: dynamodb:GetItem)") {
			t.Errorf("table %s: stdout %q; stderr:\n%s", verb, stdout, stderr)
		}
	}
}

// sweep and count pace on the consumed capacity the engine reports. Where
// the engine reports it by size, as DynamoDB bills it (dynalite does),
// their pacing tests rest on the engine's numbers, which must be
// DynamoDB's here: an eventually consistent Scan of one small item is half
// a read unit, the delete of a small item one write unit, of a 1.5 KB one
// two (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).
// Where it reports fixed figures (moto), recordUnits's bill stands
// in with DynamoDB's bill for deletes, which must be the same; it is
// checked on every engine.
func TestEngineReportsConsumedCapacity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	deleted := func(t *testing.T, client Client, key map[string]types.AttributeValue) *types.ConsumedCapacity {
		t.Helper()
		del, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &f.table, Key: key, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		return del.ConsumedCapacity
	}
	if f.billsBySize() {
		t.Run("the engine's reports", func(t *testing.T) {
			key := f.user("alice")
			scan, err := f.engine.Scan(ctx, &dynamodb.ScanInput{TableName: &f.table, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
			if err != nil {
				t.Fatal(err)
			}
			if scan.ConsumedCapacity == nil || aws.ToFloat64(scan.ConsumedCapacity.CapacityUnits) != 0.5 {
				t.Errorf("Scan of one small item reported %+v, want 0.5 read units (eventually consistent)", scan.ConsumedCapacity)
			}
			if cc := deleted(t, f.engine, layout.Key(key.PK, key.SK)); cc == nil || aws.ToFloat64(cc.CapacityUnits) != 1 {
				t.Errorf("DeleteItem of a small item reported %+v, want 1 write unit", cc)
			}
		})
	}
	t.Run("DynamoDB's bill for deletes", func(t *testing.T) {
		billed := ddbtest.NewProbe(f.engine)
		recordUnits(billed, true)
		small := f.user("bob")
		large := layout.Key("USER#carol", "PROFILE")
		f.put(withAttribute(large, "pad", strings.Repeat("x", 1500)))
		for _, tc := range []struct {
			what  string
			key   map[string]types.AttributeValue
			units float64
		}{
			{"a small item", layout.Key(small.PK, small.SK), 1},
			{"an item of 1.5 KB", large, 2},
		} {
			if cc := deleted(t, billed, tc.key); cc == nil || aws.ToFloat64(cc.CapacityUnits) != tc.units {
				t.Errorf("DeleteItem of %s reported %+v, want %v write units", tc.what, cc, tc.units)
			}
		}
	})
}

// withAttribute is av with the string attribute name set to value.
func withAttribute(av map[string]types.AttributeValue, name, value string) map[string]types.AttributeValue {
	av = maps.Clone(av)
	av[name] = &types.AttributeValueMemberS{Value: value}
	return av
}

// table check and create hold the table to its layout record: a layout
// flag that disagrees is a problem of its own (exit 5) that names the
// flag, the table's value and the flag's, in words and in -json's
// layoutFlags; create then changes nothing. A record the command cannot
// read refuses every command that acts.
func TestTableLayoutRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.probe = ddbtest.NewProbe(ddbtest.WithTTL(f.engine))
	code, stdout, stderr := f.run("table", "create") // TTL on, where the engine has none by the emulation
	wantCode(t, code, exitOK, stdout, stderr)
	for _, verb := range []string{"check", "create"} {
		code, stdout, stderr := f.run("table", verb, "-json", "-mrec", "-session-prefix", "S#")
		wantCode(t, code, exitSchema, stdout, stderr)
		var got tableReport
		decode(t, stdout, &got)
		wantFlags := []flagDiff{{Flag: "-mrec", Table: "false", Given: "true"}, {Flag: "-session-prefix", Table: `"SESSION#"`, Given: `"S#"`}}
		if diff := cmp.Diff(wantFlags, got.LayoutFlags); diff != "" {
			t.Errorf("table %s: layoutFlags (-want +got):\n%s", verb, diff)
		}
		if diff := cmp.Diff([]string{"layout-mismatch", "layout-mismatch"}, kindsOf(got.Problems)); diff != "" ||
			!strings.Contains(got.Problems[1].Error, `records -session-prefix "SESSION#" in its layout, and the flag gives "S#"`) {
			t.Errorf("table %s: problems %+v (-want +got kinds):\n%s", verb, got.Problems, diff)
		}
		if diff := cmp.Diff(layoutJSONOf(&layout), got.Layout); diff != "" || verb == "create" && (got.RecordedLayout == nil || *got.RecordedLayout) {
			t.Errorf("table %s: layout (-want +got):\n%s\nrecorded now %v", verb, diff, got.RecordedLayout)
		}
	}
	if recorded, err := item.DecodeLayout(f.item(layout.LayoutKey())); err != nil || recorded != layout {
		t.Errorf("after table create with other flags, the record: %+v, %v", recorded, err)
	}
	code, stdout, stderr = f.run("table", "create", "-json", "-mrec=false")
	wantCode(t, code, exitOK, stdout, stderr)
	var got tableReport
	decode(t, stdout, &got)
	if got.RecordedLayout == nil || *got.RecordedLayout || len(got.LayoutFlags) != 0 {
		t.Errorf("table create with a flag that agrees: %+v", got)
	}

	// A record of a form the command cannot read.
	odd := layout.EncodeLayout()
	odd["mrec"] = item.Str("yes")
	f.put(odd)
	code, stdout, stderr = f.run("sessions", "revoke-all", "USER#alice", "-sk", "PROFILE")
	wantCode(t, code, exitSchema, stdout, stderr)
	if !strings.Contains(stderr, "holds a layout record that this release cannot read") {
		t.Errorf("a layout record of another form:\n%s", stderr)
	}
}
