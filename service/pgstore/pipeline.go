package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// pipeline is a db.DBTX that sends statements together to save round
// trips. Exec only queues a statement; Query sends everything queued plus
// the query in one batch and returns the query's rows; flush sends what is
// left. Each batch is one implicit transaction (statements up to the
// protocol's Sync commit or fail together), and starts by scoping that
// transaction to the tenant, so row-level security applies to every
// statement.
//
// Exec's command tag is empty, except for a statement whose rows affected
// its caller reads (see Exec). A caller that reads results that depend on
// each other within one transaction uses inTx.
type pipeline struct {
	conn *pgxpool.Conn
	// tenant scopes every batch ("": no tenant, for the system functions,
	// which see across tenants as holdpoint_system).
	tenant string
	batch  *pgx.Batch
}

// begin starts a new batch with the statement that scopes it to the
// tenant, queued through db's SetTenant.
func (p *pipeline) begin(ctx context.Context) {
	p.batch = &pgx.Batch{}
	_ = db.New(queuer{p.batch}).SetTenant(ctx, p.tenant)
}

// queuer queues the statements sqlc methods execute.
type queuer struct{ b *pgx.Batch }

func (q queuer) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (q queuer) Query(context.Context, string, ...any) (pgx.Rows, error) {
	panic("queuer: queries go through the pipeline")
}

func (q queuer) QueryRow(context.Context, string, ...any) pgx.Row {
	panic("queuer: queries go through the pipeline")
}

// Exec queues a statement. A statement whose row count its caller reads
// (sqlc's :execrows) cannot wait for the end: what is queued goes out now,
// with it, and its real command tag is returned.
func (p *pipeline) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.batch.Queue(sql, args...)
	if !readsRowCount(sql) {
		return pgconn.CommandTag{}, nil
	}
	n := p.batch.Len()
	br := p.conn.SendBatch(ctx, p.batch)
	p.begin(ctx)
	var tag pgconn.CommandTag
	for i := 0; i < n; i++ {
		t, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return pgconn.CommandTag{}, err
		}
		tag = t
	}
	return tag, br.Close()
}

// readsRowCount reports whether a sqlc statement's caller reads its rows
// affected: sqlc starts every statement with "-- name: X :kind".
func readsRowCount(sql string) bool {
	first, _, _ := strings.Cut(sql, "\n")
	return strings.HasSuffix(strings.TrimSpace(first), ":execrows")
}

// Query sends the queued statements and the query in one batch.
func (p *pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p.batch.Queue(sql, args...)
	n := p.batch.Len()
	br := p.conn.SendBatch(ctx, p.batch)
	p.begin(ctx)
	for i := 0; i < n-1; i++ {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow is Query for one row.
func (p *pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return &firstRow{rows: rows, err: err}
}

// flush sends what is queued (beyond the tenant scope) and reports the
// first error.
func (p *pipeline) flush(ctx context.Context) error {
	if p.batch.Len() <= 1 {
		return nil
	}
	err := p.conn.SendBatch(ctx, p.batch).Close()
	p.begin(ctx)
	return err
}

// batchRows closes its batch with the rows, so the connection is free again.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return nil
}

// firstRow is the pgx.Row of a pipeline query.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r *firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// piped runs fn over a pipeline scoped to tenantID: each query costs one
// round trip, and the statements fn only executes go out together at the
// end, as one transaction.
func (s *PgStore) piped(ctx context.Context, tenantID string, fn func(q *db.Queries) error) (err error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer func() { release(conn, err) }()
	p := &pipeline{conn: conn, tenant: tenantID}
	p.begin(ctx)
	if err := fn(db.New(p)); err != nil {
		return translate(err)
	}
	return translate(p.flush(ctx))
}

// pipedQuery runs one query with piped and answers what it returns.
func pipedQuery[T any](ctx context.Context, s *PgStore, tenantID string, query func(q *db.Queries) (T, error)) (T, error) {
	var v T
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		v, err = query(q)
		return err
	})
	return v, err
}

// pipedRows runs one query with piped and answers its rows, each made a
// T by conv (an empty slice, not nil, when there are none).
func pipedRows[R, T any](ctx context.Context, s *PgStore, tenantID string, query func(q *db.Queries) ([]R, error), conv func(R) T) ([]T, error) {
	rows, err := pipedQuery(ctx, s, tenantID, query)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		out = append(out, conv(r))
	}
	return out, nil
}
