package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestSessionHeadUpdatesAreHOT checks that moving a session's latest
// snapshot, as every turn's write does, is a heap-only (HOT) update: it
// changes no indexed column and the table leaves room on its pages, so the
// update adds no index entry and its dead version is pruned without
// vacuum. (An index on updated_at once made every such update a new index
// entry and a version only vacuum removed; a soak slowed down as they
// piled up.)
func TestSessionHeadUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.OwnerPool(t, testdb.URL(t))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `INSERT INTO sessions (tenant_id, id, agent, end_user) VALUES ('default', 's', 'a', 'u'), ('default', 't', 'a', NULL)`); err != nil {
		t.Fatal(err)
	}
	const updates = 20
	for i := range updates {
		// The same change as WriteTurn's sess_next, for a session with an
		// end user and one without.
		if _, err := conn.Exec(ctx, `UPDATE sessions SET latest_snapshot_id = $1, updated_at = now()
			WHERE tenant_id = 'default' AND id IN ('s', 't')`, time.Now().String()+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	// This backend's counters reach the statistics when it next goes idle.
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var upd, hot int64
	deadline := time.Now().Add(time.Minute)
	for {
		if err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'sessions'`).Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		if upd >= 2*updates || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if upd != 2*updates || hot != upd {
		t.Fatalf("%d session updates, %d of them HOT; want %d, all HOT", upd, hot, 2*updates)
	}
}
