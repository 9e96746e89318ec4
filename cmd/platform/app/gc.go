package app

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the garbage collector's target (GOGC) of a platform
// process when the environment sets none. A turn allocates a few hundred
// kilobytes that die with it while the live heap stays small (tens of
// megabytes: sessions live in PostgreSQL), so at Go's default of 100 the
// collector runs every few turns and took a quarter of the process's CPU;
// at 400 the heap grows by a few tens of megabytes and the approval cycle
// needs about a third less CPU (platform bench, 32 sessions: 0.51-0.55 ->
// 0.34-0.39 ms per cycle). GOGC and GOMEMLIMIT, when set, win.
const DefaultGCPercent = 400

// tuneGC applies DefaultGCPercent unless GOGC is set.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
