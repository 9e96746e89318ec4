package service

import (
	"context"

	"github.com/holdpoint/holdpoint/service/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span attribute keys the runtime sets. Ids only: never message contents
// nor tool inputs or outputs.
const (
	AttrAgent        = attribute.Key("holdpoint.agent")
	AttrSessionID    = attribute.Key("holdpoint.session_id")
	AttrSnapshotID   = attribute.Key("holdpoint.snapshot_id")
	AttrInterruptIDs = attribute.Key("holdpoint.interrupt_ids")
	AttrFinishReason = attribute.Key("holdpoint.finish_reason")
	AttrTool         = attribute.Key("holdpoint.tool")
	AttrModel        = attribute.Key("holdpoint.model")
	AttrOutcome      = attribute.Key("holdpoint.outcome")
)

// TracerName names the tracer of the runtime's spans.
const TracerName = "github.com/holdpoint/holdpoint/service"

// tracerOf is the tracer of the runtime's spans: a no-op one unless
// Options.TracerProvider sets a provider.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// metricAgent is the agent label of name: itself for an agent compiled
// into the binary, observe.TenantAgentLabel for a tenant's own (whose names are
// unbounded).
func (r *Runtime) metricAgent(name string) string {
	if _, err := r.Lookup(name); err == nil {
		return name
	}
	return observe.TenantAgentLabel
}

// metricAgent and metricTool are the invocation's agent's and a tool's
// labels (see Runtime.metricAgent).
func (inv *invocation) metricAgent() string {
	if inv.agent.Version > 0 {
		return observe.TenantAgentLabel
	}
	return inv.agent.Name
}

func (r *Runtime) metricTool(agent, tool string) string {
	if r.metricAgent(agent) == observe.TenantAgentLabel {
		return observe.TenantToolLabel
	}
	return tool
}

func (inv *invocation) metricTool(tool string) string {
	if inv.agent.Version > 0 {
		return observe.TenantToolLabel
	}
	return tool
}

// endSpan records err on span (its class only: error texts may carry data)
// and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, AsError(err).Status)
	}
	span.End()
}

// storeSpan starts the span of one store batch (the write of a turn, a
// claim).
func (r *Runtime) storeSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
}
