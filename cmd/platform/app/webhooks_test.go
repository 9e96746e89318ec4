package app

import (
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// webhookCreated parses the output of `webhooks create`: the endpoint's id
// and its signing secret.
func webhookCreated(t *testing.T, out string) (id, secret string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("webhooks create printed %q", out)
		}
		switch f[0] {
		case "id":
			id = f[1]
		case "secret":
			secret = f[1]
		}
	}
	if id == "" || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("webhooks create printed %q: want an id and a whsec_ secret", out)
	}
	return id, secret
}

func TestWebhookCommands(t *testing.T) {
	t.Setenv("DATABASE_URL", testdb.URL(t))
	for _, tenant := range []string{"acme", "other"} {
		if code, out, errOut := runCLI("tenants", "create", tenant, "--id", tenant); code != 0 {
			t.Fatalf("tenants create %s = %d %q %q", tenant, code, out, errOut)
		}
	}

	// create prints the id and the secret, said to be shown once.
	code, out, errOut := runCLI("webhooks", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/hook",
		"--events", "interrupt.created, turn.failed", "--description", "ops", "--allow-loopback")
	if code != 0 || !strings.Contains(errOut, "shown only this once") {
		t.Fatalf("webhooks create = %d %q %q", code, out, errOut)
	}
	id, secret := webhookCreated(t, out)

	// A loopback URL needs --allow-loopback.
	if code, _, errOut := runCLI("webhooks", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/other"); code != 1 || !strings.Contains(errOut, "url:") {
		t.Errorf("loopback URL without --allow-loopback = %d %q", code, errOut)
	}

	// list shows it with its delivery figures.
	code, out, errOut = runCLI("webhooks", "list", "--tenant", "acme")
	if code != 0 {
		t.Fatalf("webhooks list = %d %q %q", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID URL ENABLED EVENTS PENDING DELIVERED DEAD" {
		t.Fatalf("webhooks list printed %q", out)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != id+" http://127.0.0.1:9/hook yes interrupt.created,turn.failed 0 0 0" {
		t.Errorf("webhooks list row %q", got)
	}
	if strings.Contains(out, secret) {
		t.Errorf("webhooks list shows the secret: %q", out)
	}

	// update --disable, then show says disabled; flags after the id work.
	if code, out, errOut := runCLI("webhooks", "update", id, "--tenant", "acme", "--disable"); code != 0 || !strings.Contains(out, "disabled") {
		t.Fatalf("webhooks update --disable = %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI("webhooks", "show", "--tenant", "acme", id)
	if code != 0 || !strings.Contains(out, "disabled") || !strings.Contains(out, "http://127.0.0.1:9/hook") ||
		!strings.Contains(out, "interrupt.created,turn.failed") || !strings.Contains(out, "ops") || strings.Contains(out, secret) {
		t.Fatalf("webhooks show = %d %q %q", code, out, errOut)
	}
	for _, field := range []string{"pending:", "delivered:", "dead:"} {
		if !strings.Contains(out, field) {
			t.Errorf("webhooks show lacks %q: %q", field, out)
		}
	}
	// Only the flags given change.
	if code, out, errOut := runCLI("webhooks", "update", id, "--tenant", "acme", "--enable"); code != 0 || !strings.Contains(out, "enabled") || !strings.Contains(out, "interrupt.created,turn.failed") {
		t.Errorf("webhooks update --enable = %d %q %q", code, out, errOut)
	}

	// An unknown event type is refused, naming the field.
	for _, args := range [][]string{
		{"webhooks", "create", "--tenant", "acme", "--url", "http://127.0.0.1:9/x", "--allow-loopback", "--events", "interrupt.exploded"},
		{"webhooks", "update", id, "--tenant", "acme", "--events", "interrupt.exploded"},
	} {
		code, out, errOut := runCLI(args...)
		if (code != 1 && code != 2) || !strings.Contains(errOut, "eventTypes") || !strings.Contains(errOut, "interrupt.exploded") || out != "" {
			t.Errorf("%v = %d %q %q", args, code, out, errOut)
		}
	}

	// rotate-secret prints a new secret.
	code, out, errOut = runCLI("webhooks", "rotate-secret", id, "--tenant", "acme", "--overlap", "1h")
	rotated := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(rotated, "whsec_") || rotated == secret || !strings.Contains(errOut, "until") {
		t.Errorf("webhooks rotate-secret = %d %q %q (first secret %q)", code, out, errOut, secret)
	}

	// A new endpoint has no deliveries: the header only.
	code, out, errOut = runCLI("webhooks", "deliveries", id, "--tenant", "acme", "--status", "dead", "--limit", "10")
	if code != 0 || strings.Join(strings.Fields(out), " ") != "DELIVERY EVENT TYPE STATUS ATTEMPTS LAST STATUS NEXT ATTEMPT LAST ERROR" {
		t.Errorf("webhooks deliveries = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("webhooks", "redeliver", id, "00000000-0000-0000-0000-000000000001", "--tenant", "acme"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("redeliver of no delivery = %d %q", code, errOut)
	}

	// Another tenant does not see the endpoint.
	for _, args := range [][]string{
		{"webhooks", "show", id, "--tenant", "other"},
		{"webhooks", "update", id, "--tenant", "other", "--disable"},
		{"webhooks", "rotate-secret", id, "--tenant", "other"},
		{"webhooks", "deliveries", id, "--tenant", "other"},
		{"webhooks", "delete", id, "--tenant", "other"},
	} {
		if code, out, errOut := runCLI(args...); code != 1 || !strings.Contains(errOut, "webhook "+id+" not found") || out != "" {
			t.Errorf("%v = %d %q %q", args, code, out, errOut)
		}
	}
	if code, out, _ := runCLI("webhooks", "list", "--tenant", "other"); code != 0 || strings.Contains(out, id) {
		t.Errorf("other tenant's list = %d %q", code, out)
	}
	if code, _, errOut := runCLI("webhooks", "list", "--tenant", "nope"); code != 1 || !strings.Contains(errOut, "tenant nope not found") {
		t.Errorf("list of an unknown tenant = %d %q", code, errOut)
	}

	// delete, then show: not found.
	if code, out, errOut := runCLI("webhooks", "delete", id, "--tenant", "acme"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("webhooks delete = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("webhooks", "show", id, "--tenant", "acme"); code == 0 || !strings.Contains(errOut, "not found") || out != "" {
		t.Errorf("show after delete = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("webhooks", "delete", id, "--tenant", "acme"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("second delete = %d %q", code, errOut)
	}
}

func TestWebhookCommandsUsage(t *testing.T) {
	// Usage errors stop before the database: nothing listens here.
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	const id = "6f1c2a0e-8a4b-4c1d-9e2f-3a4b5c6d7e8f"
	for _, args := range [][]string{
		{"webhooks"},
		{"webhooks", "frobnicate"},
		{"webhooks", "list"},
		{"webhooks", "create", "--url", "https://example.com/hook"},
		{"webhooks", "create", "--tenant", "acme"},
		{"webhooks", "show", "--tenant", "acme"},
		{"webhooks", "show", "not-a-uuid", "--tenant", "acme"},
		{"webhooks", "show", id},
		{"webhooks", "update", id, "--tenant", "acme"},
		{"webhooks", "update", id, "--tenant", "acme", "--enable", "--disable"},
		{"webhooks", "update", "nope", "--tenant", "acme", "--disable"},
		{"webhooks", "delete", "nope", "--tenant", "acme"},
		{"webhooks", "rotate-secret", id, "--tenant", "acme", "--overlap", "1000h"},
		{"webhooks", "rotate-secret", id, "--tenant", "acme", "--overlap", "soon"},
		{"webhooks", "deliveries", id, "--tenant", "acme", "--status", "lost"},
		{"webhooks", "deliveries", id, "--tenant", "acme", "--limit", "0"},
		{"webhooks", "redeliver", id, "--tenant", "acme"},
		{"webhooks", "redeliver", id, "not-a-uuid", "--tenant", "acme"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%v = %d %q %q, want the usage error 2", args, code, out, errOut)
		}
		if strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("%v went on to the database: %q", args, errOut)
		}
	}
	if code, out, _ := runCLI("webhooks", "help"); code != 0 || !strings.Contains(out, "rotate-secret") || !strings.Contains(out, "interrupt.created") {
		t.Errorf("webhooks help = %d %q", code, out)
	}
	if code, out, _ := runCLI("help"); code != 0 || !strings.Contains(out, "platform webhooks") {
		t.Errorf("help lacks the webhooks command: %d %q", code, out)
	}
}
