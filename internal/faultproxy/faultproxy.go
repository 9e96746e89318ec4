// Package faultproxy is a loopback TCP proxy that a test can cut: every
// connection through it ends at once and new ones are refused, as when a
// database server stops or its host drops off the network, without
// touching the server itself (the tests share one PostgreSQL cluster that
// no test may stop). StartDelayed adds a network's latency instead: the
// benchmark's database on another host, on one machine.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards the connections it accepts on loopback to one target.
type Proxy struct {
	target string
	addr   string
	delay  time.Duration // each chunk's, each way (StartDelayed)

	mu sync.Mutex
	ln net.Listener // nil while cut
	// conns are both ends of every proxied connection, so Cut can end
	// them all.
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target
// (host:port).
func Start(target string) (*Proxy, error) { return StartDelayed(target, 0) }

// StartDelayed is Start with every chunk forwarded oneWay after it was
// read, in each direction and in order, so a round trip takes 2*oneWay
// more. It holds no bandwidth back: chunks overlap in flight.
func StartDelayed(target string, oneWay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), delay: oneWay, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's host:port; it stays the same across Cut and Restore.
func (p *Proxy) Addr() string { return p.addr }

// Cut resets every proxied connection and closes the listener, so a new
// connection is refused (ECONNREFUSED) rather than left hanging.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			// Linger 0 sends a reset, not an orderly end: the peer sees
			// the connection lost mid-conversation.
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore listens again on the same address after a Cut.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serveLocked(ln)
	return nil
}

// Close cuts the proxy for good and waits for its goroutines.
func (p *Proxy) Close() {
	p.Cut()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(ln, c, s) {
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// track records a new pair unless the listener it came from was cut
// meanwhile.
func (p *Proxy) track(ln net.Listener, conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst (delayed, with StartDelayed); when either side
// ends, both do.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	if p.delay > 0 {
		copyDelayed(dst, src, p.delay)
	} else {
		_, _ = io.Copy(dst, src)
	}
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
	_ = dst.Close()
	_ = src.Close()
}

// copyDelayed copies src to dst until either fails, writing each chunk
// delay after it was read.
func copyDelayed(dst io.Writer, src io.Reader, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for c := range q { // drained after a failed write: the reader never blocks
			if !failed {
				time.Sleep(time.Until(c.at))
				_, err := dst.Write(c.b)
				failed = err != nil
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(delay)}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}
