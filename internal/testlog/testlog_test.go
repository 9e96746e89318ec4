package testlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestTeeWritesJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	Tee(t, &buf).Debug("checked", "k", "v")
	if got := buf.String(); !strings.Contains(got, `"level":"DEBUG","msg":"checked","k":"v"`) {
		t.Errorf("tee wrote %q", got)
	}
}

// TestLogAfterTheTest checks that a record logged once its test is over
// goes to standard error instead of panicking.
func TestLogAfterTheTest(t *testing.T) {
	var late bytes.Buffer
	saved := lateOutput
	lateOutput = &late
	t.Cleanup(func() { lateOutput = saved })
	var log *slog.Logger
	t.Run("inner", func(t *testing.T) { log = Logger(t) })
	log.Info("late", "k", "v")
	if got := late.String(); !strings.HasPrefix(got, "testlog: logged after TestLogAfterTheTest/inner ended: time=") || !strings.HasSuffix(got, " level=INFO msg=late k=v\n") {
		t.Errorf("late record written as %q", got)
	}
}
