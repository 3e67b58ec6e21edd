package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprometheus "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// checkLoopback returns an error unless addr, a host:port, listens on
// loopback only: metrics say how many users sign in and fail to, which is
// no business of the Internet's.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("metrics are served on a loopback address only, such as 127.0.0.1:9464")
	}
	return nil
}

// telemetry is the OpenTelemetry providers that the app reports to.
type telemetry struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
	tracing bool // an exporter takes the spans: worth making them
	stops   []func(context.Context) error
}

// newTelemetry sets up the providers: Prometheus metrics served on
// metricsLn, if not nil, and OTLP/HTTP metrics and traces when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (the exporters read it, and the other
// OTEL_EXPORTER_OTLP_* variables, themselves). Without either, both are
// no-ops.
func newTelemetry(ctx context.Context, metricsLn net.Listener) (*telemetry, error) {
	tel := &telemetry{meters: metricnoop.NewMeterProvider(), tracers: tracenoop.NewTracerProvider()}
	var readers []sdkmetric.Option
	if metricsLn != nil {
		// A registry of the app's own: /metrics shows what the app reports,
		// nothing that another package registered globally.
		registry := prometheus.NewRegistry()
		exporter, err := otelprometheus.New(otelprometheus.WithRegisterer(registry))
		if err != nil {
			metricsLn.Close()
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(exporter))
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
		go srv.Serve(metricsLn)
		tel.stops = append(tel.stops, srv.Shutdown)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
		metricExporter, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("OTLP metric exporter: %w", err), tel.shutdown(ctx))
		}
		spanExporter, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("OTLP span exporter: %w", err), metricExporter.Shutdown(ctx), tel.shutdown(ctx))
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExporter)))
		tracers := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spanExporter))
		tel.tracers, tel.tracing = tracers, true
		tel.stops = append(tel.stops, tracers.Shutdown)
	}
	if len(readers) > 0 {
		meters := sdkmetric.NewMeterProvider(readers...)
		tel.meters = meters
		tel.stops = append(tel.stops, meters.Shutdown)
	}
	return tel, nil
}

// shutdown flushes what the exporters hold and stops them, and the metrics
// listener; once only.
func (t *telemetry) shutdown(ctx context.Context) error {
	var errs []error
	for _, stop := range slices.Backward(t.stops) {
		errs = append(errs, stop(ctx))
	}
	t.stops = nil
	return errors.Join(errs...)
}
