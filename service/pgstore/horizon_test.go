package pgstore

import (
	"cmp"
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestEventHorizonIsThisDatabase checks what holds the event log's readers
// back: a transaction of this database that may still commit an event
// does, until it ends (the store's HeldEvents reports the events it
// holds); a transaction left open in another database of the same server
// does not. The horizon was the oldest transaction running
// anywhere on the server, and a transaction open in another database held
// every stream and webhook back for as long as it ran (it failed the
// event stream tests in CI, behind another test's long transaction).
func TestEventHorizonIsThisDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)
	st := storesOn(t, url, 1)[0]
	if _, err := pool.Exec(ctx, `INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 's', 'a')`); err != nil {
		t.Fatal(err)
	}

	// A transaction with an id, open in another database until the test
	// ends.
	other, err := pgx.Connect(ctx, cmp.Or(os.Getenv("DATABASE_URL"), testdb.DefaultAdminURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	otherTx := openWithID(t, other)
	defer func() { _ = otherTx.Rollback(ctx) }()

	addEvent(t, pool, "first")
	// Other tests' transactions, in this database's snapshot a moment
	// before pg_stat_activity is read, can hold one read back: poll.
	waitForEvents(t, pool, 1)

	// A transaction of this database, begun before the second event: it
	// may yet commit an event before it, so the readers stop before both.
	sameTx := openHere(t, pool)
	addEvent(t, pool, "second")
	// (Fewer is possible: another test's transaction that ended between
	// the snapshot and the read of pg_stat_activity holds one read back.)
	if got := readAll(t, pool); slices.Max(slices.Collect(maps.Values(got))) > 1 {
		t.Fatalf("with a transaction of this database open from before it, the second event was read: %v", got)
	}
	// The metrics endpoint reports it held, and since when.
	held, err := st.HeldEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held.Held < 1 || held.Oldest.IsZero() || time.Since(held.Oldest) > time.Hour {
		t.Errorf("held events with the second one held back: %+v, want at least 1 and its creation time", held)
	}
	// Its own transaction counts as running for a reader in it.
	var own bool
	if err := sameTx.QueryRow(ctx, `SELECT holdpoint_horizon() <= pg_current_xact_id()`).Scan(&own); err != nil {
		t.Fatal(err)
	}
	if !own {
		t.Error("a reader's own transaction is past its horizon")
	}
	if err := sameTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitForEvents(t, pool, 2)
	// (Polled: like a read, one count can be held back for a moment.)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		held, err := st.HeldEvents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held == (store.HeldEvents{}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events still held a minute after the transaction ended: %+v", held)
		}
	}
}

// TestReplayReadsThroughAPosition checks the read of a resumed event
// stream: every event up to the position given (where the live reader
// was when the stream subscribed) whatever the horizon, and past it only
// those the horizon shows final. It replayed up to the horizon alone,
// which is not the same for every reader at every moment (a transaction
// of another database that ends between the snapshot and the read of
// pg_stat_activity holds one read back): a replay could stop short of
// where the live reader already was, and the stream never sent the
// events between (it failed the event stream tests in CI, now and then).
func TestReplayReadsThroughAPosition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)
	st := storesOn(t, url, 1)[0]
	if _, err := pool.Exec(ctx, `INSERT INTO sessions (tenant_id, id, agent) VALUES ('default', 's', 'a')`); err != nil {
		t.Fatal(err)
	}
	addEvent(t, pool, "first")
	waitForEvents(t, pool, 1)

	// A transaction of this database open from before the second and
	// third events holds the horizon before them.
	tx := openHere(t, pool)
	addEvent(t, pool, "second")
	addEvent(t, pool, "third")
	var pos []store.EventPos
	rows, err := pool.Query(ctx, `SELECT xid::text::bigint, id FROM interrupt_events ORDER BY xid, id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p store.EventPos
		if err := rows.Scan(&p.Xid, &p.ID); err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	if err := rows.Err(); err != nil || len(pos) != 3 {
		t.Fatalf("events: %v, %v; want 3", pos, err)
	}
	read := func(through store.EventPos) []store.EventPos {
		t.Helper()
		events, err := st.TenantEventsThrough(ctx, "default", store.EventPos{}, through, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []store.EventPos
		for _, e := range events {
			got = append(got, e.Pos)
		}
		return got
	}
	if got := read(pos[0]); !slices.Equal(got, pos[:1]) {
		t.Errorf("through the first event, with the horizon before the second: %v, want %v", got, pos[:1])
	}
	if got := read(pos[1]); !slices.Equal(got, pos[:2]) {
		t.Errorf("through the second event, with the horizon before it: %v, want %v (up to the position, not the horizon)", got, pos[:2])
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Past the position, as far as the horizon (polled: one read can be
	// held back for a moment by another database's transaction).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got := read(pos[0])
		if slices.Equal(got, pos) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the transaction ended, through the first event: %v, want %v", got, pos)
		}
	}
}

// openHere is openWithID on a connection of pool, the transaction rolled
// back (unless committed) and the connection released when the test ends.
func openHere(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tx := openWithID(t, conn.Conn())
	t.Cleanup(func() {
		_ = tx.Rollback(context.Background())
		conn.Release()
	})
	return tx
}

// openWithID begins a transaction on conn and has it take a transaction
// id, as one that has written does.
func openWithID(t *testing.T, conn *pgx.Conn) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	return tx
}

// addEvent commits a turn event.
func addEvent(t *testing.T, pool *pgxpool.Pool, snapshot string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		WITH s AS (INSERT INTO snapshots (tenant_id, id, session_id, agent, status) VALUES ('default', $1, 's', 'a', 'completed'))
		INSERT INTO interrupt_events (tenant_id, type, actor, payload)
		VALUES ('default', 'turn.completed', 'test', jsonb_build_object('snapshotId', $1::text))`, snapshot); err != nil {
		t.Fatal(err)
	}
}

// readAll is how many events each reader of the log returns, and how many
// the horizon is past.
func readAll(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	got := map[string]int{}
	for name, q := range map[string]string{
		"live reader":    `SELECT count(*) FROM holdpoint_events_after(0, 0, 100)`,
		"resumed stream": `SELECT count(*) FROM holdpoint_tenant_events_through('default', 0, 0, 0, 0, 100)`,
		"webhook cursor": `SELECT count(*) FROM holdpoint_webhook_cursor_events('default', 0, 0, ARRAY['turn.completed'], 100) WHERE event_type <> ''`,
		"horizon":        `SELECT count(*) FROM interrupt_events WHERE xid::text::bigint < holdpoint_event_horizon()`,
	} {
		var n int
		if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = n
	}
	return got
}

// waitForEvents waits, up to a minute, until every reader returns want
// events.
func waitForEvents(t *testing.T, pool *pgxpool.Pool, want int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got := readAll(t, pool)
		all := true
		for _, n := range got {
			all = all && n == want
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the readers did not reach %d events within a minute: %v", want, got)
		}
	}
}
