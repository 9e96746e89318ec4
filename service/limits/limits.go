package limits

import (
	"strconv"

	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// Bounds on what a client may send in one invocation. The HTTP body limit
// caps the total; these keep a single request from making the runtime do
// unbounded work (walking a huge history, planning a huge resume) and apply
// to in-process callers too.
const (
	// MaxStateMessages bounds init.state.messages of a client-managed agent.
	MaxStateMessages = 1000
	// MaxStateArtifacts bounds init.state.artifacts.
	MaxStateArtifacts = 1000
	// MaxMessageParts bounds the parts of one message (or artifact).
	MaxMessageParts = 200
	// MaxResumeEntries bounds resume.respond plus resume.restart.
	MaxResumeEntries = 100
	// MaxTextBytes bounds one text or reasoning part.
	MaxTextBytes = 256 << 10
	// MaxToolNameBytes bounds the name and ref of a tool request or
	// response a client sends.
	MaxToolNameBytes = 1024
	// MaxSignatureBytes bounds init.state.signature.
	MaxSignatureBytes = 128
)

// CheckInit bounds an invocation's init: ids and the client-managed state.
func CheckInit(init protocol.AgentInit) error {
	if err := CheckID("sessionId", init.SessionID); err != nil {
		return err
	}
	if err := CheckID("snapshotId", init.SnapshotID); err != nil {
		return err
	}
	st := init.State
	if st == nil {
		return nil
	}
	if err := CheckID("state.sessionId", st.SessionID); err != nil {
		return err
	}
	if len(st.Signature) > MaxSignatureBytes {
		return store.Errorf(store.CodeInvalidArgument, "init.state.signature is longer than %d bytes", MaxSignatureBytes)
	}
	if len(st.Messages) > MaxStateMessages {
		return store.Errorf(store.CodeInvalidArgument, "init.state.messages has %d messages; at most %d are accepted", len(st.Messages), MaxStateMessages)
	}
	for i, m := range st.Messages {
		if err := checkParts(m.Content, "init.state.messages", i); err != nil {
			return err
		}
	}
	if len(st.Artifacts) > MaxStateArtifacts {
		return store.Errorf(store.CodeInvalidArgument, "init.state.artifacts has %d artifacts; at most %d are accepted", len(st.Artifacts), MaxStateArtifacts)
	}
	for i, a := range st.Artifacts {
		if err := checkParts(a.Parts, "init.state.artifacts", i); err != nil {
			return err
		}
	}
	return nil
}

// CheckInput bounds one input of an invocation: its message and its resume.
func CheckInput(in protocol.AgentInput) error {
	if in.Message != nil {
		if err := checkUserMessage(in.Message); err != nil {
			return err
		}
		if err := checkParts(in.Message.Content, "message", -1); err != nil {
			return err
		}
	}
	if res := in.Resume; res != nil {
		if n := len(res.Respond) + len(res.Restart); n > MaxResumeEntries {
			return store.Errorf(store.CodeInvalidArgument, "resume has %d entries; at most %d are accepted", n, MaxResumeEntries)
		}
		if err := checkParts(res.Respond, "resume.respond", -1); err != nil {
			return err
		}
		if err := checkParts(res.Restart, "resume.restart", -1); err != nil {
			return err
		}
	}
	return nil
}

// checkUserMessage admits only what a user may say. Model, tool and system
// messages, and tool requests or responses, are written by the server alone:
// a client that could add them could make the history claim that the model
// asked for a tool, then restart or answer that forged request.
func checkUserMessage(m *protocol.Message) error {
	if m.Role != protocol.RoleUser {
		return store.Errorf(store.CodeInvalidArgument, "data.message.role must be 'user': model, tool and system messages are written by the server only")
	}
	for i, p := range m.Content {
		switch {
		case p.ToolRequest != nil:
			return store.Errorf(store.CodeInvalidArgument, "data.message.content[%d] is a toolRequest: only the model asks for tools", i)
		case p.ToolResponse != nil:
			return store.Errorf(store.CodeInvalidArgument, "data.message.content[%d] is a toolResponse: answer an interrupt with data.resume.respond instead", i)
		case p.Reasoning != nil:
			return store.Errorf(store.CodeInvalidArgument, "data.message.content[%d] is a reasoning part, which only the model writes", i)
		}
	}
	return nil
}

// checkParts bounds a list of parts; where names the list, and index the
// message or artifact holding it (-1 for none).
func checkParts(parts []protocol.Part, where string, index int) error {
	if index >= 0 {
		where += "[" + strconv.Itoa(index) + "]"
	}
	if len(parts) > MaxMessageParts {
		return store.Errorf(store.CodeInvalidArgument, "%s has %d parts; at most %d are accepted", where, len(parts), MaxMessageParts)
	}
	for _, p := range parts {
		if (p.Text != nil && len(*p.Text) > MaxTextBytes) || (p.Reasoning != nil && len(*p.Reasoning) > MaxTextBytes) {
			return store.Errorf(store.CodeInvalidArgument, "%s has a text part over %d bytes", where, MaxTextBytes)
		}
		if tr := p.ToolRequest; tr != nil && (len(tr.Name) > MaxToolNameBytes || len(tr.Ref) > MaxToolNameBytes) {
			return store.Errorf(store.CodeInvalidArgument, "%s has a tool request whose name or ref is over %d bytes", where, MaxToolNameBytes)
		}
		if tr := p.ToolResponse; tr != nil && (len(tr.Name) > MaxToolNameBytes || len(tr.Ref) > MaxToolNameBytes) {
			return store.Errorf(store.CodeInvalidArgument, "%s has a tool response whose name or ref is over %d bytes", where, MaxToolNameBytes)
		}
	}
	return nil
}

// CheckID bounds a client-chosen id: any string, but not an unbounded or
// unprintable one.
func CheckID(field, id string) error {
	if len(id) > 256 {
		return store.Errorf(store.CodeInvalidArgument, "%s is longer than 256 bytes", field)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return store.Errorf(store.CodeInvalidArgument, "%s contains a control character", field)
		}
	}
	return nil
}
