package httptool_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/holdpoint/holdpoint/service/httptool"
)

// TestDoRefusesLoopback calls a loopback server without AllowLoopback: the
// call is refused before any connection.
func TestDoRefusesLoopback(t *testing.T) {
	t.Parallel()
	for _, tls := range []bool{true, false} {
		s := newServer(t, tls, func(http.ResponseWriter, *http.Request) {})
		c := newClient(t, httptool.Policy{}, s)
		for _, u := range []string{s.URL, strings.Replace(s.URL, "127.0.0.1", "[::ffff:127.0.0.1]", 1)} {
			res, err := c.Do(t.Context(), request(u))
			checkFailure(t, res, err, httptool.KindRefused, 0)
		}
		s.untouched(t)
	}
}

// TestDoRefusesResolvedNonPublic resolves names (with an injected resolver)
// to addresses that are not public: each call is refused before any
// connection, even when the answer holds a public address too.
func TestDoRefusesResolvedNonPublic(t *testing.T) {
	t.Parallel()
	s := newServer(t, true, func(http.ResponseWriter, *http.Request) {})
	port := s.port(t)
	tests := []struct {
		addrs []string
		want  string
	}{
		{[]string{"127.0.0.1"}, "resolves to 127.0.0.1, a loopback address"},
		{[]string{"10.0.0.1"}, "resolves to 10.0.0.1, a private address"},
		{[]string{"::ffff:127.0.0.1"}, "loopback address"},
		{[]string{"::1"}, "loopback address"},
		{[]string{"169.254.169.254"}, "link-local address"},
		{[]string{"fd00::1"}, "unique local address"},
		{[]string{"100.64.0.1"}, "CGNAT"},
		{[]string{"0.0.0.0"}, "unspecified address"},
		{[]string{"64:ff9b::7f00:1"}, "loopback address"},
		{[]string{"93.184.216.34", "10.0.0.1"}, "private address"},
		{[]string{"2606:2800:220:1:248:1893:25c8:1946", "127.0.0.1"}, "loopback address"},
	}
	for _, tt := range tests {
		r := resolver(map[string][]string{"evil.example": tt.addrs})
		c := newClient(t, httptool.Policy{}, s)
		c.Resolver = r
		res, err := c.Do(t.Context(), request("https://evil.example:"+port+"/hook"))
		checkFailure(t, res, err, httptool.KindRefused, 1)
		if err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %q does not contain %q", tt.addrs, err, tt.want)
		}
		if n := r.count("evil.example"); n != 1 {
			t.Errorf("%v: %d lookups, want 1 (a refusal is not retried)", tt.addrs, n)
		}
	}
	s.untouched(t)
}

// TestDoAllowedHostsNeverLoopback: an AllowedHosts name (or CIDR) does not
// allow loopback; AllowLoopback does.
func TestDoAllowedHostsNeverLoopback(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	u := "http://internal.example:" + s.port(t) + "/hook"
	r := resolver(map[string][]string{"internal.example": {"127.0.0.1"}})

	c := newClient(t, httptool.Policy{AllowedHosts: []string{"internal.example", "127.0.0.0/8"}}, s)
	c.Resolver = r
	res, err := c.Do(t.Context(), request(u))
	checkFailure(t, res, err, httptool.KindRefused, 0) // plain http: refused statically
	res, err = c.Do(t.Context(), request(strings.Replace(u, "http:", "https:", 1)))
	checkFailure(t, res, err, httptool.KindRefused, 1) // https: refused once resolved
	s.untouched(t)

	c = newClient(t, httptool.Policy{AllowLoopback: true, AllowedHosts: []string{"internal.example"}}, s)
	c.Resolver = r
	if _, err := c.Do(t.Context(), request(u)); err != nil {
		t.Errorf("Do with AllowLoopback: %v", err)
	}
}

// TestDoPinnedDial resolves a name to loopback with an injected resolver:
// the connection goes to the vetted address, the request keeps the name as
// its Host, and the name is resolved by the client alone, when it dials: a
// call over a pooled connection looks nothing up (a webhook endpoint or a
// tool called thousands of times a minute costs no DNS query each).
func TestDoPinnedDial(t *testing.T) {
	t.Parallel()
	var host atomic.Value
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	})
	r := resolver(map[string][]string{"tools.test": {"127.0.0.1"}})
	c := newClient(t, dev, s)
	c.Resolver = r
	u := "http://tools.test:" + s.port(t) + "/hook"
	res, err := c.Do(t.Context(), request(u))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if string(res.Body) != string(testBody) || host.Load() != "tools.test:"+s.port(t) {
		t.Errorf("body %q, Host %q", res.Body, host.Load())
	}
	if n := r.count("tools.test"); n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
	// A second call reuses the vetted connection: no lookup.
	if _, err := c.Do(t.Context(), request(u)); err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := r.count("tools.test"); n != 1 {
		t.Errorf("%d lookups after two calls over one connection, want 1", n)
	}
	// A call that must dial again resolves again.
	s.CloseClientConnections()
	httptool.CloseIdle(c)
	if _, err := c.Do(t.Context(), request(u)); err != nil {
		t.Fatalf("third Do: %v", err)
	}
	if n := r.count("tools.test"); n != 2 {
		t.Errorf("%d lookups after a new connection, want 2", n)
	}
}

// TestDoHTTPNameMustBeLoopback: plain http to a name needs AllowLoopback and
// an answer of loopback addresses only.
func TestDoHTTPNameMustBeLoopback(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, func(http.ResponseWriter, *http.Request) {})
	u := "http://tools.test:" + s.port(t) + "/hook"
	r := resolver(map[string][]string{"tools.test": {"127.0.0.1", "93.184.216.34"}})
	c := newClient(t, dev, s)
	c.Resolver = r
	res, err := c.Do(t.Context(), request(u))
	checkFailure(t, res, err, httptool.KindRefused, 1)
	if err != nil && !strings.Contains(err.Error(), "must use https") {
		t.Errorf("error %q does not ask for https", err)
	}
	c = newClient(t, httptool.Policy{}, s)
	c.Resolver = resolver(map[string][]string{"tools.test": {"127.0.0.1"}})
	res, err = c.Do(t.Context(), request(u))
	checkFailure(t, res, err, httptool.KindRefused, 0)
	s.untouched(t)
}

// TestDoTLSVerifiesHostName dials the vetted address of a name and checks
// the certificate against the name: httptest's certificate is for
// example.com (and *.example.com), not for tools.test.
func TestDoTLSVerifiesHostName(t *testing.T) {
	t.Parallel()
	s := newServer(t, true, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	port := s.port(t)
	c := newClient(t, dev, s)
	c.Resolver = resolver(map[string][]string{
		"example.com": {"127.0.0.1"},
		"tools.test":  {"127.0.0.1"},
	})
	if _, err := c.Do(t.Context(), request("https://example.com:"+port+"/hook")); err != nil {
		t.Fatalf("Do to example.com: %v", err)
	}
	res, err := c.Do(t.Context(), request("https://tools.test:"+port+"/hook"))
	checkFailure(t, res, err, httptool.KindNetwork, 1) // a certificate error is not retried
	if err != nil && !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error %q is not about the certificate", err)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("server served %d requests, want 1", n)
	}
}

// TestDoResolverFailure: a name that does not resolve is a network error,
// retried.
func TestDoResolverFailure(t *testing.T) {
	t.Parallel()
	r := resolver(nil)
	c := newClient(t, dev, nil)
	c.Resolver = r
	res, err := c.Do(t.Context(), request("https://nowhere.test/hook"))
	checkFailure(t, res, err, httptool.KindNetwork, 3)
	if n := r.count("nowhere.test"); n != 3 {
		t.Errorf("%d lookups, want 3", n)
	}
}
