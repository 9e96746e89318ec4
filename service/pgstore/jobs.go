package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

func insertJob(ctx context.Context, q *db.Queries, job *store.TurnJob, owner string) error {
	inputs, err := json.Marshal(job.Inputs)
	if err != nil {
		return fmt.Errorf("encoding job inputs: %w", err)
	}
	pre := job.Preclaimed
	if pre == nil {
		pre = []uuid.UUID{}
	}
	return q.InsertTurnJob(ctx, db.InsertTurnJobParams{
		TenantID: job.TenantID, SnapshotID: job.SnapshotID, Agent: job.Agent, SessionID: job.SessionID,
		ParentID: strPtr(job.ParentID), EndUser: strPtr(job.EndUser), Actor: orSystem(job.Actor),
		Inputs: inputs, Preclaimed: pre, Owner: strPtr(owner),
		TenantCap: int32(job.TenantCap), ActorCap: int32(job.ActorCap),
	})
}

func orSystem(actor string) string {
	if actor == "" {
		return "system"
	}
	return actor
}

// ClaimNextJob implements Store.
func (s *PgStore) ClaimNextJob(ctx context.Context, c store.JobClaim) (*store.TurnJob, error) {
	var row db.TurnJob
	p := db.ClaimNextTurnJobParams{Owner: c.Owner, StaleSeconds: c.Stale.Seconds(), Agents: c.Agents, TenantAgents: c.TenantAgents,
		RunningTenants: make([]string, 0, len(c.Running)), RunningSnapshots: make([]string, 0, len(c.Running))}
	for _, j := range c.Running {
		p.RunningTenants = append(p.RunningTenants, j.TenantID)
		p.RunningSnapshots = append(p.RunningSnapshots, j.SnapshotID)
	}
	// Jobs of every tenant are claimable here: through the system function,
	// then under the job's tenant.
	err := s.tx(ctx, func(q *db.Queries) error {
		var err error
		row, err = q.ClaimNextTurnJob(ctx, p)
		if err != nil {
			return err
		}
		if err := q.SetTenant(ctx, row.TenantID); err != nil {
			return err
		}
		// The snapshot's heartbeat is as old as the dead worker's: refresh
		// it with the claim, or a client polling between the claim and the
		// new worker's first heartbeat would read the snapshot as expired.
		// Unless a turn's end is writing it (see the query).
		return q.TouchSnapshotHeartbeatUnlessLocked(ctx, db.TouchSnapshotHeartbeatUnlessLockedParams{TenantID: row.TenantID, ID: row.SnapshotID})
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	job := &store.TurnJob{
		TenantID: row.TenantID, SnapshotID: row.SnapshotID, Agent: row.Agent, SessionID: row.SessionID,
		ParentID: deref(row.ParentID), EndUser: deref(row.EndUser), Actor: row.Actor,
		Preclaimed: row.Preclaimed, Attempts: int(row.Attempts),
	}
	if err := json.Unmarshal(row.Inputs, &job.Inputs); err != nil {
		return nil, fmt.Errorf("job %s inputs: %w", row.SnapshotID, err)
	}
	return job, nil
}

// errNotOwned rolls back a heartbeat of a job another instance took over.
var errNotOwned = errors.New("the job is not this worker's")

// TouchHeartbeat implements Store. It locks the snapshot before its job
// row, the order in which a turn's end (WriteTurn: the snapshot, then the
// job it deletes) takes them: in the other order a heartbeat at the moment
// the turn ends deadlocked with its write, and the turn failed after its
// tools ran. The snapshot's heartbeat is rolled back when the job turns
// out not to be this worker's.
func (s *PgStore) TouchHeartbeat(ctx context.Context, tenantID, snapshotID, owner string) (string, bool, error) {
	var status string
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		status, err = q.TouchSnapshotHeartbeat(ctx, db.TouchSnapshotHeartbeatParams{TenantID: tenantID, ID: snapshotID})
		if errors.Is(translate(err), store.ErrNotFound) {
			return errNotOwned
		}
		if err != nil {
			return err
		}
		n, err := q.TouchTurnJob(ctx, db.TouchTurnJobParams{TenantID: tenantID, SnapshotID: snapshotID, Owner: &owner})
		if err != nil {
			return err
		}
		if n == 0 {
			return errNotOwned
		}
		return nil
	})
	if errors.Is(err, errNotOwned) {
		return "", false, nil
	}
	return status, err == nil, err
}

// AppendJobInputs implements Store.
func (s *PgStore) AppendJobInputs(ctx context.Context, tenantID, snapshotID string, inputs []protocol.AgentInput) error {
	raw, err := json.Marshal(inputs)
	if err != nil {
		return err
	}
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		return q.AppendTurnJobInputs(ctx, db.AppendTurnJobInputsParams{TenantID: tenantID, SnapshotID: snapshotID, Inputs: raw})
	})
}

// DeleteJob implements Store.
func (s *PgStore) DeleteJob(ctx context.Context, tenantID, snapshotID string) error {
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		return deleteJob(ctx, q, tenantID, snapshotID)
	})
}

// DropAbortedJob implements Store.
func (s *PgStore) DropAbortedJob(ctx context.Context, tenantID, snapshotID, owner string) ([]uuid.UUID, error) {
	var released []uuid.UUID
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		released, err = q.ReleaseAbortedTurnClaims(ctx, db.ReleaseAbortedTurnClaimsParams{
			TenantID: tenantID, SnapshotID: snapshotID, Owner: &owner})
		if err != nil {
			return err
		}
		var batch eventBatch
		for _, id := range released {
			batch.released(id)
		}
		if err := batch.insert(ctx, q, tenantID, "system"); err != nil {
			return err
		}
		return deleteJob(ctx, q, tenantID, snapshotID)
	})
	if err != nil {
		return nil, err
	}
	if len(released) > 0 {
		s.eventsWritten()
	}
	return released, nil
}

// JournalStep implements Store.
func (s *PgStore) JournalStep(ctx context.Context, tenantID, turnID string, step store.TurnStep, owner string) (bool, error) {
	var r db.JournalTurnStepRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		r, err = q.JournalTurnStep(ctx, db.JournalTurnStepParams{TenantID: tenantID, TurnID: turnID, Step: int32(step.Step),
			Message: step.Message, FinishReason: step.FinishReason, Owner: owner})
		return err
	})
	if err != nil {
		return false, err
	}
	if r.Owned && !r.Recorded {
		// Not a model's answer to replace: the turn's count of answers
		// went astray, and it must not go on.
		return false, fmt.Errorf("step %d of turn %s was recorded before", step.Step, turnID)
	}
	return r.Recorded, nil
}

// TurnSteps implements Store.
func (s *PgStore) TurnSteps(ctx context.Context, tenantID, turnID string) ([]store.TurnStep, error) {
	var rows []db.ListTurnStepsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTurnSteps(ctx, db.ListTurnStepsParams{TenantID: tenantID, TurnID: turnID})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.TurnStep, len(rows))
	for i, r := range rows {
		out[i] = store.TurnStep{Step: int(r.Step), Message: r.Message, FinishReason: r.FinishReason}
	}
	return out, nil
}

func deleteJob(ctx context.Context, q *db.Queries, tenantID, snapshotID string) error {
	return q.DeleteTurnJob(ctx, db.DeleteTurnJobParams{TenantID: tenantID, SnapshotID: snapshotID})
}

// ReleaseJobs implements Store.
func (s *PgStore) ReleaseJobs(ctx context.Context, owner string) (int, error) {
	var n int64
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		n, err = q.ReleaseTurnJobs(ctx, owner)
		return err
	})
	return int(n), err
}

// ListenAborts implements store.Store: it blocks, calling fn for every
// abort announced on the database, until ctx ends or the connection fails.
func (s *PgStore) ListenAborts(ctx context.Context, ready func(), fn func(tenantID, snapshotID string)) error {
	return s.listen(ctx, func(q *db.Queries) error { return q.ListenAborts(ctx) }, ready, func(payload string) {
		var note struct {
			TenantID   string `json:"tenantId"`
			SnapshotID string `json:"snapshotId"`
		}
		if json.Unmarshal([]byte(payload), &note) == nil {
			fn(note.TenantID, note.SnapshotID)
		}
	})
}
