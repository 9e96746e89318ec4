package pgstore

import (
	"context"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// NewAppPool connects to databaseURL with every connection running as the
// application role (holdpoint_app), so row-level security applies even when
// the URL names the tables' owner. Migrations use their own connection.
func NewAppPool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	return NewAppPoolWith(ctx, databaseURL, nil)
}

// NewAppPoolWith is NewAppPool with a hook to adjust the pool configuration
// (a tracer, a pool size) before connecting.
func NewAppPoolWith(ctx context.Context, databaseURL string, configure func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if cfg.MaxConns < int32(4*runtime.GOMAXPROCS(0)) {
		cfg.MaxConns = int32(4 * runtime.GOMAXPROCS(0))
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		return db.New(conn).SetAppRole(ctx)
	}
	if configure != nil {
		configure(cfg)
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}
