package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// PgStore is the PostgreSQL Store.
type PgStore struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// cache keeps completed snapshots this instance wrote or read, with
	// their state, so the next turn of a conversation does not read back
	// the history the previous turn just wrote.
	cache *snapshotCache

	notifyOnce sync.Once
	notifyCh   chan struct{}
}

// DefaultSnapshotCacheSize bounds the completed snapshots a store keeps in
// memory.
const DefaultSnapshotCacheSize = 4096

// NewPostgresStore returns a store over pool.
func NewPostgresStore(pool *pgxpool.Pool) *PgStore {
	return &PgStore{pool: pool, q: db.New(pool), cache: newSnapshotCache(DefaultSnapshotCacheSize)}
}

// errSessionTaken is SQLSTATE HP404, raised by WriteTurn when the session
// belongs to another end user or agent (holdpoint_session_taken).
const sqlstateSessionTaken = "HP404"

// translate is the one error translator at the store boundary.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == sqlstateSessionTaken {
			return ErrNotFound
		}
		switch pgErr.Code[:2] {
		case "08", "57": // connection exception, operator intervention (shutdown)
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return err
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

// inTx runs fn in a transaction scoped to one tenant: the row-level
// security policies show it only that tenant's rows. The rollback uses a
// context that survives the caller's cancellation so a cancelled request
// never leaves a transaction open.
func (s *PgStore) inTx(ctx context.Context, tenantID string, fn func(q *db.Queries) error) error {
	return s.tx(ctx, func(q *db.Queries) error {
		if err := q.SetTenant(ctx, tenantID); err != nil {
			return translate(err)
		}
		return fn(q)
	})
}

// inSystemTx runs fn in a transaction that sees every tenant, for the
// workers that span tenants.
func (s *PgStore) inSystemTx(ctx context.Context, fn func(q *db.Queries) error) error {
	return s.tx(ctx, func(q *db.Queries) error {
		if err := q.SetSystem(ctx); err != nil {
			return translate(err)
		}
		return fn(q)
	})
}

func (s *PgStore) tx(ctx context.Context, fn func(q *db.Queries) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(s.q.WithTx(tx)); err != nil {
		return err
	}
	return translate(tx.Commit(ctx))
}

// LoadSnapshot implements Store. A completed snapshot with its state comes
// from the cache when it is there: it never changes, whichever instance
// wrote it.
func (s *PgStore) LoadSnapshot(ctx context.Context, scope Scope, agent, id string, withState bool) (*StoredSnapshot, error) {
	if snap := s.cache.get(scope.TenantID, id); snap != nil {
		if snap.Agent != agent || !scope.Sees(snap.EndUser) {
			return nil, ErrNotFound
		}
		return snap, nil
	}
	snap, err := s.loadSnapshot(ctx, scope.TenantID, agent, id, withState)
	if err != nil {
		return nil, err
	}
	if !scope.Sees(snap.EndUser) {
		return nil, ErrNotFound
	}
	if withState {
		s.cache.put(scope.TenantID, snap)
	}
	return snap, nil
}

func (s *PgStore) loadSnapshot(ctx context.Context, tenantID, agent, id string, withState bool) (*StoredSnapshot, error) {
	var (
		row     db.Snapshot
		endUser *string
		hist    []db.ListHistoryMessagesRow
	)
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		r, err := q.GetSnapshot(ctx, db.GetSnapshotParams{TenantID: tenantID, ID: id})
		if err != nil {
			return translate(err)
		}
		row, endUser = r.Snapshot, r.SessionEndUser
		if !withState || row.MessageCount == 0 || row.Agent != agent {
			return nil
		}
		hist, err = q.ListHistoryMessages(ctx, db.ListHistoryMessagesParams{
			TenantID: tenantID, SnapshotID: id, MessageCount: row.MessageCount,
		})
		return translate(err)
	})
	if err != nil {
		return nil, err
	}
	if row.Agent != agent {
		return nil, ErrNotFound
	}
	out := &StoredSnapshot{
		Snapshot:     snapshotFromRow(row),
		Agent:        row.Agent,
		EndUser:      deref(endUser),
		MessageCount: int(row.MessageCount),
	}
	if !withState {
		return out, nil
	}
	state := &SessionState{SessionID: row.SessionID}
	if len(row.Custom) > 0 {
		state.Custom = json.RawMessage(row.Custom)
	}
	if len(row.Artifacts) > 0 {
		if err := json.Unmarshal(row.Artifacts, &state.Artifacts); err != nil {
			return nil, fmt.Errorf("snapshot %s artifacts: %w", id, err)
		}
	}
	if row.MessageCount > 0 {
		rows := hist
		if len(rows) != int(row.MessageCount) {
			return nil, fmt.Errorf("snapshot %s: history has %d of %d messages", id, len(rows), row.MessageCount)
		}
		state.Messages = make([]Message, len(rows))
		out.Bodies = make([][]byte, len(rows))
		for i, r := range rows {
			if int(r.Position) != i {
				return nil, fmt.Errorf("snapshot %s: history position %d missing", id, i)
			}
			if err := json.Unmarshal(r.Body, &state.Messages[i]); err != nil {
				return nil, fmt.Errorf("snapshot %s message %d: %w", id, i, err)
			}
			out.Bodies[i] = r.Body
		}
	}
	out.State = state
	return out, nil
}

func snapshotFromRow(row db.Snapshot) Snapshot {
	snap := Snapshot{
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
		var e ErrorDetails
		if json.Unmarshal(row.Error, &e) == nil {
			snap.Error = &e
		}
	}
	return snap
}

// LoadSession implements Store.
func (s *PgStore) LoadSession(ctx context.Context, scope Scope, id string) (*StoredSession, error) {
	var row db.Session
	err := s.piped(ctx, scope.TenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetSession(ctx, db.GetSessionParams{TenantID: scope.TenantID, ID: id})
		return translate(err)
	})
	if err != nil {
		return nil, err
	}
	out := &StoredSession{ID: row.ID, Agent: row.Agent, EndUser: deref(row.EndUser)}
	if !scope.Sees(out.EndUser) {
		return nil, ErrNotFound
	}
	if row.LatestSnapshotID != nil {
		out.LatestSnapshotID = *row.LatestSnapshotID
	}
	return out, nil
}

// CreateSession implements Store. A row committed by a concurrent creator
// after the statement's snapshot is invisible to it, so an empty answer is
// read again.
func (s *PgStore) CreateSession(ctx context.Context, scope Scope, agent, id string) (*StoredSession, error) {
	for attempt := 0; attempt < 3; attempt++ {
		var row db.CreateSessionRow
		err := s.piped(ctx, scope.TenantID, func(q *db.Queries) error {
			var err error
			row, err = q.CreateSession(ctx, db.CreateSessionParams{TenantID: scope.TenantID, ID: id, Agent: agent, EndUser: strPtr(scope.EndUser)})
			return err
		})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out := &StoredSession{ID: id, Agent: row.Agent, EndUser: deref(row.EndUser)}
		if !scope.Sees(out.EndUser) {
			return nil, ErrNotFound
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
func (s *PgStore) CreatePendingSnapshot(ctx context.Context, w *SnapshotWrite, job *TurnJob, owner string) error {
	params, err := writeTurnParams(w)
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

func encodeSnapshotDocs(w *SnapshotWrite) (errJSON, artifacts []byte, err error) {
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

// CommitTurn implements Store.
func (s *PgStore) CommitTurn(ctx context.Context, w *SnapshotWrite) (bool, error) {
	var err error
	if w.FinalizePending {
		err = s.finalizePending(ctx, w)
	} else {
		err = s.writeTurn(ctx, w)
	}
	if errors.Is(err, errNotPending) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(w.Interrupts) > 0 || (w.ResolvedEvents && len(w.Resolved) > 0) {
		s.eventsWritten()
	}
	if w.Status == StatusCompleted && w.State != nil {
		now := time.Now()
		s.cache.put(w.TenantID, &StoredSnapshot{
			Snapshot: Snapshot{SnapshotID: w.SnapshotID, SessionID: w.SessionID, ParentID: w.ParentID,
				CreatedAt: now, UpdatedAt: &now, Status: StatusCompleted, FinishReason: w.FinishReason, State: w.State},
			Agent: w.Agent, EndUser: w.EndUser, MessageCount: len(w.Bodies), Bodies: w.Bodies,
		})
	}
	return true, nil
}

// writeTurn writes a new snapshot: one statement (WriteTurn) in one batch,
// so one round trip and one transaction.
func (s *PgStore) writeTurn(ctx context.Context, w *SnapshotWrite) error {
	p, err := writeTurnParams(w)
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

// writeTurnParams encodes a snapshot write for the WriteTurn statement, with
// created events for its interrupts and resolved events for its claims.
func writeTurnParams(w *SnapshotWrite) (db.WriteTurnParams, error) {
	errJSON, artifacts, err := encodeSnapshotDocs(w)
	if err != nil {
		return db.WriteTurnParams{}, err
	}
	p := db.WriteTurnParams{
		TenantID: w.TenantID, SnapshotID: w.SnapshotID, SessionID: w.SessionID, Agent: w.Agent,
		ParentID: strPtr(w.ParentID), Status: w.Status, FinishReason: strPtr(w.FinishReason),
		Error: errJSON, Custom: nullableJSON(w.Custom), Artifacts: artifacts,
		MessageCount: int32(w.MessageCount), HeartbeatAt: w.HeartbeatAt, EndUser: strPtr(w.EndUser),
		Actor: orSystem(w.Actor),
	}
	for _, m := range w.Messages {
		p.Positions = append(p.Positions, int32(m.Position))
		p.Roles = append(p.Roles, m.Role)
		p.Bodies = append(p.Bodies, m.Body)
	}
	created, _ := json.Marshal(map[string]string{"snapshotId": w.SnapshotID})
	for _, in := range w.Interrupts {
		id := uuid.New()
		p.InterruptIds = append(p.InterruptIds, id)
		p.Tools = append(p.Tools, in.Tool)
		p.Refs = append(p.Refs, in.Ref)
		p.Inputs = append(p.Inputs, nullableJSON(in.Input))
		p.Metadatas = append(p.Metadatas, nullableJSON(in.Metadata))
		p.ExpiresInMs = append(p.ExpiresInMs, in.ExpiresIn.Milliseconds())
		p.OnExpires = append(p.OnExpires, nullableJSON(in.OnExpire))
		p.EventInterruptIds = append(p.EventInterruptIds, id)
		p.EventTypes = append(p.EventTypes, "created")
		p.EventPayloads = append(p.EventPayloads, created)
	}
	if w.ResolvedEvents {
		resolved, _ := json.Marshal(map[string]string{"resumedSnapshotId": w.SnapshotID})
		for _, id := range w.Resolved {
			p.EventInterruptIds = append(p.EventInterruptIds, id)
			p.EventTypes = append(p.EventTypes, "resolved")
			p.EventPayloads = append(p.EventPayloads, resolved)
		}
	}
	return p, nil
}

// setResumed records the snapshot a resume produced on the interrupts it
// answered, unless their claim already did.
func setResumed(ctx context.Context, q *db.Queries, w *SnapshotWrite) error {
	if w.ResumedSet {
		return nil
	}
	for _, id := range w.Resolved {
		if err := q.SetInterruptResumedSnapshot(ctx, db.SetInterruptResumedSnapshotParams{
			TenantID: w.TenantID, ID: id, ResumedSnapshotID: &w.SnapshotID,
		}); err != nil {
			return translate(err)
		}
	}
	return nil
}

// finalizePending rewrites a detached turn's pending snapshot, only if it
// is still pending (it reads the rows it changed to stay abort-aware, so it
// takes a transaction of its own), and drops the turn's job.
func (s *PgStore) finalizePending(ctx context.Context, w *SnapshotWrite) error {
	return s.inTx(ctx, w.TenantID, func(q *db.Queries) error {
		errJSON, artifacts, err := encodeSnapshotDocs(w)
		if err != nil {
			return err
		}
		n, err := q.FinalizePendingSnapshot(ctx, db.FinalizePendingSnapshotParams{
			TenantID:     w.TenantID,
			ID:           w.SnapshotID,
			Status:       w.Status,
			FinishReason: strPtr(w.FinishReason),
			Error:        errJSON,
			Custom:       nullableJSON(w.Custom),
			Artifacts:    artifacts,
			MessageCount: int32(w.MessageCount),
		})
		if err != nil {
			return translate(err)
		}
		if n == 0 {
			return errNotPending
		}
		if err := deleteJob(ctx, q, w.TenantID, w.SnapshotID); err != nil {
			return err
		}
		if len(w.Messages) > 0 {
			p := db.InsertMessagesParams{TenantID: w.TenantID, SnapshotID: w.SnapshotID}
			for _, m := range w.Messages {
				p.Positions = append(p.Positions, int32(m.Position))
				p.Roles = append(p.Roles, m.Role)
				p.Bodies = append(p.Bodies, m.Body)
			}
			if err := q.InsertMessages(ctx, p); err != nil {
				return translate(err)
			}
		}
		if err := insertInterrupts(ctx, q, w); err != nil {
			return err
		}
		// Detached turns record outcomes as they go; this only catches
		// what a turn left unrecorded.
		if err := finishToolCalls(ctx, q, w.TenantID, w.SnapshotID, w.ToolCalls); err != nil {
			return err
		}
		if err := setResumed(ctx, q, w); err != nil {
			return err
		}
		if w.ResolvedEvents && len(w.Resolved) > 0 {
			payload, _ := json.Marshal(map[string]string{"resumedSnapshotId": w.SnapshotID})
			if err := insertEvents(ctx, q, w.TenantID, w.Resolved, "resolved", w.Actor, payload); err != nil {
				return err
			}
		}
		return translate(q.UpdateSessionLatestSnapshot(ctx, db.UpdateSessionLatestSnapshotParams{
			TenantID: w.TenantID, ID: w.SessionID, SnapshotID: &w.SnapshotID,
		}))
	})
}

// AbortSnapshot implements Store.
func (s *PgStore) AbortSnapshot(ctx context.Context, scope Scope, agent, id string) (string, error) {
	var prev string
	err := s.inTx(ctx, scope.TenantID, func(q *db.Queries) error {
		r, err := q.GetSnapshotForUpdate(ctx, db.GetSnapshotForUpdateParams{TenantID: scope.TenantID, ID: id})
		if err != nil {
			return translate(err)
		}
		row := r.Snapshot
		if row.Agent != agent || !scope.Sees(deref(r.SessionEndUser)) {
			return ErrNotFound
		}
		prev = row.Status
		if row.Status != StatusPending {
			return nil
		}
		_, err = q.AbortPendingSnapshot(ctx, db.AbortPendingSnapshotParams{TenantID: scope.TenantID, ID: id})
		return translate(err)
	})
	return prev, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullableJSON(r json.RawMessage) []byte {
	if isNull(r) {
		return nil
	}
	return r
}

// translateConflict is translate, with a unique violation reported as
// ALREADY_EXISTS and the given public message.
func translateConflict(err error, format string, args ...any) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return Errorf(CodeAlreadyExists, format, args...)
	}
	return translate(err)
}

func refSuffix(ref string) string {
	if ref == "" {
		return ""
	}
	return "#" + ref
}

// SigningKeys implements Store.
func (s *PgStore) SigningKeys(ctx context.Context, tenantID, purpose string) ([]SigningKey, error) {
	var rows []db.ListTenantSecretsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantSecrets(ctx, db.ListTenantSecretsParams{TenantID: tenantID, Purpose: purpose})
		return translate(err)
	})
	if err != nil {
		return nil, err
	}
	out := make([]SigningKey, len(rows))
	for i, r := range rows {
		out[i] = SigningKey{ID: int(r.KeyID), Secret: r.Secret, ExpiresAt: r.ExpiresAt}
	}
	return out, nil
}
