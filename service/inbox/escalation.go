package inbox

import (
	"context"
)

// escalationBatch is how many interrupts one statement of the sweep
// escalates.
const escalationBatch = 100

// SweepEscalations hands the pending approvals (all tenants) whose
// policy's Escalate.After has passed to the escalation's scope, once
// each: from then on only holders of that scope list and decide them.
// Each gets an escalated event (webhooks' interrupt.escalated). The
// tool's deadline is not moved: the deadline sweep applies it as before.
func (ib *Inbox) SweepEscalations(ctx context.Context) (int, error) {
	total := 0
	for {
		done, err := ib.store.EscalateDue(ctx, escalationBatch)
		if err != nil {
			return total, err
		}
		total += len(done)
		for _, e := range done {
			ib.obs.InterruptEscalated(ib.rt.MetricLabels(e.Agent, e.Tool))
			ib.log.Info("interrupt escalated", "tenant", e.TenantID, "interrupt", e.ID, "from", e.From, "to", e.To)
		}
		if len(done) < escalationBatch {
			return total, nil
		}
	}
}
