package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestRunIdle pauses a few sessions and checks every figure is measured
// and printed (no bound on their values: they are the machine's).
func TestRunIdle(t *testing.T) {
	var out strings.Builder
	res, err := RunIdle(context.Background(), IdleConfig{DatabaseURL: testdb.URL(t), Sessions: 20, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if res.Paused != 20 {
		t.Errorf("%d pending interrupts, want 20", res.Paused)
	}
	for _, f := range []Footprint{res.Before, res.After} {
		if f.Heap == 0 || f.RSS == 0 || f.Goroutines == 0 {
			t.Errorf("unmeasured footprint %+v", f)
		}
	}
	for _, want := range []string{"idle sessions: 20", "heap per idle session", "RSS", "goroutines", "snapshot cache until newer ones push it out", "bounded (4096 snapshots", "heap stops growing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunStreams opens a few event streams and checks every one got the
// cycle's event and the goroutines went back.
func TestRunStreams(t *testing.T) {
	var out strings.Builder
	// Wait is generous: the bench measures the latency; the test checks
	// that every stream gets the event, on a loaded machine too.
	res, err := RunStreams(context.Background(), StreamsConfig{DatabaseURL: testdb.URL(t), Streams: 20, Wait: time.Minute, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if res.Received != 20 {
		t.Errorf("%d of 20 streams got the event", res.Received)
	}
	if res.LatencyP50 <= 0 || res.LatencyMax < res.LatencyP50 {
		t.Errorf("latency p50 %s max %s", res.LatencyP50, res.LatencyMax)
	}
	if res.Open.Goroutines <= res.Before.Goroutines || res.Open.Heap == 0 || res.Open.RSS == 0 {
		t.Errorf("unmeasured footprints: before %+v, open %+v", res.Before, res.Open)
	}
	if !res.GoroutinesBack() {
		t.Errorf("goroutines %d after, %d before", res.GoroutinesAfter, res.Before.Goroutines)
	}
	for _, want := range []string{"event streams: 20", "per stream", "20 of 20 streams", "p50", "goroutines:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
