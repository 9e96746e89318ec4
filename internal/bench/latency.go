package bench

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// dialer dials addr whatever address it is asked for (pgx's DialFunc).
func dialer(addr string) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}

// measureRTT is the median time of 50 SELECT 1 round trips over pool.
func measureRTT(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	var ds []time.Duration
	for range 50 {
		start := time.Now()
		if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}
