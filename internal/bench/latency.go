package bench

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// latencyProxy forwards TCP connections to a server, delaying every chunk
// by half a round trip in each direction, in order: the network between
// an application and a PostgreSQL on another host, on one machine. It
// holds no bandwidth back (chunks overlap in flight).
type latencyProxy struct {
	ln     net.Listener
	target string
	oneWay time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// startLatencyProxy listens on loopback and forwards to target with rtt
// added to each round trip.
func startLatencyProxy(target string, rtt time.Duration) (*latencyProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &latencyProxy{ln: ln, target: target, oneWay: rtt / 2}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *latencyProxy) addr() string { return p.ln.Addr().String() }

func (p *latencyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.pipe(s, c) }()
		go func() { defer p.wg.Done(); p.pipe(c, s) }()
	}
}

// pipe copies src to dst, each chunk written oneWay after it was read.
func (p *latencyProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(p.oneWay)}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	// The other direction ends when its reader sees this close.
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

// close stops the proxy and its connections.
func (p *latencyProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// dialer dials addr whatever address it is asked for (pgx's DialFunc).
func dialer(addr string) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}

// measureRTT is the median time of 50 SELECT 1 round trips over pool.
func measureRTT(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	var ds []time.Duration
	for range 50 {
		start := time.Now()
		if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}
