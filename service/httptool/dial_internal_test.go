package httptool

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// TestDialVetted checks the dialer's own walls: it dials nothing without a
// vetted target, nothing for another host, and its Control refuses an
// address the policy does not allow, before any connection.
func TestDialVetted(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	defer s.Close()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	strict, _ := parsePolicy(Policy{})
	dev, _ := parsePolicy(Policy{AllowLoopback: true})
	loopback := func(context.Context) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	withTarget := func(tgt *target) context.Context {
		return context.WithValue(t.Context(), targetKey{}, tgt)
	}

	tests := []struct {
		name    string
		ctx     context.Context
		address string
	}{
		{"no target", t.Context(), "tools.test:" + port},
		{"another host", withTarget(&target{host: "tools.test", lookup: loopback, policy: dev, timeout: time.Second}), "evil.test:" + port},
		{"address refused by Control", withTarget(&target{host: "tools.test", lookup: loopback, policy: strict, timeout: time.Second}), "tools.test:" + port},
	}
	for _, tt := range tests {
		conn, err := dialVetted(tt.ctx, "tcp", tt.address)
		var refused *refusedError
		if !errors.As(err, &refused) {
			t.Errorf("%s: dial = %v, %v; want a refusal", tt.name, conn, err)
		}
		if conn != nil {
			_ = conn.Close()
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want none", n)
	}

	conn, err := dialVetted(withTarget(&target{host: "tools.test", lookup: loopback, policy: dev, timeout: time.Second}), "tcp", "tools.test:"+port)
	if err != nil {
		t.Fatalf("dial of a vetted address: %v", err)
	}
	if got := conn.RemoteAddr().String(); got != "127.0.0.1:"+port {
		t.Errorf("connected to %s", got)
	}
	_ = conn.Close()
}

// TestBackoff checks the delays' doubling and jitter.
func TestBackoff(t *testing.T) {
	t.Parallel()
	c := &Client{Backoff: 100 * time.Millisecond}
	for n, base := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 40: time.Minute} {
		for range 50 {
			d := c.backoff(n)
			if d < base*8/10 || d > base*12/10 {
				t.Fatalf("backoff(%d) = %v, want %v +-20%%", n, d, base)
			}
		}
	}
	if d := (&Client{}).backoff(1); d < 160*time.Millisecond || d > 240*time.Millisecond {
		t.Errorf("default backoff = %v, want 200ms +-20%%", d)
	}
}
