package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbitem"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
	"github.com/ddbsession/ddbsession/internal/item"
	"github.com/ddbsession/ddbsession/internal/table"
)

// policyDoc documents each feature set's least-privilege policy, which the
// library's tests hold it to; functionFeatures are the sets this function
// uses, whose union is the template's policy.
const policyDoc = "../../docs/lambda.md"

var functionFeatures = []string{"startup", "requests", "sign-in", "sessions", "revoke-all"}

// functionActions is the union of the function's feature sets' documented
// actions.
func functionActions(t testing.TB) []string {
	t.Helper()
	sets, err := ddbtest.DocumentedPolicies(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	return ddbtest.PolicyOf(t, sets, nil, functionFeatures...).Actions
}

var parsing sync.Mutex

// templateOf parses template.yaml as CloudFormation would deploy it with
// the parameter ExpiryIndex, into goformation's typed resources: a
// misspelt property or a value of the wrong type fails the parse. A
// resource's Ref reads "Ref:<name>" and its Fn::GetAtt "GetAtt:<name>.<attribute>",
// for the tests to see what they point at.
func templateOf(t testing.TB, expiryIndex string) *cloudformation.Template {
	t.Helper()
	parsing.Lock() // goformation registers its YAML tags in globals, on every parse
	defer parsing.Unlock()
	tpl, err := goformation.OpenWithOptions("template.yaml", &intrinsics.ProcessorOptions{
		ParameterOverrides: map[string]any{"ExpiryIndex": expiryIndex},
		EvaluateConditions: true,
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
			"Ref": func(name string, input, template any) any {
				if v := intrinsics.Ref(name, input, template); v != nil {
					return v
				}
				if s, ok := input.(string); ok && s != "AWS::NoValue" {
					return "Ref:" + s
				}
				return nil
			},
			"Fn::GetAtt": func(_ string, input, _ any) any {
				switch v := input.(type) {
				case string:
					return "GetAtt:" + v
				case []any:
					return fmt.Sprintf("GetAtt:%v.%v", v...)
				}
				return nil
			},
		},
	})
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	return tpl
}

// templateTable is the template's sessions table as a CreateTableInput
// named name, and its TTL specification.
func templateTable(t testing.TB, expiryIndex, name string) (*dynamodb.CreateTableInput, *types.TimeToLiveSpecification) {
	t.Helper()
	tt, err := templateOf(t, expiryIndex).GetDynamoDBTableWithName("SessionsTable")
	if err != nil {
		t.Fatal(err)
	}
	in := &dynamodb.CreateTableInput{TableName: &name, BillingMode: types.BillingMode(aws.ToString(tt.BillingMode))}
	for _, a := range tt.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(a.AttributeName), AttributeType: types.ScalarAttributeType(a.AttributeType)})
	}
	for _, k := range tt.KeySchema {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: types.KeyType(k.KeyType)})
	}
	for _, g := range tt.GlobalSecondaryIndexes {
		gsi := types.GlobalSecondaryIndex{IndexName: aws.String(g.IndexName)}
		for _, k := range g.KeySchema {
			gsi.KeySchema = append(gsi.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: types.KeyType(k.KeyType)})
		}
		if g.Projection != nil {
			gsi.Projection = &types.Projection{ProjectionType: types.ProjectionType(aws.ToString(g.Projection.ProjectionType)), NonKeyAttributes: g.Projection.NonKeyAttributes}
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gsi)
	}
	var ttl *types.TimeToLiveSpecification
	if s := tt.TimeToLiveSpecification; s != nil {
		ttl = &types.TimeToLiveSpecification{AttributeName: s.AttributeName, Enabled: aws.Bool(s.Enabled)}
	}
	return in, ttl
}

// layoutWith is ddbsession's default layout with the expiry index named.
func layoutWith(t testing.TB, expiryIndex string) ddbsession.Layout {
	t.Helper()
	l, err := ddbitem.Resolve(ddbsession.Layout{ExpiryIndex: expiryIndex})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The template's table is the one CreateTable would make for the layout:
// the same keys, attribute types, billing and expiry index (with the
// attributes its projection must hold), and TTL on the layout's attribute.
func TestTemplateTableIsCreateTables(t *testing.T) {
	t.Parallel()
	for _, index := range []string{"", "expiry"} {
		t.Run("ExpiryIndex="+index, func(t *testing.T) {
			t.Parallel()
			got, ttl := templateTable(t, index, "app")
			layout := layoutWith(t, index)
			want := table.Input("app", item.Layout(layout))
			opts := cmp.Options{
				cmpopts.IgnoreUnexported(dynamodb.CreateTableInput{}, types.AttributeDefinition{}, types.KeySchemaElement{}, types.GlobalSecondaryIndex{}, types.Projection{}),
				cmpopts.SortSlices(func(a, b types.AttributeDefinition) bool { return *a.AttributeName < *b.AttributeName }),
				cmpopts.SortSlices(func(a, b string) bool { return a < b }),
			}
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Errorf("template's table (-CreateTable's +template's):\n%s", diff)
			}
			if ttl == nil || aws.ToString(ttl.AttributeName) != layout.TTLAttribute || !aws.ToBool(ttl.Enabled) {
				t.Errorf("template's TTL %+v, want enabled on %q", ttl, layout.TTLAttribute)
			}
		})
	}
}

// The template deploys a table that CreateTable, at the function's cold
// start, accepts under the start-up policy; and a table that does not fit
// the function's layout is refused there, so the check is one. The
// template's table has no layout record yet (docs/item-format.md#the-layout-record):
// the deployment's first start writes it, a PutItem, which the function's
// policy holds for sign-in; every start after it reads the record under
// the start-up policy alone.
func TestTemplateTablePassesTheStartupCheck(t *testing.T) {
	t.Parallel()
	sets, err := ddbtest.DocumentedPolicies(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ deployed, configured string }{{"", ""}, {"expiry", "expiry"}, {"expiry", ""}, {"", "expiry"}} {
		t.Run(fmt.Sprintf("deployed=%q,configured=%q", tc.deployed, tc.configured), func(t *testing.T) {
			t.Parallel()
			name, ttl := deployTemplate(t, tc.deployed)
			start := func(features ...string) (*ddbtest.Front, error) {
				front := ddbtest.NewFront(t, ddbtest.PolicyOf(t, sets, []string{ddbtest.TableARN(name)}, features...), ddbtest.FrontTTL(ttl))
				m, err := ddbsession.New(ddbsession.Config[User]{Client: front.Client(), Table: name, Layout: ddbsession.Layout{ExpiryIndex: tc.configured}})
				if err != nil {
					t.Fatal(err)
				}
				err = m.CreateTable(context.Background())
				for _, c := range front.Refused() {
					t.Errorf("the start-up check under %v called %s, which its policy lacks", features, c.Action)
				}
				return front, err
			}
			fits := tc.deployed == tc.configured || tc.configured == ""
			if fits {
				front, err := start(functionFeatures...)
				if err != nil {
					t.Fatalf("the deployment's first CreateTable: %v", err)
				}
				if !slices.Contains(front.Used(), "dynamodb:PutItem") {
					t.Errorf("the deployment's first start called %v: no PutItem, so no layout record written", front.Used())
				}
			}
			if _, err := start("startup"); fits != (err == nil) {
				t.Errorf("CreateTable: %v, want an error %v", err, !fits)
			}
		})
	}
}

// deployTemplate creates the template's table, with the expiry index named
// (or none), as CloudFormation would, TTL included (emulated in the returned
// client where the engine lacks it), and returns its name.
func deployTemplate(t testing.TB, expiryIndex string) (string, *ddbtest.TTLClient) {
	t.Helper()
	admin := ddbtest.Client(t)
	name := ddbtest.TableName(t, admin)
	in, spec := templateTable(t, expiryIndex, name)
	ctx := context.Background()
	if _, err := admin.CreateTable(ctx, in); err != nil {
		t.Fatalf("create the template's table: %v", err)
	}
	ddbtest.WaitActive(t, admin, name)
	ttl := ddbtest.WithTTL(admin)
	if _, err := ttl.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &name, TimeToLiveSpecification: spec}); err != nil {
		t.Fatalf("turn the template's TTL on: %v", err)
	}
	return name, ttl
}

// The function is what docs/lambda.md deploys: provided.al2023 on arm64,
// a streaming Function URL, settings the function reads, and a policy of
// exactly its feature sets' documented actions on the table alone.
func TestTemplateFunction(t *testing.T) {
	t.Parallel()
	fn, err := templateOf(t, "").GetServerlessFunctionWithName("Function")
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(fn.Runtime); got != "provided.al2023" {
		t.Errorf("Runtime %q", got)
	}
	if !slices.Equal(fn.Architectures, []string{"arm64"}) || aws.ToString(fn.Handler) != "bootstrap" {
		t.Errorf("Architectures %q, Handler %q: want [arm64], bootstrap", fn.Architectures, aws.ToString(fn.Handler))
	}
	if u := fn.FunctionUrlConfig; u == nil || aws.ToString(u.InvokeMode) != "RESPONSE_STREAM" {
		t.Errorf("FunctionUrlConfig %+v: lambdaurl needs InvokeMode RESPONSE_STREAM", u)
	}
	if fn.Environment == nil {
		t.Fatal("no Environment")
	}
	vars := fn.Environment.Variables
	if vars["TABLE"] != "Ref:SessionsTable" {
		t.Errorf("TABLE %q, want the table's name", vars["TABLE"])
	}
	for name := range vars {
		if !regexp.MustCompile(`^(TABLE|IDLE_TIMEOUT|REFRESH_INTERVAL|ABSOLUTE_LIFETIME|STORE_TIMEOUT|REAUTH)$`).MatchString(name) {
			t.Errorf("Environment %s: the function reads no such setting", name)
		}
	}
	if _, err := settingsFrom(func(k string) string { return vars[k] }); err != nil {
		t.Errorf("the template's settings: %v", err)
	}

	if fn.Policies == nil || fn.Policies.IAMPolicyDocumentArray == nil || len(*fn.Policies.IAMPolicyDocumentArray) != 1 {
		t.Fatalf("Policies %+v: want one inline policy document", fn.Policies)
	}
	doc := (*fn.Policies.IAMPolicyDocumentArray)[0]
	if len(doc.Statement) != 1 {
		t.Fatalf("%d statements, want 1", len(doc.Statement))
	}
	st, _ := doc.Statement[0].(map[string]any)
	var keys []string
	for k := range st {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"Action", "Effect", "Resource"}) || st["Effect"] != "Allow" {
		t.Errorf("statement %v: want Effect Allow, Action and Resource only", st)
	}
	var actions []string
	list, _ := st["Action"].([]any)
	for _, a := range list {
		actions = append(actions, fmt.Sprint(a))
	}
	slices.Sort(actions)
	if diff := cmp.Diff(functionActions(t), actions); diff != "" {
		t.Errorf("the template's actions (-documented +template's):\n%s", diff)
	}
	if st["Resource"] != "GetAtt:SessionsTable.Arn" {
		t.Errorf("Resource %v: want the table alone", st["Resource"])
	}
}

// docs/lambda.md shows the template's policy as IAM JSON; it must be the
// template's.
func TestDocsShowTheTemplatesPolicy(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```json\n(\\{\n  \"Version\": \"2012-10-17\".*?)```").FindSubmatch(b)
	if block == nil {
		t.Fatalf("%s shows no policy document", policyDoc)
	}
	shown := regexp.MustCompile(`"(dynamodb:[A-Za-z]+)"`).FindAllSubmatch(block[1], -1)
	var actions []string
	for _, m := range shown {
		actions = append(actions, string(m[1]))
	}
	if diff := cmp.Diff(functionActions(t), actions); diff != "" {
		t.Errorf("%s's policy document (-documented sets +shown):\n%s", policyDoc, diff)
	}
	if !strings.Contains(string(block[1]), `"Resource": "arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE"`) {
		t.Errorf("%s's policy document names other resources than the table: %s", policyDoc, block[1])
	}
}
