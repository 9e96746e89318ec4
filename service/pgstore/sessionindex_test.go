package pgstore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestSessionSnapshotIndexStaysSmall checks the size of the index of a
// session's snapshots when many sessions write at once, each into its own
// part of the index. With a distinct key per snapshot (the session and
// created_at) every page that filled split in half, about 112 bytes per
// snapshot (225 per approval cycle of 8 x 200); keyed by the session
// alone, one session's entries are duplicates that B-tree deduplication
// keeps as one key and a list of row pointers.
func TestSessionSnapshotIndexStaysSmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.OwnerPool(t, testdb.URL(t))
	const sessions, perSession = 8, 400
	before := indexBytes(t, pool, "snapshots_session_idx")
	// One row at a time, the sessions in turn, each newer than the last.
	_, err := pool.Exec(ctx, `
		INSERT INTO sessions (tenant_id, id, agent)
		SELECT 'default', 'session-' || g, 'a' FROM generate_series(1, $1::int) g`, sessions)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status, created_at)
		SELECT 'default', gen_random_uuid()::text, 'session-' || (g % $1::int + 1), 'a', 'completed',
		       now() + g * interval '1 millisecond'
		FROM generate_series(1, $1::int * $2::int) g`, sessions, perSession)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(indexBytes(t, pool, "snapshots_session_idx")-before) / (sessions * perSession)
	if per > 40 {
		t.Errorf("the session index grew %.0f bytes per snapshot, want at most 40", per)
	}
}

func indexBytes(t *testing.T, pool *pgxpool.Pool, name string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT pg_relation_size(to_regclass($1))`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
