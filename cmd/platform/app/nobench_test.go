//go:build !bench

package app

import (
	"os/exec"
	"strings"
	"testing"
)

// TestUserBinaryLeavesOutTheBenchmark keeps internal/bench out of the
// platform binary built without tags: `go list -deps` of cmd/platform must
// not name it, while the bench build still does.
func TestUserBinaryLeavesOutTheBenchmark(t *testing.T) {
	t.Parallel()
	const pkg = "github.com/holdpoint/holdpoint/internal/bench"
	deps := func(tags ...string) string {
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.Command("go", append(args, "github.com/holdpoint/holdpoint/cmd/platform")...).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		return string(out)
	}
	if strings.Contains(deps(), pkg+"\n") {
		t.Errorf("cmd/platform built without tags imports %s", pkg)
	}
	if !strings.Contains(deps("-tags", "bench"), pkg+"\n") {
		t.Errorf("cmd/platform built with -tags bench does not import %s: the test checks nothing", pkg)
	}
}

// TestBenchCommandWithoutTheBenchmark answers with how to get it.
func TestBenchCommandWithoutTheBenchmark(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := benchCommand([]string{"--sessions", "1"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "make bench") {
		t.Fatalf("stderr %q does not say how to build the benchmark", errOut.String())
	}
}
