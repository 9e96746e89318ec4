package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "1d": 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute, "1s": time.Second} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "0d", "0", "1.5d", "1e3d", "30 d", "30D", "1d2h", "500ms", "-5h", "36501d", "9999999d", "forever", "+3d"} {
		if got, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) = %v, want an error", in, got)
		}
	}
}

func TestRetentionCommands(t *testing.T) {
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	if code, out, errOut := runCLI("tenants", "create", "Acme", "--id", "acme"); code != 0 {
		t.Fatalf("tenants create = %d %q %q", code, out, errOut)
	}
	if code, out, _ := runCLI("tenants", "show", "acme"); code != 0 || !strings.Contains(out, "none (keeps everything)") {
		t.Errorf("tenants show = %d %q", code, out)
	}
	code, out, errOut := runCLI("tenants", "set-retention", "acme", "--completed", "30d", "--failed", "36h")
	if code != 0 || !strings.Contains(out, "completed 30d, failed 36h0m0s, events with their session") {
		t.Fatalf("set-retention = %d %q %q", code, out, errOut)
	}
	if code, out, _ := runCLI("tenants", "show", "acme"); code != 0 || !strings.Contains(out, "completed 30d, failed 36h0m0s") {
		t.Errorf("tenants show = %d %q", code, out)
	}
	for _, args := range [][]string{
		{"tenants", "set-retention", "acme", "--completed", "-1d"},
		{"tenants", "set-retention", "acme", "--completed", "30"},
		{"tenants", "set-retention", "acme", "--failed", "1.5d"},
		{"tenants", "set-retention", "acme", "--events", "0s"},
		{"tenants", "set-retention", "acme"},
		{"tenants", "set-retention", "acme", "--clear", "--completed", "1d"},
		{"tenants", "set-retention", "--completed", "1d"},
		{"prune", "--batch", "0"},
		{"prune", "--pause", "-1s"},
		{"prune", "--completed", "soon"},
		{"prune", "extra"},
	} {
		if code, _, errOut := runCLI(args...); code != 2 || errOut == "" {
			t.Errorf("%v = %d %q, want the usage error 2", args, code, errOut)
		}
	}
	if code, _, errOut := runCLI("tenants", "set-retention", "nope", "--completed", "1d"); code != 1 || !strings.Contains(errOut, "tenant nope not found") {
		t.Errorf("set-retention of an unknown tenant = %d %q", code, errOut)
	}
	if code, _, errOut := runCLI("prune", "--tenant", "nope"); code != 1 || !strings.Contains(errOut, "tenant nope not found") {
		t.Errorf("prune of an unknown tenant = %d %q", code, errOut)
	}

	// A completed session of acme, three days old.
	conn := connect(t, url)
	for _, sql := range []string{
		`INSERT INTO sessions (tenant_id, id, agent, latest_snapshot_id, updated_at) VALUES ('acme', 'old', 'a', 'old-1', now() - interval '3 days')`,
		`INSERT INTO snapshots (tenant_id, id, session_id, agent, status, updated_at, message_count, messages_from, turn_messages)
		 VALUES ('acme', 'old-1', 'old', 'a', 'completed', now() - interval '3 days', 2, 0, '[{"role": "user"}, {"role": "model"}]')`,
	} {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	rowOf := func(out, tenant string) string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == tenant {
				return strings.Join(f, " ")
			}
		}
		return ""
	}
	// Not old enough under the tenant's policy.
	if code, out, errOut := runCLI("prune", "--dry-run"); code != 0 || rowOf(out, "acme") != "acme 0 0 0 0 0 0 0 0" {
		t.Errorf("prune --dry-run = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("tenants", "set-retention", "acme", "--completed", "2d"); code != 0 {
		t.Fatalf("set-retention = %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI("prune", "--dry-run", "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "nothing deleted") || rowOf(out, "acme") != "acme 1 1 2 0 0 0 0 0" {
		t.Errorf("prune --dry-run = %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI("prune", "--batch", "10")
	if code != 0 || rowOf(out, "acme") != "acme 1 1 2 0 0 0 0 1" || rowOf(out, "total") != "total 1 1 2 0 0 0 0 1" {
		t.Errorf("prune = %d %q %q", code, out, errOut)
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM sessions WHERE tenant_id = 'acme'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d sessions left (%v)", n, err)
	}
	if code, out, errOut := runCLI("tenants", "set-retention", "acme", "--clear"); code != 0 || !strings.Contains(out, "keeps everything") {
		t.Errorf("set-retention --clear = %d %q %q", code, out, errOut)
	}
}
