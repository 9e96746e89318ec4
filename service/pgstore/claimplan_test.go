package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/sqlcapture"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestClaimsLookInterruptsUpByKey checks the plans of the two statements
// that claim interrupts (a resume's turn write, and a claim made up
// front) as the server's prepared statements run them after their fifth
// execution: generic plans. With the statistics of a long-running tenant
// (many resolved interrupts, few pending), a claim whose condition named
// the tenant and the status walked the tenant's pending range of
// interrupts_inbox_idx, which holds an entry for every pending version
// until vacuum removes it: a 10-minute soak slowed from 411 to 169 cycles/s.
// The statements captured from the store's own calls are explained with
// the plan forced generic: every interrupt they touch is found by a key.
func TestClaimsLookInterruptsUpByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	owner := testdb.OwnerPool(t, url)
	names := []string{"WriteTurn", "ClaimInterruptsByKey"}
	capture := sqlcapture.New(names...)
	pool, err := NewAppPoolWith(ctx, url, func(c *pgxpool.Config) { c.ConnConfig.Tracer = capture })
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ps := New(pool)
	defer ps.Close()

	// A tenant with a long history: 20,000 resolved interrupts, and the
	// statistics of this ANALYZE only: autovacuum's, coming at a moment of
	// its own on a server that runs it, counted the paused turns' snapshots
	// too, and once (a CI rehearsal on a loaded machine) made the plans this
	// test explains others than those it means to check.
	_, err = owner.Exec(ctx, `
		ALTER TABLE interrupts SET (autovacuum_enabled = off);
		INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 'old', 'a');
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status) VALUES ('default', 'old-snap', 'old', 'a', 'completed');
		INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, status)
		SELECT 'default', gen_random_uuid(), 'old', 'old-snap', 'a', 'approve', 'r' || g, 'resolved'
		FROM generate_series(1, 20000) g;
		ANALYZE interrupts;`)
	if err != nil {
		t.Fatal(err)
	}
	// Two paused turns, each on one interrupt.
	paused := func(session string) *store.SnapshotWrite {
		w := &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: session, SnapshotID: session + "-1",
			Status: protocol.StatusCompleted, FinishReason: protocol.FinishInterrupted, MessageCount: 1,
			Messages:   []store.PositionedMessage{{Position: 0, Body: []byte(`{"role":"user","content":[{"text":"hi"}]}`)}},
			Interrupts: []store.NewInterrupt{{Tool: "approve", Ref: "r1", Input: json.RawMessage(`{}`)}}}
		if _, err := ps.CommitTurn(ctx, w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	claim := store.InterruptClaim{Tool: "approve", Ref: "r1", Resolution: json.RawMessage(`{"respond":{"approved":true}}`)}
	first := paused("s1")
	// A resume whose turn write claims.
	if _, err := ps.CommitTurn(ctx, &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: "s1",
		SnapshotID: "s1-2", ParentID: first.SnapshotID, Status: protocol.StatusCompleted, FinishReason: "stop", MessageCount: 1,
		Claims: []store.InterruptClaim{claim}}); err != nil {
		t.Fatal(err)
	}
	// A claim made up front.
	second := paused("s2")
	if _, err := ps.ClaimInterrupts(ctx, store.ClaimInterruptsParams{TenantID: "default", SnapshotID: second.SnapshotID,
		Claims: []store.InterruptClaim{claim}, Actor: "test", ResumedSnapshotID: "s2-2"}); err != nil {
		t.Fatal(err)
	}

	for _, name := range names {
		st, ok := capture.Last(name)
		if !ok {
			t.Fatalf("the store ran no %s", name)
		}
		plan := genericPlan(t, ctx, owner, st)
		if strings.Contains(plan, "interrupts_inbox_idx") || strings.Contains(plan, `"Seq Scan"`) {
			t.Errorf("%s's generic plan does not find interrupts by key:\n%s", name, plan)
		}
	}
}

// genericPlan explains a captured statement (its SQL; the arguments only
// count) as a prepared statement with its plan forced generic, in a
// transaction rolled back.
func genericPlan(t *testing.T, ctx context.Context, pool *pgxpool.Pool, st sqlcapture.Statement) string {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE captured AS `+st.SQL); err != nil {
		t.Fatal(err)
	}
	// A prepared statement outlives the transaction; the connection goes
	// back to the pool.
	defer func() { _, _ = tx.Exec(ctx, `DEALLOCATE captured`) }()
	// A generic plan does not depend on the values: NULL stands for each.
	params := strings.TrimSuffix(strings.Repeat("NULL, ", len(st.Args)), ", ")
	var doc []byte
	if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE captured(`+params+`)`).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// TestResumesReadNoHistoryAfterTheKeeper: on a new database of a server
// that never analyzes (autovacuum off), a connection plans WriteTurn
// generically at its sixth run, while the tables hold a handful of rows and
// no statistics, and keeps that plan: its claim then read the tenant's every
// interrupt (a sequential scan, or its range of interrupts_inbox_idx), and
// a run of 8 sessions fell from 1,094 to 530 cycles/s between its 200th and
// 800th cycle. Once the statistics keeper has analyzed the turn tables, the
// connection plans again, and a resume reads no more of the table than its
// own interrupts. Without the keeper's ANALYZE this test fails.
func TestResumesReadNoHistoryAfterTheKeeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	owner := testdb.OwnerPool(t, url)
	// One connection: every statement runs on it, and its plans are kept.
	pool, err := NewAppPoolWith(ctx, url, func(c *pgxpool.Config) { c.MaxConns = 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ps := New(pool)
	defer ps.Close()
	cycle := func(session string) {
		paused := &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: session, SnapshotID: session + "-1",
			Status: protocol.StatusCompleted, FinishReason: protocol.FinishInterrupted, MessageCount: 1,
			Messages:   []store.PositionedMessage{{Position: 0, Body: []byte(`{"role":"user","content":[{"text":"hi"}]}`)}},
			Interrupts: []store.NewInterrupt{{Tool: "approve", Ref: "r1", Input: json.RawMessage(`{}`)}}}
		if _, err := ps.CommitTurn(ctx, paused); err != nil {
			t.Fatal(err)
		}
		if _, err := ps.CommitTurn(ctx, &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: session,
			SnapshotID: session + "-2", ParentID: paused.SnapshotID, Status: protocol.StatusCompleted, FinishReason: "stop",
			MessageCount: 1, Claims: []store.InterruptClaim{{Tool: "approve", Ref: "r1",
				Resolution: json.RawMessage(`{"respond":{"approved":true}}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Eight writes: the connection's WriteTurn is planned generically.
	for i := range 4 {
		cycle(fmt.Sprintf("early%d", i))
	}
	// A long history: 20,000 resolved interrupts, never analyzed.
	if _, err := owner.Exec(ctx, `
		INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 'old', 'a');
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status) VALUES ('default', 'old-snap', 'old', 'a', 'completed');
		INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, status)
		SELECT 'default', gen_random_uuid(), 'old', 'old-snap', 'a', 'approve', 'r' || g, 'resolved'
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	analyzed, err := ps.stats.analyze(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(analyzed, "interrupts") {
		t.Fatalf("the keeper analyzed %v, not interrupts", analyzed)
	}
	before := interruptReads(t, ctx, pool, owner)
	cycle("late")
	if read := interruptReads(t, ctx, pool, owner) - before; read > 100 {
		t.Fatalf("an approval cycle read %d interrupt rows of the tenant's 20,000; want a few", read)
	}
}

// interruptReads answers the rows and index entries read from interrupts
// so far (sequential scans' rows and every index's entries), once the
// pool's one connection has reported its counters.
func interruptReads(t *testing.T, ctx context.Context, pool, owner *pgxpool.Pool) int64 {
	t.Helper()
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	// That connection flushed them when it went idle after the statement,
	// before it answered.
	var reads int64
	err := owner.QueryRow(ctx, `
SELECT coalesce(t.seq_tup_read, 0) + coalesce(t.idx_tup_fetch, 0) + coalesce(sum(i.idx_tup_read), 0)
FROM pg_stat_user_tables t LEFT JOIN pg_stat_user_indexes i ON i.relid = t.relid
WHERE t.relname = 'interrupts' GROUP BY t.seq_tup_read, t.idx_tup_fetch`).Scan(&reads)
	if err != nil {
		t.Fatal(err)
	}
	return reads
}
