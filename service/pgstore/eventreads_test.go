package pgstore

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestEventReadsLookUpByKey checks that the readers of the event log look
// up each event's snapshot by key, however large the tables: with 40,000
// snapshots of about 700 bytes (some 3,500 pages), reading a batch of 100
// events touches a few hundred buffers. The functions run with their
// parameters unknown to the planner (a SQL function; a PL/pgSQL one after
// its first five calls), and a plan that joined by hashing the snapshots
// table read every page of it for each batch. It counts buffers, not time.
func TestEventReadsLookUpByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.OwnerPool(t, testdb.URL(t))
	_, err := pool.Exec(ctx, `
		INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 's', 'a');
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status, custom)
		SELECT 'default', 'snap-' || g, 's', 'a', 'completed', jsonb_build_object('pad', repeat('x', 600))
		FROM generate_series(1, 40000) g;
		INSERT INTO interrupt_events (tenant_id, type, actor, payload)
		SELECT 'default', 'turn.completed', 'test', jsonb_build_object('snapshotId', 'snap-' || g)
		FROM generate_series(1, 40000) g;
		ANALYZE sessions; ANALYZE snapshots; ANALYZE interrupt_events;`)
	if err != nil {
		t.Fatal(err)
	}
	testdb.WaitForEventHorizon(t, pool)
	var pages int64
	if err := pool.QueryRow(ctx, `SELECT relpages FROM pg_class WHERE relname = 'snapshots'`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, call string }{
		{"live reader", `SELECT * FROM holdpoint_events_after(0, 0, 100)`},
		{"resumed stream", `SELECT * FROM holdpoint_tenant_events_through('default', 0, 0, 0, 0, 100)`},
		{"resumed stream through a position", `SELECT * FROM holdpoint_tenant_events_through('default', 0, 0, 4000000000, 0, 100)`},
		{"webhook cursor", `SELECT * FROM holdpoint_webhook_cursor_events('default', 0, 0, ARRAY['turn.completed'], 100)`},
	} {
		buffers, rows := lastOfSeven(t, pool, tc.name, tc.call)
		if rows < 100 {
			t.Errorf("%s: %d rows, want 100", tc.name, rows)
		}
		if buffers > 1500 || buffers > pages/2 {
			t.Errorf("%s: a batch of 100 events read %d buffers (snapshots has %d pages): it does not look snapshots up by key", tc.name, buffers, pages)
		}
		t.Logf("%s: %d buffers for %d rows; snapshots has %d pages", tc.name, buffers, rows, pages)
	}
}

// TestEventReadsStopAtTheBatch checks that the readers of the event log
// read a batch in the order of the key and stop when it is full, however
// many events follow it and whatever the planner knows of the table. On
// a table never analyzed (autovacuum off, or soon after a bulk load) the
// planner guessed a few rows past any position and read them all through
// a bitmap, then sorted them for the first batch: an endpoint catching up
// on a backlog of n events read n for each batch of 16, so draining it
// took time quadratic in n (a webhook delivery cost PostgreSQL 290 µs of
// CPU instead of 60). The functions run with sorting off, so the index
// order is the plan. It counts buffers, not time.
func TestEventReadsStopAtTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.OwnerPool(t, testdb.URL(t))
	// No ANALYZE: the planner knows only the table's size.
	_, err := pool.Exec(ctx, `
		INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 's', 'a');
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status)
		SELECT 'default', 'snap-' || g, 's', 'a', 'completed' FROM generate_series(1, 100) g;
		INSERT INTO interrupt_events (tenant_id, type, actor, payload)
		SELECT 'default', 'turn.completed', 'test', jsonb_build_object('snapshotId', 'snap-' || (g % 100 + 1), 'pad', repeat('x', 200))
		FROM generate_series(1, 30000) g;`)
	if err != nil {
		t.Fatal(err)
	}
	testdb.WaitForEventHorizon(t, pool)
	var pages int64
	if err := pool.QueryRow(ctx, `SELECT pg_relation_size('interrupt_events') / current_setting('block_size')::int`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, call string }{
		{"live reader", `SELECT * FROM holdpoint_events_after(0, 0, 16)`},
		{"resumed stream", `SELECT * FROM holdpoint_tenant_events_through('default', 0, 0, 0, 0, 16)`},
		{"resumed stream through a position", `SELECT * FROM holdpoint_tenant_events_through('default', 0, 0, 4000000000, 0, 16)`},
		{"webhook cursor", `SELECT * FROM holdpoint_webhook_cursor_events('default', 0, 0, ARRAY['turn.completed'], 16)`},
	} {
		buffers, rows := lastOfSeven(t, pool, tc.name, tc.call)
		if rows != 16 {
			t.Errorf("%s: %d rows, want 16", tc.name, rows)
		}
		if buffers > 200 {
			t.Errorf("%s: a batch of 16 events read %d buffers (the log has %d pages): it reads past the batch", tc.name, buffers, pages)
		}
		t.Logf("%s: %d buffers for %d rows; the log has %d pages", tc.name, buffers, rows, pages)
	}
}

// lastOfSeven runs call seven times under EXPLAIN ANALYZE on one
// connection and returns the buffers the last touched and the rows it
// returned: a PL/pgSQL function's query gets a generic plan from its sixth
// call on a connection.
func lastOfSeven(t *testing.T, pool *pgxpool.Pool, name, call string) (buffers, rows int64) {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for range 7 {
		buffers, rows = explainBuffers(t, conn, name, call)
	}
	return buffers, rows
}

// explainBuffers runs call under EXPLAIN ANALYZE on conn and returns the
// buffers it touched and the rows it returned.
func explainBuffers(t *testing.T, conn *pgxpool.Conn, name, call string) (buffers, rows int64) {
	t.Helper()
	var doc []byte
	if err := conn.QueryRow(context.Background(), `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+call).Scan(&doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var plan []struct {
		Plan struct {
			Rows int64 `json:"Actual Rows"`
			Hit  int64 `json:"Shared Hit Blocks"`
			Read int64 `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal(doc, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("%s: explain output %s: %v", name, doc, err)
	}
	return plan[0].Plan.Hit + plan[0].Plan.Read, plan[0].Plan.Rows
}
