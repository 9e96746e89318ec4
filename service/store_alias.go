package service

// The store's interfaces, the records they pass and the errors they
// answer are defined in package store, which both the engine and its
// PostgreSQL implementation (service/pgstore) import; the engine names them
// as its own so that code written against package service reads as before.

import "github.com/holdpoint/holdpoint/service/store"

type (
	EventPos                   = store.EventPos
	Notification               = store.Notification
	EventSource                = store.EventSource
	Store                      = store.Store
	Scope                      = store.Scope
	TurnJob                    = store.TurnJob
	JobRef                     = store.JobRef
	TurnStep                   = store.TurnStep
	LoadSnapshotParams         = store.LoadSnapshotParams
	ListSessionToolCallsParams = store.ListSessionToolCallsParams
	ClaimInterruptsParams      = store.ClaimInterruptsParams
	DecideInterruptParams      = store.DecideInterruptParams
	Vote                       = store.Vote
	ReportInterruptsParams     = store.ReportInterruptsParams
	StoredSession              = store.StoredSession
	SessionSummary             = store.SessionSummary
	SessionPosition            = store.SessionPosition
	StoredSnapshot             = store.StoredSnapshot
	SnapshotWrite              = store.SnapshotWrite
	PositionedMessage          = store.PositionedMessage
	NewInterrupt               = store.NewInterrupt
	DecideToolCallParams       = store.DecideToolCallParams
	ToolCallRecord             = store.ToolCallRecord
	ToolCallOutcome            = store.ToolCallOutcome
	ToolCallCursor             = store.ToolCallCursor
	InterruptClaim             = store.InterruptClaim
	PendingCount               = store.PendingCount
	PendingStat                = store.PendingStat
	Interrupt                  = store.Interrupt
	InterruptEvent             = store.InterruptEvent
	InterruptFilter            = store.InterruptFilter
	Decision                   = store.Decision
	ReportRow                  = store.ReportRow
	TenantAgentStore           = store.TenantAgentStore
	TenantAgentRecord          = store.TenantAgentRecord
	TenantAgentName            = store.TenantAgentName
	TenantAgentVersion         = store.TenantAgentVersion
	StoredPolicy               = store.StoredPolicy
	SigningKey                 = store.SigningKey
	StoredEscalation           = store.StoredEscalation
	Error                      = store.Error
	RetryAdvice                = store.RetryAdvice
	ClaimRefused               = store.ClaimRefused
	Tenant                     = store.Tenant
	TenantStore                = store.TenantStore
	UISession                  = store.UISession
)

const (
	VoteApprove            = store.VoteApprove
	VoteDeny               = store.VoteDeny
	InterruptPending       = store.InterruptPending
	InterruptResolved      = store.InterruptResolved
	InterruptExpired       = store.InterruptExpired
	InterruptCancelled     = store.InterruptCancelled
	ToolCallRunning        = store.ToolCallRunning
	ToolCallSucceeded      = store.ToolCallSucceeded
	ToolCallInterrupted    = store.ToolCallInterrupted
	ToolCallFailed         = store.ToolCallFailed
	ToolCallUnknown        = store.ToolCallUnknown
	ToolCallCancelled      = store.ToolCallCancelled
	DecisionConfirmed      = store.DecisionConfirmed
	DecisionCancelled      = store.DecisionCancelled
	DecisionRetried        = store.DecisionRetried
	CodeInvalidArgument    = store.CodeInvalidArgument
	CodeFailedPrecondition = store.CodeFailedPrecondition
	CodeNotFound           = store.CodeNotFound
	CodeAlreadyExists      = store.CodeAlreadyExists
	CodeAborted            = store.CodeAborted
	CodePermissionDenied   = store.CodePermissionDenied
	CodeUnauthenticated    = store.CodeUnauthenticated
	CodeResourceExhausted  = store.CodeResourceExhausted
	CodeUnavailable        = store.CodeUnavailable
	CodeInternal           = store.CodeInternal
	RetryResend            = store.RetryResend
	RetryOutcome           = store.RetryOutcome
	RetryByHuman           = store.RetryByHuman
	RetryNotAgain          = store.RetryNotAgain
	UnavailableRetryAfter  = store.UnavailableRetryAfter
	UnavailableMessage     = store.UnavailableMessage
)

var (
	OperatorScope      = store.OperatorScope
	NewRowID           = store.NewRowID
	ActorOfKey         = store.ActorOfKey
	RefSuffix          = store.RefSuffix
	Errorf             = store.Errorf
	ErrNotFound        = store.ErrNotFound
	AsError            = store.AsError
	ErrUnavailable     = store.ErrUnavailable
	UnavailableError   = store.UnavailableError
	ErrSessionMoved    = store.ErrSessionMoved
	Details            = store.Details
	ErrDecisionTaken   = store.ErrDecisionTaken
	ErrTooManyPending  = store.ErrTooManyPending
	ErrTooManyDetached = store.ErrTooManyDetached
)
