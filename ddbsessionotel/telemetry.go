package ddbsessionotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ddbsession/ddbsession"
)

// This file is the package's one type: its Config, New, and the OnEvent
// that feeds both the instruments (metrics.go) and the check spans
// (trace.go).

// scope is the instrumentation scope of the meter and the tracer: this
// module's import path, as the OpenTelemetry conventions ask.
const scope = "github.com/ddbsession/ddbsession/ddbsessionotel"

// Config configures [New]. The zero Config uses the global providers.
type Config struct {
	// MeterProvider makes the instruments. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the check spans. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Telemetry records a [ddbsession.Manager]'s events as metrics and traces
// its requests' session checks. It is safe for concurrent use. [New] makes
// one; set its OnEvent as the Manager's [ddbsession.Config.OnEvent], and
// wrap the Manager's guards with [Telemetry.Guard].
type Telemetry struct {
	instruments
	tracer trace.Tracer
}

// New makes the instruments from cfg's MeterProvider and the tracer from its
// TracerProvider. Its error is the MeterProvider's, if it refused an
// instrument.
func New(cfg Config) (*Telemetry, error) {
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	ins, err := newInstruments(cfg.MeterProvider.Meter(scope))
	if err != nil {
		return nil, err
	}
	return &Telemetry{instruments: ins, tracer: cfg.TracerProvider.Tracer(scope)}, nil
}

// OnEvent records e: it is meant for [ddbsession.Config.OnEvent], as it is
// or called from an OnEvent of the app's own (see the package
// documentation). It adds to the instrument of e's kind, and a rejection
// or a store failure ends the check span of the request it came from, if
// [Telemetry.Guard] started one. It never blocks, and reads no token,
// session ID or user key.
func (t *Telemetry) OnEvent(ctx context.Context, e ddbsession.Event) {
	t.record(ctx, e)
	c := checkFrom(ctx)
	switch {
	case c == nil:
	case e.Kind == ddbsession.EventRejected:
		c.end(outcomeRejected, reasonKey.String(string(e.Reason)))
	case e.Kind == ddbsession.EventStoreFailed:
		c.end(outcomeStoreFailed, errorType(e.Err))
	}
}
