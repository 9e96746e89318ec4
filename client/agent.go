package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"
)

// AgentInfo describes an agent the server runs for the caller.
type AgentInfo struct {
	Name          string `json:"name"`
	Description   string `json:"description,omitempty"`
	ServerManaged bool   `json:"serverManaged"`
}

// Agents lists the agents the server runs for the caller.
func (c *Client) Agents(ctx context.Context) ([]AgentInfo, error) {
	var out struct {
		Agents []AgentInfo `json:"agents"`
	}
	if err := c.doJSON(ctx, http.MethodGet, c.agentsPath, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Agents, nil
}

// Agent is one agent of the server, the Go counterpart of the JS client's
// remoteAgent.
type Agent struct {
	c    *Client
	name string
}

// Agent returns the agent served at {agents path}/name.
func (c *Client) Agent(name string) *Agent { return &Agent{c: c, name: name} }

// Name is the agent's name.
func (a *Agent) Name() string { return a.name }

func (a *Agent) path(suffix string) string {
	return a.c.agentsPath + "/" + pathEscape(a.name) + suffix
}

// Chat starts a conversation on a new session.
func (a *Agent) Chat() *Chat { return a.ChatFrom(Init{}) }

// ChatFrom starts a conversation from init: a snapshot, a session (its
// latest snapshot) or a client-managed state.
func (a *Agent) ChatFrom(init Init) *Chat {
	ch := &Chat{agent: a, connect: init, snapshotID: init.SnapshotID, sessionID: init.SessionID}
	if len(init.State) > 0 {
		ch.hydrate(init.State)
	}
	return ch
}

// snapshotLookup is the data of getSnapshot.
type snapshotLookup struct {
	SnapshotID string `json:"snapshotId,omitempty"`
	SessionID  string `json:"sessionId,omitempty"`
}

// envelope is the body of every protocol POST.
type envelope struct {
	Data any   `json:"data"`
	Init *Init `json:"init,omitempty"`
}

func (a *Agent) getSnapshot(ctx context.Context, lookup snapshotLookup) (*Snapshot, error) {
	var out struct {
		Result *Snapshot `json:"result"`
	}
	if err := a.c.doJSON(ctx, http.MethodPost, a.path("/getSnapshot"), nil, envelope{Data: lookup}, &out); err != nil {
		return nil, err
	}
	if out.Result == nil {
		return nil, &Error{HTTPStatus: http.StatusOK, Status: StatusNotFound, Message: "the server answered no snapshot"}
	}
	return out.Result, nil
}

// Snapshot returns a snapshot by id (getSnapshot).
func (a *Agent) Snapshot(ctx context.Context, snapshotID string) (*Snapshot, error) {
	return a.getSnapshot(ctx, snapshotLookup{SnapshotID: snapshotID})
}

// SessionSnapshot returns the latest snapshot of a session.
func (a *Agent) SessionSnapshot(ctx context.Context, sessionID string) (*Snapshot, error) {
	return a.getSnapshot(ctx, snapshotLookup{SessionID: sessionID})
}

// LoadChat returns a chat that goes on from a snapshot, with its
// conversation loaded.
func (a *Agent) LoadChat(ctx context.Context, snapshotID string) (*Chat, error) {
	snap, err := a.Snapshot(ctx, snapshotID)
	if err != nil {
		return nil, err
	}
	return a.chatFromSnapshot(snap), nil
}

// LoadSession returns a chat that goes on from a session's latest
// snapshot, with its conversation loaded.
func (a *Agent) LoadSession(ctx context.Context, sessionID string) (*Chat, error) {
	snap, err := a.SessionSnapshot(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return a.chatFromSnapshot(snap), nil
}

func (a *Agent) chatFromSnapshot(snap *Snapshot) *Chat {
	ch := &Chat{agent: a, snapshotID: snap.SnapshotID, sessionID: snap.SessionID}
	if snap.State != nil {
		ch.messages = append([]Message(nil), snap.State.Messages...)
		ch.artifacts = append([]Artifact(nil), snap.State.Artifacts...)
	}
	return ch
}

// Abort stops the pending (detached) turn of a snapshot and returns the
// status the snapshot had before, as the protocol does: pending when the
// turn was running (it is aborted now), else how it had already ended ("" for
// a snapshot the server does not know).
func (a *Agent) Abort(ctx context.Context, snapshotID string) (string, error) {
	var out struct {
		Result struct {
			SnapshotID string `json:"snapshotId"`
			Status     string `json:"status"`
		} `json:"result"`
	}
	if err := a.c.doJSON(ctx, http.MethodPost, a.path("/abort"), nil, envelope{Data: map[string]string{"snapshotId": snapshotID}}, &out); err != nil {
		return "", err
	}
	return out.Result.Status, nil
}

// Task returns the detached turn of a snapshot, to wait for or abort.
func (a *Agent) Task(snapshotID string) *DetachedTask {
	return &DetachedTask{agent: a, SnapshotID: snapshotID}
}

// Snapshot returns a snapshot of an agent by id.
func (c *Client) Snapshot(ctx context.Context, agent, snapshotID string) (*Snapshot, error) {
	return c.Agent(agent).Snapshot(ctx, snapshotID)
}

// LoadSession returns a chat on a session of an agent, from its latest
// snapshot.
func (c *Client) LoadSession(ctx context.Context, agent, sessionID string) (*Chat, error) {
	return c.Agent(agent).LoadSession(ctx, sessionID)
}

// Chat is one conversation with an agent: each turn goes on from the
// previous one, by snapshot id for a server-managed agent and by the
// returned state, unchanged, for a client-managed one. A Chat is not safe
// for concurrent use: its turns are sequential.
type Chat struct {
	agent   *Agent
	connect Init

	snapshotID string
	sessionID  string
	// state is the last state the server returned, raw, sent back unchanged.
	state     json.RawMessage
	messages  []Message
	artifacts []Artifact
}

// SnapshotID is the snapshot the next turn goes on from ("" for a new or
// client-managed chat).
func (ch *Chat) SnapshotID() string { return ch.snapshotID }

// SessionID is the chat's session ("" before the first answer).
func (ch *Chat) SessionID() string { return ch.sessionID }

// Messages is the conversation as the client knows it.
func (ch *Chat) Messages() []Message { return append([]Message(nil), ch.messages...) }

// Artifacts are the session's artifacts as the client knows them.
func (ch *Chat) Artifacts() []Artifact { return append([]Artifact(nil), ch.artifacts...) }

// State is the last state the server returned for a client-managed chat,
// exactly as it came (nil otherwise).
func (ch *Chat) State() json.RawMessage { return ch.state }

func (ch *Chat) hydrate(raw json.RawMessage) {
	ch.state = raw
	var st SessionState
	if json.Unmarshal(raw, &st) == nil {
		ch.messages = append([]Message(nil), st.Messages...)
		ch.artifacts = append([]Artifact(nil), st.Artifacts...)
		if st.SessionID != "" {
			ch.sessionID = st.SessionID
		}
	}
}

// init is what the next turn starts from: the snapshot when there is one,
// else the client-managed state, else what the chat was opened with, else
// an empty init, a fresh session. It is never left out: the Genkit JS
// client always sends one, and the reference server validates it.
func (ch *Chat) init() *Init {
	switch {
	case ch.snapshotID != "":
		return &Init{SnapshotID: ch.snapshotID}
	case len(ch.state) > 0:
		return &Init{State: ch.state}
	case ch.connect.SessionID != "":
		return &Init{SessionID: ch.connect.SessionID}
	}
	return &Init{}
}

// apply takes a turn's output into the chat, as the JS client does.
func (ch *Chat) apply(out *Output) *Response {
	if out.SnapshotID != "" {
		ch.snapshotID = out.SnapshotID
	}
	if out.SessionID != "" {
		ch.sessionID = out.SessionID
	}
	resp := &Response{Output: *out}
	if len(out.State) > 0 && string(out.State) != "null" {
		ch.state = out.State
		var st SessionState
		if err := json.Unmarshal(out.State, &st); err == nil {
			resp.State = &st
			ch.messages = append([]Message(nil), st.Messages...)
			ch.artifacts = append([]Artifact(nil), st.Artifacts...)
		}
	} else if out.Message != nil {
		ch.messages = append(ch.messages, *out.Message)
	}
	if resp.State == nil {
		for _, a := range out.Artifacts {
			ch.mergeArtifact(a)
		}
	}
	resp.Messages = ch.Messages()
	resp.chatSessionID = ch.sessionID
	return resp
}

func (ch *Chat) mergeArtifact(a Artifact) {
	if a.Name != "" {
		for i := range ch.artifacts {
			if ch.artifacts[i].Name == a.Name {
				ch.artifacts[i] = a
				return
			}
		}
	}
	ch.artifacts = append(ch.artifacts, a)
}

// begin records the user message of a turn about to start and returns a
// function that forgets it again when the turn failed without an answer.
func (ch *Chat) begin(in Input) func() {
	n := len(ch.messages)
	if in.Message != nil {
		ch.messages = append(ch.messages, *in.Message)
	}
	return func() { ch.messages = ch.messages[:n] }
}

// finish turns the output of a turn into its response and, for a failed
// turn, the error it carries.
func (ch *Chat) finish(out *Output, rollback func()) (*Response, error) {
	if (out.FinishReason == FinishFailed || out.FinishReason == FinishAborted) && len(out.State) == 0 && out.Message == nil {
		rollback()
	}
	resp := ch.apply(out)
	if out.FinishReason == FinishFailed {
		e := &Error{HTTPStatus: http.StatusOK, Status: StatusUnknown, Message: "agent turn failed"}
		if out.Error != nil {
			e.Status, e.Message, e.Details = out.Error.Status, out.Error.Message, out.Error.Details
		}
		return resp, e
	}
	return resp, nil
}

// Send sends a user text message and waits for the turn's answer. A turn
// that failed returns its Response and an *Error with its status.
func (ch *Chat) Send(ctx context.Context, text string) (*Response, error) {
	m := UserMessage(text)
	return ch.Invoke(ctx, Input{Message: &m})
}

// SendMessage sends a user message of any parts and waits for the answer.
func (ch *Chat) SendMessage(ctx context.Context, m Message) (*Response, error) {
	return ch.Invoke(ctx, Input{Message: &m})
}

// Resume answers or restarts the interrupts the last turn paused on (see
// Interrupt.Respond and Interrupt.Restart) and waits for the continued
// turn's answer.
func (ch *Chat) Resume(ctx context.Context, replies ...Reply) (*Response, error) {
	res, err := buildResume(replies)
	if err != nil {
		return nil, err
	}
	return ch.Invoke(ctx, Input{Resume: res})
}

// Invoke runs one turn with any input and waits for its answer (one JSON
// answer, no stream).
func (ch *Chat) Invoke(ctx context.Context, in Input) (*Response, error) {
	rollback := ch.begin(in)
	var body struct {
		Result *Output `json:"result"`
	}
	err := ch.agent.c.doJSON(ctx, http.MethodPost, ch.agent.path(""), nil, envelope{Data: in, Init: ch.init()}, &body)
	if err == nil && body.Result == nil {
		err = &Error{HTTPStatus: http.StatusOK, Status: StatusUnknown, Message: "the server answered no result"}
	}
	if err != nil {
		rollback()
		return nil, err
	}
	return ch.finish(body.Result, rollback)
}

// SendStream sends a user text message and streams the turn: range over
// Chunks, then read Response.
func (ch *Chat) SendStream(ctx context.Context, text string) *Stream {
	m := UserMessage(text)
	return ch.InvokeStream(ctx, Input{Message: &m})
}

// ResumeStream is Resume with the continued turn streamed.
func (ch *Chat) ResumeStream(ctx context.Context, replies ...Reply) *Stream {
	res, err := buildResume(replies)
	if err != nil {
		return &Stream{err: err, done: true}
	}
	return ch.InvokeStream(ctx, Input{Resume: res})
}

// InvokeStream runs one turn with any input as a stream. Nothing is sent
// until Chunks is ranged over (or Response called).
func (ch *Chat) InvokeStream(ctx context.Context, in Input) *Stream {
	return &Stream{ctx: ctx, chat: ch, input: in}
}

// Detach sends a user text message as a detached turn: the server runs it
// on its own and answers at once with the snapshot to wait for.
func (ch *Chat) Detach(ctx context.Context, text string) (*DetachedTask, error) {
	m := UserMessage(text)
	return ch.DetachInput(ctx, Input{Message: &m})
}

// DetachInput is Detach with any input.
func (ch *Chat) DetachInput(ctx context.Context, in Input) (*DetachedTask, error) {
	in.Detach = true
	resp, err := ch.Invoke(ctx, in)
	if err != nil {
		return nil, err
	}
	if resp.SnapshotID() == "" {
		return nil, &Error{HTTPStatus: http.StatusOK, Status: StatusUnknown, Message: "detach answered no snapshotId"}
	}
	return &DetachedTask{agent: ch.agent, SnapshotID: resp.SnapshotID()}, nil
}

// Abort aborts the chat's pending snapshot (a detached turn) and returns
// its status before the abort (see Agent.Abort); "" when the chat has no
// snapshot.
func (ch *Chat) Abort(ctx context.Context) (string, error) {
	if ch.snapshotID == "" {
		return "", nil
	}
	return ch.agent.Abort(ctx, ch.snapshotID)
}

// Response is the answer of one turn.
type Response struct {
	// Output is the turn's result as the server sent it.
	Output Output
	// State is Output.State decoded: the whole session state, which a
	// client-managed agent returns with every answer (nil otherwise).
	State *SessionState
	// Messages is the chat's conversation after the turn.
	Messages []Message

	chatSessionID string
}

// Message is the agent's answer (nil when the turn produced none).
func (r *Response) Message() *Message { return r.Output.Message }

// Text concatenates the answer's text parts.
func (r *Response) Text() string { return messageText(r.Output.Message) }

// FinishReason is how the turn ended: stop, interrupted, detached,
// aborted, failed, ...
func (r *Response) FinishReason() string {
	if r.Output.FinishReason == "" {
		return "unknown"
	}
	return r.Output.FinishReason
}

// SnapshotID is the snapshot the turn wrote (server-managed agents).
func (r *Response) SnapshotID() string { return r.Output.SnapshotID }

// SessionID is the turn's session.
func (r *Response) SessionID() string {
	if r.Output.SessionID != "" {
		return r.Output.SessionID
	}
	return r.chatSessionID
}

// Custom is the agent's custom state after the turn, when the answer
// carried the state (client-managed agents).
func (r *Response) Custom() json.RawMessage {
	if r.State == nil {
		return nil
	}
	return r.State.Custom
}

// Artifacts are the turn's artifacts (or the state's).
func (r *Response) Artifacts() []Artifact {
	if r.Output.Artifacts != nil {
		return r.Output.Artifacts
	}
	if r.State != nil {
		return r.State.Artifacts
	}
	return nil
}

// ToolRequests are the answer's tool request parts.
func (r *Response) ToolRequests() []Part {
	var out []Part
	if r.Output.Message != nil {
		for _, p := range r.Output.Message.Content {
			if p.ToolRequest != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// Interrupts are the tool requests the turn paused on, to answer with
// Respond or Restart and pass to Chat.Resume.
func (r *Response) Interrupts() []Interrupt {
	var out []Interrupt
	for _, p := range r.ToolRequests() {
		if isTrue(p.Metadata["interrupt"]) {
			out = append(out, Interrupt{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Input: p.ToolRequest.Input, Metadata: p.Metadata})
		}
	}
	return out
}

// isTrue reports whether a metadata value marks an interrupt: true or an
// object (Genkit puts the interrupt's metadata there).
func isTrue(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case bool:
		return v
	case map[string]any:
		return true
	}
	return false
}

// Interrupt is a tool request a turn paused on: a question for a human
// (userApproval) or a tool that asks for a confirmation.
type Interrupt struct {
	Name     string
	Ref      string
	Input    json.RawMessage
	Metadata map[string]json.RawMessage
}

// DecodeInput decodes the interrupt's input into v.
func (i Interrupt) DecodeInput(v any) error {
	if len(i.Input) == 0 {
		return fmt.Errorf("holdpoint: interrupt %s has no input", i.Name)
	}
	return json.Unmarshal(i.Input, v)
}

// Respond answers the interrupt with output (encoded as JSON), which must
// match the tool's output schema.
func (i Interrupt) Respond(output any) Reply {
	b, err := json.Marshal(output)
	if err != nil {
		return Reply{err: fmt.Errorf("holdpoint: encode the answer to %s: %w", i.Name, err)}
	}
	return Reply{respond: &Part{ToolResponse: &ToolResponse{Name: i.Name, Ref: i.Ref, Output: b}}}
}

// Restart asks for the interrupted tool to run again with its original
// input (for a tool that paused for a confirmation).
func (i Interrupt) Restart() Reply {
	return Reply{restart: &Part{ToolRequest: &ToolRequest{Name: i.Name, Ref: i.Ref, Input: i.Input}}}
}

// RestartWith asks for the tool to run again with another input. The
// Holdpoint server refuses it (INVALID_ARGUMENT): a restart must repeat
// the request the server wrote, so that a client cannot forge a tool call.
func (i Interrupt) RestartWith(input any) Reply {
	b, err := json.Marshal(input)
	if err != nil {
		return Reply{err: fmt.Errorf("holdpoint: encode the restart input of %s: %w", i.Name, err)}
	}
	return Reply{restart: &Part{ToolRequest: &ToolRequest{Name: i.Name, Ref: i.Ref, Input: b}}}
}

// Reply is the answer to one interrupt: made by Interrupt.Respond,
// Restart or RestartWith, passed to Chat.Resume.
type Reply struct {
	respond *Part
	restart *Part
	err     error
}

// WithResumedMetadata attaches metadata to a restart, which the restarted
// tool reads as how it was resumed (metadata.resumed). It does nothing to
// a Respond reply.
func (r Reply) WithResumedMetadata(v any) Reply {
	if r.restart == nil || r.err != nil {
		return r
	}
	b, err := json.Marshal(v)
	if err != nil {
		r.err = fmt.Errorf("holdpoint: encode resumed metadata: %w", err)
		return r
	}
	p := *r.restart
	p.Metadata = map[string]json.RawMessage{"resumed": b}
	r.restart = &p
	return r
}

// buildResume gathers replies into one resume.
func buildResume(replies []Reply) (*Resume, error) {
	res := &Resume{}
	for _, r := range replies {
		switch {
		case r.err != nil:
			return nil, r.err
		case r.respond != nil:
			res.Respond = append(res.Respond, *r.respond)
		case r.restart != nil:
			res.Restart = append(res.Restart, *r.restart)
		default:
			return nil, errors.New("holdpoint: an empty Reply: make replies with Interrupt.Respond or Interrupt.Restart")
		}
	}
	return res, nil
}

// DetachedTask is a turn running on the server on its own: wait for it to
// end, or abort it.
type DetachedTask struct {
	agent *Agent
	// SnapshotID is the snapshot the turn writes; pending until it ends.
	SnapshotID string
}

// DefaultPollInterval is how often Poll and Wait read the snapshot unless
// told otherwise.
const DefaultPollInterval = 500 * time.Millisecond

// Poll reads the task's snapshot every interval (DefaultPollInterval when
// not positive) and yields it, until it is done (its last yield) or ctx
// ends (an error).
func (t *DetachedTask) Poll(ctx context.Context, interval time.Duration) iter.Seq2[*Snapshot, error] {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	return func(yield func(*Snapshot, error) bool) {
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-timer.C:
			}
			snap, err := t.agent.Snapshot(ctx, t.SnapshotID)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(snap, nil) || snap.Done() {
				return
			}
			timer.Reset(interval)
		}
	}
}

// Wait polls the task's snapshot until its turn ends and returns it.
// Whether the turn succeeded is in Status and FinishReason: Wait errs only
// when it cannot read the snapshot or ctx ends.
func (t *DetachedTask) Wait(ctx context.Context, interval time.Duration) (*Snapshot, error) {
	var last *Snapshot
	for snap, err := range t.Poll(ctx, interval) {
		if err != nil {
			return last, err
		}
		last = snap
	}
	return last, nil
}

// Abort stops the task and returns its snapshot's status before the abort
// (see Agent.Abort).
func (t *DetachedTask) Abort(ctx context.Context) (string, error) {
	return t.agent.Abort(ctx, t.SnapshotID)
}
