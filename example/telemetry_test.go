package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	//lint:ignore SA1019 otelaws is the AWS SDK's OpenTelemetry instrumentation that the module proxy serves; its contrib module has no owner any more (see ddbsessionotel's documentation).
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"

	"github.com/ddbsession/ddbsession/ddbsessionotel"
	"github.com/ddbsession/ddbsession/internal/ddbtest"
)

// TestRunMetrics runs the app as main does with -metrics-addr: Prometheus
// scrapes session metrics from a listener of their own, which serves
// nothing else, and the app's listener does not serve them.
func TestRunMetrics(t *testing.T) {
	table := ddbtest.TableName(t, ddbtest.Client(t))
	base, rest, stop := startRunOutput(t, "-table", table, "-dev", "-metrics-addr", "127.0.0.1:0")
	line, err := rest.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the metrics URL that run prints: %v", err)
	}
	go io.Copy(io.Discard, rest)
	metricsURL, ok := strings.CutPrefix(strings.TrimSpace(line), "metrics ")
	if !ok || !strings.HasPrefix(metricsURL, "http://127.0.0.1:") || !strings.HasSuffix(metricsURL, "/metrics") {
		t.Fatalf("run printed %q, want \"metrics http://127.0.0.1:<port>/metrics\"", line)
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(base+"signup", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	stale, _ := http.NewRequest(http.MethodGet, base+"api/me", nil)
	stale.AddCookie(&http.Cookie{Name: "session", Value: "stale"})
	if code := status(t, http.DefaultClient, stale); code != http.StatusUnauthorized {
		t.Errorf("GET /api/me with a stale cookie: %d, want 401", code)
	}

	body := get(t, metricsURL, http.StatusOK)
	for _, want := range []struct {
		name, label string
		value       float64
	}{
		{"ddbsession_session_created_total", "", 1},
		{"ddbsession_request_rejected_total", `ddbsession_rejection_reason="malformed"`, 1},
	} {
		if got, ok := promValue(body, want.name, want.label); !ok || got != want.value {
			t.Errorf("/metrics: %s{%s} = %v (found: %v), want %v\n%s", want.name, want.label, got, ok, want.value, body)
		}
	}
	get(t, base+"metrics", http.StatusNotFound)
	get(t, strings.TrimSuffix(metricsURL, "metrics"), http.StatusNotFound)
	stop()
}

// TestRunOTLP runs the app as main does with OTEL_EXPORTER_OTLP_ENDPOINT
// set: on shutdown, the collector has the spans of a request: its session
// check under its server span and the check's DynamoDB call under that, and
// the session metrics.
func TestRunOTLP(t *testing.T) {
	var mu sync.Mutex
	var spanNames []string // "parent name > name", by span ID
	metricNames := map[string]bool{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/traces":
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("POST /v1/traces: %v", err)
			}
			names := map[string]string{}
			var all []*tracepb.Span
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						names[string(s.SpanId)] = s.Name
						all = append(all, s)
					}
				}
			}
			for _, s := range all {
				spanNames = append(spanNames, names[string(s.ParentSpanId)]+" > "+s.Name)
			}
		case "/v1/metrics":
			var req colmetricpb.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("POST /v1/metrics: %v", err)
			}
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						metricNames[m.Name] = true
					}
				}
			}
		}
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)

	table := ddbtest.TableName(t, ddbtest.Client(t))
	base, stop := startRun(t, "-table", table, "-dev")
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(base+"signup", url.Values{"username": {"alice"}, "password": {"correct horse"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.Get(base + "api/me")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	stop() // flushes the exporters

	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"GET > ddbsession.check", "ddbsession.check > DynamoDB.BatchGetItem"} {
		if !slices.Contains(spanNames, want) {
			t.Errorf("the collector has no span %q; it has %q", want, spanNames)
		}
	}
	if !metricNames["ddbsession.session.created"] {
		t.Errorf("the collector has no ddbsession.session.created; it has %v", metricNames)
	}
}

// The app reports each session event to the Telemetry's providers, and
// each guarded request's check is a span with the DynamoDB calls as
// children.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	metrics := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	plain := ddbtest.Client(t)
	client := dynamodb.New(plain.Options(), func(o *dynamodb.Options) {
		otelaws.AppendMiddlewares(&o.APIOptions, otelaws.WithTracerProvider(tracers))
	})
	ta := startApp(t, client, ddbtest.TableName(t, plain), unlimited, func(cfg *appConfig) {
		cfg.Telemetry = ddbsessionotel.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)), TracerProvider: tracers}
	})
	b := ta.browser("test")
	b.signup("alice", "correct horse")
	if code := b.meStatus(); code != http.StatusOK {
		t.Fatalf("GET /api/me: %d", code)
	}
	b.mustPost(http.StatusSeeOther, "/logout", nil)
	if code := b.meStatus(); code != http.StatusUnauthorized {
		t.Fatalf("GET /api/me after logout: %d", code)
	}

	var rm metricdata.ResourceMetrics
	if err := metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					got[m.Name] += dp.Value
				}
			}
		}
	}
	// The sign-in is from a device new to the account (RememberDevices).
	if diff := cmp.Diff(map[string]int64{"ddbsession.session.created": 1, "ddbsession.session.new_device": 1, "ddbsession.session.ended": 1}, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	var checks []string
	for _, s := range spans.Ended() {
		if s.Name() != "ddbsession.check" {
			continue
		}
		check := s.Name()
		for _, a := range s.Attributes() {
			check += " " + string(a.Key) + "=" + a.Value.String()
		}
		for _, c := range spans.Ended() {
			if c.Parent().SpanID() == s.SpanContext().SpanID() {
				check += " > " + c.Name()
			}
		}
		checks = append(checks, check)
	}
	want := []string{
		"ddbsession.check ddbsession.check.outcome=accepted > DynamoDB.BatchGetItem",
		"ddbsession.check ddbsession.check.outcome=none",
	}
	if diff := cmp.Diff(want, checks); diff != "" {
		t.Errorf("check spans of GET /api/me before and after logout (-want +got):\n%s", diff)
	}
}

// get GETs u and checks the status, and returns the body.
func get(t *testing.T, u string, want int) string {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Errorf("GET %s: %d, want %d", u, res.StatusCode, want)
	}
	return string(body)
}

func status(t *testing.T, c *http.Client, r *http.Request) int {
	t.Helper()
	res, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// promValue finds the sample of the metric name whose labels include label
// ("" for any) in a Prometheus text exposition.
func promValue(exposition, name, label string) (float64, bool) {
	s := bufio.NewScanner(strings.NewReader(exposition))
	for s.Scan() {
		line := s.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') || !strings.Contains(rest, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		return v, err == nil
	}
	return 0, false
}
