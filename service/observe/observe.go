package observe

import "time"

// Observer hears what the runtime does, for metrics (service/telemetry
// implements it on Prometheus). Its methods run on the turns' paths: they
// must be cheap and never block. Agent and tool names are bounded by the
// runtime (package service): a tenant's own agents and their tools are reported as
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

// Nop is an Observer that does nothing.
type Nop struct{}

// TurnFinished implements Observer.
func (Nop) TurnFinished(string, string, time.Duration) {}

// ModelCalled implements Observer.
func (Nop) ModelCalled(string, time.Duration, bool) {}

// ToolCalled implements Observer.
func (Nop) ToolCalled(string, string, string, time.Duration) {}

// InterruptCreated implements Observer.
func (Nop) InterruptCreated(string, string) {}

// InterruptResolved implements Observer.
func (Nop) InterruptResolved(string, string) {}

// InterruptExpired implements Observer.
func (Nop) InterruptExpired(string, string) {}

// InterruptEscalated implements Observer.
func (Nop) InterruptEscalated(string, string) {}

// ResumeConflict implements Observer.
func (Nop) ResumeConflict(string) {}

// SessionHeadMoved implements Observer.
func (Nop) SessionHeadMoved() {}

// JobStarted implements Observer.
func (Nop) JobStarted(bool) {}

// JobEnded implements Observer.
func (Nop) JobEnded() {}

// Recovered implements Observer.
func (Nop) Recovered(string, int) {}

// WebhookAttempted implements Observer.
func (Nop) WebhookAttempted(string, time.Duration) {}
