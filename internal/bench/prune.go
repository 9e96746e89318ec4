package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/retention"
)

// PruneConfig seeds prunable rows before the run and prunes them during
// it, to measure what pruning costs concurrent turns.
type PruneConfig struct {
	// Seed sets how many old completed sessions of the tenant "prunable"
	// to seed: one per eight rows (a session, its snapshot holding three
	// messages, an interrupt and two audit events: eight rows until
	// migration 00029 put the messages in the snapshot's row, five now).
	Seed int
	// Run prunes them while the turns run (with Batch, Pause and Share).
	Run   bool
	Batch int
	Pause time.Duration
	Share float64
}

// pruneTenant is the tenant the seeded rows belong to.
const pruneTenant = "prunable"

// seedPrunable writes the rows as the tables' owner, in one statement per
// table.
func seedPrunable(ctx context.Context, admin *pgxpool.Pool, rows int) error {
	n := max(rows/8, 1)
	steps := []string{
		`INSERT INTO tenants (id, name) VALUES ('prunable', 'prunable')`,
		`INSERT INTO retention_policies (tenant_id, completed_seconds, failed_seconds) VALUES ('prunable', 3600, 3600)`,
		`INSERT INTO sessions (tenant_id, id, agent, latest_snapshot_id, created_at, updated_at)
		 SELECT 'prunable', 's' || g, 'bench', 'p' || g, now() - interval '2 days', now() - interval '2 days' FROM generate_series(1, $1::int) g`,
		`INSERT INTO snapshots (tenant_id, id, session_id, agent, status, message_count, created_at, updated_at, messages_from, turn_messages)
		 SELECT 'prunable', 'p' || g, 's' || g, 'bench', 'completed', 3, now() - interval '2 days', now() - interval '2 days', 0,
		        '[{"role":"user","content":[{"text":"Transfer $50 to account 12345"}]},{"role":"model","content":[{"text":"Done."}]},{"role":"user","content":[{"text":"Transfer $50 to account 12345"}]}]'
		 FROM generate_series(1, $1::int) g`,
		`INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, status, created_at, resolved_at)
		 SELECT 'prunable', gen_random_uuid(), 's' || g, 'p' || g, 'bench', 'userApproval', 'a1', 'resolved', now() - interval '2 days', now() - interval '2 days'
		 FROM generate_series(1, $1::int) g`,
		`INSERT INTO interrupt_events (tenant_id, interrupt_id, type, actor, created_at)
		 SELECT 'prunable', i.id, t, 'bench', now() - interval '2 days' FROM interrupts i, unnest(ARRAY['created', 'resolved']) t
		 WHERE i.tenant_id = 'prunable'`,
		`ANALYZE`,
	}
	for _, sql := range steps {
		var args []any
		if strings.Contains(sql, "$1") {
			args = []any{n}
		}
		if _, err := admin.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("seed prunable rows: %.50s...: %w", strings.TrimSpace(sql), err)
		}
	}
	return nil
}

// startPrune prunes the seeded tenant in the background; the returned
// function waits for it and prints what it did.
func startPrune(ctx context.Context, store *pgstore.PgStore, cfg PruneConfig, out io.Writer) func() error {
	p := &retention.Pruner{Store: store, Batch: cfg.Batch, Pause: cfg.Pause, Share: cfg.Share}
	start := time.Now()
	done := make(chan error, 1)
	var rep []retention.Report
	go func() {
		var err error
		rep, err = p.Prune(ctx, []string{pruneTenant}, false)
		done <- err
	}()
	return func() error {
		err := <-done
		var c retention.PruneCounts
		batches := 0
		for _, r := range rep {
			c.Add(r.Counts)
			batches += r.Batches
		}
		if out != nil {
			fmt.Fprintf(out, "pruned %d rows (%d sessions) in %d batches in %.1f s\n", c.Total(), c.Sessions, batches, time.Since(start).Seconds())
		}
		return err
	}
}
