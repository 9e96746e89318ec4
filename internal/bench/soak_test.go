package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestRunSoak runs a soak of a few seconds, a line a second, and checks the
// lines are printed and their figures measured (not their values: they
// are the machine's).
func TestRunSoak(t *testing.T) {
	var out strings.Builder
	res, err := RunSoak(context.Background(), SoakConfig{
		DatabaseURL: testdb.URL(t), Sessions: 4, Duration: 3 * time.Second, Rate: 0.5,
		PeakTime: time.Second, Interval: time.Second, Out: &out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if res.Peak <= 0 || res.Target <= 0 || res.PerSecond() <= 0 {
		t.Errorf("peak %.1f, target %.1f, achieved %.1f cycles/s", res.Peak, res.Target, res.PerSecond())
	}
	if len(res.Intervals) < 2 {
		t.Fatalf("%d intervals, want a line a second", len(res.Intervals))
	}
	// An interval's cycles are a value: a machine that stalls for a second
	// leaves one with none. Its footprint is always measured.
	cycles := 0
	for _, iv := range res.Intervals {
		cycles += iv.Cycles
		if iv.P99 < iv.P50 || (iv.Cycles > 0 && iv.P50 <= 0) || iv.RSS == 0 || iv.Heap == 0 || iv.Goroutines == 0 {
			t.Errorf("unmeasured interval %+v", iv)
		}
	}
	if cycles == 0 {
		t.Errorf("no interval has a cycle: %+v", res.Intervals)
	}
	lines := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 11 && strings.HasSuffix(f[0], "s") && f[3] == "ms" && f[5] == "ms" {
			lines++ // 1s 572 0.73 ms 3.68 ms 72.3 MiB 35.5 MiB 17
		}
	}
	if lines != len(res.Intervals) {
		t.Errorf("%d interval lines printed, want %d:\n%s", lines, len(res.Intervals), out.String())
	}
	for _, want := range []string{"soak: peak", "elapsed", "cycles/s", "turn p99", "RSS", "heap in use", "goroutines", "first interval vs last"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
