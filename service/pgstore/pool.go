package pgstore

import (
	"context"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// (a tracer, a pool size, TransactionPooling) before connecting. It refuses
// a URL whose default_query_exec_mode cannot carry the store's parameters
// (see CheckQueryExecMode).
//
// The pool holds at most the URL's pool_max_conns connections; without
// one, 4 per core (GOMAXPROCS), or pgxpool's default where that is more.
func NewAppPoolWith(ctx context.Context, databaseURL string, configure func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if !setsPoolSize(databaseURL) && cfg.MaxConns < int32(4*runtime.GOMAXPROCS(0)) {
		cfg.MaxConns = int32(4 * runtime.GOMAXPROCS(0))
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		return db.New(conn).SetAppRole(ctx)
	}
	if configure != nil {
		configure(cfg)
	}
	if err := CheckQueryExecMode(cfg.ConnConfig); err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// setsPoolSize reports whether databaseURL sizes the pool itself
// (pool_max_conns, which pgxpool reads and pgx alone leaves among the
// parameters it would send to PostgreSQL).
func setsPoolSize(databaseURL string) bool {
	cc, err := pgx.ParseConfig(databaseURL)
	return err == nil && cc.RuntimeParams["pool_max_conns"] != ""
}

// ConnConfig parses databaseURL for a connection of its own, outside any
// pool (migrations, a listener, the bench's admin): the pool's settings a
// URL may carry (pool_max_conns and pgxpool's other pool_* keys) are left
// out, where pgx alone would send them to PostgreSQL, which refuses the
// connection ("unrecognized configuration parameter").
func ConnConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	return cfg.ConnConfig, nil
}

// CheckQueryExecMode refuses the query modes that send parameters without
// asking PostgreSQL for their types (default_query_exec_mode=exec or
// simple_protocol): the store's json and uuid[] parameters then fail ("invalid
// input syntax for type json", "unable to encode []uuid.UUID").
func CheckQueryExecMode(cc *pgx.ConnConfig) error {
	switch m := cc.DefaultQueryExecMode; m {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return fmt.Errorf("database url: default_query_exec_mode=%s is not supported: the server's queries need their parameter types described; "+
			"use cache_describe or describe_exec (or leave it out: cache_statement, or cache_describe behind a transaction pooler)", m)
	}
	return nil
}

// TransactionPooling adapts a pool configuration to a transaction pooler
// between the server and PostgreSQL (PgBouncer with pool_mode=transaction,
// which hands each transaction to any of its server connections): it keeps
// no state on a connection beyond one transaction.
//
//   - No prepared statements: the default cache_statement mode becomes
//     cache_describe, which sends each query unnamed (with the parameter
//     types it described once); describe_exec is kept. Named statements
//     would be missing, or "already exist", on the next server connection.
//   - No SET ROLE per connection: it would stay on the pooler's server
//     connection, for its next client, and be missing from this one's next
//     transaction. Every transaction of the store sets the role for itself
//     (SetTenant); the few statements outside one (NOTIFY, the readiness
//     probe) run as the login role.
//
// LISTEN needs a connection of its own, not pooled: see PgStore.ListenOn.
func TransactionPooling(cfg *pgxpool.Config) {
	if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	cfg.AfterConnect = nil
}

// CheckAppRole runs one empty transaction of the kind the store runs,
// which sets the application role: it fails as the store's transactions
// would when the login role may not act as holdpoint_app (or it does not
// exist yet), and also when PostgreSQL cannot be reached.
func CheckAppRole(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return db.New(tx).SetTenant(ctx, "")
	})
}

// CheckWritable is the readiness probe's look at the database: a pooled
// connection answers, and its server takes writes. A standby, or a primary
// fenced read-only during a failover, does not: the instance is not ready,
// and that connection is closed so that the pool's next one goes where the
// URL points now (with several hosts and target_session_attrs=read-write,
// the new primary).
func CheckWritable(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	var readOnly string
	err = conn.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&readOnly)
	if err == nil && readOnly == "on" {
		err = &pgconn.PgError{Code: sqlstateReadOnly, Severity: "ERROR",
			Message: "the database server takes no writes (transaction_read_only is on)"}
	}
	release(conn, err)
	return err
}
