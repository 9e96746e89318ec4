package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestRelationGrowth: the relations that grew, per cycle, largest first,
// and their total; one that shrank counts against it.
func TestRelationGrowth(t *testing.T) {
	before := map[string]int64{"snapshots": 8192, "snapshots_pkey": 16384, "sessions": 8192}
	after := map[string]int64{"snapshots": 40960, "snapshots_pkey": 24576, "sessions": 8192, "interrupts": 16384}
	rels, total := relationGrowth(before, after, 8)
	if len(rels) != 3 || rels[0].Name != "snapshots" || rels[0].Bytes != 4096 || rels[2].Name != "snapshots_pkey" || total != 7168 {
		t.Errorf("growth %v, total %v", rels, total)
	}
	var out strings.Builder
	printRelations(&out, rels)
	if !strings.Contains(out.String(), ": snapshots 4096, interrupts 2048, snapshots_pkey 1024\n") {
		t.Errorf("printed %q", out.String())
	}
}

// TestHeapPagesUsed: a heap counts the pages that hold a live row, not
// the empty pages of its file (PostgreSQL extends a heap by many pages at
// once under concurrent inserts), while an index counts its file.
func TestHeapPagesUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Four rows of 2 KB fill a page: 12 rows take 3 pages. Forty more,
	// deleted and vacuumed (the file not truncated), leave ten empty
	// pages in the file.
	exec(`CREATE TABLE grown (id bigint PRIMARY KEY, pad text)`)
	exec(`INSERT INTO grown SELECT g, repeat('x', 1900) FROM generate_series(1, 12) g`)
	before, err := relationSizes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if before["grown"] != 3*8192 || before["grown_pkey"] != 2*8192 {
		t.Fatalf("sizes before: heap %d, index %d", before["grown"], before["grown_pkey"])
	}
	exec(`INSERT INTO grown SELECT g, repeat('x', 1900) FROM generate_series(100, 139) g`)
	exec(`DELETE FROM grown WHERE id >= 100`)
	exec(`VACUUM (TRUNCATE false) grown`)
	var file int64
	if err := pool.QueryRow(ctx, `SELECT pg_relation_size('grown')`).Scan(&file); err != nil {
		t.Fatal(err)
	}
	after, err := relationSizes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if after["grown"] != 3*8192 || file != 13*8192 {
		t.Errorf("heap after: %d bytes counted of a %d-byte file, want 3 pages of 13", after["grown"], file)
	}
}
