package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// turnTables are the tables statsKeeper analyzes: of the tables a turn
// writes, the one whose plans have a choice to get wrong. Every other
// lookup of a turn's write is by a primary key (sessions, snapshots,
// tool_calls, turn_jobs) or inserts only (interrupt_events), and an ANALYZE
// costs every connection its plans and cached catalog entries of the table:
// analyzing all six cost a run of 8 sessions 15 % of its cycles.
var turnTables = []string{"interrupts"}

// firstStatsCheck is the turn write count at which statsKeeper first looks
// at the turn tables' statistics; it looks again each time the count grows
// statsCheckGrowth times. A check costs an ANALYZE and then every pooled
// connection its plans of the table (WriteTurn's: about 0.6 ms each),
// about 10 ms with 8 connections; a plan that reads the tenant's every
// interrupt costs a claim about 0.65 us per interrupt, so over the first 512
// writes (256 interrupts) about 20 ms in all. Checking at the 64th write,
// and at each fourfold growth, took 10 % of the cycles of a run of 8
// sessions x 20 cycles.
const (
	firstStatsCheck  = 512
	statsCheckGrowth = 8
)

// statsKeeper keeps the planner's statistics of the turn tables when
// nothing else does. A connection plans each statement generically from its
// sixth run (PostgreSQL's plan cache) and keeps that plan until the tables
// are analyzed. Planned on tables that were never analyzed, and tiny at the
// time, WriteTurn's lookups of a claimed interrupt by its key scanned the
// tenant's whole range of interrupts_inbox_idx instead of the unique key (the
// two cost the same on a table thought empty): every turn read every
// interrupt the tenant ever had, and a run of 8 sessions fell from 1,094 to
// 530 cycles/s between its 200th and its 800th cycle. Autovacuum analyzes a
// table once it has 50 rows and at each 10 % of growth, which replans; a
// server with autovacuum off never does, and a new one not before its first
// round (a minute). So at the 512th turn write of this process, and each
// time the count has grown eight times, the keeper analyzes each turn table
// that was never analyzed, or every turn table when the server runs
// without autovacuum: a logarithmic number of ANALYZEs over a process's
// life, none once autovacuum keeps up. (From the first, on a table of
// about 256 interrupts, the claim's plan goes by key.)
//
// ANALYZE needs the tables' owner: the keeper's transaction drops the
// application role for the login role (as migrations run). A login role
// that owns no turn table (the tables migrated by another) is left to
// autovacuum, and said once in the log.
type statsKeeper struct {
	pool   *pgxpool.Pool
	writes atomic.Int64
	next   atomic.Int64 // the write count of the next check
	busy   atomic.Bool  // a check runs
	off    atomic.Bool  // the login role may not analyze the turn tables

	mu       sync.Mutex // guards closed, the WaitGroup's Add and analyses
	closed   bool
	analyses []StatsAnalysis
	wg       sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

func newStatsKeeper(pool *pgxpool.Pool) *statsKeeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &statsKeeper{pool: pool, ctx: ctx, cancel: cancel}
	k.next.Store(firstStatsCheck)
	return k
}

// wrote counts a turn write, and starts a check in the background when the
// count reaches the next one's.
func (k *statsKeeper) wrote() {
	n := k.writes.Add(1)
	if n < k.next.Load() || k.off.Load() || !k.busy.CompareAndSwap(false, true) {
		return
	}
	k.next.Store(statsCheckGrowth * n)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.wg.Go(func() {
		defer k.busy.Store(false)
		if _, err := k.analyze(k.ctx); err != nil && k.ctx.Err() == nil {
			slog.Warn("could not analyze the turn tables", "err", err)
		}
	})
}

// StatsAnalysis is one ANALYZE the statistics keeper ran: when it started,
// how long it took and the tables it analyzed. The connections' plans of
// those tables are made again after it, each at its next run.
type StatsAnalysis struct {
	At     time.Time
	Took   time.Duration
	Tables []string
}

// StatsAnalyses answers the ANALYZEs the store's statistics keeper has run,
// oldest first (a handful over a process's life: see statsKeeper). The
// bench prints them beside the slowest turns.
func (s *PgStore) StatsAnalyses() []StatsAnalysis {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return slices.Clone(s.stats.analyses)
}

// close stops a running check and waits for it.
func (k *statsKeeper) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
}

// analyze analyzes the turn tables that need it (see statsKeeper) and
// answers which it analyzed.
func (k *statsKeeper) analyze(ctx context.Context) (analyzed []string, err error) {
	var start time.Time
	var took time.Duration
	err = pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
		// The login role, for this transaction only.
		if _, err := tx.Exec(ctx, `SELECT set_config('role', 'none', true)`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
SELECT c.relname::text, pg_has_role(c.relowner, 'USAGE') AS owned
FROM pg_class c
JOIN pg_stat_user_tables t ON t.relid = c.oid
WHERE c.oid = ANY (SELECT to_regclass(n) FROM unnest($1::text[]) AS n)
  AND (current_setting('autovacuum') = 'off' OR (t.last_analyze IS NULL AND t.last_autoanalyze IS NULL))`, turnTables)
		if err != nil {
			return err
		}
		var names []string
		notOwned := 0
		for rows.Next() {
			var name string
			var owned bool
			if err := rows.Scan(&name, &owned); err != nil {
				return err
			}
			if owned {
				names = append(names, name)
			} else {
				notOwned++
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(names) == 0 && notOwned > 0 {
			k.off.Store(true)
			slog.Info("the turn tables' statistics are left to autovacuum: the database's login role does not own them")
			return nil
		}
		start = time.Now()
		for _, name := range names {
			if _, err := tx.Exec(ctx, "ANALYZE "+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("analyze %s: %w", name, err)
			}
		}
		took = time.Since(start)
		analyzed = names
		return nil
	})
	if err == nil && len(analyzed) > 0 {
		k.mu.Lock()
		k.analyses = append(k.analyses, StatsAnalysis{At: start, Took: took, Tables: analyzed})
		k.mu.Unlock()
	}
	return analyzed, err
}
