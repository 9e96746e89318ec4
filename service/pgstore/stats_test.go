package pgstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestStatsKeeperAnalyzesAtItsCounts: the keeper's first check comes at its
// count of turn writes, in the background, and analyzes every turn table of
// a new database; a second check analyzes them again only on a server
// without autovacuum, which would otherwise keep them.
func TestStatsKeeperAnalyzesAtItsCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	ps := New(pool)
	defer ps.Close()
	k := ps.stats
	k.next.Store(3)
	analyzedTables := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = ANY ($1::text[]) AND reltuples >= 0`,
			turnTables).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := analyzedTables(); n != 0 {
		t.Fatalf("%d turn tables analyzed in a new database", n)
	}
	k.wrote()
	k.wrote()
	if n := analyzedTables(); n != 0 {
		t.Fatalf("%d turn tables analyzed before the keeper's count", n)
	}
	k.wrote()
	deadline := time.Now().Add(time.Minute)
	// Until the check has analyzed every table and ended.
	for analyzedTables() < len(turnTables) || k.busy.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d turn tables analyzed a minute after the keeper's count", analyzedTables(), len(turnTables))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The store reports the ANALYZE it ran (the bench prints it beside
	// the slowest turns).
	if got := ps.StatsAnalyses(); len(got) != 1 || !slices.Equal(got[0].Tables, turnTables) || got[0].Took <= 0 ||
		got[0].At.After(time.Now()) {
		t.Fatalf("the store reports the analyses %+v; want one of %v", got, turnTables)
	}
	if next := k.next.Load(); next != 3*statsCheckGrowth {
		t.Fatalf("the next check comes at %d writes; want %d", next, 3*statsCheckGrowth)
	}
	var autovacuum string
	if err := pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		t.Fatal(err)
	}
	again, err := k.analyze(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(again)
	var want []string
	if autovacuum == "off" {
		want = slices.Sorted(slices.Values(turnTables))
	}
	if !slices.Equal(again, want) {
		t.Fatalf("with autovacuum %s, a second check analyzed %v; want %v", autovacuum, again, want)
	}
}
