package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// LoadSnapshot implements Store. A completed snapshot with its state comes
// from the cache when it is there: it never changes, whichever instance
// wrote it.
func (s *PgStore) LoadSnapshot(ctx context.Context, p store.LoadSnapshotParams) (*store.StoredSnapshot, error) {
	scope, agent, id, withState := p.Scope, p.Agent, p.ID, p.WithState
	if snap := s.cache.get(scope.TenantID, id); snap != nil {
		if snap.Agent != agent || !scope.Sees(snap.EndUser) {
			return nil, store.ErrNotFound
		}
		if !p.Split {
			snap = snap.Joined()
		}
		return snap, nil
	}
	snap, err := s.loadSnapshot(ctx, scope.TenantID, agent, id, withState)
	if err != nil {
		return nil, err
	}
	if !scope.Sees(snap.EndUser) {
		return nil, store.ErrNotFound
	}
	if withState {
		s.cache.put(scope.TenantID, snap)
	}
	return snap, nil
}

func (s *PgStore) loadSnapshot(ctx context.Context, tenantID, agent, id string, withState bool) (*store.StoredSnapshot, error) {
	var (
		row     db.Snapshot
		endUser *string
		hist    []db.ListHistoryMessagesRow
	)
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		r, err := q.GetSnapshot(ctx, db.GetSnapshotParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		row, endUser = r.Snapshot, r.SessionEndUser
		if !withState || row.MessageCount == 0 || row.Agent != agent {
			return nil
		}
		hist, err = q.ListHistoryMessages(ctx, db.ListHistoryMessagesParams{
			TenantID: tenantID, SnapshotID: id, MessageCount: row.MessageCount,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if row.Agent != agent {
		return nil, store.ErrNotFound
	}
	out := &store.StoredSnapshot{
		Snapshot:     snapshotFromRow(row),
		Agent:        row.Agent,
		EndUser:      deref(endUser),
		MessageCount: int(row.MessageCount),
	}
	if row.AgentVersion != nil {
		out.AgentVersion = int(*row.AgentVersion)
	}
	if !withState {
		return out, nil
	}
	state, bodies, err := stateFromRows(row, hist)
	if err != nil {
		return nil, err
	}
	out.State, out.Bodies = state, bodies
	return out, nil
}

// stateFromRows is a snapshot's state: its documents, and its history
// rebuilt from the messages of its ancestor chain (with each message's
// stored JSON).
func stateFromRows(row db.Snapshot, hist []db.ListHistoryMessagesRow) (*protocol.SessionState, [][]byte, error) {
	state := &protocol.SessionState{SessionID: row.SessionID}
	if len(row.Custom) > 0 {
		state.Custom = json.RawMessage(row.Custom)
	}
	if len(row.Artifacts) > 0 {
		if err := json.Unmarshal(row.Artifacts, &state.Artifacts); err != nil {
			return nil, nil, fmt.Errorf("snapshot %s artifacts: %w", row.ID, err)
		}
	}
	if row.MessageCount == 0 {
		return state, nil, nil
	}
	if len(hist) != int(row.MessageCount) {
		return nil, nil, fmt.Errorf("snapshot %s: history has %d of %d messages", row.ID, len(hist), row.MessageCount)
	}
	state.Messages = make([]protocol.Message, len(hist))
	bodies := make([][]byte, len(hist))
	for i, r := range hist {
		if int(r.Position) != i {
			return nil, nil, fmt.Errorf("snapshot %s: history position %d missing", row.ID, i)
		}
		body := r.Body
		if r.Edits != nil {
			var edits []json.RawMessage
			if err := json.Unmarshal(r.Edits, &edits); err != nil {
				return nil, nil, fmt.Errorf("snapshot %s message %d edits: %w", row.ID, i, err)
			}
			for _, e := range edits {
				var err error
				if body, err = applyEdit(body, e); err != nil {
					return nil, nil, fmt.Errorf("snapshot %s message %d: %w", row.ID, i, err)
				}
			}
		}
		if err := json.Unmarshal(body, &state.Messages[i]); err != nil {
			return nil, nil, fmt.Errorf("snapshot %s message %d: %w", row.ID, i, err)
		}
		bodies[i] = body
	}
	return state, bodies, nil
}

func snapshotFromRow(row db.Snapshot) protocol.Snapshot {
	snap := protocol.Snapshot{
		SnapshotID:  row.ID,
		SessionID:   row.SessionID,
		CreatedAt:   row.CreatedAt,
		HeartbeatAt: row.HeartbeatAt,
		Status:      row.Status,
	}
	updated := row.UpdatedAt
	snap.UpdatedAt = &updated
	if row.ParentID != nil {
		snap.ParentID = *row.ParentID
	}
	if row.FinishReason != nil {
		snap.FinishReason = *row.FinishReason
	}
	if len(row.Error) > 0 {
		var e protocol.ErrorDetails
		if json.Unmarshal(row.Error, &e) == nil {
			snap.Error = &e
		}
	}
	return snap
}

// LoadSession implements Store.
func (s *PgStore) LoadSession(ctx context.Context, scope store.Scope, id string) (*store.StoredSession, error) {
	var row db.Session
	err := s.piped(ctx, scope.TenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetSession(ctx, db.GetSessionParams{TenantID: scope.TenantID, ID: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &store.StoredSession{ID: row.ID, Agent: row.Agent, EndUser: deref(row.EndUser)}
	if !scope.Sees(out.EndUser) {
		return nil, store.ErrNotFound
	}
	if row.LatestSnapshotID != nil {
		out.LatestSnapshotID = *row.LatestSnapshotID
	}
	return out, nil
}

// CreateSession implements Store. A row committed by a concurrent creator
// after the statement's snapshot is invisible to it, so an empty answer is
// read again.
func (s *PgStore) CreateSession(ctx context.Context, scope store.Scope, agent, id string) (*store.StoredSession, error) {
	for attempt := 0; attempt < 3; attempt++ {
		var row db.CreateSessionRow
		err := s.piped(ctx, scope.TenantID, func(q *db.Queries) error {
			var err error
			row, err = q.CreateSession(ctx, db.CreateSessionParams{TenantID: scope.TenantID, ID: id, Agent: agent, EndUser: strPtr(scope.EndUser)})
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out := &store.StoredSession{ID: id, Agent: row.Agent, EndUser: deref(row.EndUser)}
		if !scope.Sees(out.EndUser) {
			return nil, store.ErrNotFound
		}
		if !row.Created {
			// Taken by the same owner meanwhile: continue it as it is now.
			return s.LoadSession(ctx, scope, id)
		}
		return out, nil
	}
	return nil, fmt.Errorf("session %s: created and deleted concurrently", id)
}

// CreatePendingSnapshot implements Store: the snapshot (through the same
// statement a turn end uses) and the job, in one batch.
func (s *PgStore) CreatePendingSnapshot(ctx context.Context, w *store.SnapshotWrite, job *store.TurnJob, owner string) error {
	// The session moves to the pending snapshot (or, on failure, maybe
	// not): what this instance cached of it is no longer its head.
	s.heads.drop(w.TenantID, w.SessionID)
	params, err := s.turnParams(w)
	if err != nil {
		return err
	}
	return s.piped(ctx, w.TenantID, func(q *db.Queries) error {
		if err := q.WriteTurn(ctx, params); err != nil {
			return err
		}
		return insertJob(ctx, q, job, owner)
	})
}

func encodeSnapshotDocs(w *store.SnapshotWrite) (errJSON, artifacts []byte, err error) {
	if w.Error != nil {
		if errJSON, err = json.Marshal(w.Error); err != nil {
			return nil, nil, err
		}
	}
	if len(w.Artifacts) > 0 {
		if artifacts, err = json.Marshal(w.Artifacts); err != nil {
			return nil, nil, err
		}
	}
	return errJSON, artifacts, nil
}

// errNotPending stops a finalize whose snapshot was aborted meanwhile.
var errNotPending = errors.New("snapshot is no longer pending")

// errClaimRefused stops a write whose claims (SnapshotWrite.Claims) found
// an interrupt no longer pending.
var errClaimRefused = errors.New("an interrupt the turn answers is no longer pending")

// claimRefusal says why a write's claims were refused, as ClaimInterrupts
// would have: the interrupts are read again after the write rolled back.
func (s *PgStore) claimRefusal(ctx context.Context, w *store.SnapshotWrite) error {
	var rows []db.ListInterruptsBySnapshotRow
	err := s.piped(ctx, w.TenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListInterruptsBySnapshot(ctx, db.ListInterruptsBySnapshotParams{TenantID: w.TenantID, SnapshotID: w.ParentID})
		return err
	})
	if err != nil {
		return err
	}
	for _, c := range w.Claims {
		for _, r := range rows {
			if r.Tool == c.Tool && r.Ref == c.Ref {
				if e := refuse(r.ID, c.Tool, c.Ref, r.Status, true); e != nil {
					return e
				}
			}
		}
	}
	// Every one is pending again (a claim released since): the write lost
	// a race all the same.
	return store.Errorf(store.CodeAborted, "the interrupts this resume answers changed while its turn ran; resume again")
}

// CachedSessionHead implements Store.
func (s *PgStore) CachedSessionHead(tenantID, id string) *store.StoredSession {
	return s.heads.get(tenantID, id)
}

// CommitTurn implements Store.
func (s *PgStore) CommitTurn(ctx context.Context, w *store.SnapshotWrite) (bool, error) {
	err := s.writeTurn(ctx, w)
	if err != nil {
		s.heads.drop(w.TenantID, w.SessionID)
	} else {
		// The write moved the session to its snapshot (WriteTurn moves it
		// for every status, and only a session of this end user and agent).
		s.heads.put(w.TenantID, store.StoredSession{ID: w.SessionID, Agent: w.Agent, EndUser: w.EndUser, LatestSnapshotID: w.SnapshotID})
	}
	if errors.Is(err, errNotPending) {
		return false, nil
	}
	if len(w.Claims) > 0 && (err == nil || errors.Is(err, errClaimRefused)) {
		s.cache.markAnswered(w.TenantID, w.ParentID)
	}
	if errors.Is(err, errClaimRefused) {
		return false, s.claimRefusal(context.WithoutCancel(ctx), w)
	}
	if err != nil {
		return false, err
	}
	if len(w.Interrupts) > 0 || len(w.Claims) > 0 || (w.ResolvedEvents && len(w.Resolved) > 0) || turnEvent(w.Status) != "" {
		s.eventsWritten()
	}
	if w.Status == protocol.StatusCompleted && w.State != nil {
		now := time.Now()
		count := len(w.Bodies)
		if w.Last != nil {
			count++
		}
		s.cache.put(w.TenantID, &store.StoredSnapshot{
			Snapshot: protocol.Snapshot{SnapshotID: w.SnapshotID, SessionID: w.SessionID, ParentID: w.ParentID,
				CreatedAt: now, UpdatedAt: &now, Status: protocol.StatusCompleted, FinishReason: w.FinishReason, State: w.State},
			Agent: w.Agent, EndUser: w.EndUser, MessageCount: count, Bodies: w.Bodies, AgentVersion: w.AgentVersion,
			Handoff: w.Handoff, Last: w.Last, LastBody: w.LastBody,
		})
	}
	return true, nil
}

// writeTurn writes a new snapshot: one statement (WriteTurn) in one batch,
// so one round trip and one transaction.
func (s *PgStore) writeTurn(ctx context.Context, w *store.SnapshotWrite) error {
	p, err := s.turnParams(w)
	if err != nil {
		return err
	}
	return s.piped(ctx, w.TenantID, func(q *db.Queries) error {
		if err := q.WriteTurn(ctx, p); err != nil {
			return err
		}
		// Queued in the same batch, so written in the same transaction,
		// with no extra round trip.
		if err := finishToolCalls(ctx, q, w.TenantID, w.SnapshotID, w.ToolCalls); err != nil {
			return err
		}
		return setResumed(ctx, q, w)
	})
}

// messageRun is how a snapshot row holds the messages its turn wrote: the
// first position, and a JSON array of the bodies from it to the last,
// with null at a position the turn did not write and an edit (messageEdit)
// where it resolved the paused requests of its parent's message (with
// edits: the write has a parent). Both are nil when it wrote none.
func messageRun(msgs []store.PositionedMessage, edits bool) (*int32, []byte) {
	if len(msgs) == 0 {
		return nil, nil
	}
	first, last := msgs[0].Position, msgs[0].Position
	size := 2
	for _, m := range msgs {
		first, last = min(first, m.Position), max(last, m.Position)
		size += len(m.Body) + 1
	}
	at := make([][]byte, last-first+1)
	for _, m := range msgs {
		at[m.Position-first] = m.Body
		if edits && m.Base != nil {
			if edit := messageEdit(m.Base, m.Body); edit != nil {
				at[m.Position-first] = edit
			}
		}
	}
	buf := make([]byte, 0, size+5*(len(at)-len(msgs)))
	buf = append(buf, '[')
	for i, b := range at {
		if i > 0 {
			buf = append(buf, ',')
		}
		if b == nil {
			b = []byte("null")
		}
		buf = append(buf, b...)
	}
	buf = append(buf, ']')
	from := int32(first)
	return &from, buf
}

// turnParams is writeTurnParams for a write this store sends, counted for
// the statistics keeper.
func (s *PgStore) turnParams(w *store.SnapshotWrite) (db.WriteTurnParams, error) {
	s.stats.wrote()
	return writeTurnParams(w)
}

// writeTurnParams encodes a snapshot write for the WriteTurn statement, with
// created events for its interrupts and resolved events for its claims.
func writeTurnParams(w *store.SnapshotWrite) (db.WriteTurnParams, error) {
	errJSON, artifacts, err := encodeSnapshotDocs(w)
	if err != nil {
		return db.WriteTurnParams{}, err
	}
	p := db.WriteTurnParams{
		TenantID: w.TenantID, SnapshotID: w.SnapshotID, SessionID: w.SessionID, Agent: w.Agent,
		ParentID: strPtr(w.ParentID), Status: w.Status, FinishReason: strPtr(w.FinishReason),
		Error: errJSON, Custom: nullableJSON(w.Custom), Artifacts: artifacts,
		MessageCount: int32(w.MessageCount), HeartbeatAt: w.HeartbeatAt, EndUser: strPtr(w.EndUser), AgentVersion: int32(w.AgentVersion),
		Actor: orSystem(w.Actor), FinalizePending: w.FinalizePending, ExpectedHead: w.ExpectedHead,
		MaxPending: int32(w.MaxPending), KeepHead: w.KeepHead,
	}
	p.MessagesFrom, p.TurnMessages = messageRun(w.Messages, w.ParentID != "")
	var batch eventBatch
	for _, in := range w.Interrupts {
		id := store.NewRowID()
		p.InterruptIDs = append(p.InterruptIDs, id)
		p.Tools = append(p.Tools, in.Tool)
		p.Refs = append(p.Refs, in.Ref)
		p.Inputs = append(p.Inputs, nullableJSON(in.Input))
		p.Metadatas = append(p.Metadatas, nullableJSON(in.Metadata))
		p.ExpiresInMs = append(p.ExpiresInMs, in.ExpiresIn.Milliseconds())
		p.OnExpires = append(p.OnExpires, nullableJSON(in.OnExpire))
		p.Repauses = append(p.Repauses, in.Repause)
		p.Policies = append(p.Policies, nullableJSON(in.Policy))
		batch.created(id, w.SnapshotID)
	}
	if w.ResolvedEvents {
		for _, id := range w.Resolved {
			batch.resumed(id, w.SnapshotID)
		}
	}
	for _, c := range w.Claims {
		p.ClaimTools = append(p.ClaimTools, c.Tool)
		p.ClaimRefs = append(p.ClaimRefs, c.Ref)
		p.ClaimResolutions = append(p.ClaimResolutions, nullableJSON(c.Resolution))
	}
	p.EventInterruptIDs, p.EventTypes, p.EventPayloads = batch.ids, batch.types, batch.payloads
	p.TurnEvent = turnEvent(w.Status)
	return p, nil
}

// turnEvent is the event a turn's end writes: none for a pending snapshot
// (a detached turn writes its event when it ends) or an aborted one.
func turnEvent(status string) string {
	switch status {
	case protocol.StatusCompleted:
		return events.TurnCompleted
	case protocol.StatusFailed:
		return events.TurnFailed
	}
	return ""
}

// setResumed records the snapshot a resume produced on the interrupts it
// answered, unless their claim already did.
func setResumed(ctx context.Context, q *db.Queries, w *store.SnapshotWrite) error {
	if w.ResumedSet {
		return nil
	}
	for _, id := range w.Resolved {
		if err := q.SetInterruptResumedSnapshot(ctx, db.SetInterruptResumedSnapshotParams{
			TenantID: w.TenantID, ID: id, ResumedSnapshotID: &w.SnapshotID,
		}); err != nil {
			return err
		}
	}
	return nil
}

// AbortSnapshot implements Store.
func (s *PgStore) AbortSnapshot(ctx context.Context, scope store.Scope, agent, id string) (string, error) {
	var prev string
	err := s.inTx(ctx, scope.TenantID, func(q *db.Queries) error {
		r, err := q.GetSnapshotForUpdate(ctx, db.GetSnapshotForUpdateParams{TenantID: scope.TenantID, ID: id})
		if err != nil {
			return err
		}
		row := r.Snapshot
		if row.Agent != agent || !scope.Sees(deref(r.SessionEndUser)) {
			return store.ErrNotFound
		}
		prev = row.Status
		if row.Status != protocol.StatusPending {
			return nil
		}
		_, err = q.AbortPendingSnapshot(ctx, db.AbortPendingSnapshotParams{TenantID: scope.TenantID, ID: id})
		return err
	})
	return prev, err
}

// FindSessions implements Store.
func (s *PgStore) FindSessions(ctx context.Context, tenantID, q string, limit int) ([]store.SessionSummary, error) {
	var rows []db.FindSessionsRow
	err := s.piped(ctx, tenantID, func(qq *db.Queries) error {
		var err error
		rows, err = qq.FindSessions(ctx, db.FindSessionsParams{TenantID: tenantID, Q: q, MaxRows: int32(limit)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.SessionSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.SessionSummary{ID: r.ID, Agent: r.Agent, EndUser: deref(r.EndUser),
			LatestSnapshotID: deref(r.LatestSnapshotID), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
	}
	return out, nil
}

// ListSessionSnapshots implements Store.
func (s *PgStore) ListSessionSnapshots(ctx context.Context, tenantID, sessionID string) ([]protocol.Snapshot, error) {
	var rows []db.ListSessionSnapshotsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListSessionSnapshots(ctx, db.ListSessionSnapshotsParams{TenantID: tenantID, SessionID: sessionID})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Snapshot, 0, len(rows))
	for _, r := range rows {
		snap := snapshotFromRow(db.Snapshot{ID: r.ID, SessionID: sessionID, ParentID: r.ParentID, Status: r.Status,
			FinishReason: r.FinishReason, Error: r.Error, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
		out = append(out, snap)
	}
	return out, nil
}
