// Package retention applies tenants' retention policies: it prunes
// finished sessions, with their snapshots, messages, interrupts, tool
// calls, events and webhook deliveries, in bounded batches (each its own
// short transaction, with a pause between them so turns are not held up),
// on demand (platform prune) or every interval on one instance at a time
// (the sweeper of platform serve). What may go is decided in the database
// (migration 00021_retention.sql); this package drives the batches.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/store"
)

// Defaults of a Pruner.
const (
	// DefaultBatch is the most sessions (with all their rows) one
	// transaction removes, and the most events one event batch looks at.
	DefaultBatch = 100
	// DefaultPause is the least wait between two batches.
	DefaultPause = 10 * time.Millisecond
	// DefaultShare is the most of the wall time prune batches take: after
	// a batch that took d, the next waits at least d*(1-share)/share (4d
	// at 0.2). A loaded database makes batches slower, so prune backs off
	// on its own when turns need the server.
	DefaultShare = 0.2
)

// PrunerStore is what a Pruner needs: the retention store and the tenant
// list.
type PrunerStore interface {
	Store
	ListTenants(ctx context.Context) ([]store.Tenant, error)
}

// Pruner prunes tenants' data under their retention policies.
type Pruner struct {
	Store PrunerStore
	// Ready, when set, says whether the instance may take work: a round
	// while it is false is skipped (see readiness.Readiness).
	Ready func() bool
	// Defaults fill in the ages a tenant's own policy leaves unset (zero:
	// keep forever).
	Defaults Policy
	// Batch bounds each transaction (default DefaultBatch).
	Batch int
	// Pause is the least wait between batches (default DefaultPause;
	// negative: none).
	Pause time.Duration
	// Share is the most of the wall time batches take (default
	// DefaultShare; 1 or more: no such bound, only Pause).
	Share float64
	// Log receives what the sweeper deleted (default: discarded).
	Log *slog.Logger
	// OnBatch, when set, is called after each batch with its counts (for
	// progress reports and tests).
	OnBatch func(tenantID string, c PruneCounts)
}

// Report is what a prune did (or, in a dry run, would do) to one tenant.
type Report struct {
	TenantID string
	// Policy is the policy applied: the tenant's own, completed by the
	// defaults.
	Policy Policy
	Counts PruneCounts
	// Batches counts the transactions that deleted (0 in a dry run).
	Batches int
}

func (p *Pruner) batch() int {
	if p.Batch <= 0 {
		return DefaultBatch
	}
	return p.Batch
}

// pause is the wait after a batch that took took.
func (p *Pruner) pause(took time.Duration) time.Duration {
	var least time.Duration
	switch {
	case p.Pause < 0:
	case p.Pause == 0:
		least = DefaultPause
	default:
		least = p.Pause
	}
	share := p.Share
	if share <= 0 {
		share = DefaultShare
	}
	if share < 1 {
		if d := time.Duration(float64(took) * (1 - share) / share); d > least {
			return d
		}
	}
	return least
}

func (p *Pruner) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// Prune prunes the given tenants (every tenant when none is given), or
// with dryRun counts what it would delete and deletes nothing. It returns
// one report per tenant, in order, up to the first error.
func (p *Pruner) Prune(ctx context.Context, tenantIDs []string, dryRun bool) ([]Report, error) {
	if len(tenantIDs) == 0 {
		tenants, err := p.Store.ListTenants(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tenants {
			tenantIDs = append(tenantIDs, t.ID)
		}
	}
	var out []Report
	for _, id := range tenantIDs {
		own, err := p.Store.RetentionPolicy(ctx, id)
		if err != nil {
			return out, err
		}
		r := Report{TenantID: id, Policy: own.Or(p.Defaults)}
		if dryRun {
			r.Counts, err = p.Store.PrunePreview(ctx, id, r.Policy)
		} else {
			err = p.pruneTenant(ctx, &r)
		}
		out = append(out, r)
		if err != nil {
			return out, fmt.Errorf("tenant %s: %w", id, err)
		}
	}
	return out, nil
}

// eventCutoff is the age past which a turn or tool event whose snapshot
// is gone may go: the event retention, or else the shortest session age
// (zero: none applies).
func eventCutoff(p Policy) time.Duration {
	if p.Events > 0 {
		return p.Events
	}
	switch {
	case p.Completed == 0:
		return p.Failed
	case p.Failed == 0:
		return p.Completed
	}
	return min(p.Completed, p.Failed)
}

// pruneTenant removes one tenant's sessions, then the turn and tool
// events left without their snapshot, a batch at a time.
func (p *Pruner) pruneTenant(ctx context.Context, r *Report) error {
	if r.Policy.Completed == 0 && r.Policy.Failed == 0 {
		return nil
	}
	for after := ""; ; {
		start := time.Now()
		b, err := p.Store.PruneSessions(ctx, r.TenantID, r.Policy, after, p.batch())
		if err != nil {
			return err
		}
		if err := p.batchDone(ctx, r, b, time.Since(start)); err != nil {
			return err
		}
		if b.Done {
			break
		}
		after = b.AfterSession
	}
	cutoff := eventCutoff(r.Policy)
	for after := (store.EventPos{}); ; {
		start := time.Now()
		b, err := p.Store.PruneEvents(ctx, r.TenantID, cutoff, after, p.batch())
		if err != nil {
			return err
		}
		if err := p.batchDone(ctx, r, b, time.Since(start)); err != nil {
			return err
		}
		if b.Done {
			return nil
		}
		after = b.AfterEvent
	}
}

// batchDone adds a batch that took took to the report and pauses before
// the next one.
func (p *Pruner) batchDone(ctx context.Context, r *Report, b PruneBatch, took time.Duration) error {
	r.Counts.Add(b.Counts)
	if b.Counts.Total() > 0 {
		r.Batches++
		if p.OnBatch != nil {
			p.OnBatch(r.TenantID, b.Counts)
		}
	}
	if b.Done {
		return nil
	}
	return wait.Sleep(ctx, p.pause(took))
}

// Run prunes every tenant every interval until ctx ends, on one instance
// at a time: a round that finds another instance pruning skips. It logs
// what each round deleted.
func (p *Pruner) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.round(ctx)
	}
}

// round is one round of the sweeper.
func (p *Pruner) round(ctx context.Context) {
	log := p.log()
	if p.Ready != nil && !p.Ready() {
		log.Debug("prune: not ready, skipping this round")
		return
	}
	release, ok, err := p.Store.TryPruneLock(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("prune: lock", "err", err)
		}
		return
	}
	if !ok {
		log.Debug("prune: another instance is pruning")
		return
	}
	defer release()
	start := time.Now()
	reports, err := p.Prune(ctx, nil, false)
	var total PruneCounts
	for _, r := range reports {
		total.Add(r.Counts)
		if r.Counts.Total() > 0 {
			log.Info("pruned", "tenant", r.TenantID, "sessions", r.Counts.Sessions, "snapshots", r.Counts.Snapshots,
				"messages", r.Counts.Messages, "interrupts", r.Counts.Interrupts, "events", r.Counts.Events,
				"tool_calls", r.Counts.ToolCalls, "deliveries", r.Counts.Deliveries, "batches", r.Batches)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("prune failed", "err", err)
	}
	log.Debug("prune round", "rows", total.Total(), "took", time.Since(start).String())
}
