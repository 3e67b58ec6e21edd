package ddbsessionotel_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	//lint:ignore SA1019 otelaws is the AWS SDK's OpenTelemetry instrumentation that the module proxy serves; its contrib module has no owner any more (see the package documentation).
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionotel"
	"github.com/ddbsession/ddbsession/ddbsessiontest"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

func TestMain(m *testing.M) { os.Exit(ddbsessiontest.Main(m)) }

// User is the app's user item in these tests.
type User struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
}

// env is a Manager on a table of its own whose client is instrumented with
// otelaws, its Telemetry, and the readers of both.
type env struct {
	t       *testing.T
	table   string
	m       *ddbsession.Manager[User]
	setup   *ddbsession.Manager[User] // on a client without otelaws
	tel     *ddbsessionotel.Telemetry
	metrics *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
	tracer  trace.Tracer // the test's own, for the server and handler spans
	clock   *ddbtest.Clock
	started int // the spans of the app's start, which spanTree leaves out
}

// newEnv creates the table and the env. The table and the users are
// created through a client of their own, whose calls leave no spans.
func newEnv(t *testing.T, edit ...func(*ddbsession.Config[User])) *env {
	t.Helper()
	plain := ddbsessiontest.Client(t)
	table := ddbsessiontest.TableName(t, plain)
	quiet := slog.New(slog.DiscardHandler) // dynalite has no TTL; the warning is expected
	setup, err := ddbsession.New(ddbsession.Config[User]{Client: plain, Table: table, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}

	e := &env{t: t, table: table, setup: setup, metrics: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), clock: ddbtest.NewClock(time.Now())}
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	e.tracer = tracers.Tracer("test")
	e.tel, err = ddbsessionotel.New(ddbsessionotel.Config{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.metrics)),
		TracerProvider: tracers,
	})
	if err != nil {
		t.Fatal(err)
	}
	instrumented := dynamodb.New(plain.Options(), func(o *dynamodb.Options) {
		otelaws.AppendMiddlewares(&o.APIOptions, otelaws.WithTracerProvider(tracers))
	})
	cfg := ddbsession.Config[User]{
		Client:  instrumented,
		Table:   table,
		Limits:  ddbsession.Limits{StoreTimeout: time.Minute}, // dynalite on a busy machine; no test here is about the bound
		OnEvent: e.tel.OnEvent,
		Logger:  quiet,
		Now:     e.clock.Now,
	}
	for _, f := range edit {
		f(&cfg)
	}
	if e.m, err = ddbsession.New(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// start starts the app as an app does, with CreateTable, which reads the
// table's layout record and its cookie keys: without, the first request
// with a sealed cookie reads them before its own read. spanTree leaves its
// spans out.
func (e *env) start() {
	e.t.Helper()
	if err := e.m.CreateTable(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.started = len(e.spans.Ended())
}

// newUser creates a user item with a key that no other test uses, and so
// that the leak test can look for it.
func (e *env) newUser() ddbsession.UserKey {
	e.t.Helper()
	suffix := rand.Text()
	key := ddbsession.UserKey{PK: "USER#alice-" + suffix, SK: "PROFILE-" + suffix}
	if err := e.setup.CreateUser(context.Background(), User{PK: key.PK, SK: key.SK}); err != nil {
		e.t.Fatal(err)
	}
	return key
}

// quietLogin logs user in through the Manager on the plain client, which
// records nothing, and returns the session cookie.
func (e *env) quietLogin(user ddbsession.UserKey) *http.Cookie {
	e.t.Helper()
	w := httptest.NewRecorder()
	if err := e.setup.Login(w, httptest.NewRequest(http.MethodPost, "/login", nil), user, nil); err != nil {
		e.t.Fatal(err)
	}
	return sessionCookie(e.t, w)
}

// The app's handlers: a login, a logout, and a page that makes a span of its
// own and names its user, so that a test sees what its context holds.

func (e *env) loginHandler(user ddbsession.UserKey) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := e.m.Login(w, r, user, nil); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

func (e *env) logoutHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := e.m.Logout(w, r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

func (e *env) account() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, span := e.tracer.Start(r.Context(), "account")
		defer span.End()
		if u, ok := e.m.User(r.Context()); ok {
			fmt.Fprint(w, "hello ", u.PK)
			return
		}
		fmt.Fprint(w, "hello stranger")
	})
}

// serve serves one request to h within a span of its own, named after the
// request, as otelhttp's server span would be, and waits for the refreshes
// it started.
func (e *env) serve(h http.Handler, method, path string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	e.t.Helper()
	ctx, span := e.tracer.Start(context.Background(), method+" "+path, trace.WithSpanKind(trace.SpanKindServer))
	r := httptest.NewRequestWithContext(ctx, method, path, nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	span.End()
	if err := e.m.Wait(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return w
}

// sessionCookie returns the session cookie that w sets.
func sessionCookie(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	return cookieNamed(t, w, "__Host-session")
}

// cookieNamed returns the cookie named name that w sets, with a value.
func cookieNamed(t *testing.T, w *httptest.ResponseRecorder, name string) *http.Cookie {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name == name && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no cookie %s in the response (%d %q)", name, w.Code, w.Body)
	return nil
}

// spanTree draws the spans that ended, as parent and children, each
// child indented under its parent, siblings in the order they started:
// each span's name, its attributes in this package's namespace and
// error.type, and "status=error" for an error.
func (e *env) spanTree() string {
	spans := e.spans.Ended()[e.started:]
	slices.SortStableFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ended := map[trace.SpanID]bool{}
	for _, s := range spans {
		ended[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() && ended[p.SpanID()] {
			children[p.SpanID()] = append(children[p.SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var draw func(s sdktrace.ReadOnlySpan, depth int)
	draw = func(s sdktrace.ReadOnlySpan, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + s.Name())
		for _, a := range s.Attributes() {
			if strings.HasPrefix(string(a.Key), "ddbsession.") || a.Key == "error.type" {
				fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
			}
		}
		if s.Status().Code == codes.Error {
			b.WriteString(" status=error")
		}
		b.WriteString("\n")
		for _, c := range children[s.SpanContext().SpanID()] {
			draw(c, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}

// span returns the one ended span named name.
func (e *env) span(name string) sdktrace.ReadOnlySpan {
	e.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("%d spans named %q, want 1", len(found), name)
	}
	return found[0]
}

// collect reads the metrics.
func (e *env) collect() metricdata.ResourceMetrics {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.metrics.Collect(context.Background(), &rm); err != nil {
		e.t.Fatal(err)
	}
	return rm
}

// metricValues returns each data point of the metrics as
// "name{key=value,...}" with its value: a counter's sum, or a histogram's
// count (" count" appended to the name).
func (e *env) metricValues() map[string]float64 {
	e.t.Helper()
	values := map[string]float64{}
	for _, sm := range e.collect().ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					values[m.Name+labels(dp.Attributes)] = float64(dp.Value)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					values[m.Name+labels(dp.Attributes)+" count"] = float64(dp.Count)
				}
			default:
				e.t.Fatalf("metric %s holds %T", m.Name, m.Data)
			}
		}
	}
	return values
}

func labels(set attribute.Set) string {
	if set.Len() == 0 {
		return ""
	}
	return "{" + set.Encoded(attribute.DefaultEncoder()) + "}"
}
