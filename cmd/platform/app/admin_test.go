package app

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// runCLI runs a command line and returns its exit code and output.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestAdminCommands(t *testing.T) {
	t.Setenv("DATABASE_URL", testdb.URL(t))

	code, out, errOut := runCLI("tenants", "create", "Acme Corp", "--id", "acme")
	if code != 0 || out != "acme\n" {
		t.Fatalf("tenants create = %d %q %q", code, out, errOut)
	}
	if code, out, _ := runCLI("tenants", "create", "--id", "acme", "Again"); code != 1 {
		t.Errorf("duplicate tenant = %d %q", code, out)
	}
	if code, out, _ := runCLI("tenants", "list"); code != 0 || !strings.Contains(out, "Acme Corp") {
		t.Errorf("tenants list = %d %q", code, out)
	}

	code, key, errOut := runCLI("keys", "create", "--tenant", "acme", "--role", "client", "--name", "backend")
	if code != 0 || !strings.HasPrefix(key, "hp_") || !strings.Contains(errOut, "shown only this once") {
		t.Fatalf("keys create = %d %q %q", code, key, errOut)
	}
	code, list, _ := runCLI("keys", "list", "--tenant", "acme")
	if code != 0 || !strings.Contains(list, "backend") || strings.Contains(list, strings.TrimSpace(key)) {
		t.Fatalf("keys list = %d %q (must not show the key)", code, list)
	}
	keyID := strings.Fields(strings.Split(list, "\n")[1])[0]
	if !strings.Contains(strings.Split(list, "\n")[1], " - ") {
		t.Errorf("a key without scopes lists %q, want a dash", list)
	}
	code, _, errOut = runCLI("keys", "create", "--tenant", "acme", "--role", "admin", "--name", "ops",
		"--scope", "approve:payments", "--scope", "refunds", "--scope", "approve:payments")
	if code != 0 || !strings.Contains(errOut, "with scopes approve:payments, refunds.") {
		t.Fatalf("keys create --scope = %d %q", code, errOut)
	}
	if code, list, _ := runCLI("keys", "list", "--tenant", "acme"); code != 0 || !strings.Contains(list, "approve:payments,refunds") {
		t.Errorf("keys list = %d %q, want the scopes", code, list)
	}
	if code, _, errOut := runCLI("keys", "create", "--tenant", "acme", "--role", "admin", "--scope", "ok", "--scope", "no way"); code != 2 || !strings.Contains(errOut, `"no way"`) {
		t.Errorf("keys create with a bad scope = %d %q, want the usage error naming it", code, errOut)
	}
	// Flags after the positional argument work too.
	if code, out, errOut := runCLI("keys", "revoke", keyID, "--tenant", "acme"); code != 0 || !strings.Contains(out, keyID) {
		t.Errorf("keys revoke = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("keys", "revoke", "--tenant", "acme", keyID); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("second revoke = %d %q", code, errOut)
	}

	code, tok, errOut := runCLI("tokens", "mint", "--tenant", "acme", "--user", "alice", "--ttl", "5m")
	if code != 0 || strings.Count(tok, ".") != 2 || !strings.Contains(errOut, "valid until") {
		t.Errorf("tokens mint = %d %q %q", code, tok, errOut)
	}
	tokenID := strings.Fields(strings.TrimPrefix(errOut, "Token "))[0]
	if code, out, errOut := runCLI("tokens", "revoke", "--tenant", "acme", "--token-id", tokenID); code != 0 || !strings.Contains(out, tokenID) {
		t.Errorf("tokens revoke --token-id = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("tokens", "revoke", "--tenant", "acme", "--user", "alice"); code != 0 || !strings.Contains(out, "alice") {
		t.Errorf("tokens revoke --user = %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI("tenants", "rotate-secret", "--tenant", "acme", "--grace", "1h")
	if code != 0 || !strings.Contains(out, "token key 2") || !strings.Contains(out, "state key 2") {
		t.Errorf("tenants rotate-secret = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("tenants", "rotate-secret", "--tenant", "acme", "--purpose", "state", "--grace", "0s"); code != 0 || !strings.Contains(out, "state key 3") {
		t.Errorf("tenants rotate-secret --purpose state = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("tenants", "rotate-secret", "--tenant", "nope"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("rotate-secret of an unknown tenant = %d %q", code, errOut)
	}

	for _, args := range [][]string{
		{"keys", "create", "--tenant", "acme", "--role", "root"},
		{"keys", "create", "--role", "client"},
		{"keys", "revoke", "--tenant", "acme", "not-a-uuid"},
		{"tokens", "mint", "--tenant", "acme", "--user", "u", "--ttl", "48h"},
		{"tokens", "mint", "--tenant", "acme"},
		{"tenants", "create"},
		{"tenants", "frobnicate"},
		{"tenants", "rotate-secret"},
		{"tenants", "rotate-secret", "--tenant", "acme", "--purpose", "event_ids"},
		{"tokens", "revoke", "--tenant", "acme"},
		{"tokens", "revoke", "--tenant", "acme", "--token-id", "x", "--user", "y"},
	} {
		if code, _, _ := runCLI(args...); code != 2 {
			t.Errorf("%v = %d, want the usage error 2", args, code)
		}
	}
	if code, _, errOut := runCLI("keys", "create", "--tenant", "nope", "--role", "admin"); code != 1 || !strings.Contains(errOut, "tenant nope not found") {
		t.Errorf("key of an unknown tenant = %d %q", code, errOut)
	}
}

func TestAdminCommandsNeedTheSchema(t *testing.T) {
	// An empty database on the test server, without migrations.
	t.Setenv("DATABASE_URL", emptyDatabase(t, connect(t, testdb.URL(t)), ""))
	for _, args := range [][]string{{"tenants", "list"}, {"keys", "list", "--tenant", "acme"}, {"tokens", "mint", "--tenant", "a", "--user", "u"}} {
		code, _, errOut := runCLI(args...)
		if code != 1 || !strings.Contains(errOut, "run `platform migrate up` first") {
			t.Errorf("%v on an empty database = %d %q", args, code, errOut)
		}
	}
}

func TestDevNeedsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true, "127.0.0.2:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false, "example.com:80": false, "nonsense": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
	var stderr bytes.Buffer
	if code := serveCommand(Platform{Demo: true}, []string{"--dev", "--addr", "0.0.0.0:0"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "loopback") {
		t.Errorf("serve --dev on 0.0.0.0 = %d %q", code, stderr.String())
	}
}

func TestEdgeFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--body-timeout", "0s"}, "--body-timeout must be positive"},
		{[]string{"--ip-rate-limit", "-1"}, "--ip-rate-limit and --ip-rate-burst must not be negative"},
		{[]string{"--ip-rate-burst", "-5"}, "--ip-rate-limit and --ip-rate-burst must not be negative"},
		{[]string{"--max-event-streams", "-1"}, "--max-event-streams must not be negative"},
		{[]string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, `"proxy.internal" is neither an address nor a CIDR range`},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, `"10.0.0.0/33" is neither an address nor a CIDR range`},
	} {
		var stderr bytes.Buffer
		if code := serveCommand(Platform{Demo: true}, append([]string{"--dev"}, tc.args...), &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("serve %v = %d %q, want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	// --trusted-proxies takes addresses (a range of one each) and ranges.
	var p proxyRanges
	if err := p.Set(" 10.0.0.5, fd00::/8,::1,192.168.0.0/16 "); err != nil || p.String() != "10.0.0.5/32,fd00::/8,::1/128,192.168.0.0/16" {
		t.Errorf("--trusted-proxies parsed to %q (%v)", p.String(), err)
	}
	// The defaults docs/security.md documents.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var a accessConfig
	a.register(fs)
	for name, want := range map[string]string{"body-timeout": "10s", "ip-rate-limit": "100", "ip-rate-burst": "200", "max-event-streams": "8"} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %s, want %s", name, got, want)
		}
	}
}
