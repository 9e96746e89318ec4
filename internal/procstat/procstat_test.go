package procstat

import (
	"os"
	"testing"
)

// TestBytesReadsAProcessStatus: this process's resident memory, by pid 0
// and by its pid, is a positive number of bytes, its peak at least that;
// an unknown field and a process that does not exist are errors.
func TestBytesReadsAProcessStatus(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	rss, err := Bytes(0, "VmRSS")
	if err != nil || rss <= 0 || rss%1024 != 0 {
		t.Fatalf("VmRSS of this process: %d, %v; want a positive number of KiB in bytes", rss, err)
	}
	peak, err := Bytes(os.Getpid(), "VmHWM")
	if err != nil || peak < rss/2 {
		t.Fatalf("VmHWM of this process by its pid: %d, %v; want about VmRSS (%d) or more", peak, err, rss)
	}
	if v, err := Bytes(0, "NoSuchField"); err == nil {
		t.Errorf("an unknown field answered %d", v)
	}
	if v, err := Bytes(1<<30, "VmRSS"); err == nil {
		t.Errorf("a process that does not exist answered %d", v)
	}
}
