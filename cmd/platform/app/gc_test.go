package app

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/procstat"
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

// TestPrefaultHeapLeavesPagesResident: after prefaultHeap the runtime holds
// the pages it touched as free heap backed by memory (not returned to the
// system), for the next allocations to use without a page fault. The test
// keeps the heap goal high, as the policy's floor does, so that the
// scavenger has nothing to return.
func TestPrefaultHeapLeavesPagesResident(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(10000))
	const n = 16 << 20
	free := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before, rss0 := free(), residentBytes(t)
	prefaultHeap(n)
	if after := free(); after < n*3/4 {
		t.Fatalf("free heap backed by memory %d KiB after touching %d KiB; want the touched pages kept", after>>10, n>>10)
	}
	// Pages the runtime had not used before are in memory now: touched,
	// not only mapped.
	if grew := residentBytes(t) - rss0; before < n/4 && grew < n/2 {
		t.Fatalf("the process's resident memory grew %d KiB while %d KiB of new heap were touched", grew>>10, n>>10)
	}
}

// residentBytes is the process's resident memory (VmRSS), or skips the test
// where /proc does not tell it.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	rss, err := procstat.Bytes(0, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	return rss
}
