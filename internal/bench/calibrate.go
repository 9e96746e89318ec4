package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CalibrationRun is the commit rate of one client count.
type CalibrationRun struct {
	Clients   int
	PerSecond float64
}

// calibrationTime is how long each client count commits (shorter in
// tests).
var calibrationTime = 3 * time.Second

// calibrationClients are the client counts measured, the last being the
// ceiling. Tests use fewer, so that a suite running many test databases
// at once stays under the server's max_connections.
var calibrationClients = []int{1, 32}

// Calibrate measures the server's commit ceiling, the way pgbench's
// simplest write test does: clients each commit one-row inserts, one
// transaction each, as fast as the server takes them, for a few seconds;
// first 1 client, then 32. The last run is the ceiling a benchmark's
// commits are compared with. It prints the rates to out (if not nil) and
// leaves nothing behind.
func Calibrate(ctx context.Context, admin *pgxpool.Pool, out io.Writer) ([]CalibrationRun, error) {
	// Logged like the application's tables: each commit waits for the WAL
	// flush as theirs do.
	if _, err := admin.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_calibrate (id bigserial PRIMARY KEY, v integer NOT NULL)`); err != nil {
		return nil, err
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_calibrate`) }()
	var runs []CalibrationRun
	for _, clients := range calibrationClients {
		cfg := admin.Config().Copy()
		cfg.MaxConns = int32(clients)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		var n atomic.Int64
		var failed atomic.Pointer[error]
		var wg sync.WaitGroup
		deadline := time.Now().Add(calibrationTime)
		start := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if _, err := pool.Exec(ctx, `INSERT INTO bench_calibrate (v) VALUES (1)`); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		pool.Close()
		if err := failed.Load(); err != nil {
			return nil, *err
		}
		runs = append(runs, CalibrationRun{Clients: clients, PerSecond: float64(n.Load()) / elapsed.Seconds()})
	}
	if out != nil {
		fmt.Fprintf(out, "commit ceiling (one-row insert transactions, %s each): %d client %.0f/s, %d clients %.0f/s\n",
			calibrationTime, runs[0].Clients, runs[0].PerSecond, runs[1].Clients, runs[1].PerSecond)
	}
	return runs, nil
}

// assignedXids is the next transaction id the server will assign: its
// growth over a run counts the writing transactions committed (or rolled
// back) in it, by every process on the server.
func assignedXids(ctx context.Context, admin *pgxpool.Pool) (int64, error) {
	var n int64
	err := admin.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n)
	return n, err
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the CPU time every process on the machine has used
// (/proc/stat: all but idle and iowait); 0 where there is no /proc.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
