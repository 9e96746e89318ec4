package client

import (
	"encoding/json"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// The wire types are the server's own (package protocol, which needs
// nothing but the standard library): one definition for both ends, so a
// field the server learns is one the client reads. Parts, tool requests and
// messages keep keys they do not know and write them back unchanged.
type (
	// Part is one piece of message content: one of text, media,
	// toolRequest, toolResponse, data, reasoning, custom or resource, with
	// optional metadata. protocol.TextPart makes a text part.
	Part = protocol.Part
	// ToolRequest asks for a tool to run.
	ToolRequest = protocol.ToolRequest
	// ToolResponse carries a tool's result.
	ToolResponse = protocol.ToolResponse
	// Message is one entry of a conversation.
	Message = protocol.Message
	// Artifact is a named output of an agent.
	Artifact = protocol.Artifact
	// SessionState is a session's whole state: the conversation, the
	// agent's custom state and its artifacts. A client-managed agent's
	// state carries the server's Signature.
	SessionState = protocol.SessionState
	// ErrorDetails is the protocol's error object, as a failed turn or
	// snapshot carries it.
	ErrorDetails = protocol.ErrorDetails
	// Snapshot is a point of a session: its status (a detached turn's is
	// pending until it ends), how the turn ended, and the state then.
	Snapshot = protocol.Snapshot
	// Resume answers (Respond) or restarts (Restart) interrupted tool
	// requests. Reply builders fill it; see Interrupt.
	Resume = protocol.Resume
	// Input is one input of a turn: a user message, or a resume, and
	// whether to detach it (run it on the server while the request returns
	// at once).
	Input = protocol.AgentInput
	// ModelChunk is a streamed piece of a model (or tool) message.
	ModelChunk = protocol.ModelChunk
	// PatchOp is one RFC 6902 operation on the agent's custom state.
	PatchOp = protocol.PatchOp
	// TurnEnd marks the end of a turn inside a stream.
	TurnEnd = protocol.TurnEnd
	// Chunk is one streamed piece of a turn: exactly one of its fields is
	// set.
	Chunk = protocol.StreamChunk
)

// Message roles.
const (
	RoleUser   = protocol.RoleUser
	RoleModel  = protocol.RoleModel
	RoleTool   = protocol.RoleTool
	RoleSystem = protocol.RoleSystem
)

// Finish reasons of a turn.
const (
	FinishStop        = protocol.FinishStop
	FinishInterrupted = protocol.FinishInterrupted
	FinishAborted     = protocol.FinishAborted
	FinishDetached    = protocol.FinishDetached
	FinishFailed      = protocol.FinishFailed
	FinishOther       = protocol.FinishOther
)

// Snapshot statuses. A detached turn's snapshot is pending until it ends
// in one of the others.
const (
	SnapshotPending   = protocol.StatusPending
	SnapshotCompleted = protocol.StatusCompleted
	SnapshotFailed    = protocol.StatusFailed
	SnapshotAborted   = protocol.StatusAborted
	SnapshotExpired   = protocol.StatusExpired
)

// UserMessage returns a user message of one text part.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Content: []Part{protocol.TextPart(text)}}
}

// messageText is the text of a message that may be absent.
func messageText(m *Message) string {
	if m == nil {
		return ""
	}
	return m.Text()
}

// Output is a turn's result exactly as the server sent it: a
// protocol.AgentOutput but for State, which is kept as raw JSON so that a
// client-managed state goes back to the server byte for byte (its signature
// covers it); Response.State decodes it.
type Output struct {
	SessionID    string          `json:"sessionId,omitempty"`
	SnapshotID   string          `json:"snapshotId,omitempty"`
	State        json.RawMessage `json:"state,omitempty"`
	Message      *Message        `json:"message,omitempty"`
	Artifacts    []Artifact      `json:"artifacts,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"`
	Error        *ErrorDetails   `json:"error,omitempty"`
}

// Init selects what a chat starts from: nothing (a new session), a
// snapshot, a session's latest snapshot, or a client-managed state. It is
// a protocol.AgentInit but for State, raw JSON sent unchanged.
type Init struct {
	SnapshotID string          `json:"snapshotId,omitempty"`
	SessionID  string          `json:"sessionId,omitempty"`
	State      json.RawMessage `json:"state,omitempty"`
}
