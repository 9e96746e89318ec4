package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/pgstore"
)

// TestSlowestTurns: the slowest turns come slowest first, each with when it
// started from the run's start and which turn of which cycle it was; the
// keeper's ANALYZEs that ended before the run are left out.
func TestSlowestTurns(t *testing.T) {
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	turns := []timedTurn{
		{end: start.Add(10 * time.Millisecond), d: 5 * time.Millisecond, session: 0, cycle: 0},
		{end: start.Add(400 * time.Millisecond), d: 30 * time.Millisecond, session: 3, cycle: 64, resume: true},
		{end: start.Add(390 * time.Millisecond), d: 20 * time.Millisecond, session: 1, cycle: 63},
		{end: start.Add(900 * time.Millisecond), d: 2 * time.Millisecond, session: 2, cycle: 99, resume: true},
	}
	analyses := []pgstore.StatsAnalysis{
		{At: start.Add(-time.Second), Took: time.Millisecond, Tables: []string{"interrupts"}},
		{At: start.Add(360 * time.Millisecond), Took: 9 * time.Millisecond, Tables: []string{"interrupts"}},
	}
	var res Result
	res.setSlowest(turns, start, 2, analyses)
	want := []SlowTurn{
		{Start: 370 * time.Millisecond, Took: 30 * time.Millisecond, Session: 3, Cycle: 64, Resume: true},
		{Start: 370 * time.Millisecond, Took: 20 * time.Millisecond, Session: 1, Cycle: 63},
	}
	if len(res.Slowest) != len(want) || res.Slowest[0] != want[0] || res.Slowest[1] != want[1] {
		t.Fatalf("slowest %+v; want %+v", res.Slowest, want)
	}
	if len(res.Analyses) != 1 || res.Analyses[0].Start != 360*time.Millisecond || res.Analyses[0].Took != 9*time.Millisecond {
		t.Fatalf("analyses %+v; want the one at +360 ms", res.Analyses)
	}
	var out bytes.Buffer
	printSlowest(&out, &res)
	for _, s := range []string{"the 2 slowest turns", "+0.370 s  30.00 ms  session 3 cycle 65, resume turn",
		"+0.370 s  20.00 ms  session 1 cycle 64, first turn", "ANALYZE interrupts: +0.360 s, took 9.00 ms"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("printed %q; want it to hold %q", out.String(), s)
		}
	}
	res.setSlowest(turns, start, 1, nil)
	out.Reset()
	printSlowest(&out, &res)
	if !strings.Contains(out.String(), "ran no ANALYZE during the run") {
		t.Errorf("printed %q; want no ANALYZE said", out.String())
	}
}
