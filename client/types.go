package client

import (
	"encoding/json"
	"strings"
	"time"
)

// Message roles.
const (
	RoleUser   = "user"
	RoleModel  = "model"
	RoleTool   = "tool"
	RoleSystem = "system"
)

// Finish reasons of a turn.
const (
	FinishStop        = "stop"
	FinishInterrupted = "interrupted"
	FinishAborted     = "aborted"
	FinishDetached    = "detached"
	FinishFailed      = "failed"
	FinishOther       = "other"
)

// Snapshot statuses. A detached turn's snapshot is pending until it ends
// in one of the others.
const (
	SnapshotPending   = "pending"
	SnapshotCompleted = "completed"
	SnapshotFailed    = "failed"
	SnapshotAborted   = "aborted"
	SnapshotExpired   = "expired"
)

// Part is one piece of message content: one of text, media, toolRequest,
// toolResponse, data, reasoning, custom or resource, with optional metadata.
type Part struct {
	Text         string                     `json:"text,omitempty"`
	Media        *Media                     `json:"media,omitempty"`
	ToolRequest  *ToolRequest               `json:"toolRequest,omitempty"`
	ToolResponse *ToolResponse              `json:"toolResponse,omitempty"`
	Data         json.RawMessage            `json:"data,omitempty"`
	Reasoning    string                     `json:"reasoning,omitempty"`
	Custom       json.RawMessage            `json:"custom,omitempty"`
	Resource     json.RawMessage            `json:"resource,omitempty"`
	Metadata     map[string]json.RawMessage `json:"metadata,omitempty"`
}

// Media is a media part's content.
type Media struct {
	URL         string `json:"url"`
	ContentType string `json:"contentType,omitempty"`
}

// ToolRequest asks for a tool to run.
type ToolRequest struct {
	Name  string          `json:"name"`
	Ref   string          `json:"ref,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// ToolResponse carries a tool's result.
type ToolResponse struct {
	Name   string          `json:"name"`
	Ref    string          `json:"ref,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
}

// Message is one entry of a conversation.
type Message struct {
	Role     string                     `json:"role"`
	Content  []Part                     `json:"content"`
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
}

// UserMessage returns a user message of one text part.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Content: []Part{{Text: text}}}
}

// Text concatenates the message's text parts.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	return partsText(m.Content)
}

func partsText(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Artifact is a named output of an agent.
type Artifact struct {
	Name     string          `json:"name,omitempty"`
	Parts    []Part          `json:"parts"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// SessionState is a session's whole state: the conversation, the agent's
// custom state and its artifacts. A client-managed agent's state carries
// the server's Signature.
type SessionState struct {
	SessionID string          `json:"sessionId,omitempty"`
	Messages  []Message       `json:"messages"`
	Custom    json.RawMessage `json:"custom,omitempty"`
	Artifacts []Artifact      `json:"artifacts"`
	Signature string          `json:"signature,omitempty"`
}

// ErrorDetails is the protocol's error object, as a failed turn or snapshot
// carries it.
type ErrorDetails struct {
	Status  string          `json:"status"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

// Output is a turn's result exactly as the server sent it. State is kept
// as raw JSON so that a client-managed state goes back to the server
// unchanged (its signature covers it); Response.State decodes it.
type Output struct {
	SessionID    string          `json:"sessionId,omitempty"`
	SnapshotID   string          `json:"snapshotId,omitempty"`
	State        json.RawMessage `json:"state,omitempty"`
	Message      *Message        `json:"message,omitempty"`
	Artifacts    []Artifact      `json:"artifacts,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"`
	Error        *ErrorDetails   `json:"error,omitempty"`
}

// Snapshot is a point of a session: its status (a detached turn's is
// pending until it ends), how the turn ended, and the state then.
type Snapshot struct {
	SnapshotID   string        `json:"snapshotId"`
	SessionID    string        `json:"sessionId"`
	ParentID     string        `json:"parentId,omitempty"`
	CreatedAt    time.Time     `json:"createdAt"`
	UpdatedAt    *time.Time    `json:"updatedAt,omitempty"`
	HeartbeatAt  *time.Time    `json:"heartbeatAt,omitempty"`
	Status       string        `json:"status"`
	FinishReason string        `json:"finishReason,omitempty"`
	Error        *ErrorDetails `json:"error,omitempty"`
	State        *SessionState `json:"state,omitempty"`
}

// Done reports whether the snapshot's turn has ended (completed, failed,
// aborted or expired).
func (s *Snapshot) Done() bool {
	switch s.Status {
	case SnapshotCompleted, SnapshotFailed, SnapshotAborted, SnapshotExpired:
		return true
	}
	return false
}

// Resume answers (Respond) or restarts (Restart) interrupted tool requests.
// Reply builders fill it; see Interrupt.
type Resume struct {
	Respond  []Part          `json:"respond,omitempty"`
	Restart  []Part          `json:"restart,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Input is one input of a turn: a user message, or a resume, and whether to
// detach it (run it on the server while the request returns at once).
type Input struct {
	Message *Message `json:"message,omitempty"`
	Resume  *Resume  `json:"resume,omitempty"`
	Detach  bool     `json:"detach,omitempty"`
}

// Init selects what a chat starts from: nothing (a new session), a
// snapshot, a session's latest snapshot, or a client-managed state (raw
// JSON, sent unchanged).
type Init struct {
	SnapshotID string          `json:"snapshotId,omitempty"`
	SessionID  string          `json:"sessionId,omitempty"`
	State      json.RawMessage `json:"state,omitempty"`
}

// ModelChunk is a streamed piece of a model (or tool) message.
type ModelChunk struct {
	Role    string `json:"role,omitempty"`
	Content []Part `json:"content"`
	Index   *int   `json:"index,omitempty"`
}

// PatchOp is one RFC 6902 operation on the agent's custom state.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// TurnEnd marks the end of a turn inside a stream.
type TurnEnd struct {
	SnapshotID   string `json:"snapshotId,omitempty"`
	FinishReason string `json:"finishReason,omitempty"`
}

// Chunk is one streamed piece of a turn: exactly one of its fields is set.
type Chunk struct {
	ModelChunk  *ModelChunk `json:"modelChunk,omitempty"`
	CustomPatch []PatchOp   `json:"customPatch,omitempty"`
	Artifact    *Artifact   `json:"artifact,omitempty"`
	TurnEnd     *TurnEnd    `json:"turnEnd,omitempty"`
}

// Text is the text of a model chunk ("" for other chunks).
func (c Chunk) Text() string {
	if c.ModelChunk == nil {
		return ""
	}
	return partsText(c.ModelChunk.Content)
}
