// Package waitfor is the tests' one way to wait: poll for the condition
// that matters under a generous bound, instead of sleeping for a time
// and hoping. A test that must show something does not happen waits for
// a positive sign that the work which would have done it ran (a poll, an
// attempt, a later event), then asserts. It imports only the standard
// library.
package waitfor

import (
	"testing"
	"time"
)

// maxInterval is the longest pause between two looks at a condition.
const maxInterval = 20 * time.Millisecond

// Until polls cond until it holds and returns how long that took; the
// test fails (FailNow) once timeout passed without it. The first looks
// come quickly (1 ms apart, doubling up to 20 ms), so a condition that
// holds soon costs little. cond runs on the test's goroutine and may call
// t.Fatal.
func Until(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	interval := time.Millisecond
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(interval)
		interval = min(2*interval, maxInterval)
	}
	return time.Since(start)
}
