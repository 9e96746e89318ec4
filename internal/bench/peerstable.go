package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// ComparisonRow is one line of the comparison table: a runtime's figures
// for a workload, medians over the rounds that measured.
type ComparisonRow struct {
	Workload Workload
	Runtime  string
	Ours     bool
	// Measured is how many of Rounds rounds gave figures; Failed is why
	// the last one that did not failed.
	Measured, Rounds int
	Failed           string
	CyclesPerSec     float64
	// BytesPerCycle is the store's growth per cycle (-1: not reported).
	BytesPerCycle float64
	// TurnP50, TurnP99 are the platform's (0 for a peer).
	TurnP50, TurnP99 time.Duration
	// Ratio is the platform's cycles/s over this runtime's (0: none).
	Ratio float64
}

// Rows turns the runs into the table's rows, the platform's first in
// each workload.
func (c *Comparison) Rows() []ComparisonRow {
	var rows []ComparisonRow
	for wi, w := range c.Workloads {
		var ours float64
		for _, rr := range c.Runtimes[wi] {
			row := rr.row(w, c.Rounds)
			if rr.Ours {
				ours = row.CyclesPerSec
			} else if ours > 0 && row.CyclesPerSec > 0 {
				row.Ratio = ours / row.CyclesPerSec
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// row is rr's medians.
func (rr *runtimeRuns) row(w Workload, rounds int) ComparisonRow {
	row := ComparisonRow{Workload: w, Runtime: rr.Name, Ours: rr.Ours, Rounds: rounds, BytesPerCycle: -1}
	var cps, bytes []float64
	for _, r := range rr.Runs {
		if r.Failed != "" {
			row.Failed = r.Failed
			continue
		}
		cps = append(cps, r.CyclesPerSec)
		if r.HasBytes {
			bytes = append(bytes, float64(r.Bytes)/float64(w.Sessions*w.Cycles))
		}
	}
	row.Measured = len(cps)
	row.CyclesPerSec = median(cps)
	if len(bytes) > 0 {
		row.BytesPerCycle = median(bytes)
	}
	row.TurnP50, row.TurnP99 = medianDuration(rr.TurnP50), medianDuration(rr.TurnP99)
	return row
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// comparisonColumns are the table's columns, on the terminal and in the
// markdown file.
var comparisonColumns = []string{"workload", "runtime", "cycles/s (median)", "rounds", "turn p50", "turn p99", "store bytes/cycle", "ours/peer"}

// Cells are the row's cells, one a column of comparisonColumns.
func (r ComparisonRow) Cells() []string {
	cps, rounds := "-", fmt.Sprintf("%d/%d", r.Measured, r.Rounds)
	switch {
	case r.Measured > 0:
		cps = rate(r.CyclesPerSec)
	case r.Failed != "":
		cps = "failed: " + r.Failed
	}
	if r.Measured > 0 && r.Measured < r.Rounds && r.Failed != "" {
		rounds += " (" + r.Failed + ")"
	}
	p50, p99, bytes, ratio := "-", "-", "-", "-"
	if r.Ours && r.Measured > 0 {
		p50, p99 = ms(r.TurnP50), ms(r.TurnP99)
	}
	if r.BytesPerCycle >= 0 {
		bytes = fmt.Sprintf("%.0f", r.BytesPerCycle)
	}
	if r.Ratio > 0 {
		ratio = fmt.Sprintf("%.2fx", r.Ratio)
	}
	return []string{r.Workload.String(), r.Runtime, cps, rounds, p50, p99, bytes, ratio}
}

// rate is a cycles/s figure: a decimal below 100, where the peers are.
func rate(x float64) string {
	if x < 100 {
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.0f", x)
}

// PrintComparison writes the comparison table.
func PrintComparison(w io.Writer, c *Comparison) {
	fmt.Fprintf(w, "the approval cycle beside the peers (%d rounds, alternated; medians; store bytes: this platform's tables and indexes, a file store's directory, LangGraph's checkpoint tables):\n", c.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, col := range comparisonColumns {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, col)
	}
	fmt.Fprintln(tw)
	for _, r := range c.Rows() {
		for i, cell := range r.Cells() {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// MarkdownTable names the comparison's table in a results file.
func (r ComparisonRow) MarkdownTable() (string, []string) {
	return "Approval cycle beside the peers (scripts/peers.sh, platform bench --peers)", comparisonColumns
}

// MarkdownCells are the row's cells.
func (r ComparisonRow) MarkdownCells() []string { return r.Cells() }
