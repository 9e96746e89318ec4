package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/bench"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/retention"
	"github.com/holdpoint/holdpoint/service/store"
)

// env is a runtime with the benchmark agent (a user message pauses on an
// approval, the approval ends the turn) over a fresh database, and a
// connection as the tables' owner to age rows.
type env struct {
	t     *testing.T
	rt    *service.Runtime
	store *pgstore.PgStore
	owner *pgxpool.Pool
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	te := servicetest.New(t, servicetest.Options{Register: bench.Register})
	store, rt := te.Store, te.Runtime
	owner := testdb.OwnerPool(t, te.URL)
	for _, id := range []string{"acme", "rival"} {
		if _, err := te.Tenants.CreateTenant(ctx, id, id); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, rt: rt, store: store, owner: owner}
}

func msg(text string) *protocol.Message {
	return &protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart(text)}}
}

// pause runs a turn in the session that pauses on an approval.
func (e *env) pause(tenant, session string) *protocol.AgentOutput {
	e.t.Helper()
	out, err := e.rt.InvokeOne(context.Background(), auth.Caller{TenantID: tenant, Actor: "test"}, bench.Agent,
		protocol.AgentInit{SessionID: session}, protocol.AgentInput{Message: msg("Transfer $50 to account 12345")}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if out.FinishReason != protocol.FinishInterrupted {
		e.t.Fatalf("turn finished %q, want interrupted", out.FinishReason)
	}
	return out
}

// approve answers the approval out paused on.
func (e *env) approve(tenant string, out *protocol.AgentOutput) (*protocol.AgentOutput, error) {
	req := out.Message.Content[0].ToolRequest
	resume := &protocol.Resume{Respond: []protocol.Part{{ToolResponse: &protocol.ToolResponse{Name: req.Name, Ref: req.Ref, Output: json.RawMessage(`{"approved":true}`)}}}}
	return e.rt.InvokeOne(context.Background(), auth.Caller{TenantID: tenant, Actor: "test"}, bench.Agent,
		protocol.AgentInit{SnapshotID: out.SnapshotID}, protocol.AgentInput{Resume: resume}, nil)
}

// cycle runs a whole approval cycle in the session.
func (e *env) cycle(tenant, session string) {
	e.t.Helper()
	out, err := e.approve(tenant, e.pause(tenant, session))
	if err != nil {
		e.t.Fatal(err)
	}
	if out.FinishReason != protocol.FinishStop {
		e.t.Fatalf("resume finished %q", out.FinishReason)
	}
}

// exec runs SQL as the owner, with triggers off (the audit trail refuses
// updates), for setting up what the runtime cannot produce quickly.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.owner.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// age moves everything of the sessions (or only their rows other than
// events, without events) ago into the past.
func (e *env) age(tenant string, sessions []string, ago time.Duration, events bool) {
	e.t.Helper()
	secs := ago.Seconds()
	e.exec(`UPDATE sessions SET created_at = created_at - make_interval(secs => $3), updated_at = updated_at - make_interval(secs => $3)
	        WHERE tenant_id = $1 AND id = ANY ($2)`, tenant, sessions, secs)
	e.exec(`UPDATE snapshots SET created_at = created_at - make_interval(secs => $3), updated_at = updated_at - make_interval(secs => $3)
	        WHERE tenant_id = $1 AND session_id = ANY ($2)`, tenant, sessions, secs)
	e.exec(`UPDATE interrupts SET created_at = created_at - make_interval(secs => $3), resolved_at = resolved_at - make_interval(secs => $3)
	        WHERE tenant_id = $1 AND session_id = ANY ($2)`, tenant, sessions, secs)
	if events {
		e.exec(`UPDATE interrupt_events e SET created_at = e.created_at - make_interval(secs => $3)
		        WHERE e.tenant_id = $1 AND (e.interrupt_id IN (SELECT id FROM interrupts WHERE tenant_id = $1 AND session_id = ANY ($2))
		           OR e.payload ->> 'snapshotId' IN (SELECT id FROM snapshots WHERE tenant_id = $1 AND session_id = ANY ($2)))`,
			tenant, sessions, secs)
	}
}

// rows counts a session's rows in every table prune deletes from.
func (e *env) rows(tenant, session string) map[string]int64 {
	e.t.Helper()
	out := map[string]int64{}
	for table, sql := range map[string]string{
		"sessions":   `SELECT count(*) FROM sessions WHERE tenant_id = $1 AND id = $2`,
		"snapshots":  `SELECT count(*) FROM snapshots WHERE tenant_id = $1 AND session_id = $2`,
		"messages":   `SELECT count(*) FROM messages m JOIN snapshots s ON s.tenant_id = m.tenant_id AND s.id = m.snapshot_id WHERE m.tenant_id = $1 AND s.session_id = $2`,
		"interrupts": `SELECT count(*) FROM interrupts WHERE tenant_id = $1 AND session_id = $2`,
		"toolCalls":  `SELECT count(*) FROM tool_calls WHERE tenant_id = $1 AND session_id = $2`,
		"events": `SELECT count(*) FROM interrupt_events e WHERE e.tenant_id = $1
		             AND (e.interrupt_id IN (SELECT id FROM interrupts WHERE tenant_id = $1 AND session_id = $2)
		                  OR e.payload ->> 'snapshotId' IN (SELECT id FROM snapshots WHERE tenant_id = $1 AND session_id = $2))`,
	} {
		var n int64
		if err := e.owner.QueryRow(context.Background(), sql, tenant, session).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func (e *env) count(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.owner.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestPrunePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	// A webhook endpoint of acme, so the events have deliveries to make.
	e.exec(`INSERT INTO webhooks (tenant_id, url, event_types, created_by) VALUES ('acme', 'http://127.0.0.1:9/h',
	        ARRAY['interrupt.created', 'interrupt.resolved', 'turn.completed', 'turn.failed', 'tool.called'], 'test')`)
	// (exec runs without triggers: the endpoint's position, where the log
	// is now, as its trigger would set it.)
	e.exec(`INSERT INTO webhook_cursors (tenant_id, webhook_id, xid, id)
	        SELECT tenant_id, id, pg_snapshot_xmin(pg_current_snapshot()), 0 FROM webhooks`)

	e.cycle("acme", "done")        // completed, old: goes
	e.cycle("acme", "failed")      // its latest turn failed, old: goes
	e.pause("acme", "paused")      // a pending interrupt: stays
	e.cycle("acme", "job")         // a detached turn queued: stays
	e.cycle("acme", "recent")      // completed but recent: stays
	e.cycle("acme", "audited")     // old, its audit trail recent: stays
	e.cycle("acme", "undelivered") // old, a delivery of its audit trail pending: stays
	e.cycle("rival", "done")       // another tenant's, which sets no policy: stays
	for _, s := range []string{"done", "failed", "paused", "job", "audited", "undelivered"} {
		e.age("acme", []string{s}, 3*time.Hour, s != "audited")
	}
	e.age("rival", []string{"done"}, 3*time.Hour, true)
	e.exec(`UPDATE snapshots s SET status = 'failed' FROM sessions x
	        WHERE x.tenant_id = 'acme' AND x.id = 'failed' AND s.tenant_id = x.tenant_id AND s.id = x.latest_snapshot_id`)
	e.exec(`INSERT INTO snapshots (tenant_id, id, session_id, agent, parent_id, status, created_at, updated_at)
	        SELECT tenant_id, 'job-pending', id, agent, latest_snapshot_id, 'pending', now() - interval '3 hours', now() - interval '3 hours'
	        FROM sessions WHERE tenant_id = 'acme' AND id = 'job'`)
	e.exec(`INSERT INTO turn_jobs (tenant_id, snapshot_id, agent, session_id, inputs, heartbeat_at, created_at)
	        VALUES ('acme', 'job-pending', $1, 'job', '[]', now() - interval '3 hours', now() - interval '3 hours')`, bench.Agent)
	// While the endpoint has not read their events, no session goes.
	hold := &retention.Pruner{Store: e.store, Batch: 10, Pause: -1,
		Defaults: retention.Policy{Completed: time.Hour, Failed: time.Hour, Events: time.Hour}}
	if dry, err := hold.Prune(ctx, []string{"acme"}, true); err != nil || len(dry) != 1 || dry[0].Counts.Sessions != 0 {
		t.Fatalf("a dry run before the endpoint read the events: %+v %v", dry, err)
	}
	// The endpoint read every event and each was delivered, but one of
	// the undelivered session's, which waits for a retry.
	e.exec(`UPDATE webhook_cursors c SET xid = e.xid, id = e.id
	        FROM (SELECT xid, id FROM interrupt_events WHERE tenant_id = 'acme' ORDER BY xid DESC, id DESC LIMIT 1) e
	        WHERE c.tenant_id = 'acme'`)
	e.exec(`INSERT INTO webhook_deliveries (tenant_id, webhook_id, event_xid, event_id, status, attempts, delivered_at)
	        SELECT e.tenant_id, w.id, e.xid, e.id, 'delivered', 1, now() FROM interrupt_events e
	        JOIN webhooks w ON w.tenant_id = e.tenant_id WHERE e.tenant_id = 'acme'`)
	e.exec(`UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = now() + interval '1 hour'
	        FROM interrupt_events e JOIN interrupts i ON i.tenant_id = e.tenant_id AND i.id = e.interrupt_id
	        WHERE i.session_id = 'undelivered' AND d.tenant_id = e.tenant_id AND d.event_xid = e.xid AND d.event_id = e.id`)

	hour := time.Hour
	if err := e.store.SetRetentionPolicy(ctx, "acme", retention.Policy{Completed: hour, Failed: hour, Events: hour}); err != nil {
		t.Fatal(err)
	}
	if p, err := e.store.RetentionPolicy(ctx, "rival"); err != nil || !p.IsZero() {
		t.Fatalf("rival's policy = %+v %v, want none", p, err)
	}
	before := map[string]map[string]int64{}
	for _, s := range []string{"done", "failed", "paused", "job", "recent", "audited", "undelivered"} {
		before[s] = e.rows("acme", s)
	}
	deliveries := e.count(`SELECT count(*) FROM webhook_deliveries WHERE tenant_id = 'acme'`)

	// A dry run deletes nothing and reports what the run then deletes.
	p := &retention.Pruner{Store: e.store, Batch: 1, Pause: -1}
	dry, err := p.Prune(ctx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 3 || dry[1].TenantID != "acme" || dry[2].TenantID != "rival" || dry[0].Counts.Total()+dry[2].Counts.Total() != 0 {
		t.Fatalf("dry run = %+v", dry)
	}
	if got := e.rows("acme", "done"); got["sessions"] != 1 {
		t.Fatalf("the dry run deleted: %v", got)
	}
	batches := 0
	p.OnBatch = func(string, retention.PruneCounts) { batches++ }
	real, err := p.Prune(ctx, []string{"acme"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(real) != 1 || real[0].Counts != dry[1].Counts {
		t.Fatalf("prune deleted %+v, the dry run said %+v", real[0].Counts, dry[1].Counts)
	}
	want := retention.PruneCounts{Sessions: 2}
	for _, s := range []string{"done", "failed"} {
		want.Snapshots += before[s]["snapshots"]
		want.Messages += before[s]["messages"]
		want.Interrupts += before[s]["interrupts"]
		want.Events += before[s]["events"]
		want.ToolCalls += before[s]["toolCalls"]
	}
	got := real[0].Counts
	gotDeliveries := got.Deliveries
	got.Deliveries = 0
	if got != want || want.Events == 0 || want.Messages == 0 {
		t.Errorf("prune deleted %+v, want %+v", got, want)
	}
	if gotDeliveries == 0 || e.count(`SELECT count(*) FROM webhook_deliveries WHERE tenant_id = 'acme'`) != deliveries-gotDeliveries {
		t.Errorf("deliveries deleted: %d of %d", gotDeliveries, deliveries)
	}
	if batches < 3 {
		t.Errorf("%d batches, want one per session with --batch 1", batches)
	}
	for _, s := range []string{"done", "failed"} {
		for table, n := range e.rows("acme", s) {
			if n != 0 {
				t.Errorf("session %s: %d rows left in %s", s, n, table)
			}
		}
	}
	for _, s := range []string{"paused", "job", "recent", "audited", "undelivered"} {
		if got := e.rows("acme", s); fmt.Sprint(got) != fmt.Sprint(before[s]) {
			t.Errorf("session %s changed: %v, was %v", s, got, before[s])
		}
	}
	if got := e.rows("rival", "done"); got["sessions"] != 1 || got["events"] == 0 {
		t.Errorf("rival's session: %v", got)
	}
	// Nothing left to do: a second run deletes nothing.
	again, err := p.Prune(ctx, []string{"acme"}, false)
	if err != nil || again[0].Counts.Total() != 0 {
		t.Errorf("second prune = %+v %v", again, err)
	}

	// Clearing the policy keeps everything from then on.
	e.age("acme", []string{"recent"}, 3*time.Hour, true)
	if err := e.store.SetRetentionPolicy(ctx, "acme", retention.Policy{}); err != nil {
		t.Fatal(err)
	}
	if r, err := p.Prune(ctx, []string{"acme"}, false); err != nil || r[0].Counts.Total() != 0 {
		t.Errorf("prune without a policy = %+v %v", r, err)
	}
	// Defaults apply to tenants that set nothing. Without an event
	// retention the audit trail goes with its session: the audited
	// session goes too.
	p.Defaults = retention.Policy{Completed: hour}
	if r, err := p.Prune(ctx, []string{"acme"}, false); err != nil || r[0].Counts.Sessions != 2 ||
		e.rows("acme", "recent")["sessions"]+e.rows("acme", "audited")["sessions"] != 0 {
		t.Errorf("prune with a default = %+v %v", r, err)
	}
	if _, err := e.store.RetentionPolicy(ctx, "nope"); store.AsError(err).Status != store.CodeNotFound {
		t.Errorf("policy of an unknown tenant: %v", err)
	}
}

// TestPruneBatches: a run over many sessions with a small batch makes
// many transactions, and deletes them all.
func TestPruneBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var sessions []string
	for i := range 30 {
		s := fmt.Sprintf("s%02d", i)
		e.cycle("acme", s)
		sessions = append(sessions, s)
	}
	e.age("acme", sessions, 3*time.Hour, true)
	var batches []retention.PruneCounts
	p := &retention.Pruner{Store: e.store, Batch: 4, Pause: time.Millisecond,
		Defaults: retention.Policy{Completed: time.Hour, Failed: time.Hour},
		OnBatch:  func(_ string, c retention.PruneCounts) { batches = append(batches, c) }}
	r, err := p.Prune(ctx, []string{"acme"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if r[0].Counts.Sessions != 30 || e.count(`SELECT count(*) FROM sessions WHERE tenant_id = 'acme'`) != 0 {
		t.Fatalf("pruned %+v", r[0].Counts)
	}
	if len(batches) < 8 {
		t.Errorf("%d batches, want at least 30/4", len(batches))
	}
	for _, b := range batches {
		if b.Sessions > 4 {
			t.Errorf("a batch removed %d sessions, more than --batch 4", b.Sessions)
		}
	}
}

// TestPruneRacesTurns: turns on old sessions while a prune runs. A session
// that got a turn is either kept whole, or was removed before the turn
// wrote, and then the turn fails with NOT_FOUND: never a turn written
// into a session whose history is gone.
func TestPruneRacesTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var sessions []string
	outs := map[string]*protocol.AgentOutput{}
	for i := range 40 {
		s := fmt.Sprintf("r%02d", i)
		e.cycle("acme", s)
		sessions = append(sessions, s)
	}
	e.age("acme", sessions, 3*time.Hour, true)
	p := &retention.Pruner{Store: e.store, Batch: 2, Pause: time.Millisecond,
		Defaults: retention.Policy{Completed: time.Hour, Failed: time.Hour}}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var written, refused, anew atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := p.Prune(ctx, []string{"acme"}, false); err != nil {
			t.Errorf("prune: %v", err)
		}
	}()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.rt.InvokeOne(ctx, auth.Caller{TenantID: "acme", Actor: "test"}, bench.Agent,
				protocol.AgentInit{SessionID: s}, protocol.AgentInput{Message: msg("Transfer $5 to account 1")}, nil)
			switch {
			case err == nil && out.FinishReason == protocol.FinishFailed && out.Error != nil && out.Error.Status == store.CodeNotFound:
				// The write found the session pruned: the turn failed
				// with NOT_FOUND and wrote nothing.
				refused.Add(1)
			case err == nil:
				written.Add(1)
				mu.Lock()
				outs[s] = out
				mu.Unlock()
			case errors.Is(err, store.ErrNotFound) || store.AsError(err).Status == store.CodeNotFound:
				refused.Add(1)
			default:
				t.Errorf("turn in %s: %v", s, err)
			}
		}()
	}
	wg.Wait()
	for s, out := range outs {
		// The session is there, its latest snapshot is the turn's, and
		// the whole chain of snapshots back to the first is intact.
		var latest string
		if err := e.owner.QueryRow(ctx, `SELECT latest_snapshot_id FROM sessions WHERE tenant_id = 'acme' AND id = $1`, s).Scan(&latest); err != nil {
			t.Errorf("session %s, which got a turn, is gone: %v", s, err)
			continue
		}
		if latest != out.SnapshotID {
			t.Errorf("session %s: latest %s, the turn wrote %s", s, latest, out.SnapshotID)
		}
		// A turn that found its session already pruned started it anew:
		// its snapshot has no parent. Any other has the whole chain.
		var parent *string
		if err := e.owner.QueryRow(ctx, `SELECT parent_id FROM snapshots WHERE tenant_id = 'acme' AND id = $1`, out.SnapshotID).Scan(&parent); err != nil {
			t.Errorf("session %s: the turn's snapshot: %v", s, err)
			continue
		}
		if parent == nil {
			anew.Add(1)
			continue
		}
		if n := e.count(`WITH RECURSIVE chain AS (
		        SELECT id, parent_id FROM snapshots WHERE tenant_id = 'acme' AND id = $1
		        UNION ALL SELECT s.id, s.parent_id FROM snapshots s JOIN chain c ON s.tenant_id = 'acme' AND s.id = c.parent_id)
		      SELECT count(*) FROM chain`, out.SnapshotID); n != 3 {
			t.Errorf("session %s: %d snapshots on the chain of its latest, want 3", s, n)
		}
	}
	t.Logf("%d turns written (%d of them on a session pruned before they began, started anew), %d refused (session pruned while they ran)",
		written.Load(), anew.Load(), refused.Load())
}
