package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// StartToolCall implements Store, in one round trip: the statement returns
// the row it recorded.
func (s *PgStore) StartToolCall(ctx context.Context, tenantID string, c *store.ToolCallRecord, jobOwner string) (bool, error) {
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		_, err := q.StartToolCall(ctx, db.StartToolCallParams{
			TenantID: tenantID, TurnID: c.TurnID, CallKey: c.CallKey, SessionID: c.SessionID,
			Agent: c.Agent, Tool: c.Tool, Ref: c.Ref, Input: nullableJSON(c.Input), Restart: c.Restart,
			Actor: orSystem(c.Actor), EndUser: strPtr(c.EndUser), JobOwner: strPtr(jobOwner),
			Attempt: int32(max(c.Attempt, 1)), CallID: strPtr(c.CallID),
		})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// FinishToolCalls implements Store.
func (s *PgStore) FinishToolCalls(ctx context.Context, tenantID, turnID string, outcomes []store.ToolCallOutcome) error {
	if len(outcomes) == 0 {
		return nil
	}
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		return finishToolCalls(ctx, q, tenantID, turnID, outcomes)
	})
	if err == nil {
		s.eventsWritten() // tool.called
	}
	return err
}

// finishToolCalls records outcomes through q (a pipeline or a transaction);
// none is no statement.
func finishToolCalls(ctx context.Context, q *db.Queries, tenantID, turnID string, outcomes []store.ToolCallOutcome) error {
	if len(outcomes) == 0 {
		return nil
	}
	a, err := outcomeArrays(outcomes)
	if err != nil {
		return err
	}
	return q.FinishToolCalls(ctx, db.FinishToolCallsParams{
		TenantID: tenantID, TurnID: turnID,
		CallKeys: a.keys, Statuses: a.statuses, Outputs: a.outputs, Errors: a.errors, FinishedAts: a.finishedAts,
		HttpStatuses: a.httpStatuses, Attempts: a.attempts,
	})
}

// callOutcomes are outcomes as the column arrays the statements unnest.
type callOutcomes struct {
	keys, statuses  []string
	outputs, errors [][]byte
	finishedAts     []time.Time
	httpStatuses    []int32
	attempts        []int32
}

func outcomeArrays(outcomes []store.ToolCallOutcome) (callOutcomes, error) {
	var a callOutcomes
	for _, o := range outcomes {
		errJSON, err := encodeErrorDetails(o.Error)
		if err != nil {
			return a, err
		}
		a.keys = append(a.keys, o.Key)
		a.httpStatuses = append(a.httpStatuses, int32(o.HTTPStatus))
		a.attempts = append(a.attempts, int32(o.Attempts))
		a.statuses = append(a.statuses, o.Status)
		a.outputs = append(a.outputs, nullableJSON(o.Output))
		a.errors = append(a.errors, errJSON)
		a.finishedAts = append(a.finishedAts, o.FinishedAt)
	}
	return a, nil
}

// GetToolCall implements Store.
func (s *PgStore) GetToolCall(ctx context.Context, tenantID, turnID, key string) (*store.ToolCallRecord, error) {
	var row db.ToolCall
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetToolCall(ctx, db.GetToolCallParams{TenantID: tenantID, TurnID: turnID, CallKey: key})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := toolCallFromRow(row)
	return &out, nil
}

// ListSessionToolCalls implements Store.
func (s *PgStore) ListSessionToolCalls(ctx context.Context, lp store.ListSessionToolCallsParams) ([]store.ToolCallRecord, error) {
	p := db.ListSessionToolCallsParams{TenantID: lp.TenantID, SessionID: lp.SessionID, PageSize: int32(lp.Limit)}
	if after := lp.After; after != nil {
		p.AfterStartedAt, p.AfterTurnID, p.AfterCallKey = &after.StartedAt, &after.TurnID, &after.CallKey
	}
	var rows []db.ToolCall
	err := s.piped(ctx, lp.TenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListSessionToolCalls(ctx, p)
		return err
	})
	return toolCallsFromRows(rows), err
}

// ListTurnToolCalls implements Store.
func (s *PgStore) ListTurnToolCalls(ctx context.Context, tenantID string, turnIDs []string) ([]store.ToolCallRecord, error) {
	var rows []db.ToolCall
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTurnToolCalls(ctx, db.ListTurnToolCallsParams{TenantID: tenantID, TurnIDs: turnIDs})
		return err
	})
	return toolCallsFromRows(rows), err
}

func toolCallsFromRows(rows []db.ToolCall) []store.ToolCallRecord {
	out := make([]store.ToolCallRecord, len(rows))
	for i, r := range rows {
		out[i] = toolCallFromRow(r)
	}
	return out
}

func toolCallFromRow(r db.ToolCall) store.ToolCallRecord {
	out := store.ToolCallRecord{
		TurnID: r.TurnID, CallKey: r.CallKey, SessionID: r.SessionID, Agent: r.Agent,
		Tool: r.Tool, Ref: r.Ref, Input: rawOrNilBytes(r.Input), Status: r.Status, Output: rawOrNilBytes(r.Output),
		Restart: r.Restart, Actor: r.Actor, EndUser: deref(r.EndUser), StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		ID: r.ID, Decision: deref(r.Decision), DecidedBy: deref(r.DecidedBy), DecidedAt: r.DecidedAt, Note: deref(r.Note),
		Attempt: int(r.Attempt), CallID: deref(r.CallID),
	}
	if len(r.Error) > 0 {
		var e protocol.ErrorDetails
		if json.Unmarshal(r.Error, &e) == nil {
			out.Error = &e
		}
	}
	if r.HttpStatus != nil {
		out.HTTPStatus = int(*r.HttpStatus)
	}
	if r.Attempts != nil {
		out.Attempts = int(*r.Attempts)
	}
	return out
}

// encodeErrorDetails is the stored form of an error object (nil for none).
func encodeErrorDetails(e *protocol.ErrorDetails) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	return json.Marshal(e)
}

// MarkToolCallUnknown implements Store: the mark and the read of the row
// share one round trip.
func (s *PgStore) MarkToolCallUnknown(ctx context.Context, tenantID, turnID, key string) (*store.ToolCallRecord, error) {
	var row db.ToolCall
	marked := false
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		_, err := q.MarkToolCallUnknown(ctx, db.MarkToolCallUnknownParams{TenantID: tenantID, TurnID: turnID, CallKey: key})
		if err == nil {
			marked = true
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, err = q.GetToolCall(ctx, db.GetToolCallParams{TenantID: tenantID, TurnID: turnID, CallKey: key})
		return err
	})
	if err != nil {
		return nil, err
	}
	if marked {
		s.eventsWritten() // tool.called
	}
	out := toolCallFromRow(row)
	return &out, nil
}

// MarkLostToolCalls implements Store, through the system function.
func (s *PgStore) MarkLostToolCalls(ctx context.Context, startedBefore time.Time, limit int) (int, error) {
	rows, err := s.q.MarkLostToolCalls(ctx, db.MarkLostToolCallsParams{StartedBefore: startedBefore, BatchSize: int32(limit)})
	if err != nil {
		return 0, translate(err)
	}
	if len(rows) > 0 {
		s.eventsWritten() // tool.called
	}
	return len(rows), nil
}

// GetToolCallByID implements Store.
func (s *PgStore) GetToolCallByID(ctx context.Context, tenantID string, id uuid.UUID) (*store.ToolCallRecord, error) {
	var row db.ToolCall
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetToolCallByID(ctx, db.GetToolCallByIDParams{TenantID: tenantID, ID: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := toolCallFromRow(row)
	return &out, nil
}

// DecideToolCall implements Store.
func (s *PgStore) DecideToolCall(ctx context.Context, p store.DecideToolCallParams) (*store.ToolCallRecord, error) {
	var row db.DecideToolCallRow
	err := s.piped(ctx, p.TenantID, func(q *db.Queries) error {
		var err error
		row, err = q.DecideToolCall(ctx, db.DecideToolCallParams{
			TenantID: p.TenantID, ID: p.ID, Status: p.Status, Decision: p.Decision,
			Output: nullableJSON(p.Output), Actor: orSystem(p.Actor), Note: strPtr(p.Note),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if p.Status != store.ToolCallRunning {
		s.eventsWritten() // tool.called
	}
	out := toolCallFromRow(db.ToolCall(row))
	return &out, nil
}

// ReopenDecision implements Store.
func (s *PgStore) ReopenDecision(ctx context.Context, tenantID string, id uuid.UUID, fromSnapshot string) (bool, error) {
	var n int64
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		n, err = q.ReopenDecision(ctx, db.ReopenDecisionParams{TenantID: tenantID, ID: id, FromSnapshot: fromSnapshot})
		return err
	})
	return n == 1, err
}
