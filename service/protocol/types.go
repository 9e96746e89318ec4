package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// Part is one piece of message content: exactly one of text, media,
// toolRequest, toolResponse, data, reasoning, custom or resource, plus
// optional metadata. Keys the platform does not know are kept in Extra and
// written back unchanged.
type Part struct {
	Text         *string         `json:"-"`
	Media        json.RawMessage `json:"-"`
	ToolRequest  *ToolRequest    `json:"-"`
	ToolResponse *ToolResponse   `json:"-"`
	Data         json.RawMessage `json:"-"`
	Reasoning    *string         `json:"-"`
	Custom       json.RawMessage `json:"-"`
	Resource     json.RawMessage `json:"-"`
	Metadata     Metadata        `json:"-"`
	Extra        rawObject       `json:"-"`
}

// Metadata is a JSON object of raw members, kept losslessly.
type Metadata = map[string]json.RawMessage

// ToolRequest asks for a tool to run.
type ToolRequest struct {
	Name  string
	Ref   string
	Input json.RawMessage
	Extra rawObject
}

// ToolResponse carries a tool's result.
type ToolResponse struct {
	Name    string
	Ref     string
	Output  json.RawMessage
	Content json.RawMessage
	Extra   rawObject
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Text: &s} }

// UnmarshalJSON decodes a part, keeping unknown keys.
func (p *Part) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data, "part")
	if err != nil {
		return err
	}
	var out Part
	if _, err := obj.take("text", &out.Text, "part"); err != nil {
		return err
	}
	if _, err := obj.take("reasoning", &out.Reasoning, "part"); err != nil {
		return err
	}
	out.Media = obj.takeRaw("media")
	out.Data = obj.takeRaw("data")
	out.Custom = obj.takeRaw("custom")
	out.Resource = obj.takeRaw("resource")
	if _, err := obj.take("toolRequest", &out.ToolRequest, "part"); err != nil {
		return err
	}
	if _, err := obj.take("toolResponse", &out.ToolResponse, "part"); err != nil {
		return err
	}
	if _, err := obj.take("metadata", &out.Metadata, "part"); err != nil {
		return err
	}
	if len(obj) > 0 {
		out.Extra = obj
	}
	*p = out
	return nil
}

// MarshalJSON encodes a part with its unknown keys.
func (p Part) MarshalJSON() ([]byte, error) {
	known := []member{
		{"text", ptrOrNil(p.Text)},
		{"media", rawOrNil(p.Media)},
		{"toolRequest", p.toolRequestValue()},
		{"toolResponse", p.toolResponseValue()},
		{"data", rawOrNil(p.Data)},
		{"reasoning", ptrOrNil(p.Reasoning)},
		{"custom", rawOrNil(p.Custom)},
		{"resource", rawOrNil(p.Resource)},
		{"metadata", metaOrNil(p.Metadata)},
	}
	return encodeObject(known, p.Extra)
}

func (p Part) toolRequestValue() any {
	if p.ToolRequest == nil {
		return nil
	}
	return p.ToolRequest
}

func (p Part) toolResponseValue() any {
	if p.ToolResponse == nil {
		return nil
	}
	return p.ToolResponse
}

// UnmarshalJSON decodes a tool request.
func (t *ToolRequest) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data, "toolRequest")
	if err != nil {
		return err
	}
	var out ToolRequest
	if ok, err := obj.take("name", &out.Name, "toolRequest"); err != nil {
		return err
	} else if !ok || out.Name == "" {
		return fmt.Errorf("toolRequest.name is required")
	}
	if _, err := obj.take("ref", &out.Ref, "toolRequest"); err != nil {
		return err
	}
	out.Input = obj.takeRaw("input")
	if len(obj) > 0 {
		out.Extra = obj
	}
	*t = out
	return nil
}

// MarshalJSON encodes a tool request.
func (t ToolRequest) MarshalJSON() ([]byte, error) {
	return encodeObject([]member{
		{"name", t.Name},
		{"ref", strOrNil(t.Ref)},
		{"input", rawOrNil(t.Input)},
	}, t.Extra)
}

// UnmarshalJSON decodes a tool response.
func (t *ToolResponse) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data, "toolResponse")
	if err != nil {
		return err
	}
	var out ToolResponse
	if ok, err := obj.take("name", &out.Name, "toolResponse"); err != nil {
		return err
	} else if !ok || out.Name == "" {
		return fmt.Errorf("toolResponse.name is required")
	}
	if _, err := obj.take("ref", &out.Ref, "toolResponse"); err != nil {
		return err
	}
	out.Output = obj.takeRaw("output")
	out.Content = obj.takeRaw("content")
	if len(obj) > 0 {
		out.Extra = obj
	}
	*t = out
	return nil
}

// MarshalJSON encodes a tool response.
func (t ToolResponse) MarshalJSON() ([]byte, error) {
	return encodeObject([]member{
		{"name", t.Name},
		{"ref", strOrNil(t.Ref)},
		{"output", rawOrNil(t.Output)},
		{"content", rawOrNil(t.Content)},
	}, t.Extra)
}

// Message is one entry of a conversation.
type Message struct {
	Role     string
	Content  []Part
	Metadata Metadata
	Extra    rawObject
}

// Message roles.
const (
	RoleUser   = "user"
	RoleModel  = "model"
	RoleTool   = "tool"
	RoleSystem = "system"
)

// UnmarshalJSON decodes a message and checks its role.
func (m *Message) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data, "message")
	if err != nil {
		return err
	}
	var out Message
	if ok, err := obj.take("role", &out.Role, "message"); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("message.role is required")
	}
	switch out.Role {
	case RoleUser, RoleModel, RoleTool, RoleSystem:
	default:
		return fmt.Errorf("message.role must be one of user, model, tool, system")
	}
	if _, err := obj.take("content", &out.Content, "message"); err != nil {
		return err
	}
	if out.Content == nil {
		return fmt.Errorf("message.content is required")
	}
	if _, err := obj.take("metadata", &out.Metadata, "message"); err != nil {
		return err
	}
	if len(obj) > 0 {
		out.Extra = obj
	}
	*m = out
	return nil
}

// MarshalJSON encodes a message.
func (m Message) MarshalJSON() ([]byte, error) {
	content := m.Content
	if content == nil {
		content = []Part{}
	}
	return encodeObject([]member{
		{"role", m.Role},
		{"content", content},
		{"metadata", metaOrNil(m.Metadata)},
	}, m.Extra)
}

// Clone returns a copy of the message whose parts and metadata maps can be
// changed without touching the original.
func (m Message) Clone() Message {
	out := m
	out.Content = make([]Part, len(m.Content))
	for i, p := range m.Content {
		out.Content[i] = p.Clone()
	}
	out.Metadata = CloneMetadata(m.Metadata)
	return out
}

// Clone returns a copy of the part with its own metadata map and tool structs.
func (p Part) Clone() Part {
	out := p
	out.Metadata = CloneMetadata(p.Metadata)
	if p.ToolRequest != nil {
		tr := *p.ToolRequest
		out.ToolRequest = &tr
	}
	if p.ToolResponse != nil {
		tr := *p.ToolResponse
		out.ToolResponse = &tr
	}
	return out
}

func CloneMetadata(m Metadata) Metadata {
	if m == nil {
		return nil
	}
	out := make(Metadata, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ResolvedMetadata is m with its interrupt member moved to
// resolvedInterrupt, as a resume leaves a request it answered (nil when
// nothing is left). m is not changed.
func ResolvedMetadata(m Metadata) Metadata {
	out := CloneMetadata(m)
	irq, ok := out["interrupt"]
	delete(out, "interrupt")
	if ok {
		out["resolvedInterrupt"] = irq
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Text concatenates the message's text parts.
func (m Message) Text() string {
	var s string
	for _, p := range m.Content {
		if p.Text != nil {
			s += *p.Text
		}
	}
	return s
}

// Artifact is a named output of an agent, deduplicated by name.
type Artifact struct {
	Name     string          `json:"name,omitempty"`
	Parts    []Part          `json:"parts"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// SessionState is the whole state of a session as the protocol shows it.
type SessionState struct {
	SessionID string          `json:"sessionId,omitempty"`
	Messages  []Message       `json:"messages,omitempty"`
	Custom    json.RawMessage `json:"custom,omitempty"`
	Artifacts []Artifact      `json:"artifacts,omitempty"`
	// Signature is the server's signature of a client-managed agent's
	// state (see statesig.go): only tool requests of a state that carries a
	// valid one can be answered or restarted.
	Signature string `json:"signature,omitempty"`
}

// MarshalJSON writes messages and artifacts as arrays even when empty, as
// the reference runtime does, so a client can read state.messages and
// state.artifacts without a check.
func (s SessionState) MarshalJSON() ([]byte, error) {
	type plain SessionState
	out := struct {
		plain
		Messages  []Message  `json:"messages"`
		Artifacts []Artifact `json:"artifacts"`
	}{plain(s), s.Messages, s.Artifacts}
	if out.Messages == nil {
		out.Messages = []Message{}
	}
	if out.Artifacts == nil {
		out.Artifacts = []Artifact{}
	}
	return json.Marshal(out)
}

// Resume answers or restarts interrupted tool requests.
type Resume struct {
	Respond  []Part          `json:"respond,omitempty"`
	Restart  []Part          `json:"restart,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// AgentInput is one input of an invocation.
type AgentInput struct {
	Message *Message `json:"message,omitempty"`
	Resume  *Resume  `json:"resume,omitempty"`
	Detach  bool     `json:"detach,omitempty"`
}

// HasPayload reports whether the input asks for a turn. As in the
// reference runtime, every input but a detach directive does: an empty
// resume, or an input with neither message nor resume, runs a turn that
// fails on a paused session instead of passing unnoticed. A detach
// directive runs a turn only when it carries a message or resume entries.
func (in AgentInput) HasPayload() bool {
	if !in.Detach {
		return true
	}
	return in.Message != nil || (in.Resume != nil && (len(in.Resume.Respond) > 0 || len(in.Resume.Restart) > 0))
}

// AgentInit selects the session an invocation works on.
type AgentInit struct {
	SnapshotID string        `json:"snapshotId,omitempty"`
	SessionID  string        `json:"sessionId,omitempty"`
	State      *SessionState `json:"state,omitempty"`
}

// ErrorDetails is the protocol's error object.
type ErrorDetails struct {
	Status  string          `json:"status"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

// Finish reasons.
const (
	FinishStop        = "stop"
	FinishLength      = "length"
	FinishBlocked     = "blocked"
	FinishInterrupted = "interrupted"
	FinishOther       = "other"
	FinishUnknown     = "unknown"
	FinishAborted     = "aborted"
	FinishDetached    = "detached"
	FinishFailed      = "failed"
)

// AgentOutput is the result of an invocation.
type AgentOutput struct {
	SessionID    string        `json:"sessionId,omitempty"`
	SnapshotID   string        `json:"snapshotId,omitempty"`
	State        *SessionState `json:"state,omitempty"`
	Message      *Message      `json:"message,omitempty"`
	Artifacts    []Artifact    `json:"artifacts,omitempty"`
	FinishReason string        `json:"finishReason,omitempty"`
	Error        *ErrorDetails `json:"error,omitempty"`
}

// ModelChunk is a streamed piece of a model (or tool) message.
type ModelChunk struct {
	Role    string `json:"role,omitempty"`
	Content []Part `json:"content"`
	Index   *int   `json:"index,omitempty"`
}

// TurnEnd marks the end of a turn in a stream.
type TurnEnd struct {
	SnapshotID   string `json:"snapshotId,omitempty"`
	FinishReason string `json:"finishReason,omitempty"`
}

// PatchOp is one RFC 6902 operation.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// StreamChunk is exactly one of its fields.
type StreamChunk struct {
	ModelChunk  *ModelChunk `json:"modelChunk,omitempty"`
	CustomPatch []PatchOp   `json:"customPatch,omitempty"`
	Artifact    *Artifact   `json:"artifact,omitempty"`
	TurnEnd     *TurnEnd    `json:"turnEnd,omitempty"`
}

// Text is the text of a model chunk ("" for other chunks).
func (c StreamChunk) Text() string {
	if c.ModelChunk == nil {
		return ""
	}
	var s string
	for _, p := range c.ModelChunk.Content {
		if p.Text != nil {
			s += *p.Text
		}
	}
	return s
}

// Snapshot statuses. StatusExpired is never stored: it is computed on read.
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusAborted   = "aborted"
	StatusExpired   = "expired"
)

// Snapshot is the protocol's SessionSnapshot.
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
	case StatusCompleted, StatusFailed, StatusAborted, StatusExpired:
		return true
	}
	return false
}

// SnapshotLookup selects a snapshot by id, or a session's latest.
type SnapshotLookup struct {
	SnapshotID string `json:"snapshotId,omitempty"`
	SessionID  string `json:"sessionId,omitempty"`
}

// AbortResult answers an abort.
type AbortResult struct {
	SnapshotID string `json:"snapshotId"`
	Status     string `json:"status,omitempty"`
}

func ptrOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func rawOrNil(r json.RawMessage) any {
	if r == nil {
		return nil
	}
	return r
}

func metaOrNil(m Metadata) any {
	if m == nil {
		return nil
	}
	return m
}

// ReportRow is one group of the interrupt report of the approvals inbox
// (GET /api/v1/interrupts/report). Percentiles are seconds, absent when no
// interrupt of the group qualifies.
type ReportRow struct {
	Key           string   `json:"key"`
	Total         int64    `json:"total"`
	Pending       int64    `json:"pending"`
	Resolved      int64    `json:"resolved"`
	Expired       int64    `json:"expired"`
	Cancelled     int64    `json:"cancelled"`
	Approved      int64    `json:"approved"`
	Denied        int64    `json:"denied"`
	DecisionP50   *float64 `json:"decisionP50Seconds,omitempty"`
	DecisionP90   *float64 `json:"decisionP90Seconds,omitempty"`
	DecisionP99   *float64 `json:"decisionP99Seconds,omitempty"`
	PendingAgeP50 *float64 `json:"pendingAgeP50Seconds,omitempty"`
	PendingAgeP99 *float64 `json:"pendingAgeP99Seconds,omitempty"`
}
