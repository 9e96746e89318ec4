package service

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Store is the persistence the runtime needs. PgStore implements it on
// PostgreSQL; every method is scoped by tenant in the SQL itself.
type Store interface {
	// LoadSnapshot returns a snapshot of the agent, with its state (history
	// rebuilt from the ancestor chain) when withState. ErrNotFound when it
	// does not exist for this tenant and agent.
	LoadSnapshot(ctx context.Context, tenantID, agent, id string, withState bool) (*StoredSnapshot, error)
	// LoadSession returns a session of the agent. ErrNotFound when missing;
	// a session of another agent is reported with its agent name set.
	LoadSession(ctx context.Context, tenantID, id string) (*StoredSession, error)
	// CreatePendingSnapshot writes the pending snapshot of a detached turn
	// (creating the session if new) and makes it the session's latest.
	CreatePendingSnapshot(ctx context.Context, w *SnapshotWrite) error
	// CommitTurn persists the end of a turn in one transaction. With
	// w.FinalizePending it rewrites the pending snapshot w.SnapshotID only if
	// it is still pending, and reports false (writing nothing) otherwise.
	CommitTurn(ctx context.Context, w *SnapshotWrite) (bool, error)
	// AbortSnapshot flips a pending snapshot to aborted and returns the
	// status it had ("" with ErrNotFound when missing).
	AbortSnapshot(ctx context.Context, tenantID, agent, id string) (string, error)
	// TouchHeartbeat refreshes a pending snapshot's heartbeat and returns its
	// current status.
	TouchHeartbeat(ctx context.Context, tenantID, id string) (string, error)
	// ClaimInterrupts claims the pending interrupts of a paused snapshot that
	// keys name, in one transaction. An interrupt that is no longer pending
	// fails the whole claim with ABORTED.
	ClaimInterrupts(ctx context.Context, tenantID, snapshotID string, claims []InterruptClaim, actor string) ([]uuid.UUID, error)
	// ReleaseInterrupts gives claims back (the resume turn failed before any
	// side effect).
	ReleaseInterrupts(ctx context.Context, tenantID string, ids []uuid.UUID) error
}

// StoredSession is a session row.
type StoredSession struct {
	ID               string
	Agent            string
	LatestSnapshotID string
}

// StoredSnapshot is a snapshot as loaded from the store.
type StoredSnapshot struct {
	Snapshot
	Agent        string
	MessageCount int
	// Bodies are the stored JSON of the history's messages by position, so
	// the next turn can tell which positions it changed.
	Bodies [][]byte
}

// SnapshotWrite is everything one turn end persists.
type SnapshotWrite struct {
	TenantID   string
	Agent      string
	SessionID  string
	EndUser    string
	NewSession bool

	SnapshotID      string
	ParentID        string
	FinalizePending bool
	Status          string
	FinishReason    string
	Error           *ErrorDetails
	Custom          json.RawMessage
	Artifacts       []Artifact
	MessageCount    int
	HeartbeatAt     *time.Time

	// Messages are the positions this snapshot wrote (appended or changed).
	Messages []PositionedMessage
	// Interrupts are the interrupted tool requests the turn paused on.
	Interrupts []NewInterrupt
	// Resolved are the claimed interrupts this turn answered.
	Resolved []uuid.UUID
}

// PositionedMessage is a message at its position in the history.
type PositionedMessage struct {
	Position int
	Role     string
	Body     []byte
}

// NewInterrupt is an interrupted tool request to record.
type NewInterrupt struct {
	Tool     string
	Ref      string
	Input    json.RawMessage
	Metadata json.RawMessage
}

// InterruptClaim names an interrupt a resume answers, and how.
type InterruptClaim struct {
	Tool       string
	Ref        string
	Resolution json.RawMessage
}
