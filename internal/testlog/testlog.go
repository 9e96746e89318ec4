package testlog

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// Logger returns a logger, at Debug level, writing to t's output. Once t
// and its cleanups have finished, a record (from a goroutine that outlived
// its test) goes to standard error with the test's name instead: writing to
// a finished test panics.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(newTestHandler(t))
}

// Tee returns a logger, at Debug level, writing to t's output as Logger's
// does and, as JSON lines, to w: for tests that assert on what was logged.
func Tee(t testing.TB, w io.Writer) *slog.Logger {
	return slog.New(slog.NewMultiHandler(newTestHandler(t), slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

func newTestHandler(t testing.TB) slog.Handler {
	w := &testWriter{t: t, name: t.Name()}
	// Registered now, so it runs after the cleanups the test registers
	// later: a runtime's shutdown in a cleanup still logs to t.
	t.Cleanup(w.finish)
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: timeOfDay})
}

// timeOfDay prints a record's time without the date.
func timeOfDay(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		return slog.String(slog.TimeKey, a.Value.Time().Format("15:04:05.000"))
	}
	return a
}

// lateOutput receives the records logged after their test ended.
var lateOutput io.Writer = os.Stderr

// testWriter writes records to the test's output until the test is over.
// slog's handlers write each record in one call.
type testWriter struct {
	t    testing.TB
	name string

	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		fmt.Fprintf(lateOutput, "testlog: logged after %s ended: %s", w.name, p)
		return len(p), nil
	}
	return w.t.Output().Write(p)
}

// finish sends later records to standard error. It takes mu, so a write in
// progress completes first.
func (w *testWriter) finish() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
