package service

import (
	"strconv"
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
)

// checkInit bounds an invocation's init: ids and the client-managed state.
func checkInit(init AgentInit) error {
	if err := checkID("sessionId", init.SessionID); err != nil {
		return err
	}
	if err := checkID("snapshotId", init.SnapshotID); err != nil {
		return err
	}
	st := init.State
	if st == nil {
		return nil
	}
	if err := checkID("state.sessionId", st.SessionID); err != nil {
		return err
	}
	if len(st.Signature) > maxSignatureBytes {
		return Errorf(CodeInvalidArgument, "init.state.signature is longer than %d bytes", maxSignatureBytes)
	}
	if len(st.Messages) > MaxStateMessages {
		return Errorf(CodeInvalidArgument, "init.state.messages has %d messages; at most %d are accepted", len(st.Messages), MaxStateMessages)
	}
	for i, m := range st.Messages {
		if err := checkParts(m.Content, "init.state.messages", i); err != nil {
			return err
		}
	}
	if len(st.Artifacts) > MaxStateArtifacts {
		return Errorf(CodeInvalidArgument, "init.state.artifacts has %d artifacts; at most %d are accepted", len(st.Artifacts), MaxStateArtifacts)
	}
	for i, a := range st.Artifacts {
		if err := checkParts(a.Parts, "init.state.artifacts", i); err != nil {
			return err
		}
	}
	return nil
}

// checkInput bounds one input of an invocation: its message and its resume.
func checkInput(in AgentInput) error {
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
			return Errorf(CodeInvalidArgument, "resume has %d entries; at most %d are accepted", n, MaxResumeEntries)
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
func checkUserMessage(m *Message) error {
	if m.Role != RoleUser {
		return Errorf(CodeInvalidArgument, "data.message.role must be 'user': model, tool and system messages are written by the server only")
	}
	for i, p := range m.Content {
		switch {
		case p.ToolRequest != nil:
			return Errorf(CodeInvalidArgument, "data.message.content[%d] is a toolRequest: only the model asks for tools", i)
		case p.ToolResponse != nil:
			return Errorf(CodeInvalidArgument, "data.message.content[%d] is a toolResponse: answer an interrupt with data.resume.respond instead", i)
		case p.Reasoning != nil:
			return Errorf(CodeInvalidArgument, "data.message.content[%d] is a reasoning part, which only the model writes", i)
		}
	}
	return nil
}

// checkParts bounds a list of parts; where names the list, and index the
// message or artifact holding it (-1 for none).
func checkParts(parts []Part, where string, index int) error {
	if index >= 0 {
		where += "[" + strconv.Itoa(index) + "]"
	}
	if len(parts) > MaxMessageParts {
		return Errorf(CodeInvalidArgument, "%s has %d parts; at most %d are accepted", where, len(parts), MaxMessageParts)
	}
	for _, p := range parts {
		if (p.Text != nil && len(*p.Text) > MaxTextBytes) || (p.Reasoning != nil && len(*p.Reasoning) > MaxTextBytes) {
			return Errorf(CodeInvalidArgument, "%s has a text part over %d bytes", where, MaxTextBytes)
		}
		if tr := p.ToolRequest; tr != nil && (len(tr.Name) > MaxToolNameBytes || len(tr.Ref) > MaxToolNameBytes) {
			return Errorf(CodeInvalidArgument, "%s has a tool request whose name or ref is over %d bytes", where, MaxToolNameBytes)
		}
		if tr := p.ToolResponse; tr != nil && (len(tr.Name) > MaxToolNameBytes || len(tr.Ref) > MaxToolNameBytes) {
			return Errorf(CodeInvalidArgument, "%s has a tool response whose name or ref is over %d bytes", where, MaxToolNameBytes)
		}
	}
	return nil
}
