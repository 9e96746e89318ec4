package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Row is a run's figures as a row of the markdown table of its kind of run.
type Row interface {
	// MarkdownTable names the table (its heading) and its columns.
	MarkdownTable() (title string, columns []string)
	// MarkdownCells are the row's cells, one a column.
	MarkdownCells() []string
}

// markdownTitle is the first line of a results file.
const markdownTitle = "# platform bench results"

// AppendMarkdown adds r's row to the table of its kind in the markdown file
// at path: the file is created with a title line if it does not exist, and
// the table (a heading, the header and the separator) the first time a run
// of its kind is added; later rows go under the table's last row. The date
// (UTC) is the row's first cell.
func AppendMarkdown(path string, r Row) error {
	title, columns := r.MarkdownTable()
	cells := r.MarkdownCells()
	if len(cells) != len(columns) {
		return fmt.Errorf("markdown row of %q: %d cells for %d columns", title, len(cells), len(columns))
	}
	header := tableLine(append([]string{"date"}, columns...))
	row := tableLine(append([]string{time.Now().UTC().Format("2006-01-02 15:04")}, cells...))

	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = []byte(markdownTitle+"\n"), nil
	}
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	// The table: the heading, a blank line, then this header (a table of
	// the same title but other columns, from an older version, is left
	// alone).
	at := -1
	for i := 0; i+2 < len(lines); i++ {
		if lines[i] == "## "+title && lines[i+2] == header {
			at = i + 2
			break
		}
	}
	if at < 0 {
		lines = append(lines, "", "## "+title, "", header, separator(len(columns)+1), row)
	} else {
		end := at + 1
		for end < len(lines) && strings.HasPrefix(lines[end], "|") {
			end++
		}
		lines = append(lines[:end], append([]string{row}, lines[end:]...)...)
	}
	return writeFile(path, []byte(strings.Join(lines, "\n")+"\n"))
}

// tableLine is a markdown table line of cells, escaping their pipes.
func tableLine(cells []string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	return b.String()
}

func separator(n int) string { return "|" + strings.Repeat("---|", n) }

// writeFile replaces path's content in one rename, so an interrupted run
// leaves the old file whole.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }

// MarkdownTable is Row's.
func (r *Result) MarkdownTable() (string, []string) {
	return "Approval cycle", []string{"mode", "sessions", "cycles/session", "cycles/s", "turn p50", "turn p99", "turn p99.9",
		"first 10 turns p50 / max", "DB round trips/cycle", "commits/cycle", "bytes/cycle", "CPU ms/cycle", "machine CPU ms/cycle", "of ceiling", "peak RSS",
		"row bytes/cycle of a long session (first 20, last 20)"}
}

// MarkdownCells is Row's.
func (r *Result) MarkdownCells() []string {
	mode := r.Mode
	if len(r.Extras) > 0 {
		mode += " (" + strings.Join(r.Extras, ", ") + ")"
	}
	ceiling, flat, first := "-", "-", "-"
	if len(r.FirstTurns) > 0 {
		p50, max := r.FirstTurnsP50Max()
		first = ms(p50) + " / " + ms(max)
	}
	if r.Ceiling > 0 {
		ceiling = fmt.Sprintf("%.0f%% of %.0f commits/s", 100*r.Commits*r.CyclesPerSecond()/r.Ceiling, r.Ceiling)
	}
	if r.FlatFirst > 0 {
		flat = fmt.Sprintf("%.0f, %.0f (%+.1f%%)", r.FlatFirst, r.FlatLast, 100*(r.FlatLast-r.FlatFirst)/r.FlatFirst)
	}
	return []string{mode, fmt.Sprint(r.Sessions), fmt.Sprint(r.Cycles), f0(r.CyclesPerSecond()),
		ms(r.TurnP50), ms(r.TurnP99), ms(r.TurnP999), first, fmt.Sprintf("%.1f", r.RoundTrips), fmt.Sprintf("%.1f", r.Commits),
		f0(r.BytesPerCycle), fmt.Sprintf("%.2f", float64(r.CPU)/float64(time.Millisecond)),
		fmt.Sprintf("%.2f", float64(r.MachineCPU)/float64(time.Millisecond)), ceiling, mib(r.PeakRSS), flat}
}

// MarkdownTable is Row's.
func (r *IdleResult) MarkdownTable() (string, []string) {
	return "Idle sessions (paused on an approval; after GC)", []string{"sessions", "heap before", "heap after",
		"heap/session", "RSS before", "RSS after", "goroutines before", "goroutines after", "snapshot cache bound"}
}

// MarkdownCells is Row's.
func (r *IdleResult) MarkdownCells() []string {
	return []string{fmt.Sprint(r.Sessions), mib(r.Before.Heap), mib(r.After.Heap), f0(r.HeapPerSession()) + " B",
		mib(r.Before.RSS), mib(r.After.RSS), fmt.Sprint(r.Before.Goroutines), fmt.Sprint(r.After.Goroutines),
		snapshotCacheBound()}
}

// MarkdownTable is Row's.
func (r *StreamsResult) MarkdownTable() (string, []string) {
	return "Event streams (GET /api/v1/events over loopback, client and server in one process; after GC)",
		[]string{"streams", "heap/stream", "RSS/stream", "goroutines/stream", "heap open", "RSS open",
			"got the event", "latency p50", "latency max", "goroutines start → end"}
}

// MarkdownCells is Row's.
func (r *StreamsResult) MarkdownCells() []string {
	return []string{fmt.Sprint(r.Streams), f0(perUnit(r.Before.Heap, r.Open.Heap, r.Streams)) + " B",
		f0(perUnit(r.Before.RSS, r.Open.RSS, r.Streams)) + " B",
		fmt.Sprintf("%.1f", perUnit(r.Before.Goroutines, r.Open.Goroutines, r.Streams)),
		mib(r.Open.Heap), mib(r.Open.RSS), fmt.Sprintf("%d of %d within %s", r.Received, r.Streams, r.Wait),
		ms(r.LatencyP50), ms(r.LatencyMax), fmt.Sprintf("%d → %d", r.Before.Goroutines, r.GoroutinesAfter)}
}

// MarkdownTable is Row's.
func (r *SoakResult) MarkdownTable() (string, []string) {
	return "Soak (first interval → last interval)", []string{"mode", "sessions", "duration", "rate of peak", "peak cycles/s",
		"cycles/s achieved", "turn p99", "RSS", "heap in use", "goroutines"}
}

// MarkdownCells is Row's.
func (r *SoakResult) MarkdownCells() []string {
	first, last := r.First(), r.Last()
	return []string{r.Mode, fmt.Sprint(r.Sessions), r.Duration.String(), fmt.Sprintf("%.0f%%", 100*r.Rate), f0(r.Peak),
		fmt.Sprintf("%.0f (target %.0f)", r.PerSecond(), r.Target),
		ms(first.P99) + " → " + ms(last.P99), mib(first.RSS) + " → " + mib(last.RSS),
		mib(first.Heap) + " → " + mib(last.Heap), fmt.Sprintf("%d → %d", first.Goroutines, last.Goroutines)}
}

// MarkdownTable is Row's.
func (r *InboxResult) MarkdownTable() (string, []string) {
	return "Inbox at scale", []string{"tenants", "interrupts/tenant", "pending/tenant",
		"pending inbox page (50) p50", "p99", "max", "daily report p50", "p99", "max"}
}

// MarkdownCells is Row's.
func (r *InboxResult) MarkdownCells() []string {
	return []string{fmt.Sprint(r.Tenants), fmt.Sprint(r.PerTenant), fmt.Sprint(r.Pending),
		ms(r.Inbox.P50), ms(r.Inbox.P99), ms(r.Inbox.Max), ms(r.Report.P50), ms(r.Report.P99), ms(r.Report.Max)}
}
