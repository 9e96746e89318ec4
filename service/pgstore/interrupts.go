package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/store"
)

// eventBatch collects audit events (rows of interrupt_events) as the
// column arrays the statements unnest: the one place an event's type and
// payload are made.
type eventBatch struct {
	ids      []uuid.UUID
	types    []string
	payloads [][]byte
}

func (b *eventBatch) add(id uuid.UUID, typ string, payload json.RawMessage) {
	b.ids = append(b.ids, id)
	b.types = append(b.types, typ)
	b.payloads = append(b.payloads, nullableJSON(payload))
}

// created: the turn that paused on the interrupt, by its snapshot.
func (b *eventBatch) created(id uuid.UUID, snapshotID string) {
	payload, _ := json.Marshal(map[string]string{"snapshotId": snapshotID})
	b.add(id, events.Created, payload)
}

// resumed: the resume that answered the interrupt, by the snapshot it
// wrote.
func (b *eventBatch) resumed(id uuid.UUID, snapshotID string) {
	payload, _ := json.Marshal(map[string]string{"resumedSnapshotId": snapshotID})
	b.add(id, events.Resolved, payload)
}

// decided: an operator's or a deadline's decision, as stored on the row.
func (b *eventBatch) decided(id uuid.UUID, resolution json.RawMessage) {
	b.add(id, events.Resolved, resolution)
}

// released: a claim given back.
func (b *eventBatch) released(id uuid.UUID) { b.add(id, events.Released, nil) }

// expired: a deadline that passed with nothing to answer.
func (b *eventBatch) expired(id uuid.UUID) { b.add(id, events.Expired, nil) }

// insert appends the batch's events of one tenant, by actor.
func (b *eventBatch) insert(ctx context.Context, q *db.Queries, tenantID, actor string) error {
	if len(b.ids) == 0 {
		return nil
	}
	return q.InsertInterruptEvents(ctx, db.InsertInterruptEventsParams{
		TenantID: tenantID, InterruptIDs: b.ids, Types: b.types, Payloads: b.payloads, Actor: orSystem(actor),
	})
}

// ClaimInterrupts implements Store. The claim is one statement (one round
// trip); when only some of the keys could be claimed (another resume or a
// decision got there first), the ones this call took are given back.
func (s *PgStore) ClaimInterrupts(ctx context.Context, cp store.ClaimInterruptsParams) ([]uuid.UUID, error) {
	tenantID, claims, actor := cp.TenantID, cp.Claims, cp.Actor
	if len(claims) == 0 {
		return nil, nil
	}
	p := claimParams(cp)
	var rows []db.ClaimInterruptsByKeyRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ClaimInterruptsByKey(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.cache.markAnswered(tenantID, cp.SnapshotID)
	ids, refusal := claimOutcome(claims, rows)
	if refusal != nil {
		if len(ids) > 0 {
			if err := s.ReleaseInterrupts(context.WithoutCancel(ctx), tenantID, ids, actor); err != nil {
				return nil, err
			}
		}
		return nil, refusal
	}
	if len(ids) > 0 {
		s.eventsWritten()
	}
	return ids, nil
}

// claimParams is the claim statement's parameters.
func claimParams(cp store.ClaimInterruptsParams) db.ClaimInterruptsByKeyParams {
	p := db.ClaimInterruptsByKeyParams{TenantID: cp.TenantID, SnapshotID: cp.SnapshotID, Actor: orSystem(cp.Actor),
		JobSnapshotID: cp.JobSnapshotID, ResumedSnapshotID: cp.ResumedSnapshotID}
	for _, c := range cp.Claims {
		p.Tools = append(p.Tools, c.Tool)
		p.Refs = append(p.Refs, c.Ref)
		p.Resolutions = append(p.Resolutions, nullableJSON(c.Resolution))
	}
	return p
}

// claimOutcome is what the claim statement's rows say: the interrupts it
// took, or why not all could be.
func claimOutcome(claims []store.InterruptClaim, rows []db.ClaimInterruptsByKeyRow) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	var refusal error
	for _, c := range claims {
		for _, r := range rows {
			if r.Tool != c.Tool || r.Ref != c.Ref {
				continue
			}
			switch {
			case r.ClaimedNow:
				ids = append(ids, r.ID)
			case refusal == nil:
				// Still pending when read, yet not claimed: another resume
				// took it meanwhile.
				refusal = refuse(r.ID, c.Tool, c.Ref, r.Status, true)
			}
		}
	}
	return ids, refusal
}

// GuardedClaim implements Store: the guard's pending snapshot and job and
// the claim in one transaction, which a refused claim rolls back whole.
func (s *PgStore) GuardedClaim(ctx context.Context, w *store.SnapshotWrite, job *store.TurnJob, owner string, cp store.ClaimInterruptsParams) ([]uuid.UUID, error) {
	params, err := s.turnParams(w)
	if err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	err = s.inTx(ctx, w.TenantID, func(q *db.Queries) error {
		if err := q.WriteTurn(ctx, params); err != nil {
			return err
		}
		if err := insertJob(ctx, q, job, owner); err != nil {
			return err
		}
		rows, err := q.ClaimInterruptsByKey(ctx, claimParams(cp))
		if err != nil {
			return err
		}
		var refusal error
		ids, refusal = claimOutcome(cp.Claims, rows)
		return refusal
	})
	if err == nil || errors.As(err, new(*store.Error)) {
		s.cache.markAnswered(w.TenantID, cp.SnapshotID)
	}
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		s.eventsWritten()
	}
	return ids, nil
}

// refuse explains why an interrupt cannot be claimed, the one place these
// messages are made: an expired one is a precondition failure; a resolved
// one, or (raced) one another resume took while this one read it pending,
// a lost race (ABORTED). A pending one that did not race is claimable: nil.
func refuse(id uuid.UUID, tool, ref, status string, raced bool) error {
	switch {
	case status == store.InterruptExpired:
		return store.Errorf(store.CodeFailedPrecondition, "interrupt %s (%s%s) expired and can no longer be resumed", id, tool, store.RefSuffix(ref))
	case status == store.InterruptPending && raced:
		e := store.Errorf(store.CodeAborted, "interrupt %s (%s%s) was claimed by another resume", id, tool, store.RefSuffix(ref))
		e.Cause = &store.ClaimRefused{InterruptID: id, Tool: tool, Ref: ref}
		return e
	case status == store.InterruptPending:
		return nil
	default:
		e := store.Errorf(store.CodeAborted, "interrupt %s (%s%s) is already %s", id, tool, store.RefSuffix(ref), status)
		e.Cause = &store.ClaimRefused{InterruptID: id, Tool: tool, Ref: ref}
		return e
	}
}

// ReleaseInterrupts implements Store.
func (s *PgStore) ReleaseInterrupts(ctx context.Context, tenantID string, ids []uuid.UUID, actor string) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		for _, id := range ids {
			if err := q.ReleaseInterrupt(ctx, db.ReleaseInterruptParams{TenantID: tenantID, ID: id}); err != nil {
				return err
			}
		}
		var batch eventBatch
		for _, id := range ids {
			batch.released(id)
		}
		return batch.insert(ctx, q, tenantID, actor)
	})
	if err == nil {
		s.eventsWritten()
	}
	return err
}

func interruptFromRow(r db.Interrupt) store.Interrupt {
	out := store.Interrupt{
		ID:         r.ID,
		Agent:      r.Agent,
		SessionID:  r.SessionID,
		SnapshotID: r.SnapshotID,
		Tool:       r.Tool,
		Ref:        r.Ref,
		Input:      rawOrNilBytes(r.Input),
		Metadata:   rawOrNilBytes(r.Metadata),
		Status:     r.Status,
		CreatedAt:  r.CreatedAt,
		ExpiresAt:  r.ExpiresAt,
		ResolvedAt: r.ResolvedAt,
		Resolution: rawOrNilBytes(r.Resolution),
		OnExpire:   rawOrNilBytes(r.OnExpire),
	}
	if r.ResolvedBy != nil {
		out.ResolvedBy = *r.ResolvedBy
	}
	if r.ResumedSnapshotID != nil {
		out.ResumedSnapshotID = *r.ResumedSnapshotID
	}
	if r.PreviousID.Valid {
		id := uuid.UUID(r.PreviousID.Bytes)
		out.PreviousID = &id
	}
	if r.EndUser != nil {
		out.EndUser = *r.EndUser
	}
	if len(r.Policy) > 0 {
		var p store.StoredPolicy
		if json.Unmarshal(r.Policy, &p) == nil {
			out.Policy = &p
			out.Approvals, out.ApprovalsNeeded = int(r.ApprovalsGiven), int(r.ApprovalsNeeded)
		}
	}
	if r.Scope != nil {
		out.Scope = *r.Scope
	}
	out.ProposedInput = rawOrNilBytes(r.ProposedInput)
	out.EscalatedAt = r.EscalatedAt
	return out
}

func rawOrNilBytes(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// ListInterrupts implements Store.
func (s *PgStore) ListInterrupts(ctx context.Context, tenantID string, f store.InterruptFilter) ([]store.Interrupt, error) {
	p := db.ListInterruptsParams{
		TenantID:        tenantID,
		Status:          f.Status,
		Agent:           strPtr(f.Agent),
		Tool:            strPtr(f.Tool),
		SessionID:       strPtr(f.SessionID),
		EndUser:         strPtr(f.EndUser),
		CreatedBefore:   f.CreatedBefore,
		CreatedAfter:    f.CreatedAfter,
		CursorCreatedAt: f.AfterCreatedAt,
		PageSize:        int32(f.Limit),
		AllScopes:       f.AllScopes,
		Scopes:          f.Scopes,
	}
	if f.Scopes == nil {
		p.Scopes = []string{}
	}
	if f.AfterCreatedAt != nil {
		p.CursorID = pgtype.UUID{Bytes: f.AfterID, Valid: true}
	}
	var rows []db.ListInterruptsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		if !f.Oldest {
			var err error
			rows, err = q.ListInterrupts(ctx, p)
			return err
		}
		oldest, err := q.ListInterruptsOldest(ctx, db.ListInterruptsOldestParams(p))
		for _, r := range oldest {
			rows = append(rows, db.ListInterruptsRow(r))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.Interrupt, len(rows))
	for i, r := range rows {
		out[i] = interruptFromRow(r.Interrupt)
		out[i].EndUser = r.AskedBy
	}
	return out, nil
}

// GetInterrupt implements Store.
func (s *PgStore) GetInterrupt(ctx context.Context, tenantID string, id uuid.UUID) (*store.Interrupt, error) {
	row, err := pipedQuery(ctx, s, tenantID, func(q *db.Queries) (db.GetInterruptRow, error) {
		return q.GetInterrupt(ctx, db.GetInterruptParams{TenantID: tenantID, ID: id})
	})
	if err != nil {
		return nil, err
	}
	return askedInterrupt(row.Interrupt, row.AskedBy), nil
}

// askedInterrupt is the interrupt of r, with the end user who asked it.
func askedInterrupt(r db.Interrupt, endUser string) *store.Interrupt {
	out := interruptFromRow(r)
	out.EndUser = endUser
	return &out
}

// InterruptOfRequest implements Store.
func (s *PgStore) InterruptOfRequest(ctx context.Context, tenantID, snapshotID, tool, ref string) (*store.Interrupt, error) {
	row, err := pipedQuery(ctx, s, tenantID, func(q *db.Queries) (db.GetInterruptOfRequestRow, error) {
		return q.GetInterruptOfRequest(ctx, db.GetInterruptOfRequestParams{TenantID: tenantID, SnapshotID: snapshotID, Tool: tool, Ref: ref})
	})
	if err != nil {
		return nil, err
	}
	return askedInterrupt(row.Interrupt, row.AskedBy), nil
}

// ListInterruptEvents implements Store.
func (s *PgStore) ListInterruptEvents(ctx context.Context, tenantID string, id uuid.UUID) ([]store.InterruptEvent, error) {
	var rows []db.InterruptEvent
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListInterruptEvents(ctx, db.ListInterruptEventsParams{TenantID: tenantID, InterruptID: pgtype.UUID{Bytes: id, Valid: true}})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.InterruptEvent, len(rows))
	for i, r := range rows {
		out[i] = store.InterruptEvent{Pos: store.EventPos{Xid: int64(r.Xid.Uint64), ID: r.ID}, InterruptID: r.InterruptID.Bytes, Type: r.Type, Actor: r.Actor, Payload: rawOrNilBytes(r.Payload), CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// DecideInterrupt implements Store.
func (s *PgStore) DecideInterrupt(ctx context.Context, p store.DecideInterruptParams) (*store.Decision, error) {
	tenantID, id, resolution, actor := p.TenantID, p.ID, p.Resolution, p.Actor
	var out *store.Decision
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		row, rows, err := lockForDecision(ctx, q, tenantID, id)
		if err != nil {
			return err
		}
		if err := refuse(row.ID, row.Tool, row.Ref, row.Status, false); err != nil {
			return err
		}
		var batch eventBatch
		if p.Vote != nil {
			d, err := s.vote(ctx, q, row, p, &batch)
			if err != nil || d != nil {
				out = d
				return err
			}
			resolution = withProposal(resolution, row.ProposedInput)
		}
		n, err := q.ClaimInterrupt(ctx, db.ClaimInterruptParams{
			TenantID: tenantID, ID: id, Resolution: nullableJSON(resolution), ResolvedBy: strPtr(actor),
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return store.Errorf(store.CodeAborted, "interrupt %s was decided concurrently", id)
		}
		batch.decided(id, resolution)
		if err := batch.insert(ctx, q, tenantID, actor); err != nil {
			return err
		}
		row.Status = store.InterruptResolved
		row.Resolution = resolution
		row.ResolvedBy = strPtr(actor)
		now := time.Now()
		row.ResolvedAt = &now
		it := interruptFromRow(*row)
		out = &store.Decision{Interrupt: &it}
		out.Waiting, out.Batch = splitDecided(rows)
		if len(out.Waiting) > 0 {
			out.Batch = nil
		}
		return nil
	})
	if err == nil {
		s.eventsWritten()
	}
	return out, err
}

// splitDecided splits a paused snapshot's interrupts into those still
// pending and those decided but not yet resumed.
func splitDecided(rows []db.Interrupt) (waiting, decided []store.Interrupt) {
	for _, r := range rows {
		switch {
		case r.Status == store.InterruptPending:
			waiting = append(waiting, interruptFromRow(r))
		case r.Status == store.InterruptResolved && r.ResumedSnapshotID == nil:
			decided = append(decided, interruptFromRow(r))
		}
	}
	return waiting, decided
}

// SweepDueInterrupts implements Store.
func (s *PgStore) SweepDueInterrupts(ctx context.Context, limit int) ([]store.SweptInterrupt, []store.DecidedSnapshot, error) {
	var swept []store.SweptInterrupt
	var decided []store.DecidedSnapshot
	// The sweeper serves every tenant: its batch comes from the system
	// function, and each interrupt is changed under its own tenant.
	err := s.tx(ctx, func(q *db.Queries) error {
		due, err := q.LockDueInterrupts(ctx, int32(limit))
		if err != nil {
			return err
		}
		swept = make([]store.SweptInterrupt, 0, len(due))
		touched := map[snapshotKey]string{} // -> agent, for snapshots that got a respond
		for _, row := range due {
			responded, err := applyDeadline(ctx, q, row)
			if err != nil {
				return err
			}
			status := store.InterruptExpired
			if responded {
				status = store.InterruptResolved
			}
			swept = append(swept, store.SweptInterrupt{TenantID: row.TenantID, Agent: row.Agent, Tool: row.Tool, Status: status})
			if responded {
				touched[snapshotKey{row.TenantID, row.SnapshotID}] = row.Agent
			}
		}
		decided, err = decidedSnapshots(ctx, q, touched)
		return err
	})
	if err == nil && len(swept) > 0 {
		s.eventsWritten()
	}
	return swept, decided, err
}

// snapshotKey names a snapshot across tenants.
type snapshotKey struct{ tenant, snapshot string }

// applyDeadline applies a due interrupt's deadline under its tenant: its
// fixed answer (responded) or its expiry.
func applyDeadline(ctx context.Context, q *db.Queries, row db.Interrupt) (responded bool, err error) {
	var policy struct {
		Action string          `json:"action"`
		Output json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(row.OnExpire, &policy)
	if err := q.SetTenant(ctx, row.TenantID); err != nil {
		return false, err
	}
	var batch eventBatch
	if policy.Action == "respond" {
		resolution, _ := json.Marshal(map[string]any{"respond": rawjson.Or(policy.Output, "null"), "reason": "deadline"})
		if _, err := q.ClaimInterrupt(ctx, db.ClaimInterruptParams{
			TenantID: row.TenantID, ID: row.ID, Resolution: resolution, ResolvedBy: strPtr("system"),
		}); err != nil {
			return false, err
		}
		batch.decided(row.ID, resolution)
		return true, batch.insert(ctx, q, row.TenantID, "system")
	}
	if _, err := q.ExpireInterrupt(ctx, db.ExpireInterruptParams{TenantID: row.TenantID, ID: row.ID}); err != nil {
		return false, err
	}
	batch.expired(row.ID)
	return false, batch.insert(ctx, q, row.TenantID, "system")
}

// decidedSnapshots are the snapshots among touched whose interrupts are
// all decided now (none expired): they resume with those decisions.
func decidedSnapshots(ctx context.Context, q *db.Queries, touched map[snapshotKey]string) ([]store.DecidedSnapshot, error) {
	var out []store.DecidedSnapshot
	for k, agent := range touched {
		if err := q.SetTenant(ctx, k.tenant); err != nil {
			return nil, err
		}
		rows, err := q.ListInterruptsBySnapshotForUpdate(ctx, db.ListInterruptsBySnapshotForUpdateParams{TenantID: k.tenant, SnapshotID: k.snapshot})
		if err != nil {
			return nil, err
		}
		waiting, batch := splitDecided(rows)
		if len(waiting) == 0 && len(batch) > 0 && !anyExpired(rows) {
			out = append(out, store.DecidedSnapshot{TenantID: k.tenant, Agent: agent, SnapshotID: k.snapshot, Batch: batch})
		}
	}
	return out, nil
}

func anyExpired(rows []db.Interrupt) bool {
	for _, r := range rows {
		if r.Status == store.InterruptExpired {
			return true
		}
	}
	return false
}

// ReportInterrupts implements Store.
func (s *PgStore) ReportInterrupts(ctx context.Context, p store.ReportInterruptsParams) ([]store.ReportRow, error) {
	var rows []db.ReportInterruptsRow
	err := s.piped(ctx, p.TenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ReportInterrupts(ctx, db.ReportInterruptsParams{TenantID: p.TenantID, FromTime: p.From, ToTime: p.To, GroupBy: p.GroupBy})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.ReportRow, len(rows))
	for i, r := range rows {
		decided := r.Resolved > 0
		out[i] = store.ReportRow{
			Key: r.GroupKey, Total: r.Total, Pending: r.Pending, Resolved: r.Resolved, Expired: r.Expired,
			Cancelled: r.Cancelled, Approved: r.Approved, Denied: r.Denied,
			DecisionP50: floatIf(decided, r.DecisionP50), DecisionP90: floatIf(decided, r.DecisionP90),
			DecisionP99: floatIf(decided, r.DecisionP99), PendingAgeP50: floatIf(r.Pending > 0, r.PendingAgeP50),
			PendingAgeP99: floatIf(r.Pending > 0, r.PendingAgeP99),
		}
	}
	return out, nil
}

func floatIf(ok bool, v float64) *float64 {
	if !ok {
		return nil
	}
	return &v
}

// CountPendingInterrupts implements Store.
func (s *PgStore) CountPendingInterrupts(ctx context.Context, tenantID string, scopes []string, allScopes bool) ([]store.PendingCount, error) {
	if scopes == nil {
		scopes = []string{}
	}
	return pipedRows(ctx, s, tenantID, func(q *db.Queries) ([]db.CountPendingInterruptsRow, error) {
		return q.CountPendingInterrupts(ctx, db.CountPendingInterruptsParams{TenantID: tenantID, Scopes: scopes, AllScopes: allScopes})
	}, func(r db.CountPendingInterruptsRow) store.PendingCount {
		return store.PendingCount{Agent: r.Agent, Tool: r.Tool, Pending: r.Pending}
	})
}

// PendingInterruptStats implements Store: a system function, since it
// counts every tenant's interrupts.
func (s *PgStore) PendingInterruptStats(ctx context.Context) ([]store.PendingStat, error) {
	return pipedRows(ctx, s, "", func(q *db.Queries) ([]db.PendingInterruptStatsRow, error) {
		return q.PendingInterruptStats(ctx)
	}, func(r db.PendingInterruptStatsRow) store.PendingStat {
		return store.PendingStat{TenantID: r.TenantID, Pending: r.Pending, Oldest: r.Oldest}
	})
}

// GuardDecided implements Store: the guard of a decided batch's turn (its
// pending snapshot, written aside, and its job) and the decisions taken
// for it, in one transaction; when a decision was taken already, nothing
// is written and the error is store.ErrDecisionTaken.
func (s *PgStore) GuardDecided(ctx context.Context, w *store.SnapshotWrite, job *store.TurnJob, owner string, ids []uuid.UUID) error {
	params, err := s.turnParams(w)
	if err != nil {
		return err
	}
	return s.inTx(ctx, w.TenantID, func(q *db.Queries) error {
		if err := q.WriteTurn(ctx, params); err != nil {
			return err
		}
		if err := insertJob(ctx, q, job, owner); err != nil {
			return err
		}
		for _, id := range ids {
			n, err := q.GuardDecidedInterrupt(ctx, db.GuardDecidedInterruptParams{ResumedSnapshotID: w.SnapshotID, TenantID: w.TenantID, ID: id})
			if err != nil {
				return err
			}
			if n != 1 {
				return store.ErrDecisionTaken
			}
		}
		return nil
	})
}

// StrandedDecisions implements Store.
func (s *PgStore) StrandedDecisions(ctx context.Context, olderThan time.Duration, limit int) ([]store.DecidedSnapshot, error) {
	var out []store.DecidedSnapshot
	err := s.tx(ctx, func(q *db.Queries) error {
		rows, err := q.ListStrandedDecisions(ctx, db.ListStrandedDecisionsParams{OlderSeconds: olderThan.Seconds(), BatchSize: int32(limit)})
		if err != nil {
			return err
		}
		touched := make(map[snapshotKey]string, len(rows))
		for _, r := range rows {
			touched[snapshotKey{r.TenantID, r.SnapshotID}] = r.Agent
		}
		out, err = decidedSnapshots(ctx, q, touched)
		return err
	})
	return out, err
}

// vote records p.Vote on the locked pending row: a second vote of the same
// voter is refused; an approval short of the approvals needed returns the
// decision that only records it (with its event), else nil to go on with
// the decision (row.ProposedInput then is the input approved).
func (s *PgStore) vote(ctx context.Context, q *db.Queries, row *db.Interrupt, p store.DecideInterruptParams, batch *eventBatch) (*store.Decision, error) {
	v := p.Vote
	if deref(row.Scope) != p.Scope {
		return nil, store.Errorf(store.CodeAborted, "interrupt %s was escalated to %s meanwhile: decide it again if you may", row.ID, deref(row.Scope))
	}
	var keyID pgtype.UUID
	if id, err := uuid.Parse(v.KeyID); err == nil {
		keyID = pgtype.UUID{Bytes: id, Valid: true}
	}
	n, err := q.InsertVote(ctx, db.InsertVoteParams{
		TenantID: p.TenantID, InterruptID: row.ID, Voter: v.Voter, KeyID: keyID, KeyName: v.KeyName,
		Vote: v.Vote, Input: nullableJSON(v.Input), Note: strPtr(v.Note),
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, store.Errorf(store.CodeAborted, "%s has already voted on interrupt %s: one person counts once", v.Voter, row.ID)
	}
	payload := map[string]any{"vote": v.Vote, "voter": v.Voter, "keyId": v.KeyID, "keyName": v.KeyName}
	if v.Vote == store.VoteApprove {
		c, err := q.CountApproval(ctx, db.CountApprovalParams{TenantID: p.TenantID, ID: row.ID, Input: nullableJSON(v.Input)})
		if err != nil {
			return nil, err
		}
		row.ProposedInput = c.ProposedInput
		payload["approvals"], payload["needed"] = c.ApprovalsGiven, c.ApprovalsNeeded
		if len(v.Input) > 0 {
			payload["input"] = v.Input
		}
		if c.ApprovalsGiven < c.ApprovalsNeeded {
			raw, _ := json.Marshal(payload)
			batch.add(row.ID, events.Voted, raw)
			if err := batch.insert(ctx, q, p.TenantID, p.Actor); err != nil {
				return nil, err
			}
			it := interruptFromRow(*row)
			it.Approvals, it.ProposedInput = int(c.ApprovalsGiven), rawOrNilBytes(c.ProposedInput)
			return &store.Decision{Interrupt: &it, Voted: true, Approvals: int(c.ApprovalsGiven), Needed: int(c.ApprovalsNeeded)}, nil
		}
	}
	raw, _ := json.Marshal(payload)
	batch.add(row.ID, events.Voted, raw)
	return nil, nil
}

// withProposal is the resolution of an approval that reached its count,
// with the input it approved when an approver edited it.
func withProposal(resolution json.RawMessage, proposed []byte) json.RawMessage {
	if len(proposed) == 0 {
		return resolution
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(resolution, &m) != nil {
		return resolution
	}
	if _, ok := m["restart"]; !ok {
		return resolution
	}
	m["input"] = proposed
	out, _ := json.Marshal(m)
	return out
}

// ListVotes implements Store.
func (s *PgStore) ListVotes(ctx context.Context, tenantID string, id uuid.UUID) ([]store.Vote, error) {
	var out []store.Vote
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		rows, err := q.ListVotes(ctx, db.ListVotesParams{TenantID: tenantID, InterruptID: id})
		if err != nil {
			return err
		}
		for _, r := range rows {
			v := store.Vote{Voter: r.Voter, KeyName: r.KeyName, Vote: r.Vote, Input: rawOrNilBytes(r.Input), At: r.CreatedAt}
			if r.KeyID.Valid {
				v.KeyID = uuid.UUID(r.KeyID.Bytes).String()
			}
			if r.Note != nil {
				v.Note = *r.Note
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// lockForDecision locks every interrupt of the snapshot that paused on id
// (as a resume's claim does) and returns id's row among them.
func lockForDecision(ctx context.Context, q *db.Queries, tenantID string, id uuid.UUID) (*db.Interrupt, []db.Interrupt, error) {
	target, err := q.GetInterrupt(ctx, db.GetInterruptParams{TenantID: tenantID, ID: id})
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.ListInterruptsBySnapshotForUpdate(ctx, db.ListInterruptsBySnapshotForUpdateParams{
		TenantID: tenantID, SnapshotID: target.Interrupt.SnapshotID,
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range rows {
		if rows[i].ID == id {
			return &rows[i], rows, nil
		}
	}
	return nil, nil, store.ErrNotFound
}
