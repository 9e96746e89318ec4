package inbox

import (
	"context"
	"time"

	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/store"
)

// SweepDeadlines applies the deadlines of due interrupts (all tenants) and
// resumes the snapshots whose last interrupt was answered by a deadline.
func (ib *Inbox) SweepDeadlines(ctx context.Context) (int, error) {
	total := 0
	for {
		swept, decided, err := ib.store.SweepDueInterrupts(ctx, 100)
		if err != nil {
			return total, err
		}
		n := len(swept)
		total += n
		for _, s := range swept {
			agent, tool := ib.rt.MetricLabels(s.Agent, s.Tool)
			if s.Status == store.InterruptExpired {
				ib.obs.InterruptExpired(agent, tool)
			} else {
				ib.obs.InterruptResolved(agent, tool)
			}
		}
		for _, d := range decided {
			c := auth.Caller{TenantID: d.TenantID, Actor: "system"}
			if _, err := ib.rt.SnapshotAgent(ctx, c, d.Agent, d.SnapshotID); err != nil {
				ib.log.Warn("deadline answered an interrupt of an agent this instance does not serve", "agent", d.Agent, "snapshot", d.SnapshotID, "err", err)
				continue
			}
			out, err := ib.rt.ResumeDecided(ctx, c, d.Agent, d.SnapshotID, d.Batch)
			if err != nil {
				ib.log.Error("resuming after a deadline failed", "snapshot", d.SnapshotID, "err", err)
				continue
			}
			ib.log.Info("resumed after a deadline", "snapshot", d.SnapshotID, "finishReason", out.FinishReason, "resumedSnapshot", out.SnapshotID)
		}
		if n < 100 {
			return total, nil
		}
	}
}

// RunDeadlineSweeper sweeps every interval until ctx ends: the due
// deadlines, the escalations, the tool calls lost with their turn
// (SweepLostToolCalls), and the decisions whose turn never started (the
// engine's service.Runtime.RepairStrandedDecisions).
func (ib *Inbox) RunDeadlineSweeper(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() bool {
		if !ib.rt.Ready() {
			return false // nothing to gain from sweeps that would fail
		}
		if _, err := ib.SweepDeadlines(ctx); err != nil && ctx.Err() == nil {
			ib.log.Warn("deadline sweep failed", "err", err)
		}
		if _, err := ib.SweepEscalations(ctx); err != nil && ctx.Err() == nil {
			ib.log.Warn("escalation sweep failed", "err", err)
		}
		if _, err := ib.SweepLostToolCalls(ctx); err != nil && ctx.Err() == nil {
			ib.log.Warn("lost tool call sweep failed", "err", err)
		}
		if _, err := ib.rt.RepairStrandedDecisions(ctx); err != nil && ctx.Err() == nil {
			ib.log.Warn("stranded decision repair failed", "err", err)
		}
		return false
	})
}

// SweepLostToolCalls marks unknown (all tenants) the tool calls running
// for longer than service.Options.LostToolCallAfter whose turn has no detached
// job: their instance died, so nobody will record their outcome. A
// detached turn's calls are left to the takeover of its job.
func (ib *Inbox) SweepLostToolCalls(ctx context.Context) (int, error) {
	const batch = 500
	total := 0
	for {
		n, err := ib.store.MarkLostToolCalls(ctx, time.Now().Add(-ib.rt.LostToolCallAfter()), batch)
		total += n
		if err != nil || n < batch {
			if total > 0 {
				ib.obs.Recovered(observe.RecoveryLostToolCall, total)
				ib.log.Warn("tool calls lost with their turn may have run; they wait for a human", "calls", total)
			}
			return total, err
		}
	}
}
