package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCPUSplit runs a long session of a cycle that does nothing and checks
// the split's shape; the costs are the machine's.
func TestCPUSplit(t *testing.T) {
	var n int
	cycle := func(context.Context, string, int) (time.Duration, time.Duration, error) { n++; return 0, 0, nil }
	s, err := cpuSplit(context.Background(), cycle, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n != 10 || s.Cycles != 10 || s.N != 3 || s.First.Wall < 0 || s.Last.CPU < 0 {
		t.Errorf("%d cycles run, split %+v", n, s)
	}
	var out strings.Builder
	s.print(&out)
	for _, want := range []string{"one long session (10 cycles): first 3 ", ", last 3 ", "machine ", "wall "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q: %s", want, out.String())
		}
	}
	for _, bad := range []int{0, 6} {
		if _, err := cpuSplit(context.Background(), cycle, 10, bad); err == nil {
			t.Errorf("cpuSplit of 10 cycles with n %d: no error", bad)
		}
	}
}

// TestFirstTurnsApart checks the first turns (warm-up's first) are set
// apart from the others, which have their own p50 and max.
func TestFirstTurnsApart(t *testing.T) {
	start := time.Now()
	var turns []timedTurn
	for i := 0; i < 20; i++ { // ended in order; the run's first 4 are slow
		d := time.Millisecond
		if i < 4 {
			d = 50 * time.Millisecond
		}
		turns = append(turns, timedTurn{end: start.Add(time.Duration(i) * time.Second), d: d})
	}
	turns[19].d = 9 * time.Millisecond
	warmup := []time.Duration{100 * time.Millisecond, 1, 1, 1, 1, 1}
	var res Result
	res.setLatencies(turns, warmup)
	if len(res.FirstTurns) != firstTurns || res.FirstTurns[0] != 100*time.Millisecond || res.FirstTurns[9] != 50*time.Millisecond {
		t.Errorf("first turns %v", res.FirstTurns)
	}
	if res.RestP50 != time.Millisecond || res.RestMax != 9*time.Millisecond {
		t.Errorf("the others: p50 %s, max %s", res.RestP50, res.RestMax)
	}
	if cells := strings.Join(res.MarkdownCells(), "|"); !strings.Contains(cells, "|50.00 ms / 100.00 ms|") {
		t.Errorf("markdown cells without the first turns' p50 / max: %s", cells)
	}
	var out strings.Builder
	res.Sessions, res.Cycles, res.Elapsed = 1, 10, time.Second
	Print(&out, &res)
	if !strings.Contains(out.String(), "max 100.00 ms; the other turns: p50 1.00 ms, max 9.00 ms\n") {
		t.Errorf("output:\n%s", out.String())
	}
}
