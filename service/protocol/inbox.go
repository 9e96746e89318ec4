package protocol

import (
	"encoding/json"
	"time"
)

// InboxInterrupt is an interrupt as the approvals inbox (/api/v1) shows
// it: a row of the server's interrupts table, in the form the server
// writes (store.Interrupt.Wire) and the Go client reads.
type InboxInterrupt struct {
	ID                string          `json:"id"`
	Agent             string          `json:"agent"`
	SessionID         string          `json:"sessionId"`
	SnapshotID        string          `json:"snapshotId"`
	Tool              string          `json:"tool"`
	Ref               string          `json:"ref,omitempty"`
	Input             json.RawMessage `json:"input,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	Status            string          `json:"status"`
	CreatedAt         time.Time       `json:"createdAt"`
	ExpiresAt         *time.Time      `json:"expiresAt,omitempty"`
	ResolvedAt        *time.Time      `json:"resolvedAt,omitempty"`
	ResolvedBy        string          `json:"resolvedBy,omitempty"`
	Resolution        json.RawMessage `json:"resolution,omitempty"`
	ResumedSnapshotID string          `json:"resumedSnapshotId,omitempty"`
	// PreviousID is the interrupt this one replaces (a restart that
	// interrupted again).
	PreviousID string `json:"previousId,omitempty"`
	// EndUser is who asked (the session's end user when it paused).
	EndUser string `json:"endUser,omitempty"`
	// Policy is a gated call's approval policy; Scope the scope deciding
	// it needs now (the policy's, or its escalation's); Approvals of
	// ApprovalsNeeded given so far for the current proposal, and
	// ProposedInput an approver's edit of the input, when there is one.
	Policy          *InboxPolicy    `json:"policy,omitempty"`
	Scope           string          `json:"scope,omitempty"`
	Approvals       int             `json:"approvals,omitempty"`
	ApprovalsNeeded int             `json:"approvalsNeeded,omitempty"`
	ProposedInput   json.RawMessage `json:"proposedInput,omitempty"`
	EscalatedAt     *time.Time      `json:"escalatedAt,omitempty"`
}

// InboxPolicy is a gated call's approval policy as the inbox shows it:
// the scope deciding it needs, the approvals it needs, whether an approver
// may edit the input, the runs a failed approved call gets, and its
// escalation.
type InboxPolicy struct {
	Scope     string           `json:"scope,omitempty"`
	Approvals int              `json:"approvals"`
	AllowEdit bool             `json:"allowEdit,omitempty"`
	Attempts  int              `json:"attempts"`
	Escalate  *InboxEscalation `json:"escalate,omitempty"`
}

// InboxEscalation hands an approval still pending after AfterMs to Scope.
type InboxEscalation struct {
	AfterMs int64  `json:"afterMs"`
	Scope   string `json:"scope"`
}
