package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestATakeoverComesAfterAJournaledCall: a turn's tool call is being
// journaled by the job's owner (StartToolCall, its transaction not yet
// committed) when the job's heartbeat is stale. A takeover that claimed the
// job then would read its journal without the call and run the tool a
// second time (and an aborted turn's decision would be given back with the
// tool run): it must skip the job until the call's row commits, and then
// find the call.
func TestATakeoverComesAfterAJournaledCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, url := storeWithJob(t)
	owner := testdb.OwnerPool(t, url)
	if _, err := owner.Exec(ctx, `UPDATE turn_jobs SET heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}

	journal, err := owner.Begin(ctx) // w1 journaling its call, not committed yet
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = journal.Rollback(ctx) }()
	q := db.New(journal)
	if err := q.SetTenant(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	w1 := "w1"
	if _, err := q.StartToolCall(ctx, db.StartToolCallParams{TenantID: "default", TurnID: "p1", CallKey: "pay", SessionID: "s",
		Agent: "a", Tool: "pay", Actor: "test", Attempt: 1, JobOwner: &w1}); err != nil {
		t.Fatalf("journaling the call as the job's owner: %v", err)
	}
	if got, err := s.ClaimNextJob(ctx, store.JobClaim{Owner: "w2", Agents: []string{"a"}, Stale: time.Second}); err != nil || got != nil {
		t.Fatalf("a takeover while the call is being journaled: %+v, %v; want none", got, err)
	}
	if err := journal.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimNextJob(ctx, store.JobClaim{Owner: "w2", Agents: []string{"a"}, Stale: time.Second})
	if err != nil || got == nil || got.SnapshotID != "p1" {
		t.Fatalf("the takeover once the call committed: %+v, %v", got, err)
	}
	calls, err := s.ListTurnToolCalls(ctx, "default", []string{"p1"})
	if err != nil || len(calls) != 1 {
		t.Fatalf("the takeover's journal: %d calls, %v; want the one journaled", len(calls), err)
	}
}

// TestStepsAreRecordedByTheJobsOwner: a journaled turn's model answers are
// recorded only while its instance owns the job, read back in order, kept
// as written (a text with \u0000, which jsonb refuses), never replaced, and
// go with the job.
func TestStepsAreRecordedByTheJobsOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := storeWithJob(t)
	answers := []string{`{"role":"model","content":[{"text":"a\u0000b"},{"toolRequest":{"name":"pay","ref":"r1"}}]}`, `{"role":"model","content":[{"text":"done"}]}`}
	for i, a := range answers {
		ok, err := s.JournalStep(ctx, "default", "p1", store.TurnStep{Step: i, Message: []byte(a), FinishReason: "stop"}, "w1")
		if err != nil || !ok {
			t.Fatalf("step %d by the job's owner: %v, %v", i, ok, err)
		}
	}
	if ok, err := s.JournalStep(ctx, "default", "p1", store.TurnStep{Step: 2, Message: []byte(`{}`)}, "w2"); err != nil || ok {
		t.Fatalf("a step by another instance: %v, %v; want not recorded", ok, err)
	}
	if _, err := s.JournalStep(ctx, "default", "p1", store.TurnStep{Step: 1, Message: []byte(`{}`)}, "w1"); err == nil {
		t.Fatal("a step recorded again: want an error")
	}
	steps, err := s.TurnSteps(ctx, "default", "p1")
	if err != nil || len(steps) != 2 {
		t.Fatalf("the steps: %+v, %v", steps, err)
	}
	for i, st := range steps {
		if st.Step != i || string(st.Message) != answers[i] || st.FinishReason != "stop" {
			t.Fatalf("step %d read back as %d %s %q", i, st.Step, st.Message, st.FinishReason)
		}
	}
	if err := s.DeleteJob(ctx, "default", "p1"); err != nil {
		t.Fatal(err)
	}
	if steps, err := s.TurnSteps(ctx, "default", "p1"); err != nil || len(steps) != 0 {
		t.Fatalf("%d steps left after the job went; want none (%v)", len(steps), err)
	}
}

// storeWithJob is a store on a new test database where the snapshot p1
// (tenant default, agent a, session s) is pending with a job instance w1
// owns, and the database's URL.
func storeWithJob(t *testing.T) (*PgStore, string) {
	t.Helper()
	ctx := context.Background()
	url := testdb.URL(t)
	s := storesOn(t, url, 1)[0]
	w := &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: "s", SnapshotID: "p1",
		Status: protocol.StatusPending, MessageCount: 0, Actor: "test"}
	job := &store.TurnJob{TenantID: "default", SnapshotID: "p1", Agent: "a", SessionID: "s", Actor: "test"}
	if err := s.CreatePendingSnapshot(ctx, w, job, "w1"); err != nil {
		t.Fatal(err)
	}
	return s, url
}

// TestAClaimPassesOverTheJobsItsInstanceRuns: a stale job the claiming
// instance names as running is not taken (a claim counts an attempt, and
// its own turn was only slow to start its heartbeat); another instance's
// claim, or one that does not name it, takes it and counts one.
func TestAClaimPassesOverTheJobsItsInstanceRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := storeWithJob(t)
	stale := store.JobClaim{Owner: "w1", Agents: []string{"a"}, Stale: time.Nanosecond,
		Running: []store.JobRef{{TenantID: "other", SnapshotID: "p1"}, {TenantID: "default", SnapshotID: "p1"}}}
	if got, err := s.ClaimNextJob(ctx, stale); err != nil || got != nil {
		t.Fatalf("a claim naming the job as running: %+v, %v; want none", got, err)
	}
	stale.Running = stale.Running[:1] // another tenant's snapshot of that id
	got, err := s.ClaimNextJob(ctx, stale)
	if err != nil || got == nil || got.SnapshotID != "p1" || got.Attempts != 1 {
		t.Fatalf("a claim not naming it: %+v, %v; want p1, its first attempt", got, err)
	}
}
