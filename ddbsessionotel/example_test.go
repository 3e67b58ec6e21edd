package ddbsessionotel_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	//lint:ignore SA1019 otelaws is the AWS SDK's OpenTelemetry instrumentation that the module proxy serves; its contrib module has no owner any more (see the package documentation).
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"

	"github.com/ddbsession/ddbsession"
	"github.com/ddbsession/ddbsession/ddbsessionotel"
)

// An app's wiring: its meter and tracer providers, otelaws on the AWS
// configuration, the Telemetry's OnEvent as the Manager's, and its guard
// wrapped. A browser signs in and sees its account; a request with a stale
// cookie is refused.
func Example() {
	ctx := context.Background()
	// An app's providers send what they get to Prometheus or an OTLP
	// collector; these keep it in memory, for the example to print.
	metrics := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	spans := tracetest.NewSpanRecorder()
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	awsCfg, err := config.LoadDefaultConfig(ctx) // honours AWS_ENDPOINT_URL_DYNAMODB
	if err != nil {
		log.Fatal(err)
	}
	// Every DynamoDB call becomes a span, a child of the span in its context.
	otelaws.AppendMiddlewares(&awsCfg.APIOptions, otelaws.WithTracerProvider(tracers))
	client := dynamodb.NewFromConfig(awsCfg)
	table := "example-" + strings.ToLower(rand.Text()[:8])
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table})

	tel, err := ddbsessionotel.New(ddbsessionotel.Config{MeterProvider: meters, TracerProvider: tracers})
	if err != nil {
		log.Fatal(err)
	}
	sessions, err := ddbsession.New(ddbsession.Config[User]{Client: client, Table: table, OnEvent: tel.OnEvent})
	if err != nil {
		log.Fatal(err)
	}
	if err := sessions.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	alice := ddbsession.UserKey{PK: "USER#alice", SK: "PROFILE"}
	if err := sessions.CreateUser(ctx, User{PK: alice.PK, SK: alice.SK}); err != nil {
		log.Fatal(err)
	}

	signedIn := tel.Guard(sessions.RequireSession, sessions.Session)
	mux := http.NewServeMux()
	mux.Handle("GET /account", signedIn(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := sessions.User(r.Context())
		fmt.Fprintln(w, "hello", user.PK)
	})))
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.Login(w, r, alice, nil); err != nil { // nil: no credential in the user item to check (a single sign-on callback, say)
			http.Error(w, "try again", http.StatusServiceUnavailable)
		}
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: srv.Client().Transport, Jar: jar}
	if _, err := browser.Post(srv.URL+"/login", "", nil); err != nil {
		log.Fatal(err)
	}
	printResponse(browser.Get(srv.URL + "/account"))
	stale, _ := http.NewRequest(http.MethodGet, srv.URL+"/account", nil)
	stale.AddCookie(&http.Cookie{Name: "__Host-session", Value: "stale"})
	printResponse(srv.Client().Do(stale))

	var rm metricdata.ResourceMetrics
	if err := metrics.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	printSums(rm)
	printChecks(spans.Ended())

	// Output:
	// 200 hello USER#alice
	// 401 unauthorized
	// ddbsession.request.rejected {ddbsession.rejection.reason=malformed} 1
	// ddbsession.session.created 1
	// ddbsession.check ddbsession.check.outcome=accepted
	//   DynamoDB.BatchGetItem
	// ddbsession.check ddbsession.check.outcome=rejected ddbsession.rejection.reason=malformed
}

// printResponse prints a response's status code and body.
func printResponse(resp *http.Response, err error) {
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
}

// printSums prints each counter's data points, sorted.
func printSums(rm metricdata.ResourceMetrics) {
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				attrs := ""
				if dp.Attributes.Len() > 0 {
					attrs = " {" + dp.Attributes.Encoded(attribute.DefaultEncoder()) + "}"
				}
				lines = append(lines, fmt.Sprintf("%s%s %d", m.Name, attrs, dp.Value))
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
}

// printChecks prints the check spans, in the order they started, each with
// its attributes and, indented, its children's names.
func printChecks(spans []sdktrace.ReadOnlySpan) {
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for _, check := range spans {
		if check.Name() != "ddbsession.check" {
			continue
		}
		fmt.Print(check.Name())
		for _, a := range check.Attributes() {
			fmt.Printf(" %s=%s", a.Key, a.Value.String())
		}
		fmt.Println()
		for _, child := range spans {
			if child.Parent().SpanID() == check.SpanContext().SpanID() {
				fmt.Println("  " + child.Name())
			}
		}
	}
}
