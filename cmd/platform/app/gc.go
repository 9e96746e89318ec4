package app

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// The garbage collector's policy of a platform process when the
// environment sets neither GOGC nor GOMEMLIMIT: collect when the heap
// reaches HeapFloor or MinGCPercent more than the live heap (four times
// it), whichever is larger.
//
// A turn allocates a few hundred kilobytes that die with it while the live
// heap stays small (megabytes: sessions live in PostgreSQL), so at Go's
// default (GOGC=100, a collection each time the heap doubles) the collector
// ran every few turns and took a quarter of the process's CPU. A fixed
// GOGC=400 took a third off the approval cycle's CPU (platform bench, 32
// sessions: 0.51-0.55 -> 0.34-0.39 ms per cycle), but made the peak heap
// five times the live heap, so memory grew with what the process held: the
// histories of its conversations (peak RSS 59-61 MiB after 60 cycles of 8
// sessions, 72-77 MiB after 200, 121-129 MiB after 800). Below the floor,
// the few megabytes of histories come out of a heap the process has anyway;
// above it (a live heap of 6 MiB and more) a collection comes after three
// times the live heap of garbage, so its cost per turn stays the same as
// the live heap grows. (The CPU per cycle of one session's last 100 of
// 2,000 cycles against its first 100: with 100 % above the floor, -12 to
// +31 %, median +14.5 % in 11 runs; with 300 %, -24 to +14 %, median
// -0.5 % in 7.)
const (
	HeapFloor    = 24 << 20
	MinGCPercent = 300
)

// tuneGC applies the policy above unless GOGC or GOMEMLIMIT is set.
func tuneGC() {
	_, gogc := os.LookupEnv("GOGC")
	_, limit := os.LookupEnv("GOMEMLIMIT")
	if gogc || limit {
		return
	}
	t := &gcTuner{floor: HeapFloor, least: MinGCPercent}
	t.tune()
	t.arm()
	gcPolicy.Store(true)
}

// gcPolicy is whether tuneGC applied the policy.
var gcPolicy atomic.Bool

// warmHeap makes the heap floor's pages resident before a serving process
// (serve, bench) takes its first turns, when the policy applies: the first
// turns then allocate into pages already in memory. Otherwise the heap grew
// to the floor under them, each span of fresh pages written for the first
// time: a page fault per 4 KiB, costly on a virtual machine. On 2 cores the
// first 8 x 20 cycles of a process took 0.3 ms more of its CPU per cycle
// than the same cycles run after them (initHeapBits and memclr of new
// spans: 15 % of the first run's CPU samples, none of the later runs'), and
// ran a fifth fewer cycles a second. It costs about 0.1 s once, which is
// why the short commands do not pay it.
func warmHeap() {
	if gcPolicy.Load() {
		prefaultHeap(HeapFloor)
	}
}

// prefaultHeap writes a byte of each page of n bytes of heap, then collects
// them. The runtime keeps the pages: it returns to the system only pages
// beyond a tenth more than its heap goal, and the policy's goal is never
// below the floor.
func prefaultHeap(n int) {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	runtime.GC()
}

// gcTuner sets the collector's percentage after each collection, from the
// live heap it left, so that the next one comes at the policy's heap.
type gcTuner struct {
	floor   uint64
	least   int // the least percentage
	percent int
	stopped atomic.Bool
	runs    atomic.Int64 // collections tuned after
}

// gcSentinel is an object whose only reference is dropped at once: its
// finalizer runs after the next collection. It holds a pointer so that it
// is not combined with other objects (Go's tiny allocator), whose
// finalizers may never run.
type gcSentinel struct{ _ *gcTuner }

// arm has tune run after the next collection, and arm again, until stop.
func (t *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if t.stopped.Load() {
			return
		}
		t.runs.Add(1)
		t.tune()
		t.arm()
	})
}

// stop ends the tuning after the next collection at the latest; the
// percentage stays as last set.
func (t *gcTuner) stop() { t.stopped.Store(true) }

func (t *gcTuner) tune() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	var live uint64
	if sample[0].Value.Kind() == metrics.KindUint64 {
		live = sample[0].Value.Uint64()
	}
	p := gcPercentFor(live, t.floor, t.least)
	// Within a tenth of the current one: not worth a change.
	if t.percent != 0 && p > t.percent*9/10 && p < t.percent*11/10 {
		return
	}
	t.percent = p
	debug.SetGCPercent(p)
}

// gcPercentFor is the GOGC that puts the next collection at the larger of
// floor and live plus least percent of it.
func gcPercentFor(live, floor uint64, least int) int {
	if live == 0 {
		live = 1 << 20
	}
	if live >= floor {
		return least
	}
	p := int((floor - live) * 100 / live)
	// A process with almost nothing live would otherwise set a percentage
	// in the millions.
	const most = 10000
	return max(least, min(p, most))
}
