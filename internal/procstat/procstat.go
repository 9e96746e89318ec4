// Package procstat reads a process's memory figures from Linux's
// /proc/<pid>/status: the bench's resident and peak memory, and the tests
// that watch a server's or their own.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Bytes answers a size field of the status of process pid (VmRSS, VmHWM,
// ...) in bytes; pid 0 is this process. It fails where /proc does not tell
// it (not Linux, a process gone, a field unknown).
func Bytes(pid int, field string) (int64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s of %s: %w", field, path, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}
