package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

func TestParsePeerLine(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      PeerResult
	}{
		{"genkit js", `{"peer":"genkit-js-1.42+file-store","sessions":8,"cycles":160,"seconds":1.6,"cyclesPerSec":100.5,"storeBytes":123456}`,
			PeerResult{CyclesPerSec: 100.5, Bytes: 123456, HasBytes: true}},
		{"langgraph after noise", "Warning: something\n" + `{"peer":"langgraph-js+postgres-saver","cyclesPerSec":30,"dbBytesGrowth":98304}` + "\n\n",
			PeerResult{CyclesPerSec: 30, Bytes: 98304, HasBytes: true}},
		{"bytes, last line wins", `{"cyclesPerSec":1}` + "\n" + `{"cyclesPerSec":2,"bytes":7}`,
			PeerResult{CyclesPerSec: 2, Bytes: 7, HasBytes: true}},
		{"no bytes", `{"cyclesPerSec":3}`, PeerResult{CyclesPerSec: 3}},
	} {
		got, err := ParsePeerLine([]byte(c.out))
		if err != nil || got != c.want {
			t.Errorf("%s: ParsePeerLine = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "done\n", `{"cyclesPerSec":`, `{"cyclesPerSec":0}`, `{"seconds":1}`, `{"cyclesPerSec":"fast"}`} {
		if got, err := ParsePeerLine([]byte(bad)); err == nil {
			t.Errorf("ParsePeerLine(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestParseWorkloads(t *testing.T) {
	ws, err := ParseWorkloads("8x20, 1x60")
	if err != nil || len(ws) != 2 || ws[0] != (Workload{8, 20}) || ws[1] != (Workload{1, 60}) {
		t.Errorf("ParseWorkloads = %v, %v", ws, err)
	}
	for _, bad := range []string{"", "8", "8x", "x20", "0x20", "8x-1", "8x20,", "eightx20"} {
		if ws, err := ParseWorkloads(bad); err == nil {
			t.Errorf("ParseWorkloads(%q) = %v, want an error", bad, ws)
		}
	}
}

// TestComparisonRows checks the medians, the ratios and the cells of
// runtimes that measured in every round, in some, and in none.
func TestComparisonRows(t *testing.T) {
	w := Workload{2, 5}
	c := &Comparison{Workloads: []Workload{w}, Rounds: 3, Runtimes: [][]*runtimeRuns{{
		{Name: OursName, Ours: true, Runs: []PeerResult{{CyclesPerSec: 300, Bytes: 1000, HasBytes: true}, {CyclesPerSec: 100, Bytes: 3000, HasBytes: true}, {CyclesPerSec: 200, Bytes: 2000, HasBytes: true}},
			TurnP50: []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}, TurnP99: []time.Duration{9 * time.Millisecond, 8 * time.Millisecond, 7 * time.Millisecond}},
		{Name: "steady", Runs: []PeerResult{{CyclesPerSec: 40}, {CyclesPerSec: 50}, {CyclesPerSec: 60}}},
		{Name: "flaky", Runs: []PeerResult{{CyclesPerSec: 80, Bytes: 500, HasBytes: true}, {Failed: "timed out after 1s"}, {CyclesPerSec: 120, Bytes: 700, HasBytes: true}}},
		{Name: "broken", Runs: []PeerResult{{Failed: "exit status 1"}, {Failed: "exit status 1"}, {Failed: "exit status 2: boom"}}},
	}}}
	want := [][]string{
		{"2x5", OursName, "200", "3/3", "2.00 ms", "8.00 ms", "200", "-"},
		{"2x5", "steady", "50.0", "3/3", "-", "-", "-", "4.00x"},
		{"2x5", "flaky", "100", "2/3 (timed out after 1s)", "-", "-", "60", "2.00x"},
		{"2x5", "broken", "failed: exit status 2: boom", "0/3", "-", "-", "-", "-"},
	}
	rows := c.Rows()
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if got := strings.Join(r.Cells(), " | "); got != strings.Join(want[i], " | ") {
			t.Errorf("row %d:\n got %s\nwant %s", i, got, strings.Join(want[i], " | "))
		}
		if title, cols := r.MarkdownTable(); title == "" || len(cols) != len(r.MarkdownCells()) {
			t.Errorf("row %d: markdown table %q with %d columns for %d cells", i, title, len(cols), len(r.MarkdownCells()))
		}
	}
	var out strings.Builder
	PrintComparison(&out, c)
	for _, s := range []string{"ours/peer", "cycles/s (median)", "4.00x", "failed: exit status 2: boom"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{3, 1}, 2}, {[]float64{9, 1, 5}, 5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestRunPeerCommand runs stand-in peers through the runner: one that
// measures, one that fails, one that never ends and is killed by the
// timeout (with its child), one that cannot start.
func TestRunPeerCommand(t *testing.T) {
	dir := filepath.Join("testdata", "peers")
	ctx := context.Background()
	ok := runPeerCommand(ctx, dir, time.Minute, "./genkitgo-peer", "-dir", t.TempDir(), "-sessions", "1", "-cycles", "2")
	if ok.Failed != "" || ok.CyclesPerSec != 100 || ok.Bytes != 1000 {
		t.Errorf("measuring peer: %+v", ok)
	}
	if r := runPeerCommand(ctx, dir, time.Minute, "./fail.sh"); !strings.Contains(r.Failed, "exit status 1: connection refused") {
		t.Errorf("failing peer: %+v", r)
	}
	if r := runPeerCommand(ctx, dir, 200*time.Millisecond, "./slow.sh"); r.Failed != "timed out after 200ms" {
		t.Errorf("never-ending peer: %+v", r)
	}
	if r := runPeerCommand(ctx, dir, time.Minute, "./no-such-peer"); r.Failed == "" {
		t.Errorf("missing peer: %+v", r)
	}
	if r := runPeerCommand(ctx, dir, time.Minute, "./genkitgo-peer"); !strings.Contains(r.Failed, "exit status 2: usage") {
		t.Errorf("peer given no arguments: %+v", r)
	}
}

// TestRunPeers runs the comparison on a folder of stand-in peers (the
// real peer definitions, plus one that times out) beside the platform's
// cycle on a test database.
func TestRunPeers(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found")
	}
	slow := Peer{Name: "slow", Run: func(ctx context.Context, dir, _, _ string, _ Workload, _ time.Duration) PeerResult {
		return runPeerCommand(ctx, dir, 200*time.Millisecond, "./slow.sh")
	}}
	var out strings.Builder
	var peerDBs int
	c, err := RunPeers(context.Background(), PeersConfig{
		Dir: filepath.Join("testdata", "peers"), Workloads: []Workload{{2, 3}}, Rounds: 2, Timeout: time.Minute, Out: &out,
		Peers: append(append([]Peer{}, Peers...), slow),
		Database: func(context.Context, bool) (string, func(), error) {
			peerDBs++
			return testdb.URL(t), func() {}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	rows := c.Rows()
	if len(rows) != 5 || peerDBs != 4 {
		t.Fatalf("%d rows (want 5), %d databases (want 4: the platform's and LangGraph's, twice)", len(rows), peerDBs)
	}
	for _, r := range rows[:4] {
		if r.Measured != 2 || r.CyclesPerSec <= 0 {
			t.Errorf("%s: %+v", r.Runtime, r)
		}
	}
	if rows[1].BytesPerCycle != 100 || rows[2].BytesPerCycle != 200 || rows[2].CyclesPerSec != 25 || rows[3].CyclesPerSec != 100 {
		t.Errorf("peers' figures: %+v", rows[1:4])
	}
	if rows[4].Measured != 0 || rows[4].Cells()[2] != "failed: timed out after 200ms" {
		t.Errorf("slow peer: %+v", rows[4])
	}
	if rows[0].TurnP50 <= 0 || rows[1].Ratio <= 0 {
		t.Errorf("platform's row %+v, ratio %v", rows[0], rows[1].Ratio)
	}
}

// TestRunPeersAbsent runs the comparison without a peers folder: the
// platform runs alone.
func TestRunPeersAbsent(t *testing.T) {
	var out strings.Builder
	dir := filepath.Join(t.TempDir(), "peers")
	c, err := RunPeers(context.Background(), PeersConfig{
		Dir: dir, Workloads: []Workload{{1, 2}}, Out: &out,
		Database: func(context.Context, bool) (string, func(), error) { return testdb.URL(t), func() {}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "peers: " + dir + " absent; running platform bench alone\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("output does not start with %q:\n%s", want, out.String())
	}
	if rows := c.Rows(); len(rows) != 1 || rows[0].Runtime != OursName || rows[0].Measured != 1 {
		t.Errorf("rows %+v", rows)
	}
}

// TestRunPeersSkipsMissingPeer: a peers folder without one of the peers
// (the Genkit Go binary not built) runs the others and says so.
func TestRunPeersSkipsMissingPeer(t *testing.T) {
	var out strings.Builder
	cfg := PeersConfig{Dir: t.TempDir(), Out: &out}
	if got := cfg.presentPeers(); len(got) != 0 {
		t.Errorf("present peers of an empty folder: %d", len(got))
	}
	if !strings.Contains(out.String(), "genkit-go (file store) absent from") {
		t.Errorf("output:\n%s", out.String())
	}
}
