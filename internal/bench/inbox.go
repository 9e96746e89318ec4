package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/sqlcapture"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// InboxConfig sizes the inbox-at-scale run.
type InboxConfig struct {
	DatabaseURL string
	Tenants     int // tenants to create
	PerTenant   int // interrupts per tenant
	Pending     int // of which pending, per tenant
	Queries     int // timed queries of each kind
	Out         io.Writer
}

// InboxResult is the inbox run's figures.
type InboxResult struct {
	Tenants, PerTenant, Pending int
	// Inbox is the first page of a tenant's pending inbox, Report a
	// tenant's daily report.
	Inbox, Report QueryTimes
}

// QueryTimes is the latency of a timed query.
type QueryTimes struct{ P50, P99, Max time.Duration }

// RunInbox seeds many tenants' interrupts and times the first page of a
// tenant's pending inbox and a tenant's daily report through the store, the
// way the API runs them; it prints the figures and the plans.
func RunInbox(ctx context.Context, cfg InboxConfig) (*InboxResult, error) {
	res := &InboxResult{Tenants: cfg.Tenants, PerTenant: cfg.PerTenant, Pending: cfg.Pending}
	return res, runInbox(ctx, cfg, res)
}

// timeQueries times the inbox's first page and the daily report, cfg.Queries
// times each after 20 to warm the plan cache and the buffers, and prints a
// table of their percentiles.
func timeQueries(cfg InboxConfig, inbox, report func() error, res *InboxResult) error {
	tw := tabwriter.NewWriter(cfg.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "query\tp50\tp99\tmax\t")
	for _, q := range []struct {
		name string
		fn   func() error
		res  *QueryTimes
	}{{"first page of a tenant's pending inbox (50)", inbox, &res.Inbox}, {"a tenant's daily report (1 day)", report, &res.Report}} {
		for i := 0; i < 20; i++ {
			if err := q.fn(); err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
		}
		var lat []time.Duration
		for i := 0; i < cfg.Queries; i++ {
			t0 := time.Now()
			if err := q.fn(); err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		*q.res = QueryTimes{P50: lat[len(lat)/2], P99: lat[len(lat)*99/100], Max: lat[len(lat)-1]}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", q.name, ms(q.res.P50), ms(q.res.P99), ms(q.res.Max))
	}
	return tw.Flush()
}

// runInbox seeds the tenants' interrupts, then times and explains the
// store's inbox and report queries as the application role.
func runInbox(ctx context.Context, cfg InboxConfig, res *InboxResult) error {
	admin, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	start := time.Now()
	if err := seedInbox(ctx, admin, cfg); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	fmt.Fprintf(cfg.Out, "seeded %d tenants × %d interrupts (%d pending each) in %s\n",
		cfg.Tenants, cfg.PerTenant, cfg.Pending, time.Since(start).Round(time.Second))

	capture := sqlcapture.New("ListInterrupts", "ReportInterrupts")
	pool, err := pgstore.NewAppPoolWith(ctx, cfg.DatabaseURL, func(c *pgxpool.Config) { c.ConnConfig.Tracer = capture })
	if err != nil {
		return err
	}
	defer pool.Close()
	rt := service.NewRuntime(pgstore.New(pool), service.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer func() { _ = rt.Shutdown(context.Background()) }()
	ib := inbox.New(rt)

	tenant := func() string { return fmt.Sprintf("bench-t%04d", rand.IntN(cfg.Tenants)) }
	day := time.Now().UTC().Truncate(24 * time.Hour)
	firstPage := func() error {
		items, err := ib.ListInterrupts(ctx, service.Caller{TenantID: tenant()}, service.InterruptFilter{Status: "pending", Limit: 50})
		if err == nil && len(items) == 0 {
			err = fmt.Errorf("empty inbox")
		}
		return err
	}
	report := func() error {
		_, err := ib.ReportInterrupts(ctx, service.Caller{TenantID: tenant()}, day.Add(-24*time.Hour), day, "day")
		return err
	}
	if err := timeQueries(cfg, firstPage, report, res); err != nil {
		return err
	}
	for _, name := range []string{"ListInterrupts", "ReportInterrupts"} {
		st, _ := capture.Last(name)
		plan, err := explain(ctx, pool, st.SQL, st.Args)
		if err != nil {
			return fmt.Errorf("explaining %s: %w", name, err)
		}
		fmt.Fprintf(cfg.Out, "\nplan of %s (the store's query, as holdpoint_app):\n%s\n", name, plan)
	}
	return nil
}

// explain shows the plan of a captured query, run as the application role
// with the captured tenant set.
func explain(ctx context.Context, pool *pgxpool.Pool, sql string, args []any) (string, error) {
	if sql == "" {
		return "", fmt.Errorf("query not captured")
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tenant := ""
	for _, a := range args {
		if s, ok := a.(string); ok && strings.HasPrefix(s, "bench-t") {
			tenant = s
		}
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('holdpoint.tenant_id', $1, true)", tenant); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		b.WriteString("  " + line + "\n")
	}
	return b.String(), rows.Err()
}

// seedInbox writes, as the owner, cfg.Tenants tenants with one session and
// snapshot each and cfg.PerTenant interrupts spread over the last 7 days,
// cfg.Pending of them pending and the rest decided (half approved).
func seedInbox(ctx context.Context, admin *pgxpool.Pool, cfg InboxConfig) error {
	conn, err := admin.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	steps := []struct {
		sql  string
		args []any
	}{
		// Seeding spans tenants: it runs as the tables' owner, which the
		// policies let through (as they do the system functions).
		{`INSERT INTO tenants (id, name) SELECT format('bench-t%s', lpad(t::text, 4, '0')), 'bench' FROM generate_series(0, $1::int - 1) t`, []any{cfg.Tenants}},
		{`INSERT INTO sessions (tenant_id, id, agent) SELECT id, 's', 'bench' FROM tenants WHERE id LIKE 'bench-t%'`, nil},
		{`INSERT INTO snapshots (tenant_id, id, session_id, agent, status, message_count) SELECT id, 'snap', 's', 'bench', 'completed', 0 FROM tenants WHERE id LIKE 'bench-t%'`, nil},
		{`INSERT INTO interrupts (tenant_id, id, session_id, snapshot_id, agent, tool, ref, input, status, created_at, resolution, resolved_by, resolved_at)
		  SELECT t.id, gen_random_uuid(), 's', 'snap', 'bench', CASE WHEN n % 3 = 0 THEN 'refund' ELSE 'userApproval' END, 'r' || n,
		         '{"action":"transferMoney"}',
		         CASE WHEN n < $2::int THEN 'pending' ELSE 'resolved' END,
		         now() - (n * interval '7 days' / $1::int),
		         CASE WHEN n < $2::int THEN NULL ELSE jsonb_build_object('respond', jsonb_build_object('approved', n % 2 = 0)) END,
		         CASE WHEN n < $2::int THEN NULL ELSE 'operator' END,
		         CASE WHEN n < $2::int THEN NULL ELSE now() - (n * interval '7 days' / $1::int) + (n % 600) * interval '1 second' END
		  FROM tenants t, generate_series(0, $1::int - 1) n
		  WHERE t.id LIKE 'bench-t%'`, []any{cfg.PerTenant, cfg.Pending}},
		{`ANALYZE`, nil},
	}
	for _, st := range steps {
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("%.60s...: %w", strings.TrimSpace(st.sql), err)
		}
	}
	return nil
}
