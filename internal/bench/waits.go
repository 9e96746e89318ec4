package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// waits measures, while a run goes, where a turn can wait other than in
// its own work: for the CPU (the kernel's run queue, per PostgreSQL backend
// and for this process), for the garbage collector's pauses, for a pooled
// connection, and inside PostgreSQL (the wait events of the run's backends,
// sampled). It is what `platform bench --waits` prints, to explain the
// tail of the turn latencies.
type waits struct {
	admin *pgxpool.Pool
	pool  *pgxpool.Pool
	db    string

	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	samples int
	active  int            // backend samples that were active (running or waiting)
	events  map[string]int // wait_event_type:wait_event -> backend samples

	pids        map[int]bool // the run's backends seen
	runDelay0   int64        // this process's run-queue delay at start (ns)
	pgDelay0    map[int]int64
	gcPause0    float64
	acquire0    time.Duration
	emptyAcq0   int64
	acquireCnt0 int64
}

// startWaits begins sampling every 2 ms until finish.
func startWaits(ctx context.Context, admin, pool *pgxpool.Pool) (*waits, error) {
	w := &waits{admin: admin, pool: pool, stop: make(chan struct{}), done: make(chan struct{}),
		events: map[string]int{}, pids: map[int]bool{}, pgDelay0: map[int]int64{}}
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&w.db); err != nil {
		return nil, err
	}
	// The pool's connections are open after the warm-up; their backends'
	// run-queue delays start from here.
	if err := w.sample(ctx, true); err != nil {
		return nil, err
	}
	w.runDelay0 = runDelay("self")
	w.gcPause0 = gcPauseSeconds()
	st := pool.Stat()
	w.acquire0, w.emptyAcq0, w.acquireCnt0 = st.AcquireDuration(), st.EmptyAcquireCount(), st.AcquireCount()
	go func() {
		defer close(w.done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				_ = w.sample(ctx, false)
			}
		}
	}()
	return w, nil
}

// sample reads the run's backends once: their wait events, and at first
// sight their run-queue delay so far.
func (w *waits) sample(ctx context.Context, first bool) error {
	rows, err := w.admin.Query(ctx, `SELECT pid, state, coalesce(wait_event_type, ''), coalesce(wait_event, '')
		FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`, w.db)
	if err != nil {
		return err
	}
	defer rows.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !first {
		w.samples++
	}
	for rows.Next() {
		var pid int
		var state, typ, ev string
		if err := rows.Scan(&pid, &state, &typ, &ev); err != nil {
			return err
		}
		if !w.pids[pid] {
			w.pids[pid] = true
			w.pgDelay0[pid] = runDelay(strconv.Itoa(pid))
		}
		if first || state != "active" {
			continue
		}
		w.active++
		key := "CPU (no wait event)"
		if typ != "" {
			key = typ + ":" + ev
		}
		w.events[key]++
	}
	return rows.Err()
}

// finish stops sampling and prints the figures per cycle.
func (w *waits) finish(out io.Writer, cycles int, elapsed time.Duration) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	perCycle := func(ns int64) string {
		return fmt.Sprintf("%.3f ms", float64(ns)/float64(cycles)/1e6)
	}
	var pgDelay int64
	for pid, before := range w.pgDelay0 {
		if after := runDelay(strconv.Itoa(pid)); after >= before {
			pgDelay += after - before
		}
	}
	self := runDelay("self") - w.runDelay0
	gc := gcPauseSeconds() - w.gcPause0
	st := w.pool.Stat()
	acquired := st.AcquireCount() - w.acquireCnt0
	fmt.Fprintf(out, "waits per cycle: run queue (waiting for a CPU) PostgreSQL backends %s, this process %s; GC stop-the-world pauses %s; "+
		"pool acquire %s (%d of %d acquires waited for a connection)\n",
		perCycle(pgDelay), perCycle(self), perCycle(int64(gc*1e9)),
		perCycle(int64(st.AcquireDuration()-w.acquire0)), st.EmptyAcquireCount()-w.emptyAcq0, acquired)
	if w.active == 0 {
		return
	}
	type kv struct {
		k string
		n int
	}
	var evs []kv
	for k, n := range w.events {
		evs = append(evs, kv{k, n})
	}
	slices.SortFunc(evs, func(a, b kv) int { return cmp.Compare(b.n, a.n) })
	var parts []string
	for i, e := range evs {
		if i == 8 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", e.k, 100*float64(e.n)/float64(w.active)))
	}
	fmt.Fprintf(out, "PostgreSQL active backends (%d samples over %.1f s, %.1f active on average): %s\n",
		w.samples, elapsed.Seconds(), float64(w.active)/float64(max(1, w.samples)), strings.Join(parts, ", "))
}

// runDelay is the time a process's threads spent runnable but waiting for
// a CPU (ns; /proc/<pid>/schedstat, second field, summed over threads for
// "self"). 0 when unreadable.
func runDelay(pid string) int64 {
	if pid == "self" {
		var total int64
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 0
		}
		for _, e := range entries {
			total += schedDelay("/proc/self/task/" + e.Name() + "/schedstat")
		}
		return total
	}
	return schedDelay("/proc/" + pid + "/schedstat")
}

func schedDelay(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(fields[1], 10, 64)
	return n
}

// gcPauseSeconds is the total of the garbage collector's stop-the-world
// pauses so far, from the runtime's pause histogram (bucket midpoints).
func gcPauseSeconds() float64 {
	s := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s[0].Value.Float64Histogram()
	var total float64
	for i, c := range h.Counts {
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		if lo < 0 || hi > 1e9 {
			continue
		}
		total += float64(c) * (lo + hi) / 2
	}
	return total
}
