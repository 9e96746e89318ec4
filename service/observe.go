package service

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Observer hears what the runtime does, for metrics (service/telemetry
// implements it on Prometheus). Its methods run on the turns' paths: they
// must be cheap and never block. Agent and tool names are bounded by the
// runtime: a tenant's own agents and their tools are reported as
// TenantAgentLabel and TenantToolLabel, since tenants choose those names.
type Observer interface {
	// TurnFinished: a turn ended with finishReason after d.
	TurnFinished(agent, finishReason string, d time.Duration)
	// ModelCalled: a model call took d; failed when it returned an error.
	ModelCalled(agent string, d time.Duration, failed bool)
	// ToolCalled: a tool ran for d and ended with outcome (a ToolCall*
	// status: succeeded, interrupted or failed).
	ToolCalled(agent, tool, outcome string, d time.Duration)
	// InterruptCreated: a turn paused on an interrupt of tool.
	InterruptCreated(agent, tool string)
	// InterruptResolved: an interrupt was answered (by a resume or an
	// operator's decision).
	InterruptResolved(agent, tool string)
	// InterruptExpired: a deadline answered an interrupt.
	InterruptExpired(agent, tool string)
	// InterruptEscalated: an approval policy's escalation handed a
	// pending interrupt to another scope.
	InterruptEscalated(agent, tool string)
	// ResumeConflict: a resume named an interrupt already resolved (409).
	ResumeConflict(agent string)
	// SessionHeadMoved: a turn that started from this instance's cached
	// session head found the session had moved, and ran again.
	SessionHeadMoved()
	// JobStarted: a detached turn started running on this instance;
	// takenOver when it was taken from the queue (another instance
	// started it). JobEnded is called once for each.
	JobStarted(takenOver bool)
	JobEnded()
	// Recovered: a sweep repaired n things a fault left behind, of kind
	// RecoveryStrandedDecision (a decision whose turn never started, now
	// started) or RecoveryLostToolCall (a call left running by a dead
	// instance, now unknown: it may have run, a human decides).
	Recovered(kind string, n int)
	// WebhookAttempted: a webhook delivery attempt ended with outcome (a
	// Delivery* status) after d.
	WebhookAttempted(outcome string, d time.Duration)
}

// Labels the runtime reports for the names tenants choose (see Observer).
const (
	TenantAgentLabel = "tenant_agent"
	TenantToolLabel  = "tenant_tool"
)

// Kinds of Observer.Recovered.
const (
	RecoveryStrandedDecision = "stranded_decision"
	RecoveryLostToolCall     = "lost_tool_call"
)

// NopObserver is an Observer that does nothing.
type NopObserver struct{}

// TurnFinished implements Observer.
func (NopObserver) TurnFinished(string, string, time.Duration) {}

// ModelCalled implements Observer.
func (NopObserver) ModelCalled(string, time.Duration, bool) {}

// ToolCalled implements Observer.
func (NopObserver) ToolCalled(string, string, string, time.Duration) {}

// InterruptCreated implements Observer.
func (NopObserver) InterruptCreated(string, string) {}

// InterruptResolved implements Observer.
func (NopObserver) InterruptResolved(string, string) {}

// InterruptExpired implements Observer.
func (NopObserver) InterruptExpired(string, string) {}

// InterruptEscalated implements Observer.
func (NopObserver) InterruptEscalated(string, string) {}

// ResumeConflict implements Observer.
func (NopObserver) ResumeConflict(string) {}

// SessionHeadMoved implements Observer.
func (NopObserver) SessionHeadMoved() {}

// JobStarted implements Observer.
func (NopObserver) JobStarted(bool) {}

// JobEnded implements Observer.
func (NopObserver) JobEnded() {}

// Recovered implements Observer.
func (NopObserver) Recovered(string, int) {}

// WebhookAttempted implements Observer.
func (NopObserver) WebhookAttempted(string, time.Duration) {}

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
// into the binary, TenantAgentLabel for a tenant's own (whose names are
// unbounded).
func (r *Runtime) metricAgent(name string) string {
	if _, err := r.Lookup(name); err == nil {
		return name
	}
	return TenantAgentLabel
}

// metricAgent and metricTool are the invocation's agent's and a tool's
// labels (see Runtime.metricAgent).
func (inv *invocation) metricAgent() string {
	if inv.agent.Version > 0 {
		return TenantAgentLabel
	}
	return inv.agent.Name
}

func (r *Runtime) metricTool(agent, tool string) string {
	if r.metricAgent(agent) == TenantAgentLabel {
		return TenantToolLabel
	}
	return tool
}

func (inv *invocation) metricTool(tool string) string {
	if inv.agent.Version > 0 {
		return TenantToolLabel
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
