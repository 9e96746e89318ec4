package approval

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// The platform's approval gate (Tool.Approval, Policy): a call the policy
// gates pauses before anything of it runs, on an interrupt of the model's
// own request whose metadata.interrupt says so. Its marker (the metaGate
// key) is the platform's alone: a tool's own interrupt metadata loses it
// (StripGate), so no tool, endpoint or model can make a pause look
// approved, and only the server's copy of the history is read.

// metaGate marks, inside metadata.interrupt, an interrupt the gate made.
const metaGate = "gate"

// MetaEditedFrom keeps, in the metadata of a request an approver edited,
// the input the model asked for.
const MetaEditedFrom = "editedFrom"

// MaxExplanationBytes bounds the model's explanation kept with a gated
// call.
const MaxExplanationBytes = 2000

// Gate is what a gate interrupt's metadata says about its policy.
type Gate struct {
	Scope     string `json:"scope,omitempty"`
	Approvals int    `json:"approvals"`
	AllowEdit bool   `json:"allowEdit,omitempty"`
}

// GateMeta is the metadata.interrupt of a call of the tool named tool
// that the policy gates, with the model's explanation of it.
func (p *Policy) GateMeta(tool, explanation string) json.RawMessage {
	need := "your approval"
	if p.MakerChecker() {
		need = fmt.Sprintf("%d approval(s)", p.Approvers())
		if p.Scope != "" {
			need += " from holders of " + p.Scope
		}
	}
	m := map[string]any{
		"approval": "required",
		metaGate:   Gate{Scope: p.Scope, Approvals: p.Approvers(), AllowEdit: p.AllowEdit},
		"message":  fmt.Sprintf("%s needs %s before it runs: restart it to run it, or respond with an output to skip it.", tool, need),
	}
	if explanation != "" {
		m["explanation"] = explanation
	}
	raw, _ := json.Marshal(m)
	return raw
}

// GateOf is the gate of an interrupted request of the server's history,
// given its metadata.interrupt (nil: not a gate interrupt).
func GateOf(meta json.RawMessage) *Gate {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m[metaGate] == nil {
		return nil
	}
	var g Gate
	if json.Unmarshal(m[metaGate], &g) != nil {
		return nil
	}
	return &g
}

// StripGate removes the gate's marker from a tool's own interrupt
// metadata: only the platform makes gate interrupts.
func StripGate(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m[metaGate] == nil {
		return meta
	}
	delete(m, metaGate)
	out, _ := json.Marshal(m)
	return out
}

// Explanation is the model's text beside its tool requests in m, bounded
// by MaxExplanationBytes.
func Explanation(m protocol.Message) string {
	var b strings.Builder
	for _, p := range m.Content {
		if p.Text != nil && *p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(*p.Text)
		}
	}
	s := strings.TrimSpace(b.String())
	if len(s) > MaxExplanationBytes {
		s = strings.ToValidUTF8(s[:MaxExplanationBytes], "")
	}
	return s
}

// Same reports whether two resolutions of a gated call approve the same
// call (a restart of the same input), whoever gave them and with whatever
// note: the session's restart sent again after the inbox approved the call
// answers the approval's outcome (or retries its failed call).
func Same(a, b json.RawMessage) bool {
	var x, y struct {
		Restart bool            `json:"restart"`
		Input   json.RawMessage `json:"input"`
	}
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && x.Restart && y.Restart && protocol.JSONEqual(x.Input, y.Input)
}

// ScopeNote names, for an error, who decides a call the scope gates.
func ScopeNote(scope string) string {
	if scope == "" {
		return ""
	}
	return " from holders of the scope " + scope
}

// Edited is the history's request p with the input an approver edited:
// the model reads what ran, and the metadata keeps what it asked
// (MetaEditedFrom).
func Edited(p protocol.Part, input json.RawMessage) protocol.Part {
	p = p.Clone()
	meta := protocol.CloneMetadata(p.Metadata)
	if meta == nil {
		meta = protocol.Metadata{}
	}
	meta[MetaEditedFrom] = rawjson.Or(p.ToolRequest.Input, "null")
	p.Metadata = meta
	req := *p.ToolRequest
	req.Input = input
	p.ToolRequest = &req
	return p
}
