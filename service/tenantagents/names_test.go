package tenantagents_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
)

// refused checks err is ALREADY_EXISTS and names what has the name.
func refused(t *testing.T, what string, err error, names string) {
	t.Helper()
	var se *service.Error
	if !errors.As(err, &se) || se.Status != service.CodeAlreadyExists || !strings.Contains(se.Message, `"`+names+`"`) {
		t.Errorf("%s: %v, want ALREADY_EXISTS naming %q", what, err, names)
	}
}

// TestAgentNamesAreOneNamespace is issue 25's attack on names: a tenant
// agent beside its own of another case, or named as a compiled agent of
// this or another instance, is refused and stores nothing.
func TestAgentNamesAreOneNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme, rival := e.tenants["acme"], e.tenants["rival"]
	if _, err := e.m.Put(ctx, acme, "bankingAgent", e.bankingPrompt(t)); err != nil {
		t.Fatal(err)
	}
	versions := func(tenant string) int {
		t.Helper()
		var n int
		if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM tenant_agent_versions WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rename := func(name string) []byte {
		return []byte(strings.Replace(string(e.bankingPrompt(t)), "name: bankingAgent", "name: "+name, 1))
	}

	// BankingAgent beside bankingAgent: refused, naming the one it has.
	_, err := e.m.Put(ctx, acme, "BankingAgent", rename("BankingAgent"))
	refused(t, "BankingAgent beside bankingAgent", err, "bankingAgent")
	if n := versions("acme"); n != 1 {
		t.Fatalf("a refused name stored versions: %d, want 1", n)
	}
	if names, _ := e.rt.AgentNamesFor(ctx, acme); slices.Contains(names, "BankingAgent") {
		t.Fatalf("acme's agents: %v", names)
	}
	// The database refuses it too, whoever writes.
	if _, err := e.admin.Exec(ctx, `INSERT INTO tenant_agents (tenant_id, name, current_version) VALUES ('acme', 'BANKINGAGENT', 1)`); err == nil {
		t.Fatal("the database took BANKINGAGENT beside bankingAgent")
	}
	// Names are the tenant's: another tenant may have BankingAgent.
	if _, err := e.m.Put(ctx, rival, "BankingAgent", rename("BankingAgent")); err != nil {
		t.Fatalf("rival's BankingAgent: %v", err)
	}

	// A compiled agent of this process, in any case.
	_, err = e.m.Put(ctx, acme, "BANKINGAGENTCLIENT", rename("BANKINGAGENTCLIENT"))
	refused(t, "a compiled agent's name in capitals", err, "bankingAgentClient")

	// A compiled agent another instance recorded (this process has none of
	// that name): refused through any instance.
	if clash, err := e.store.RecordCompiledAgents(ctx, "other-instance", []string{"supportAgent"}); err != nil || len(clash) != 0 {
		t.Fatalf("recording supportAgent: %v %v", clash, err)
	}
	for _, name := range []string{"supportAgent", "SupportAgent"} {
		_, err = e.m.Put(ctx, acme, name, rename(name))
		refused(t, name+" compiled into another instance", err, "supportAgent")
	}
	if n := versions("acme"); n != 1 {
		t.Fatalf("refused names stored versions: %d, want 1", n)
	}

	// The order race: an instance with a compiled bankingAgent starts
	// after tenants defined theirs. It is told of them (they are kept),
	// and from then on the name is refused.
	clash, err := e.store.RecordCompiledAgents(ctx, "demo-instance", []string{"bankingAgent", "supportAgent"})
	if err != nil {
		t.Fatal(err)
	}
	want := []service.TenantAgentName{{TenantID: "acme", Name: "bankingAgent"}, {TenantID: "rival", Name: "BankingAgent"}}
	if !slices.Equal(clash, want) {
		t.Fatalf("tenants' agents with compiled names: %v, want %v", clash, want)
	}
	_, err = e.m.Put(ctx, acme, "bankingAgent", e.bankingPrompt(t))
	refused(t, "a new version once the name is compiled in", err, "bankingAgent")
	var seen int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM compiled_agents WHERE name = 'supportAgent' AND last_instance = 'demo-instance' AND last_seen_at >= first_seen_at`).Scan(&seen); err != nil || seen != 1 {
		t.Fatalf("supportAgent's record: %v %d", err, seen)
	}
}
