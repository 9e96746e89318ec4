package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/holdpoint/holdpoint/service/protocol"

	"github.com/google/uuid"
)

// Store is the persistence the runtime needs. PgStore implements it on
// PostgreSQL; every method is scoped by tenant in the SQL itself.
type Store interface {
	// LoadSnapshot returns a snapshot of the agent, with its state (history
	// rebuilt from the ancestor chain) when withState. ErrNotFound when it
	// does not exist for this tenant and agent, or its session is not the
	// scope's to see.
	LoadSnapshot(ctx context.Context, p LoadSnapshotParams) (*StoredSnapshot, error)
	// ListSessionSnapshots returns a session's snapshots, newest first
	// (at most 100), without their state.
	ListSessionSnapshots(ctx context.Context, tenantID, sessionID string) ([]protocol.Snapshot, error)
	// FindSessions returns up to limit of a tenant's sessions whose id is
	// q, or whose end user is q, newest first.
	FindSessions(ctx context.Context, tenantID, q string, limit int) ([]SessionSummary, error)
	// RecentSessions returns a tenant's limit most recently updated
	// sessions (of endUser only, unless ""), newest first, after the
	// position after (none when zero), with their latest snapshot's stored
	// status.
	RecentSessions(ctx context.Context, tenantID, endUser string, after SessionPosition, limit int) ([]SessionSummary, error)
	// LoadSession returns a session. ErrNotFound when missing or not the
	// scope's to see; a session of another agent is reported with its agent
	// name set.
	LoadSession(ctx context.Context, scope Scope, id string) (*StoredSession, error)
	// CachedSessionHead returns the session as this instance last wrote
	// it (its latest snapshot the one that write made), without reading
	// the table; nil when it has none. It may be stale (another writer
	// moved the session since): a write that continues from it names its
	// head (SnapshotWrite.ExpectedHead), and the caller must not act on it
	// beyond that write. The scope is not checked.
	CachedSessionHead(tenantID, id string) *StoredSession
	// CreateSession takes a client-chosen session id for the scope's end
	// user and the agent before a turn runs in it. When the id exists it is
	// loaded instead; ErrNotFound when it is not the scope's to see.
	CreateSession(ctx context.Context, scope Scope, agent, id string) (*StoredSession, error)
	// CreatePendingSnapshot writes the pending snapshot of a detached turn
	// (creating the session if new), makes it the session's latest, and
	// records the turn's job, owned by owner, in the same transaction.
	CreatePendingSnapshot(ctx context.Context, w *SnapshotWrite, job *TurnJob, owner string) error
	// CommitTurn persists the end of a turn in one transaction. With
	// w.FinalizePending it rewrites the pending snapshot w.SnapshotID only if
	// it is still pending, and reports false (writing nothing) otherwise.
	CommitTurn(ctx context.Context, w *SnapshotWrite) (bool, error)
	// AbortSnapshot flips a pending snapshot to aborted and returns the
	// status it had ("" with ErrNotFound when missing, or when its session
	// is not the scope's to see).
	AbortSnapshot(ctx context.Context, scope Scope, agent, id string) (string, error)
	// TouchHeartbeat refreshes a detached turn's job and pending snapshot
	// heartbeats for owner and returns the snapshot's status; owned is false
	// when another instance took the job over.
	TouchHeartbeat(ctx context.Context, tenantID, snapshotID, owner string) (status string, owned bool, err error)
	// ClaimNextJob takes a detached turn to run: one nobody owns, or whose
	// owner's heartbeat is older than c.Stale, and not one of c.Running.
	// Nil when there is none.
	ClaimNextJob(ctx context.Context, c JobClaim) (*TurnJob, error)
	// AppendJobInputs adds inputs that arrived after the detach to its job.
	AppendJobInputs(ctx context.Context, tenantID, snapshotID string, inputs []protocol.AgentInput) error
	// DeleteJob drops a finished (or aborted) job and its tool journal.
	DeleteJob(ctx context.Context, tenantID, snapshotID string) error
	// DropAbortedJob drops owner's job of a turn that was aborted while
	// nobody ran it, and gives the turn's claims back (pending again, a
	// released event each, actor system) when no tool call of the turn was
	// journaled; with one, they stay resolved. It answers the interrupts it
	// gave back.
	DropAbortedJob(ctx context.Context, tenantID, snapshotID, owner string) ([]uuid.UUID, error)
	// JournalStep records the model's answer of step n of a journaled turn
	// while owner owns the turn's job; false when it does not (taken over).
	JournalStep(ctx context.Context, tenantID, turnID string, step TurnStep, owner string) (bool, error)
	// TurnSteps answers the model's answers a journaled turn recorded, in
	// order.
	TurnSteps(ctx context.Context, tenantID, turnID string) ([]TurnStep, error)
	// ReleaseJobs hands owner's jobs back at shutdown.
	ReleaseJobs(ctx context.Context, owner string) (int, error)
	// StartToolCall records that a tool is about to run (status running).
	// With jobOwner set (a detached turn) it records only while that
	// instance still owns the turn's job. False means it was not recorded:
	// recorded before, or the job is no longer jobOwner's.
	StartToolCall(ctx context.Context, tenantID string, call *ToolCallRecord, jobOwner string) (bool, error)
	// FinishToolCalls records the outcomes of calls of one turn.
	FinishToolCalls(ctx context.Context, tenantID, turnID string, outcomes []ToolCallOutcome) error
	// GetToolCall returns one recorded call (ErrNotFound when none).
	GetToolCall(ctx context.Context, tenantID, turnID, key string) (*ToolCallRecord, error)
	// ListSessionToolCalls returns a page of a session's tool calls, oldest
	// first, after the cursor when one is given.
	ListSessionToolCalls(ctx context.Context, p ListSessionToolCallsParams) ([]ToolCallRecord, error)
	// ListTurnToolCalls returns the tool calls of the given turns.
	ListTurnToolCalls(ctx context.Context, tenantID string, turnIDs []string) ([]ToolCallRecord, error)
	// MarkToolCallUnknown turns a call still running into unknown (it may
	// have run) and returns it; a call no longer running is returned as
	// it is.
	MarkToolCallUnknown(ctx context.Context, tenantID, turnID, key string) (*ToolCallRecord, error)
	// MarkLostToolCalls marks unknown, across tenants, up to limit calls
	// running since before startedBefore whose turn has no job, and
	// returns how many it marked.
	MarkLostToolCalls(ctx context.Context, startedBefore time.Time, limit int) (int, error)
	// GetToolCallByID returns one recorded call by its id (ErrNotFound
	// when the tenant has none).
	GetToolCallByID(ctx context.Context, tenantID string, id uuid.UUID) (*ToolCallRecord, error)
	// DecideToolCall records a human's decision on an unknown call;
	// ErrNotFound when the call is not (or no longer) unknown.
	DecideToolCall(ctx context.Context, p DecideToolCallParams) (*ToolCallRecord, error)
	// SigningKeys returns a tenant's keys of a purpose that still verify,
	// newest (the signing key) first.
	SigningKeys(ctx context.Context, tenantID, purpose string) ([]SigningKey, error)
	// ListenAborts calls fn for every abort announced by any instance until
	// ctx ends or the connection fails; ready is called once listening.
	ListenAborts(ctx context.Context, ready func(), fn func(tenantID, snapshotID string)) error
	// ClaimInterrupts claims the pending interrupts of a paused snapshot that
	// keys name, in one transaction. An interrupt that is no longer pending
	// fails the whole claim with ABORTED.
	// When jobSnapshotID is set, the claims are also recorded on that
	// detached turn's job, so a takeover knows they are its own.
	// resumedSnapshotID is the snapshot the resume turn will write.
	ClaimInterrupts(ctx context.Context, p ClaimInterruptsParams) ([]uuid.UUID, error)
	// GuardedClaim writes a resume's guard (w, a pending snapshot written
	// with KeepHead, and its job owned by owner) and makes its claim, in
	// one transaction: a refused claim leaves nothing, neither the guard
	// nor a partial claim, and the error is ClaimInterrupts'.
	GuardedClaim(ctx context.Context, w *SnapshotWrite, job *TurnJob, owner string, p ClaimInterruptsParams) ([]uuid.UUID, error)
	// GuardDecided writes the guard of a decided batch's turn and takes the
	// decisions (ids) for it, in one transaction: a decision another guard
	// took already leaves nothing written, and the error is
	// ErrDecisionTaken.
	GuardDecided(ctx context.Context, w *SnapshotWrite, job *TurnJob, owner string, ids []uuid.UUID) error
	// StrandedDecisions lists the paused snapshots (of every tenant) whose
	// interrupts were all decided longer than olderThan ago with no turn
	// resuming them, each with its batch.
	StrandedDecisions(ctx context.Context, olderThan time.Duration, limit int) ([]DecidedSnapshot, error)
	// ReleaseInterrupts gives claims back (the resume turn failed before any
	// side effect).
	ReleaseInterrupts(ctx context.Context, tenantID string, ids []uuid.UUID, actor string) error

	// CountPendingInterrupts counts a tenant's pending interrupts per agent
	// and tool.
	CountPendingInterrupts(ctx context.Context, tenantID string, scopes []string, allScopes bool) ([]PendingCount, error)
	// PendingInterruptStats counts every tenant's pending interrupts and
	// finds the oldest one's creation time, for metrics: across tenants,
	// figures only.
	PendingInterruptStats(ctx context.Context) ([]PendingStat, error)
	// ListInterrupts returns a page of the approvals inbox.
	ListInterrupts(ctx context.Context, tenantID string, f InterruptFilter) ([]Interrupt, error)
	// GetInterrupt returns one interrupt (ErrNotFound when missing).
	GetInterrupt(ctx context.Context, tenantID string, id uuid.UUID) (*Interrupt, error)
	// ListInterruptEvents returns an interrupt's audit trail, oldest first.
	ListInterruptEvents(ctx context.Context, tenantID string, id uuid.UUID) ([]InterruptEvent, error)
	// DecideInterrupt records an operator's decision on a pending interrupt
	// and reports whether it was the last one its snapshot waited for.
	DecideInterrupt(ctx context.Context, p DecideInterruptParams) (*Decision, error)
	// ReopenDecision gives a decided interrupt back to its decision for a
	// retry of the approved call that failed in fromSnapshot, the turn it
	// resumed; false when another retry took it.
	ReopenDecision(ctx context.Context, tenantID string, id uuid.UUID, fromSnapshot string) (bool, error)
	// InterruptOfRequest returns the interrupt a paused snapshot's tool
	// request (tool, ref) became (ErrNotFound: none).
	InterruptOfRequest(ctx context.Context, tenantID, snapshotID, tool, ref string) (*Interrupt, error)
	// ListVotes returns the votes on an interrupt, oldest first.
	ListVotes(ctx context.Context, tenantID string, id uuid.UUID) ([]Vote, error)
	// SweepDueInterrupts applies the deadlines of up to limit due
	// interrupts (any tenant) and returns the snapshots that became fully
	// decided and must be resumed.
	SweepDueInterrupts(ctx context.Context, limit int) ([]SweptInterrupt, []DecidedSnapshot, error)
	// EscalateDue hands up to limit pending interrupts (any tenant) whose
	// policy's escalation is due to the escalation's scope, once each,
	// with an escalated event, and returns them.
	EscalateDue(ctx context.Context, limit int) ([]EscalatedInterrupt, error)
	// ReportInterrupts returns the interrupt figures of a tenant.
	ReportInterrupts(ctx context.Context, p ReportInterruptsParams) ([]ReportRow, error)
}

// Scope is whose sessions a store call may see. A session belongs to the
// end user who created it, or to the tenant itself when it was created with
// no end user; a caller sees exactly its own, so neither another user nor
// the tenant acting as no user can read or write a user's session.
// Operators (the inbox, reports) see every session of the tenant.
type Scope struct {
	TenantID string
	// EndUser is the end user acting ("" for the tenant acting as no user).
	EndUser string
	// AnyEndUser lets an operator's call see every session of the tenant.
	AnyEndUser bool
}

// Sees reports whether the scope may see a session owned by owner ("":
// the tenant's own). It is the one place the end-user rule is decided;
// the write path (WriteTurn) enforces the same rule in SQL.
func (s Scope) Sees(owner string) bool {
	return s.AnyEndUser || owner == s.EndUser
}

// SessionPosition is a place in the list of recent sessions (newest
// updated first, then by id): the last row of a page. The zero position
// is the list's start.
type SessionPosition struct {
	UpdatedAt time.Time
	ID        string
}

// OperatorScope sees every session of a tenant.
func OperatorScope(tenantID string) Scope { return Scope{TenantID: tenantID, AnyEndUser: true} }

// JobClaim is what a job runner may take from the queue.
type JobClaim struct {
	Owner string
	// Agents are the compiled agents whose jobs it takes; with
	// TenantAgents it also takes jobs of any agent a tenant defined.
	Agents       []string
	TenantAgents bool
	// Stale is how old an owner's heartbeat must be for its job to be
	// taken over.
	Stale time.Duration
	// Running are the jobs the runner's instance runs already: however
	// stale their heartbeat, they are not taken (a claim counts an attempt).
	Running []JobRef
}

// JobRef names a job.
type JobRef struct{ TenantID, SnapshotID string }

// TurnJob is the durable record of a detached turn: what to run, from which
// snapshot, for whom.
type TurnJob struct {
	TenantID   string
	SnapshotID string
	Agent      string
	SessionID  string
	ParentID   string
	EndUser    string
	Actor      string
	Inputs     []protocol.AgentInput
	Preclaimed []uuid.UUID
	Attempts   int
	// TenantCap and ActorCap, when positive, bound the jobs its tenant and
	// its actor may have: past either the job is not inserted, and the
	// error is ErrTooManyDetached.
	TenantCap, ActorCap int
}

// TurnStep is a model's answer a journaled turn recorded before acting on
// it (Store.JournalStep), for a takeover to replay.
type TurnStep struct {
	Step         int
	Message      json.RawMessage
	FinishReason string
}

// LoadSnapshotParams select a snapshot for Store.LoadSnapshot.
type LoadSnapshotParams struct {
	Scope Scope
	Agent string
	ID    string
	// WithState asks for the history (rebuilt from the ancestor chain),
	// custom state and artifacts too.
	WithState bool
	// Split accepts a snapshot whose last message is kept apart
	// (StoredSnapshot.Last), as the engine's turns take them; without it
	// the history comes whole.
	Split bool
}

// ListSessionToolCallsParams select a page for Store.ListSessionToolCalls.
type ListSessionToolCallsParams struct {
	TenantID  string
	SessionID string
	// After is the keyset position the page starts after (nil: the first).
	After *ToolCallCursor
	Limit int
}

// ClaimInterruptsParams are the arguments of Store.ClaimInterrupts.
type ClaimInterruptsParams struct {
	TenantID string
	// SnapshotID is the paused snapshot whose interrupts are claimed.
	SnapshotID string
	Claims     []InterruptClaim
	Actor      string
	// JobSnapshotID, when set, records the claims on that detached turn's
	// job, so a takeover knows they are its own.
	JobSnapshotID string
	// ResumedSnapshotID is the snapshot the resume turn will write.
	ResumedSnapshotID string
}

// DecideInterruptParams are the arguments of Store.DecideInterrupt.
type DecideInterruptParams struct {
	TenantID   string
	ID         uuid.UUID
	Resolution json.RawMessage
	Actor      string
	// Vote, for a gated call, is recorded with the decision (one per
	// voter: a second is refused); an approval short of the approvals
	// needed records only the vote (Decision.Voted).
	Vote *Vote
	// Scope is the scope the voter was checked against: a vote on an
	// interrupt escalated to another scope meanwhile is refused.
	Scope string
}

// Vote is one approver's vote on a gated call (interrupt_votes).
type Vote struct {
	Voter   string          `json:"voter"`
	KeyID   string          `json:"keyId,omitempty"`
	KeyName string          `json:"keyName,omitempty"`
	Vote    string          `json:"vote"` // approve or deny
	Input   json.RawMessage `json:"input,omitempty"`
	Note    string          `json:"note,omitempty"`
	At      time.Time       `json:"at"`
}

// Votes.
const (
	VoteApprove = "approve"
	VoteDeny    = "deny"
)

// ReportInterruptsParams select the figures of Store.ReportInterrupts.
type ReportInterruptsParams struct {
	TenantID string
	From, To time.Time
	GroupBy  string
}

// StoredSession is a session row.
type StoredSession struct {
	ID               string
	Agent            string
	EndUser          string
	LatestSnapshotID string
}

// SessionSummary is a session as a list shows it.
type SessionSummary struct {
	ID               string    `json:"id"`
	Agent            string    `json:"agent"`
	EndUser          string    `json:"endUser,omitempty"`
	LatestSnapshotID string    `json:"latestSnapshotId,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
	// Status and FinishReason are the latest snapshot's (RecentSessions
	// only); HeartbeatAt, its heartbeat, tells a stale pending one.
	Status       string     `json:"status,omitempty"`
	FinishReason string     `json:"finishReason,omitempty"`
	HeartbeatAt  *time.Time `json:"-"`
}

// StoredSnapshot is a snapshot as loaded from the store.
type StoredSnapshot struct {
	protocol.Snapshot
	Agent        string
	EndUser      string // the end user who owns the session ("" when none)
	MessageCount int
	// AgentVersion is the version of a tenant's agent the snapshot's turn
	// ran with (0: an agent compiled into the binary).
	AgentVersion int
	// Bodies are the stored JSON of the history's messages by position, so
	// the next turn can tell which positions it changed.
	Bodies [][]byte
	// Answered says the store saw this snapshot's interrupts claimed (or
	// a claim of them refused): a resume of it is likely to lose, and
	// claims up front rather than after its model call.
	Answered bool
	// Handoff is what the snapshot's writer left for the first turn that
	// continues it (SnapshotWrite.Handoff); nil when none.
	Handoff *Handoff
	// Last, when set, is the history's last message, kept apart: State's
	// messages and Bodies are the others, LastBody its JSON, and
	// MessageCount counts it. Only a load with Split returns one (see
	// SnapshotWrite.Last); Joined puts the history together.
	Last     *protocol.Message
	LastBody []byte
}

// Joined is the snapshot with its whole history in State and Bodies: s
// itself when no message is kept apart, else a copy (the history copied).
func (s *StoredSnapshot) Joined() *StoredSnapshot {
	if s.Last == nil || s.State == nil {
		return s
	}
	out := *s
	st := *s.State
	n := len(st.Messages)
	st.Messages = append(st.Messages[:n:n], *s.Last)
	out.State = &st
	out.Bodies = append(s.Bodies[:len(s.Bodies):len(s.Bodies)], s.LastBody)
	out.Last, out.LastBody, out.Handoff = nil, nil, nil
	return &out
}

// Handoff is what the writer of a completed snapshot leaves for the one
// turn that continues it first: in the engine, the arrays the snapshot's
// history lives in, with room past its length that no one else writes, so
// that the next turn appends to them rather than copying the whole
// history. The store keeps it beside the cached snapshot and never looks
// inside; Take gives it out once.
type Handoff struct {
	held  atomic.Bool
	taken atomic.Bool
	value any
}

// NewHandoff wraps v for the next turn.
func NewHandoff(v any) *Handoff { return &Handoff{value: v} }

// NewHeldHandoff wraps v for the next turn once its writer calls Release
// (until then Take gives nothing).
func NewHeldHandoff(v any) *Handoff {
	h := &Handoff{value: v}
	h.held.Store(true)
	return h
}

// Release lets Take give the value out.
func (h *Handoff) Release() { h.held.Store(false) }

// Take returns the value to the first caller after the release, nil to
// every other (and on a nil Handoff).
func (h *Handoff) Take() any {
	if h == nil || h.held.Load() || !h.taken.CompareAndSwap(false, true) {
		return nil
	}
	return h.value
}

// SnapshotWrite is everything one turn end persists.
type SnapshotWrite struct {
	TenantID  string
	Agent     string
	SessionID string
	EndUser   string

	SnapshotID      string
	ParentID        string
	AgentVersion    int // of a tenant's agent (0: compiled in)
	FinalizePending bool
	Status          string
	FinishReason    string
	Error           *protocol.ErrorDetails
	// ExpectedHead, when set, is the session's latest snapshot the write
	// expects to move on from: when the session's head is another, nothing
	// is written and the error is ErrSessionMoved.
	ExpectedHead string
	Custom       json.RawMessage
	Artifacts    []protocol.Artifact
	MessageCount int
	HeartbeatAt  *time.Time

	// State and Bodies are the whole history the snapshot stands for (a
	// view the writer no longer changes, and each message's JSON), so the
	// store can keep a completed snapshot in memory for the next turn.
	// Optional.
	State  *protocol.SessionState
	Bodies [][]byte
	// Handoff, with State, is kept beside the cached snapshot for the next
	// turn (StoredSnapshot.Handoff). Optional.
	Handoff *Handoff
	// Last, when set, is the history's last message kept apart from State
	// and Bodies (and LastBody its JSON), so that the next turn may rewrite
	// it in place (a resume does) without changing what the cached
	// snapshot shows.
	Last     *protocol.Message
	LastBody []byte

	// Messages are the positions this snapshot wrote (appended or changed).
	Messages []PositionedMessage
	// ToolCalls are the outcomes of the tool calls the turn made, recorded
	// as running before each ran.
	ToolCalls []ToolCallOutcome
	// Interrupts are the interrupted tool requests the turn paused on.
	Interrupts []NewInterrupt
	// Claims are interrupts of the parent snapshot (the paused one) this
	// write claims, with its snapshot as the one their resume produced:
	// all or nothing, with the rest of the write. When one is no longer
	// pending nothing is written, and the error is the refusal
	// ClaimInterrupts would give (ABORTED, or FAILED_PRECONDITION when it
	// expired). A resolved event is recorded for each.
	Claims []InterruptClaim
	// Resolved are the claimed interrupts this turn answered.
	Resolved []uuid.UUID
	// ResolvedEvents says whether to record a resolved event for them (not
	// when an operator's decision already did).
	ResolvedEvents bool
	// ResumedSet says the claims already recorded this snapshot as the one
	// their resume produced (a synchronous protocol resume), so the write
	// need not.
	ResumedSet bool
	// Actor is recorded on the audit events the write adds.
	Actor string
	// KeepHead writes the snapshot without moving its session to it (a
	// resume's guard; see invocation.guard).
	KeepHead bool
	// MaxPending, when positive, bounds the interrupts pending in the
	// session after the write: past it nothing is written and the error is
	// ErrTooManyPending.
	MaxPending int
}

// PositionedMessage is a message (its JSON, which holds its role) at its
// position in the history.
type PositionedMessage struct {
	Position int
	Body     []byte
	// Base, for a position the history already had (a rewrite), is the
	// message's JSON there before: the store may keep the rewrite as an
	// edit of it. Optional.
	Base []byte
}

// NewInterrupt is an interrupted tool request to record.
type NewInterrupt struct {
	Tool      string
	Ref       string
	Input     json.RawMessage
	Metadata  json.RawMessage
	ExpiresIn time.Duration // zero: no deadline
	OnExpire  json.RawMessage
	// Repause says a restart of the same request interrupted again: the
	// new interrupt is linked to the parent snapshot's one (previousId).
	Repause bool
	// Policy is a gated call's approval policy (StoredPolicy as JSON).
	Policy json.RawMessage
}

// Interrupt statuses (interrupts.status).
const (
	InterruptPending   = "pending"
	InterruptResolved  = "resolved"
	InterruptExpired   = "expired"
	InterruptCancelled = "cancelled"
)

// Tool call statuses.
const (
	ToolCallRunning     = "running"
	ToolCallSucceeded   = "succeeded"
	ToolCallInterrupted = "interrupted"
	ToolCallFailed      = "failed"
	// ToolCallUnknown: the call may have run; its instance died before
	// recording the outcome. It waits for a human to confirm, cancel or
	// retry it, and is never run again by a plain re-approval.
	ToolCallUnknown = "unknown"
	// ToolCallCancelled: a human decided an unknown call is not to run
	// (again); nothing more runs.
	ToolCallCancelled = "cancelled"
)

// Decisions a human makes on an unknown tool call.
const (
	DecisionConfirmed = "confirmed"
	DecisionCancelled = "cancelled"
	DecisionRetried   = "retried"
)

// DecideToolCallParams is a human's decision on an unknown call: the status
// it moves to (succeeded, cancelled, or running for a retry), with the
// confirmed output.
type DecideToolCallParams struct {
	TenantID string
	ID       uuid.UUID
	Status   string
	Decision string
	Output   json.RawMessage
	Actor    string
	Note     string
}

// ToolCallRecord is one execution of a tool (never an interrupt, which
// does not run), as operators and analysts see it.
type ToolCallRecord struct {
	// ID names the call in the API (/api/v1/tool-calls/{id}).
	ID uuid.UUID `json:"id"`
	// TurnID is the turn that ran the tool: for a server-managed agent the
	// snapshot the turn wrote.
	TurnID    string          `json:"turnId"`
	CallKey   string          `json:"callKey"`
	SessionID string          `json:"sessionId"`
	Agent     string          `json:"agent"`
	Tool      string          `json:"tool"`
	Ref       string          `json:"ref,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Status is running, succeeded, interrupted, failed, unknown or
	// cancelled. Unknown means the call may have run: its instance died
	// before recording the outcome, and a human must confirm, cancel or
	// retry it. Cancelled means a human decided it runs no more.
	Status string `json:"status"`
	// Output is the tool's output, or the interrupt's metadata when the
	// tool paused the turn.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is what the client was told when the tool failed.
	Error *protocol.ErrorDetails `json:"error,omitempty"`
	// Restart says the call restarted an interrupted request.
	Restart bool `json:"restart,omitempty"`
	// Attempt counts the runs of an approved call (1, then each retry);
	// CallID is the id the tool was given when it is not TurnID/CallKey
	// (a retry keeps the first attempt's).
	Attempt int    `json:"attempt,omitempty"`
	CallID  string `json:"callId,omitempty"`
	// HTTPStatus and Attempts are an HTTP tool's last response status and
	// how many times it was called.
	HTTPStatus int        `json:"httpStatus,omitempty"`
	Attempts   int        `json:"attempts,omitempty"`
	Actor      string     `json:"actor"`
	EndUser    string     `json:"endUser,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Decision, DecidedBy, DecidedAt and Note record the human who decided
	// an unknown call (confirmed, cancelled or retried).
	Decision  string     `json:"decision,omitempty"`
	DecidedBy string     `json:"decidedBy,omitempty"`
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	Note      string     `json:"note,omitempty"`
}

// ToolCallOutcome is how a recorded call ended.
type ToolCallOutcome struct {
	Key        string
	Status     string
	Output     json.RawMessage
	Error      *protocol.ErrorDetails
	FinishedAt time.Time
	// HTTPStatus and Attempts describe an HTTP tool's call (0: not one).
	HTTPStatus int
	Attempts   int
}

// ToolCallCursor is the keyset position after which a page of a session's
// tool calls starts.
type ToolCallCursor struct {
	StartedAt time.Time
	TurnID    string
	CallKey   string
}

// InterruptClaim names an interrupt a resume answers, and how.
type InterruptClaim struct {
	Tool       string
	Ref        string
	Resolution json.RawMessage
}

// PendingCount is how many interrupts of an agent's tool wait.
type PendingCount struct {
	Agent   string `json:"agent"`
	Tool    string `json:"tool"`
	Pending int64  `json:"pending"`
}

// PendingStat is how many interrupts of a tenant wait, and since when the
// oldest does.
type PendingStat struct {
	TenantID string
	Pending  int64
	Oldest   time.Time
}

// HeldEvents are the events written but not yet sent because a
// transaction of the database, older than them, is still open: how many,
// and the oldest one's creation time (zero when none is held).
type HeldEvents struct {
	Held   int64
	Oldest time.Time
}

// Interrupt is one interrupted tool request: a row of the interrupts
// table. It has no JSON form of its own: the API shows its Wire form
// (protocol.InboxInterrupt), the one definition the Go client shares.
type Interrupt struct {
	ID                uuid.UUID
	Agent             string
	SessionID         string
	SnapshotID        string
	Tool              string
	Ref               string
	Input             json.RawMessage
	Metadata          json.RawMessage
	Status            string
	CreatedAt         time.Time
	ExpiresAt         *time.Time
	ResolvedAt        *time.Time
	ResolvedBy        string
	Resolution        json.RawMessage
	ResumedSnapshotID string
	// PreviousID is the interrupt this one replaces: a restart of the
	// same request that interrupted again.
	PreviousID *uuid.UUID
	OnExpire   json.RawMessage `json:"-"`
	// EndUser is who asked (the session's end user when it paused).
	EndUser string
	// Policy is a gated call's approval policy; Scope the scope deciding
	// it needs now (the policy's, or its escalation's); Approvals of
	// ApprovalsNeeded given so far for the current proposal, and
	// ProposedInput an approver's edit of the input, when there is one.
	Policy          *StoredPolicy
	Scope           string
	Approvals       int
	ApprovalsNeeded int
	ProposedInput   json.RawMessage
	EscalatedAt     *time.Time
}

// Wire is the interrupt as the inbox's API shows it (the JSON of both
// forms is the same).
func (it *Interrupt) Wire() protocol.InboxInterrupt {
	w := protocol.InboxInterrupt{
		ID: it.ID.String(), Agent: it.Agent, SessionID: it.SessionID, SnapshotID: it.SnapshotID,
		Tool: it.Tool, Ref: it.Ref, Input: it.Input, Metadata: it.Metadata, Status: it.Status,
		CreatedAt: it.CreatedAt, ExpiresAt: it.ExpiresAt, ResolvedAt: it.ResolvedAt, ResolvedBy: it.ResolvedBy,
		Resolution: it.Resolution, ResumedSnapshotID: it.ResumedSnapshotID, EndUser: it.EndUser,
		Scope: it.Scope, Approvals: it.Approvals, ApprovalsNeeded: it.ApprovalsNeeded,
		ProposedInput: it.ProposedInput, EscalatedAt: it.EscalatedAt,
	}
	if it.PreviousID != nil {
		w.PreviousID = it.PreviousID.String()
	}
	if p := it.Policy; p != nil {
		w.Policy = &protocol.InboxPolicy{Scope: p.Scope, Approvals: p.Approvals, AllowEdit: p.AllowEdit, Attempts: p.Attempts}
		if e := p.Escalate; e != nil {
			w.Policy.Escalate = &protocol.InboxEscalation{AfterMs: e.AfterMs, Scope: e.Scope}
		}
	}
	return w
}

// InterruptOfWire is the record of a wire form (Wire's inverse; the wire
// form has no OnExpire). Malformed ids are an error.
func InterruptOfWire(w protocol.InboxInterrupt) (Interrupt, error) {
	id, err := uuid.Parse(w.ID)
	if err != nil {
		return Interrupt{}, fmt.Errorf("interrupt id %q: %w", w.ID, err)
	}
	it := Interrupt{
		ID: id, Agent: w.Agent, SessionID: w.SessionID, SnapshotID: w.SnapshotID,
		Tool: w.Tool, Ref: w.Ref, Input: w.Input, Metadata: w.Metadata, Status: w.Status,
		CreatedAt: w.CreatedAt, ExpiresAt: w.ExpiresAt, ResolvedAt: w.ResolvedAt, ResolvedBy: w.ResolvedBy,
		Resolution: w.Resolution, ResumedSnapshotID: w.ResumedSnapshotID, EndUser: w.EndUser,
		Scope: w.Scope, Approvals: w.Approvals, ApprovalsNeeded: w.ApprovalsNeeded,
		ProposedInput: w.ProposedInput, EscalatedAt: w.EscalatedAt,
	}
	if w.PreviousID != "" {
		prev, err := uuid.Parse(w.PreviousID)
		if err != nil {
			return Interrupt{}, fmt.Errorf("previous interrupt id %q: %w", w.PreviousID, err)
		}
		it.PreviousID = &prev
	}
	if p := w.Policy; p != nil {
		it.Policy = &StoredPolicy{Scope: p.Scope, Approvals: p.Approvals, AllowEdit: p.AllowEdit, Attempts: p.Attempts}
		if e := p.Escalate; e != nil {
			it.Policy.Escalate = &StoredEscalation{AfterMs: e.AfterMs, Scope: e.Scope}
		}
	}
	return it, nil
}

// InterruptEvent is one entry of an interrupt's audit trail; Wire is the
// form the API sends.
type InterruptEvent struct {
	// ID is the event's opaque id (Pos, encrypted for the tenant): the
	// same id the event streams and webhooks carry.
	ID string
	// Pos is the event's position in the log, never shown.
	Pos         EventPos
	InterruptID uuid.UUID
	Type        string
	Actor       string
	Payload     json.RawMessage
	CreatedAt   time.Time
}

// Wire returns the entry as GET /api/v1/interrupts/{id}/events sends it.
func (e InterruptEvent) Wire() protocol.AuditEvent {
	return protocol.AuditEvent{ID: e.ID, InterruptID: e.InterruptID.String(), Type: e.Type, Actor: e.Actor, Payload: e.Payload, CreatedAt: e.CreatedAt}
}

// InterruptFilter selects a page of the inbox.
type InterruptFilter struct {
	// Scopes are the caller's (an interrupt needing another scope is not
	// listed), AllScopes a caller holding every scope; ListInterrupts sets
	// them from its caller.
	Scopes    []string
	AllScopes bool
	Status    string
	Agent     string
	Tool      string
	SessionID string
	// EndUser keeps the interrupts of that end user's sessions.
	EndUser string
	// Oldest lists oldest first (what waited longest); the cursor then
	// moves forward in time.
	Oldest        bool
	CreatedBefore *time.Time
	CreatedAfter  *time.Time
	// After is the keyset cursor: the (createdAt, id) of the last item of
	// the previous page.
	AfterCreatedAt *time.Time
	AfterID        uuid.UUID
	Limit          int
}

// Decision is the outcome of recording an operator's decision.
type Decision struct {
	Interrupt *Interrupt
	// Waiting lists the interrupts of the same snapshot still pending.
	Waiting []Interrupt
	// Batch is set when the decision was the last one: every decided
	// interrupt of the snapshot, to resume together.
	Batch []Interrupt
	// Voted says the vote was recorded and the interrupt still waits for
	// approvals: Approvals of Needed so far.
	Voted             bool
	Approvals, Needed int
}

// SweptInterrupt is an interrupt a deadline answered: Status is expired,
// or resolved when its tool's deadline responds for the user.
type SweptInterrupt struct {
	TenantID string
	Agent    string
	Tool     string
	Status   string
}

// DecidedSnapshot is a paused snapshot whose interrupts are all decided.
type DecidedSnapshot struct {
	TenantID   string
	Agent      string
	SnapshotID string
	Batch      []Interrupt
}

// ReportRow is one group of the interrupt report (the wire type: the Go
// client reads the same).
type ReportRow = protocol.ReportRow

// TenantAgentStore keeps the agents tenants define: one row per agent and
// an immutable row per version of its definition.
type TenantAgentStore interface {
	// PutTenantAgent adds the next version of a tenant's agent and makes
	// it current (and enabled).
	PutTenantAgent(ctx context.Context, tenantID, name, source string, definition json.RawMessage, actor string) (*TenantAgentVersion, error)
	// GetTenantAgent returns an agent with the definition of a version (0:
	// the current one); ErrNotFound when there is none.
	GetTenantAgent(ctx context.Context, tenantID, name string, version int) (*TenantAgentRecord, error)
	// ListTenantAgents lists a tenant's agents with their current
	// definitions, by name.
	ListTenantAgents(ctx context.Context, tenantID string) ([]TenantAgentRecord, error)
	// ListTenantAgentVersions lists an agent's versions, newest first.
	ListTenantAgentVersions(ctx context.Context, tenantID, name string) ([]TenantAgentVersion, error)
	// DisableTenantAgent disables an agent; false when it is missing or
	// already disabled.
	DisableTenantAgent(ctx context.Context, tenantID, name, actor string) (bool, error)
	// TenantToolHosts are the hosts the operator allowed the tenant's HTTP
	// tools although they resolve to non-public addresses.
	TenantToolHosts(ctx context.Context, tenantID string) ([]string, error)
	// SetTenantToolHosts replaces them (ErrNotFound for an unknown tenant).
	SetTenantToolHosts(ctx context.Context, tenantID string, hosts []string) error
}

// TenantAgentRecord is a tenant's agent and one version's definition.
type TenantAgentRecord struct {
	Name           string          `json:"name"`
	CurrentVersion int             `json:"currentVersion"`
	Version        int             `json:"version"`
	Definition     json.RawMessage `json:"definition"`
	Source         string          `json:"source,omitempty"`
	CreatedBy      string          `json:"createdBy,omitempty"`
	DisabledAt     *time.Time      `json:"disabledAt,omitempty"`
	DisabledBy     string          `json:"disabledBy,omitempty"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	// VersionCreatedAt is when Version was created.
	VersionCreatedAt time.Time `json:"versionCreatedAt"`
}

// TenantAgentName names a tenant's agent.
type TenantAgentName struct {
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
}

// TenantAgentVersion is one version of a tenant's agent.
type TenantAgentVersion struct {
	Version   int       `json:"version"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// NewRowID is the id of a new session, snapshot or turn: a version 7 UUID,
// which begins with the time it was made (to the millisecond) and has 74
// random bits. Keys that hold such ids grow at their end, so their index
// pages fill up rather than split in half (a random id lands anywhere).
// Nothing is granted by knowing an id: every read checks the tenant and the
// end user.
func NewRowID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

// StoredPolicy is an approval policy as an interrupt row keeps it
// (interrupts.policy): what decisions need, without the agent's code.
type StoredPolicy struct {
	Scope     string            `json:"scope,omitempty"`
	Approvals int               `json:"approvals"`
	AllowEdit bool              `json:"allowEdit,omitempty"`
	Attempts  int               `json:"attempts"`
	Escalate  *StoredEscalation `json:"escalate,omitempty"`
}

// MakerChecker reports whether the stored policy excludes the requester
// and the protocol (see approval.Policy.MakerChecker).
func (s *StoredPolicy) MakerChecker() bool {
	return s != nil && (s.Scope != "" || s.Approvals > 1)
}

// EscalatedInterrupt is a pending approval the escalation sweep handed to
// another scope.
type EscalatedInterrupt struct {
	TenantID string
	ID       uuid.UUID
	Agent    string
	Tool     string
	// From is the scope it needed before ("" for any operator); To the
	// escalation's scope, which it needs now.
	From, To string
}

// SigningKey is one numbered key of a tenant.
type SigningKey struct {
	ID     int
	Secret []byte
	// ExpiresAt is when a rotated key stops verifying (nil: current).
	ExpiresAt *time.Time
}

// Usable reports whether the key still verifies at now.
func (k SigningKey) Usable(now time.Time) bool {
	return k.ExpiresAt == nil || now.Before(*k.ExpiresAt)
}

// StoredEscalation is an escalation as stored.
type StoredEscalation struct {
	AfterMs int64  `json:"afterMs"`
	Scope   string `json:"scope"`
}

// ActorOfKey is how every decision, vote and call records an API key (and
// a dashboard session of one): its name, when it has one, and its id, the
// same way everywhere.
func ActorOfKey(id, name string) string {
	if name == "" {
		return "key:" + id
	}
	return "key:" + name + "/" + id
}

// RefSuffix is "#ref" for messages naming a tool request, or nothing.
func RefSuffix(ref string) string {
	if ref == "" {
		return ""
	}
	return "#" + ref
}
