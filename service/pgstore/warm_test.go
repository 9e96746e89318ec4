package pgstore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestWarmPool: the pool holds its configured number of connections
// afterwards, each with the cycle's statements prepared, and nothing of
// the rolled-back cycle is left in the tables.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	pool, err := NewAppPoolWith(ctx, url, func(c *pgxpool.Config) { c.MaxConns = 3 })
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool)
	defer s.Close()
	n, err := s.WarmPool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("warmed %d connections, want 3", n)
	}
	if st := pool.Stat(); st.TotalConns() != 3 || st.IdleConns() != 3 {
		t.Errorf("pool after WarmPool: %d connections, %d idle; want 3 and 3", st.TotalConns(), st.IdleConns())
	}
	// Every connection has the cycle's statements prepared: pgx caches
	// each statement it prepares, and PostgreSQL lists them.
	conns := make([]*pgxpool.Conn, 0, 3)
	for range 3 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		var prepared int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '-- name: WriteTurn %'`).Scan(&prepared); err != nil {
			t.Fatal(err)
		}
		if prepared != 1 {
			t.Errorf("connection %d: WriteTurn prepared %d times, want once", c.Conn().PgConn().PID(), prepared)
		}
		c.Release()
	}
	owner := testdb.OwnerPool(t, url)
	var rows int
	if err := owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM snapshots) + (SELECT count(*) FROM interrupts) + (SELECT count(*) FROM interrupt_events)`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d rows left by the warm-up, want none", rows)
	}
}
