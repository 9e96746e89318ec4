package tenantagents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/tenantagents"
)

// refused checks err is ALREADY_EXISTS and names what has the name.
func refused(t *testing.T, what string, err error, names string) {
	t.Helper()
	var se *store.Error
	if !errors.As(err, &se) || se.Status != store.CodeAlreadyExists || !strings.Contains(se.Message, `"`+names+`"`) {
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
	want := []store.TenantAgentName{{TenantID: "acme", Name: "bankingAgent"}, {TenantID: "rival", Name: "BankingAgent"}}
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

// demoInstance is another instance over e's database with the demo's
// compiled bankingAgent (its transferMoney a Go function): serving no
// tenants' agents, or, with tenants set, serving them too.
func (e *env) demoInstance(t *testing.T, tenants bool) *service.Runtime {
	t.Helper()
	in := servicetest.New(t, servicetest.Options{
		URL:      e.url,
		Register: func(rt *service.Runtime) error { return rt.Register(demo.BankingAgent(demo.NewModel())) },
	})
	rt := in.Runtime
	if tenants {
		rt.SetTenantAgents(&tenantagents.Manager{Store: in.Store, Runtime: rt, Models: models{}, AllowLoopback: true,
			Client: httptool.Client{Backoff: 10 * time.Millisecond}})
	}
	return rt
}

// TestSnapshotResumesOnlyOnItsDefinition is issue 25's attack on resumes:
// an approval a tenant's bankingAgent paused, resumed on an instance with
// the compiled bankingAgent, never runs the compiled transferMoney. It is
// refused, before any claim or tool call, unless the instance serves the
// tenant's agent too: then the tenant's version that paused it runs.
func TestSnapshotResumesOnlyOnItsDefinition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme, rival := e.tenants["acme"], e.tenants["rival"]
	if _, err := e.m.Put(ctx, acme, "bankingAgent", e.bankingPrompt(t)); err != nil {
		t.Fatal(err)
	}
	paused, err := e.rt.InvokeOne(ctx, acme, "bankingAgent", protocol.AgentInit{SessionID: "s1"}, user("Transfer $50 to account 12345"), nil)
	if err != nil || len(interrupted(paused)) != 1 {
		t.Fatalf("send: %v %+v", err, paused)
	}
	approve := respond(interrupted(paused)[0], `{"approved":true}`)
	pending := func() []store.Interrupt {
		t.Helper()
		items, err := inbox.New(e.rt).ListInterrupts(ctx, acme, store.InterruptFilter{SessionID: "s1", Status: store.InterruptPending})
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	nothingRan := func(what string) {
		t.Helper()
		var calls int
		if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM tool_calls WHERE session_id = 's1'`).Scan(&calls); err != nil {
			t.Fatal(err)
		}
		if calls != 0 || len(e.recv.recorded()) != 0 || len(pending()) != 1 {
			t.Fatalf("%s: %d tool calls, %d backend calls, %d interrupts pending: want nothing run and the approval pending", what, calls, len(e.recv.recorded()), len(pending()))
		}
	}
	wantRefusal := func(what string, err error, wrote, serves string) {
		t.Helper()
		var se *store.Error
		want := fmt.Sprintf("snapshot %s was paused by %s; this instance serves %s: it cannot resume it", paused.SnapshotID, wrote, serves)
		if !errors.As(err, &se) || se.Status != store.CodeFailedPrecondition || se.Message != want {
			t.Fatalf("%s: %v, want FAILED_PRECONDITION %q", what, err, want)
		}
	}

	// On a --demo instance that serves no tenants' agents: refused, by the
	// protocol's resume and by the inbox alike.
	demoOnly := e.demoInstance(t, false)
	_, err = demoOnly.InvokeOne(ctx, acme, "bankingAgent", protocol.AgentInit{SnapshotID: paused.SnapshotID}, approve, nil)
	wantRefusal("resume", err, "tenant agent bankingAgent version 1", "the compiled agent bankingAgent")
	_, err = demoOnly.InvokeOne(ctx, acme, "bankingAgent", protocol.AgentInit{SessionID: "s1"}, approve, nil)
	wantRefusal("resume by session", err, "tenant agent bankingAgent version 1", "the compiled agent bankingAgent")
	_, err = inbox.New(demoOnly).RespondInterrupt(ctx, acme, pending()[0].ID, json.RawMessage(`{"approved":true}`), "")
	wantRefusal("inbox", err, "tenant agent bankingAgent version 1", "the compiled agent bankingAgent")
	nothingRan("on the compiled agent")

	// On a --demo instance that serves tenants' agents too: the tenant's
	// version 1 resumes, its HTTP tool is called, not the Go one.
	both := e.demoInstance(t, true)
	done, err := both.InvokeOne(ctx, acme, "bankingAgent", protocol.AgentInit{SnapshotID: paused.SnapshotID}, approve, nil)
	if err != nil || done.FinishReason != "stop" || len(e.recv.recorded()) != 1 {
		t.Fatalf("resume where the tenant's agent is served: %v %+v, backend calls %d", err, done, len(e.recv.recorded()))
	}
	var status int
	if err := e.admin.QueryRow(ctx, `SELECT http_status FROM tool_calls WHERE session_id = 's1' AND tool = 'transferMoney'`).Scan(&status); err != nil || status != 200 {
		t.Fatalf("transferMoney's row: %v %d, want the HTTP tool's", err, status)
	}

	// The other way: a compiled agent's approval is not resumed by a
	// tenant's agent of its name (defined meanwhile, through an instance
	// that does not have it compiled in).
	compiled, err := demoOnly.InvokeOne(ctx, rival, "bankingAgent", protocol.AgentInit{SessionID: "r1"}, user("Transfer $50 to account 12345"), nil)
	if err != nil || len(interrupted(compiled)) != 1 {
		t.Fatalf("compiled send: %v %+v", err, compiled)
	}
	if _, err := e.m.Put(ctx, rival, "bankingAgent", e.bankingPrompt(t)); err != nil {
		t.Fatal(err)
	}
	_, err = e.rt.InvokeOne(ctx, rival, "bankingAgent", protocol.AgentInit{SnapshotID: compiled.SnapshotID}, respond(interrupted(compiled)[0], `{"approved":true}`), nil)
	var se *store.Error
	want := fmt.Sprintf("snapshot %s was paused by the compiled agent bankingAgent; this instance serves tenant agent bankingAgent version 1: it cannot resume it", compiled.SnapshotID)
	if !errors.As(err, &se) || se.Message != want {
		t.Fatalf("compiled snapshot on the tenant's agent: %v, want %q", err, want)
	}
}

// TestDetachedTurnsAreClaimedByTheirKind checks a detached turn is taken
// over only by an instance that runs its kind of definition: a tenant's
// agent's never by one that has only the compiled agent of its name, a
// compiled agent's never through the tenant's agent of its name.
func TestDetachedTurnsAreClaimedByTheirKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.m.Put(ctx, e.tenants["acme"], "bankingAgent", e.bankingPrompt(t)); err != nil {
		t.Fatal(err)
	}
	// acme's tenant agent's detached turn (version 1), and one of the
	// compiled bankingAgent (no version), nobody's.
	_, err := e.admin.Exec(ctx, `
		INSERT INTO sessions (tenant_id, id, agent) VALUES ('acme', 'st', 'bankingAgent'), ('acme', 'sc', 'bankingAgent');
		INSERT INTO snapshots (tenant_id, id, session_id, agent, status, agent_version)
		VALUES ('acme', 'tenant-turn', 'st', 'bankingAgent', 'pending', 1), ('acme', 'compiled-turn', 'sc', 'bankingAgent', 'pending', NULL);
		INSERT INTO turn_jobs (tenant_id, snapshot_id, agent, session_id, inputs)
		VALUES ('acme', 'tenant-turn', 'bankingAgent', 'st', '[]'), ('acme', 'compiled-turn', 'bankingAgent', 'sc', '[]');`)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(owner string, compiled []string, tenants bool) string {
		t.Helper()
		job, err := e.store.ClaimNextJob(ctx, store.JobClaim{Owner: owner, Agents: compiled, TenantAgents: tenants, Stale: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if job == nil {
			return ""
		}
		return job.SnapshotID
	}
	if got := claim("tenants-only", nil, true); got != "tenant-turn" {
		t.Fatalf("an instance serving tenants' agents claimed %q, want tenant-turn", got)
	}
	if got := claim("tenants-only", nil, true); got != "" {
		t.Fatalf("an instance without the compiled agent claimed %q", got)
	}
	if _, err := e.admin.Exec(ctx, `UPDATE turn_jobs SET owner = NULL`); err != nil {
		t.Fatal(err)
	}
	if got := claim("demo", []string{"bankingAgent"}, false); got != "compiled-turn" {
		t.Fatalf("a --demo instance serving no tenants' agents claimed %q, want compiled-turn", got)
	}
	if got := claim("demo", []string{"bankingAgent"}, false); got != "" {
		t.Fatalf("a --demo instance serving no tenants' agents claimed %q", got)
	}
}
