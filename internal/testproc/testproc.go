// Package testproc runs a test's programs (a built server, a shell
// script): a loopback address to give one, its output kept where the test
// can read it while it runs, and the process stopped when the test ends
// (SIGTERM, then a kill after a grace period), its output logged if the
// test failed.
package testproc

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreeAddr is a loopback host:port nothing listens on (for a program to
// listen on, or for one expected to fail before it listens). Its port is
// below the kernel's range of ephemeral ports, from which every outgoing
// connection (the tests' hundreds to PostgreSQL) takes its local port: a
// port from that range was once taken by one between this check and the
// server's listen (a README block's server failed with "address already
// in use"). It is random, and never one this process gave before, so that
// tests asking at once rarely meet.
func FreeAddr(t testing.TB) string {
	t.Helper()
	const lowest = 10000
	if top := ephemeralLow(); top > lowest+1000 {
		for range 200 {
			port := lowest + rand.IntN(top-lowest)
			if _, taken := given.LoadOrStore(port, true); taken {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue
			}
			ln.Close()
			return ln.Addr().String()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// given is the ports FreeAddr gave.
var given sync.Map

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768, its default, elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// Output is a buffer that processes and goroutines write while a test
// reads it.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Proc is a process Start started.
type Proc struct {
	Cmd *exec.Cmd
	// Out has the process's stdout and stderr.
	Out  *Output
	done chan struct{}
	err  error
}

// Start starts cmd with its stdout and stderr in Proc.Out. When the test
// ends the process gets SIGTERM, then a kill if it has not exited within
// grace; if the test failed, its output goes to the test's log under
// name.
func Start(t testing.TB, name string, cmd *exec.Cmd, grace time.Duration) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Out: new(Output), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s: output:\n%s", name, p.Out)
		}
	})
	return p
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process exited (exec.Cmd.Wait's error), once Done is
// closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}
