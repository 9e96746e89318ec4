package faultproxy

import (
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends msg through addr and reads it back.
func roundTrip(t *testing.T, addr, msg string) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Fatalf("read back %q, want %q", got, msg)
	}
	return time.Since(start)
}

// TestCutAndRestore: a cut proxy refuses connections; restored, it
// forwards again on the same address.
func TestCutAndRestore(t *testing.T) {
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	roundTrip(t, p.Addr(), "before")
	p.Cut()
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("a cut proxy accepted a connection")
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, p.Addr(), "after")
}

// TestDelayed: every round trip through StartDelayed takes at least
// twice the one-way delay, and the bytes arrive whole and in order. (A
// lower bound only: a loaded machine makes it slower, never faster.)
func TestDelayed(t *testing.T) {
	const oneWay = 20 * time.Millisecond
	p, err := StartDelayed(echoServer(t), oneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, msg := range []string{"a", "a longer message, sent in one write"} {
		if d := roundTrip(t, p.Addr(), msg); d < 2*oneWay {
			t.Errorf("round trip of %q took %s, want at least %s", msg, d, 2*oneWay)
		}
	}
}
