package waitfor

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	Until(t, "five", time.Minute, func() bool { return n.Load() == 5 })
}

// recorder is a testing.TB that notes a failure instead of ending the
// test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(r) }

func TestUntilFailsAfterTheTimeout(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		Until(r, "never", 30*time.Millisecond, func() bool { return false })
	}()
	if !r.failed {
		t.Fatal("a condition that never held did not fail the test")
	}
}
