package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{4 << 20, 24 << 20, 500},   // 4 MiB live + 500 % = the floor
		{10 << 20, 24 << 20, 140},  // 10 + 14
		{12 << 20, 24 << 20, 100},  // half the floor: the least
		{20 << 20, 24 << 20, 100},  // the least past half
		{24 << 20, 24 << 20, 100},  // at the floor
		{100 << 20, 24 << 20, 100}, // far past it
		{1 << 10, 24 << 20, 10000}, // almost nothing live: capped
		{0, 24 << 20, 2300},        // nothing measured: counted as 1 MiB
		{8 << 20, 32 << 20, 300},   // another floor
	} {
		if got := gcPercentFor(c.live, c.floor, 100); got != c.want {
			t.Errorf("gcPercentFor(%d KiB live, %d KiB floor) = %d; want %d", c.live>>10, c.floor>>10, got, c.want)
		}
	}
}

// TestGCTunerFollowsCollections: an armed tuner sets the percentage after
// each collection, and keeps doing so until stopped.
func TestGCTunerFollowsCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	deadline := time.Now().Add(time.Minute)
	awaitGOGC := func(want uint64) {
		t.Helper()
		for gogc() != want {
			if time.Now().After(deadline) {
				t.Fatalf("GOGC is %d after collections; want the tuner's %d", gogc(), want)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
	// A floor no heap reaches: the cap, after the first collections.
	high := &gcTuner{floor: 1 << 40, least: MinGCPercent}
	high.arm()
	awaitGOGC(10000)
	// It armed itself again: it runs after the next collections too.
	runs := high.runs.Load()
	for high.runs.Load() == runs {
		if time.Now().After(deadline) {
			t.Fatal("the tuner did not run again after more collections")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	high.stop()
	// Past the floor: the least percentage.
	low := &gcTuner{floor: 1, least: MinGCPercent}
	low.arm()
	awaitGOGC(MinGCPercent)
	low.stop()
}
