package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/faultproxy"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
)

// TestServeOutage runs `platform serve` behind a proxy to its database and
// cuts it: /readyz turns 503 within a few probes, turns are then refused
// 503 with a Retry-After at once (never 500), and once the network is back
// the instance is ready and serves again, with no restart.
func TestServeOutage(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr()
	srv := startServe(t, u.String(), "--dev")

	turn := func() (*http.Response, []byte, time.Duration) {
		body, _ := json.Marshal(map[string]any{"data": map[string]any{"message": map[string]any{"role": "user", "content": []any{map[string]any{"text": "hello"}}}}})
		start := time.Now()
		res, err := http.Post(srv.base+"/api/agents/"+demo.BankingAgentName, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b, time.Since(start)
	}
	if res, b, _ := turn(); res.StatusCode != http.StatusOK {
		t.Fatalf("turn before the cut: %d %s", res.StatusCode, b)
	}

	proxy.Cut()
	waitReadyz(t, srv.base, http.StatusServiceUnavailable)
	res, b, took := turn()
	var e struct{ Status string }
	if res.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &e) != nil || e.Status != service.CodeUnavailable {
		t.Fatalf("turn while not ready: %d %s, want 503 UNAVAILABLE", res.StatusCode, b)
	}
	if n, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q, want seconds", res.Header.Get("Retry-After"))
	}
	// At once, not after waiting on the database: the bound is loose
	// enough for a loaded machine and still far below the wait for a
	// connection that never comes.
	t.Logf("refusing the turn took %s", took)
	if took > 10*time.Second {
		t.Errorf("refusing the turn took %s, want at once", took)
	}
	if bytes.Contains(b, []byte(proxy.Addr())) || bytes.Contains(b, []byte("refused")) {
		t.Errorf("the answer leaks the cause: %s", b)
	}

	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, srv.base, http.StatusOK)
	if res, b, _ := turn(); res.StatusCode != http.StatusOK {
		t.Fatalf("turn once ready again: %d %s", res.StatusCode, b)
	}
}

// waitReadyz polls /readyz until it answers want, within a bound; every
// answer on the way must be 200 or 503.
func waitReadyz(t *testing.T, base string, want int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == want {
			return
		}
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz answered %d", res.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after 30s, want %d", res.StatusCode, want)
		}
	}
}
