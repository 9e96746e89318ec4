package testproc

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartStopsTheProcessWhenTheTestEnds: the output is readable while
// the process runs, and the test's end stops it (SIGTERM) and waits.
func TestStartStopsTheProcessWhenTheTestEnds(t *testing.T) {
	var p *Proc
	t.Run("running", func(t *testing.T) {
		p = Start(t, "sleeper", exec.Command("sh", "-c", "echo hello; exec sleep 60"), 10*time.Second)
		for deadline := time.Now().Add(time.Minute); !strings.Contains(p.Out.String(), "hello"); {
			if time.Now().After(deadline) {
				t.Fatalf("no output within a minute: %q", p.Out.String())
			}
			select {
			case <-p.Done():
				t.Fatalf("exited early: %v", p.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	select {
	case <-p.Done():
	default:
		t.Fatal("the process still runs after its test ended")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("exit: %v, want killed by SIGTERM", err)
	}
}

// TestFreeAddr: nothing listens on the address, and it can be listened
// on; its port is below the ephemeral ports outgoing connections take,
// and no two calls give the same one.
func TestFreeAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr := FreeAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		if n, _ := strconv.Atoi(port); n >= ephemeralLow() || n < 10000 {
			t.Errorf("port %d, want one from 10000 below the ephemeral ports (%d)", n, ephemeralLow())
		}
		if seen[addr] {
			t.Errorf("%s given twice", addr)
		}
		seen[addr] = true
	}
	addr := FreeAddr(t)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("something listens on %s", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
