package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppendMarkdown checks a results file gets its title and each table's
// header once, and rows go under their own table.
func TestAppendMarkdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench-results.md")
	cycle := &Result{Mode: "inprocess", Sessions: 8, Cycles: 20, Elapsed: time.Second, TurnP50: time.Millisecond}
	idle := &IdleResult{Sessions: 1000, Before: Footprint{Heap: 1 << 20}, After: Footprint{Heap: 2 << 20}}
	for _, r := range []Row{cycle, idle, &Result{Mode: "http", Sessions: 32, Cycles: 20, Elapsed: time.Second, Extras: []string{"webhook"}}} {
		if err := AppendMarkdown(path, r); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	t.Log("\n" + text)
	cycleTitle, cycleCols := cycle.MarkdownTable()
	idleTitle, _ := idle.MarkdownTable()
	for _, want := range []string{markdownTitle, "## " + cycleTitle, "## " + idleTitle, "| " + cycleCols[0] + " |"} {
		if n := strings.Count(text, want); n != 1 {
			t.Errorf("%q %d times, want once:\n%s", want, n, text)
		}
	}
	// The two cycle rows are under the cycle table's header, before the
	// idle table; the idle row after its heading.
	lines := strings.Split(text, "\n")
	idx := func(prefix string) int {
		for i, l := range lines {
			if strings.Contains(l, prefix) {
				return i
			}
		}
		t.Fatalf("no line with %q:\n%s", prefix, text)
		return -1
	}
	header, inproc, http, idleHead, idleRow := idx("| date | mode |"), idx("| inprocess |"), idx("| http (webhook) |"), idx("## "+idleTitle), idx("| 1000 |")
	if !(header < inproc && inproc == header+2 && http == inproc+1 && http < idleHead && idleHead < idleRow) {
		t.Errorf("rows out of place (header %d, rows %d %d, idle heading %d row %d):\n%s", header, inproc, http, idleHead, idleRow, text)
	}
	// Every line of a table has its header's number of cells.
	cells := 0
	for _, l := range lines {
		switch {
		case !strings.HasPrefix(l, "|"):
			cells = 0
		case cells == 0:
			cells = strings.Count(l, "|")
		case strings.Count(l, "|") != cells:
			t.Errorf("a line with other cells than its header's: %s", l)
		}
	}
}
