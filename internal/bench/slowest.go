package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/service/pgstore"
)

// SlowTurn is one of a run's slowest turns (Config.Slowest).
type SlowTurn struct {
	Start   time.Duration // from the run's start
	Took    time.Duration
	Session int
	Cycle   int
	Resume  bool
}

// KeeperAnalysis is an ANALYZE of the store's statistics keeper during the
// run, from the run's start.
type KeeperAnalysis struct {
	Start, Took time.Duration
	Tables      []string
}

// setSlowest keeps the n slowest of turns, slowest first, and the keeper's
// ANALYZEs that ended after the run started.
func (res *Result) setSlowest(turns []timedTurn, start time.Time, n int, analyses []pgstore.StatsAnalysis) {
	sorted := slices.Clone(turns)
	slices.SortStableFunc(sorted, func(a, b timedTurn) int { return cmp.Compare(b.d, a.d) })
	res.Slowest = nil
	for _, t := range sorted[:min(n, len(sorted))] {
		res.Slowest = append(res.Slowest, SlowTurn{Start: t.end.Add(-t.d).Sub(start), Took: t.d,
			Session: t.session, Cycle: t.cycle, Resume: t.resume})
	}
	res.Analyses = nil
	for _, a := range analyses {
		if a.At.Add(a.Took).After(start) {
			res.Analyses = append(res.Analyses, KeeperAnalysis{Start: a.At.Sub(start), Took: a.Took, Tables: a.Tables})
		}
	}
}

// printSlowest writes the slowest turns and the keeper's ANALYZEs.
func printSlowest(w io.Writer, r *Result) {
	if len(r.Slowest) == 0 {
		return
	}
	fmt.Fprintf(w, "the %d slowest turns (started at, from the run's start):\n", len(r.Slowest))
	for _, t := range r.Slowest {
		turn := "first"
		if t.Resume {
			turn = "resume"
		}
		fmt.Fprintf(w, "  %+8.3f s  %s  session %d cycle %d, %s turn\n", t.Start.Seconds(), ms(t.Took), t.Session, t.Cycle+1, turn)
	}
	if len(r.Analyses) == 0 {
		fmt.Fprintln(w, "the statistics keeper ran no ANALYZE during the run")
	}
	for _, a := range r.Analyses {
		fmt.Fprintf(w, "the statistics keeper's ANALYZE %s: %+.3f s, took %s (each connection then plans its statements of the table again)\n",
			strings.Join(a.Tables, ", "), a.Start.Seconds(), ms(a.Took))
	}
}
