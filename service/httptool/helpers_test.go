package httptool_test

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

var (
	testSecret = []byte("tool-secret")
	testBody   = []byte(`{"tool":"lookup","input":{"account":"acc_1"}}`)
)

// server is an httptest server on loopback that counts the connections it
// accepts and the requests it serves.
type server struct {
	*httptest.Server
	conns    atomic.Int32
	requests atomic.Int32
}

// newServer starts a server (TLS when tls) running h.
func newServer(t *testing.T, tls bool, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// port is the server's port.
func (s *server) port(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// untouched fails the test when the server saw a connection.
func (s *server) untouched(t *testing.T) {
	t.Helper()
	if n := s.conns.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want none", n)
	}
	if n := s.requests.Load(); n != 0 {
		t.Errorf("server served %d requests, want none", n)
	}
}

// newClient returns a client with fast retries that trusts s's certificate
// (when s is TLS) and closes its idle connections when the test ends.
func newClient(t *testing.T, p httptool.Policy, s *server) *httptool.Client {
	t.Helper()
	c := &httptool.Client{Policy: p, Backoff: time.Millisecond}
	if s != nil && s.Certificate() != nil {
		pool := x509.NewCertPool()
		pool.AddCert(s.Certificate())
		c.RootCAs = pool
	}
	t.Cleanup(func() { httptool.CloseIdle(c) })
	return c
}

// request is a valid request to u.
func request(u string) httptool.Request {
	return httptool.Request{URL: u, ID: "call_0123", Body: testBody, Secrets: [][]byte{testSecret}, Timeout: 2 * time.Second}
}

// mapResolver resolves names from a map and counts its lookups; a name it
// does not hold is not found. It never asks DNS.
type mapResolver struct {
	addrs   map[string][]string
	mu      sync.Mutex
	lookups map[string]int
}

func resolver(addrs map[string][]string) *mapResolver {
	return &mapResolver{addrs: addrs, lookups: map[string]int{}}
}

func (r *mapResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	r.lookups[host]++
	r.mu.Unlock()
	list, ok := r.addrs[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, len(list))
	for i, s := range list {
		out[i] = net.IPAddr{IP: net.ParseIP(s)}
	}
	return out, nil
}

func (r *mapResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// hang is a handler that reads the request body (so that the server watches
// the connection) and then waits until the client goes away.
func hang(_ http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}
