// Package sqlcapture records the SQL and arguments of the statements a pgx
// connection sends whose sqlc name (the "-- name: X" line sqlc puts first)
// is one of those wanted, so that a test or the benchmark can explain the
// plan of the statement the store really ran.
package sqlcapture

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Statement is a captured statement.
type Statement struct {
	SQL  string
	Args []any
}

// Tracer is a pgx.QueryTracer and pgx.BatchTracer (set it as
// ConnConfig.Tracer) that keeps the last statement of each wanted name.
type Tracer struct {
	names []string
	mu    sync.Mutex
	last  map[string]Statement
}

// New returns a Tracer keeping the statements of these sqlc names.
func New(names ...string) *Tracer {
	return &Tracer{names: names, last: map[string]Statement{}}
}

// Last returns the newest statement of the name, if one was sent.
func (t *Tracer) Last(name string) (Statement, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.last[name]
	return st, ok
}

func (t *Tracer) record(sql string, args []any) {
	for _, name := range t.names {
		if strings.HasPrefix(sql, "-- name: "+name+" ") {
			t.mu.Lock()
			t.last[name] = Statement{SQL: sql, Args: append([]any(nil), args...)}
			t.mu.Unlock()
		}
	}
}

// TraceQueryStart records a query sent on its own.
func (t *Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.record(d.SQL, d.Args)
	return ctx
}

// TraceQueryEnd does nothing.
func (t *Tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing.
func (t *Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records a query of a batch.
func (t *Tracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.record(d.SQL, d.Args)
}

// TraceBatchEnd does nothing.
func (t *Tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
