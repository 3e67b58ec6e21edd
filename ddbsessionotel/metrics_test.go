package ddbsessionotel_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionotel"
)

// newMetrics returns a Telemetry whose metrics the returned reader reads,
// for tests that call OnEvent themselves.
func newMetrics(t *testing.T) (*ddbsessionotel.Telemetry, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	tel, err := ddbsessionotel.New(ddbsessionotel.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	return tel, reader
}

// Every kind of event has its instrument, with its unit, and each event
// adds one (or, refreshed, one to the histogram's count and its Elapsed to
// the sum).
func TestEveryKindIsCounted(t *testing.T) {
	t.Parallel()
	tel, reader := newMetrics(t)
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	events := []ddbsession.Event{
		{Kind: ddbsession.EventCreated, SessionID: "s1", User: alice},
		{Kind: ddbsession.EventCreated, SessionID: "s2", User: alice},
		{Kind: ddbsession.EventRefreshed, SessionID: "s1", User: alice, Elapsed: 20 * time.Millisecond},
		{Kind: ddbsession.EventRefreshed, SessionID: "s2", User: alice, Elapsed: 30 * time.Millisecond},
		{Kind: ddbsession.EventRotated, SessionID: "s1", User: alice},
		{Kind: ddbsession.EventEnded, SessionID: "s2", User: alice},
		{Kind: ddbsession.EventRevoked, SessionID: "s3", User: alice},
		{Kind: ddbsession.EventRevokedAll, User: alice},
		{Kind: ddbsession.EventRevokedEveryone},
		{Kind: ddbsession.EventBound, SessionID: "s4", User: alice},
		{Kind: ddbsession.EventBoundRefreshed, SessionID: "s4", User: alice},
		{Kind: ddbsession.EventRejected, Reason: ddbsession.ReasonMalformed},
		{Kind: ddbsession.EventRejected, Reason: ddbsession.ReasonUnknown},
		{Kind: ddbsession.EventRejected, Reason: ddbsession.ReasonUnknown},
		{Kind: ddbsession.EventRejected, Reason: ddbsession.ReasonRevoked, SessionID: "s5", User: alice},
		{Kind: ddbsession.EventStoreFailed, Err: fmt.Errorf("ddbsession: load user: %w", context.DeadlineExceeded)},
		{Kind: ddbsession.EventReauthenticated, SessionID: "s6", User: alice},
		{Kind: ddbsession.EventAdopted, SessionID: "s9", User: alice},
		{Kind: ddbsession.EventNewDevice, SessionID: "s9", User: alice},
		{Kind: ddbsession.EventPending, SessionID: "p1", User: alice},
		{Kind: ddbsession.EventPending, SessionID: "p2", User: alice},
		{Kind: ddbsession.EventSecondFactorFailed, SessionID: "p1", User: alice},
		{Kind: ddbsession.EventSecondFactorFailed, SessionID: "p1", User: alice},
		{Kind: ddbsession.EventSecondFactorFailed, SessionID: "p2", User: alice},
		{Kind: ddbsession.EventStepUp, SessionID: "s6", User: alice},
		{Kind: ddbsession.EventSignInFailed, User: alice},
		{Kind: ddbsession.EventEvicted, SessionID: "s7", User: alice, Reason: ddbsession.ReasonSessionLimit},
		{Kind: ddbsession.EventEvicted, SessionID: "s8", User: alice, Reason: ddbsession.ReasonSessionLimit},
		{Kind: ddbsession.EventRefusedAtMaxSessions, User: alice},
		{Kind: ddbsession.EventRejected, Reason: ddbsession.ReasonPending, SessionID: "p2", User: alice},
		{Kind: ddbsession.EventRejected, Reason: ddbsession.ReasonSessionLimit, SessionID: "s7", User: alice},
		{Kind: "a kind of a later release"},
	}
	// The list holds every kind that ddbsession declares, so that a kind
	// added there fails this test until it has its instrument here.
	for _, kind := range declaredKinds(t) {
		if !slices.ContainsFunc(events, func(e ddbsession.Event) bool { return e.Kind == kind }) {
			t.Errorf("ddbsession declares the event kind %q, which this test does not send", kind)
		}
	}
	for _, e := range events {
		tel.OnEvent(context.Background(), e)
	}

	type point struct {
		Name, Unit, Attrs string
		Value             float64
	}
	var got []point
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/ddbsession/ddbsession/ddbsessionotel" {
			t.Errorf("instrumentation scope %q, want the module's import path", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			if m.Description == "" {
				t.Errorf("%s has no description", m.Name)
			}
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !data.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, dp := range data.DataPoints {
					got = append(got, point{m.Name, m.Unit, labels(dp.Attributes), float64(dp.Value)})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					got = append(got, point{m.Name + " count", m.Unit, labels(dp.Attributes), float64(dp.Count)},
						point{m.Name + " sum", m.Unit, labels(dp.Attributes), dp.Sum})
				}
			}
		}
	}
	want := []point{
		{"ddbsession.bound_cookie.refreshed", "{cookie}", "", 1},
		{"ddbsession.login.pending", "{login}", "", 2},
		{"ddbsession.login.refused", "{login}", "", 1},
		{"ddbsession.login.second_factor.failed", "{attempt}", "", 3},
		{"ddbsession.login.failed", "{attempt}", "", 1},
		{"ddbsession.request.rejected", "{request}", "{ddbsession.rejection.reason=revoked}", 1},
		{"ddbsession.request.rejected", "{request}", "{ddbsession.rejection.reason=malformed}", 1},
		{"ddbsession.request.rejected", "{request}", "{ddbsession.rejection.reason=pending}", 1},
		{"ddbsession.request.rejected", "{request}", "{ddbsession.rejection.reason=session-limit}", 1},
		{"ddbsession.request.rejected", "{request}", "{ddbsession.rejection.reason=unknown}", 2},
		{"ddbsession.request.step_up", "{request}", "", 1},
		{"ddbsession.session.adopted", "{session}", "", 1},
		{"ddbsession.session.bound", "{session}", "", 1},
		{"ddbsession.session.created", "{session}", "", 2},
		{"ddbsession.session.ended", "{session}", "", 1},
		{"ddbsession.session.evicted", "{session}", "", 2},
		{"ddbsession.session.new_device", "{session}", "", 1},
		{"ddbsession.session.reauthenticated", "{session}", "", 1},
		{"ddbsession.session.refresh.duration count", "s", "", 2},
		{"ddbsession.session.refresh.duration sum", "s", "", 0.05},
		{"ddbsession.session.revoked", "{revocation}", "{ddbsession.revocation.scope=everyone}", 1},
		{"ddbsession.session.revoked", "{revocation}", "{ddbsession.revocation.scope=session}", 1},
		{"ddbsession.session.revoked", "{revocation}", "{ddbsession.revocation.scope=user}", 1},
		{"ddbsession.session.rotated", "{session}", "", 1},
		{"ddbsession.store.failed", "{request}", "{error.type=timeout}", 1},
	}
	sortPoints := cmpopts.SortSlices(func(a, b point) bool { return a.Name+a.Attrs < b.Name+b.Attrs })
	if diff := cmp.Diff(want, got, sortPoints, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// declaredKinds returns the EventKind constants that the ddbsession
// package declares, read from its source.
func declaredKinds(t *testing.T) []ddbsession.EventKind {
	t.Helper()
	pkg, err := build.Import("github.com/ddbsession/ddbsession", ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []ddbsession.EventKind
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "EventKind" {
					continue
				}
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: the EventKind %s is not a string literal", fset.Position(v.Pos()), vs.Names[i])
					}
					kind, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					kinds = append(kinds, ddbsession.EventKind(kind))
				}
			}
		}
	}
	if len(kinds) < 17 { // as many as this release knows, at least
		t.Fatalf("found %d EventKind constants in %s, want at least 17: %q", len(kinds), pkg.Dir, kinds)
	}
	return kinds
}

// A store failure's error.type is one of a short list, whatever the error.
func TestStoreFailureErrorType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("operation error DynamoDB: BatchGetItem: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("operation error DynamoDB: BatchGetItem: %w", context.Canceled), "canceled"},
		{fmt.Errorf("ddbsession: %w", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}), "ThrottlingException"},
		{&smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, "ProvisionedThroughputExceededException"},
		{&smithy.GenericAPIError{Code: "not a code: USER#alice"}, "_OTHER"},
		{&smithy.GenericAPIError{Code: ""}, "_OTHER"},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "_OTHER"},
		{nil, "_OTHER"},
	} {
		tel, reader := newMetrics(t)
		tel.OnEvent(context.Background(), ddbsession.Event{Kind: ddbsession.EventStoreFailed, Err: tc.err})
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := dp.Attributes.Value("error.type")
					got = append(got, m.Name+" "+v.AsString())
				}
			}
		}
		if diff := cmp.Diff([]string{"ddbsession.store.failed " + tc.want}, got); diff != "" {
			t.Errorf("store failure %v (-want +got):\n%s", tc.err, diff)
		}
	}
}
