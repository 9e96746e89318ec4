// Package testproc runs a test's programs (a built server, a shell
// script): a loopback address to give one, its output kept where the test
// can read it while it runs, and the process stopped when the test ends
// (SIGTERM, then a kill after a grace period), its output logged if the
// test failed.
package testproc

import (
	"bytes"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreeAddr is a loopback host:port nothing listens on (for a program to
// listen on, or for one expected to fail before it listens).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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
