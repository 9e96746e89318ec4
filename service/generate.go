package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/schema"
)

// Metadata keys the protocol gives meaning to.
const (
	metaInterrupt     = "interrupt"
	metaPendingOutput = "pendingOutput"
	metaResumed       = "resumed"
	metaSource        = "source"
)

var jsonTrue = json.RawMessage("true")

// generate runs one turn of a prompt agent: apply the resume (if any), then
// loop model call -> tools until the model stops asking for tools or a tool
// interrupts.
func (inv *invocation) generate(ctx context.Context, t *Turn) (string, turnRecord, error) {
	var tr turnRecord
	index := 0 // of the next streamed model or tool message
	inv.newTurnSteps()
	if res := t.input.Resume; res != nil {
		toolMsg, repaused, err := inv.resume(ctx, t, res, &tr)
		if err != nil {
			return "", tr, err
		}
		if repaused {
			return FinishInterrupted, tr, nil
		}
		inv.emit(StreamChunk{ModelChunk: &ModelChunk{Role: RoleTool, Content: toolMsg.Content, Index: intPtr(index)}})
		index++
	} else if t.input.Message == nil {
		if err := checkContinuable(inv.sess.messages); err != nil {
			return "", tr, err
		}
	}
	if err := t.begin(ctx); err != nil {
		return "", tr, err
	}
	maxRounds := inv.agent.MaxToolRounds
	if maxRounds <= 0 {
		maxRounds = 5
	}
	maxRounds = min(maxRounds, inv.rt.limits.ToolRounds)
	for round := 0; ; round++ {
		resp, err := inv.modelAnswer(ctx, index)
		if err != nil {
			return "", tr, err
		}
		index++
		msg := resp.Message
		if err := inv.chargeModel(t, msg); err != nil {
			return "", tr, err
		}
		requests := toolRequestIndexes(msg)
		if len(requests) == 0 {
			inv.sess.add(msg)
			return resp.FinishReason, tr, nil
		}
		if round+1 > maxRounds {
			return "", tr, Errorf(CodeAborted, "Exceeded maximum tool call iterations (%d)", maxRounds)
		}
		if err := inv.checkToolRequests(msg, requests, len(tr.interrupts)); err != nil {
			return "", tr, err
		}
		responses, interrupted, err := inv.runRequestedTools(ctx, t, round, msg, requests, &tr)
		if err != nil {
			return "", tr, err
		}
		if interrupted {
			return FinishInterrupted, tr, nil
		}
		inv.emit(StreamChunk{ModelChunk: &ModelChunk{Role: RoleTool, Content: responses, Index: intPtr(index)}})
		index++
		inv.sess.add(msg, Message{Role: RoleTool, Content: responses})
	}
}

// resume validates a resume against the history the server wrote, claims
// the interrupts it answers (exactly once), and applies it: it returns the
// tool message of the answers, or repaused when a restarted tool
// interrupted again. A resume the request cannot have (an output the
// interrupt refuses, an interrupt decided already) is answered as an error
// rather than a failed turn.
func (inv *invocation) resume(ctx context.Context, t *Turn, res *Resume, tr *turnRecord) (Message, bool, error) {
	a := inv.agent
	// Only history the server wrote (not an unsigned client state's seed)
	// can be answered or restarted.
	if err := validateResumeAgainstHistory(res, inv.sess.messages[inv.sess.untrusted:]); err != nil {
		return Message{}, false, err
	}
	plan, err := planResume(res, inv.sess.messages, a)
	if err != nil {
		return Message{}, false, err
	}
	last := inv.sess.messages[len(inv.sess.messages)-1]
	if err := checkGatedResume(plan, last, a, inv.preclaimed != nil, inv.gatePending(ctx, last)); err != nil {
		inv.reject(err)
		return Message{}, false, err
	}
	if err := checkRespondOutputs(plan, a); err != nil {
		// Answered 400 before anything is claimed or run.
		inv.reject(err)
		return Message{}, false, err
	}
	if err := t.begin(ctx); err != nil {
		return Message{}, false, err
	}
	if err := inv.claim(ctx, t, plan, tr); err != nil {
		return Message{}, false, err
	}
	return inv.applyResume(ctx, t, plan, res, tr)
}

// callModel asks the model for the next message, streaming its chunks as
// message index. The answer's message is the model's own copy.
func (inv *invocation) callModel(ctx context.Context, index int) (*ModelResponse, error) {
	a := inv.agent
	req := &ModelRequest{Tools: a.toolDefinitions(), Config: a.Config}
	// The history is the session's own array, not a copy: models must not
	// modify requests, and copying every message of a long conversation on
	// each call would make a turn cost grow with it.
	var system *Message
	if a.System != "" {
		system = &Message{Role: RoleSystem, Content: []Part{TextPart(a.System)}}
	}
	req.Messages = inv.sess.modelView(system)
	var resp *ModelResponse
	start := time.Now()
	ctx, span := inv.rt.tracer.Start(ctx, "holdpoint.model", oteltrace.WithAttributes(
		AttrAgent.String(a.Name), AttrModel.String(a.Model.Name())))
	err := inv.protect("model", func() error {
		var err error
		resp, err = a.Model.Generate(ctx, req, func(c ModelChunk) {
			if c.Role == "" {
				c.Role = RoleModel
			}
			if c.Index == nil {
				c.Index = intPtr(index)
			}
			inv.emit(StreamChunk{ModelChunk: &c})
		})
		return err
	})
	inv.rt.obs.ModelCalled(inv.metricAgent(), time.Since(start), err != nil)
	endSpan(span, err)
	if err != nil {
		return nil, inv.hideError(err, CodeUnavailable, "the model call")
	}
	if resp == nil {
		return nil, Errorf(CodeInternal, "model %s returned no response", a.Model.Name())
	}
	out := *resp
	out.Message = resp.Message.Clone()
	if out.Message.Role == "" {
		out.Message.Role = RoleModel
	}
	return &out, nil
}

// toolRequestIndexes are the positions of a message's tool requests.
func toolRequestIndexes(m Message) []int {
	var out []int
	for i, p := range m.Content {
		if p.ToolRequest != nil {
			out = append(out, i)
		}
	}
	return out
}

// runRequestedTools runs the tool requests of the model's message. When
// any interrupts, the message is kept with the interrupted requests marked
// (and the outputs of those that ran as pendingOutput), the interrupts are
// recorded for the turn's end, and interrupted is true; otherwise it
// returns the responses, for the tool message that follows.
func (inv *invocation) runRequestedTools(ctx context.Context, t *Turn, round int, msg Message, requests []int, tr *turnRecord) ([]Part, bool, error) {
	revised := msg.Clone()
	var responses []Part
	interrupted := false
	ran := false // a tool of this round ran
	explanation := approval.Explanation(msg)
	for _, i := range requests {
		part := msg.Content[i]
		out, irq, err := inv.runTool(ctx, t, toolRun{key: callKey(round, i, part.ToolRequest), part: part, explanation: explanation})
		if err != nil {
			// What the tools before this one did is in no message.
			t.unrecorded = t.unrecorded || ran
			return nil, false, err
		}
		if tool := inv.agent.Tool(part.ToolRequest.Name); tool != nil && !tool.Interrupt {
			ran = true
		}
		if irq != nil {
			revised.Content[i] = *irq
			interrupted = true
			continue
		}
		responses = append(responses, *out)
		p := revised.Content[i].Clone()
		if p.Metadata == nil {
			p.Metadata = Metadata{}
		}
		p.Metadata[metaPendingOutput] = rawjson.Or(out.ToolResponse.Output, "null")
		revised.Content[i] = p
	}
	if !interrupted {
		return responses, false, nil
	}
	inv.sess.add(revised)
	var paused []Part
	for _, i := range requests {
		paused = append(paused, revised.Content[i])
		if raw, ok := revised.Content[i].Metadata[metaInterrupt]; ok {
			tr.interrupts = append(tr.interrupts, inv.newInterrupt(revised.Content[i].ToolRequest, raw))
		}
	}
	inv.emit(StreamChunk{ModelChunk: &ModelChunk{Role: RoleTool, Content: paused}})
	return nil, true, nil
}

// newInterrupt is the row an interrupted request becomes, with its tool's
// deadline.
func (inv *invocation) newInterrupt(req *ToolRequest, meta json.RawMessage) NewInterrupt {
	ni := NewInterrupt{Tool: req.Name, Ref: req.Ref, Input: req.Input, Metadata: meta}
	tool := inv.agent.Tool(req.Name)
	if tool == nil {
		return ni
	}
	if tool.ExpiresAfter > 0 {
		ni.ExpiresIn = tool.ExpiresAfter
		ni.OnExpire = tool.onExpireJSON()
	}
	if tool.Approval != nil && approval.GateOf(meta) != nil {
		ni.Policy, _ = json.Marshal(tool.Approval.Stored())
	}
	return ni
}

// reject makes Invoke fail with err (an HTTP error) instead of a graceful
// failed output.
func (inv *invocation) reject(err error) {
	inv.rejected.Store(true)
	select {
	case inv.rejectCh <- err:
	default:
	}
}

// toolRun is one request for a tool: the model's (fresh), or a resume's
// restart of an interrupted one.
type toolRun struct {
	key  string // the call's key within its turn (callKey)
	part Part
	// restart says a resume restarts the request; resumed is its
	// metadata.resumed (nil when the client sent none).
	restart bool
	resumed json.RawMessage
	// explanation is the model's text beside a fresh request.
	explanation string
}

// runTool runs the tool a request names. It returns the response part, or
// the interrupted request part when the tool paused the turn. A tool that
// runs is recorded (tool_calls); an interrupt does not run. A fresh call
// of a gated tool pauses for approval first (gate): nothing of it runs,
// and no row is written, until a decision restarts it.
func (inv *invocation) runTool(ctx context.Context, t *Turn, r toolRun) (*Part, *Part, error) {
	req := r.part.ToolRequest
	tool := inv.agent.Tool(req.Name)
	if tool == nil {
		return nil, nil, Errorf(CodeNotFound, "Tool %s not found", req.Name)
	}
	if !r.restart {
		if irq, err := inv.gate(ctx, tool, r.part, r.explanation); irq != nil || err != nil {
			return nil, irq, err
		}
	}
	if !tool.Interrupt {
		return inv.recordedTool(ctx, t, tool, r)
	}
	return inv.execTool(ctx, t, tool, r.part, r.resumed, "", nil, nil)
}

// callKey names a tool call within its turn for the journal: by ref when
// the model gave one, else by its place in the model's answers.
func callKey(round, index int, req *ToolRequest) string {
	if req.Ref != "" {
		return req.Name + "#" + req.Ref
	}
	return fmt.Sprintf("%s@%d.%d", req.Name, round, index)
}

// interruptedPart is the tool request part paused with the interrupt
// metadata meta (nil for plain true).
func interruptedPart(part Part, meta json.RawMessage) *Part {
	p := part.Clone()
	if p.Metadata == nil {
		p.Metadata = Metadata{}
	}
	delete(p.Metadata, metaResumed)
	p.Metadata[metaInterrupt] = rawjson.Or(meta, "true")
	return &p
}

// execTool runs (or, for an interrupt, pauses on) one tool request.
func (inv *invocation) execTool(ctx context.Context, t *Turn, tool *Tool, part Part, resumed json.RawMessage, callID string, trace *ToolTrace, prepared any) (*Part, *Part, error) {
	req := part.ToolRequest
	// What the model sends is checked before a tool runs or a question
	// reaches a human: a request its schema refuses fails the turn.
	if err := CheckToolInput(tool, req); err != nil {
		return nil, nil, err
	}
	if tool.Interrupt {
		return nil, interruptedPart(part, nil), nil
	}
	call := ToolCall{Name: req.Name, Ref: req.Ref, Input: req.Input, Resumed: resumed, Metadata: CloneMetadata(part.Metadata),
		Session: &ToolSession{t: t}, ID: callID, TenantID: inv.caller.TenantID, SessionID: inv.sess.id, TurnID: t.turnID(),
		EndUser: inv.caller.EndUser, Trace: trace, Prepared: prepared}
	var out json.RawMessage
	start := time.Now()
	ctx, span := inv.rt.tracer.Start(ctx, "holdpoint.tool", oteltrace.WithAttributes(
		AttrAgent.String(inv.agent.Name), AttrTool.String(req.Name), AttrSessionID.String(inv.sess.id)))
	err := inv.protect("tool "+req.Name, func() error {
		var err error
		out, err = tool.Run(ctx, call)
		return err
	})
	outcome := ToolCallSucceeded
	if err != nil {
		outcome = ToolCallFailed
		if _, ok := asInterrupt(err); ok {
			outcome = ToolCallInterrupted
		}
	}
	inv.rt.obs.ToolCalled(inv.metricAgent(), inv.metricTool(req.Name), outcome, time.Since(start))
	span.SetAttributes(AttrOutcome.String(outcome))
	if outcome == ToolCallInterrupted {
		span.End()
	} else {
		endSpan(span, err)
	}
	if err != nil {
		if ie, ok := asInterrupt(err); ok {
			return nil, interruptedPart(part, approval.StripGate(ie.Metadata)), nil
		}
		if errors.Is(err, ErrMayHaveRun) {
			// Kept in the chain: the call is recorded unknown.
			return nil, nil, fmt.Errorf("%w: %w", ErrMayHaveRun, inv.hideError(err, CodeAborted, "tool "+req.Name))
		}
		return nil, nil, inv.hideError(err, CodeInternal, "tool "+req.Name)
	}
	if err := inv.chargeToolOutput(t, req.Name, out); err != nil {
		return nil, nil, err
	}
	if violations := schema.Validate(tool.OutputSchema, rawjson.Or(out, "null")); len(violations) > 0 {
		// The tool ran; what it returned is a bug of the agent's code.
		return nil, nil, inv.hideError(fmt.Errorf("tool %s returned output that does not match its output schema: %s", req.Name, strings.Join(violations, "; ")), CodeInternal, "tool "+req.Name)
	}
	resp := Part{ToolResponse: &ToolResponse{Name: req.Name, Ref: req.Ref, Output: rawjson.Or(out, "null")}}
	return &resp, nil, nil
}

// validateResumeAgainstHistory checks every resume entry names a tool request
// in the history (newest first) and that a restart repeats its input
// exactly, so a client cannot forge a tool call.
func validateResumeAgainstHistory(res *Resume, history []Message) error {
	find := func(name, ref string) *Part {
		for i := len(history) - 1; i >= 0; i-- {
			if history[i].Role != RoleModel {
				continue
			}
			for j, p := range history[i].Content {
				if tr := p.ToolRequest; tr != nil && tr.Name == name && tr.Ref == ref {
					return &history[i].Content[j]
				}
			}
		}
		return nil
	}
	for _, p := range res.Restart {
		if p.ToolRequest == nil {
			return Errorf(CodeInvalidArgument, "resume.restart entries must be toolRequest parts")
		}
		tr := p.ToolRequest
		match := find(tr.Name, tr.Ref)
		if match == nil {
			return Errorf(CodeInvalidArgument, "resume.restart references tool '%s'%s which was not found in session history.", tr.Name, refNote(tr.Ref))
		}
		// A gate that allows edits takes an edited input (checked
		// against the policy and the schema by checkGatedResume).
		if g := approval.GateOf(match.Metadata[metaInterrupt]); !JSONEqual(tr.Input, match.ToolRequest.Input) && (g == nil || !g.AllowEdit) {
			return Errorf(CodeInvalidArgument, "resume.restart for tool '%s'%s has modified inputs that do not match the original tool request in session history. Restart inputs must exactly match the interrupted tool request.", tr.Name, refNote(tr.Ref))
		}
	}
	for _, p := range res.Respond {
		if p.ToolResponse == nil {
			return Errorf(CodeInvalidArgument, "resume.respond entries must be toolResponse parts")
		}
		tr := p.ToolResponse
		if find(tr.Name, tr.Ref) == nil {
			return Errorf(CodeInvalidArgument, "resume.respond references tool '%s'%s which was not found in session history.", tr.Name, refNote(tr.Ref))
		}
	}
	return nil
}

func refNote(ref string) string {
	if ref == "" {
		return ""
	}
	return fmt.Sprintf(" (ref: %s)", ref)
}

// resumePlan says how each tool request of the interrupted model message is
// resolved.
type resumePlan struct {
	steps  []resumeStep // one per part of the last message
	claims []InterruptClaim
}

// stepKind is how a resume resolves one tool request of the interrupted
// message.
type stepKind int

const (
	stepNone    stepKind = iota // not a tool request
	stepPending                 // ran before the pause: its output waits in metadata
	stepRespond                 // answered by the client's toolResponse
	stepRestart                 // run again
)

type resumeStep struct {
	kind    stepKind
	respond *Part
	restart *Part
}

// checkContinuable refuses a turn with neither message nor resume on a
// session with no messages to continue from, or whose last message waits
// for interrupted tool requests: they must be answered or restarted first.
func checkContinuable(history []Message) error {
	if len(history) == 0 {
		return Errorf(CodeInvalidArgument, "The input has neither a message nor a resume, and the session has no messages to continue from.")
	}
	if history[len(history)-1].Role != RoleModel {
		return nil
	}
	if names := unresolvedRequests(history[len(history)-1]); len(names) > 0 {
		return Errorf(CodeInvalidArgument, "The session is paused on interrupted tool requests %s: resume with a reply or a restart for each of them.", strings.Join(names, ", "))
	}
	return nil
}

// unresolvedRequests names the tool requests of a model message that have
// no pending output, quoted as 'name' or 'name (ref: r)'.
func unresolvedRequests(m Message) []string {
	var names []string
	for _, p := range m.Content {
		if tr := p.ToolRequest; tr != nil {
			if _, ok := p.Metadata[metaPendingOutput]; !ok {
				names = append(names, "'"+tr.Name+RefSuffix(tr.Ref)+"'")
			}
		}
	}
	return names
}

// planResume matches the resume against the last message, which must be a
// model message with tool requests, and checks that every request is
// answered, restarted or already has a pending output.
func planResume(res *Resume, history []Message, a *Agent) (*resumePlan, error) {
	if len(history) == 0 || history[len(history)-1].Role != RoleModel || !hasToolRequest(history[len(history)-1]) {
		return nil, Errorf(CodeFailedPrecondition, "Cannot 'resume' generation unless the previous message is a model message with at least one tool request.")
	}
	last := history[len(history)-1]
	plan := &resumePlan{steps: make([]resumeStep, len(last.Content))}
	for i, p := range last.Content {
		tr := p.ToolRequest
		if tr == nil {
			continue
		}
		if _, ok := p.Metadata[metaPendingOutput]; ok {
			plan.steps[i] = resumeStep{kind: stepPending}
			continue
		}
		if r := findResponse(res.Respond, tr.Name, tr.Ref); r != nil {
			plan.steps[i] = resumeStep{kind: stepRespond, respond: r}
			resolution, _ := json.Marshal(map[string]any{"respond": r.ToolResponse.Output})
			plan.claims = append(plan.claims, InterruptClaim{Tool: tr.Name, Ref: tr.Ref, Resolution: resolution})
			continue
		}
		if r := findRequest(res.Restart, tr.Name, tr.Ref); r != nil {
			plan.steps[i] = resumeStep{kind: stepRestart, restart: r}
			resolution := json.RawMessage(`{"restart":true}`)
			if !JSONEqual(r.ToolRequest.Input, tr.Input) {
				// An approver's edit (a gate that allows it) is recorded
				// with the decision.
				resolution, _ = json.Marshal(map[string]any{"restart": true, "input": rawjson.Or(r.ToolRequest.Input, "null")})
			}
			plan.claims = append(plan.claims, InterruptClaim{Tool: tr.Name, Ref: tr.Ref, Resolution: resolution})
			continue
		}
		return nil, Errorf(CodeInvalidArgument, "Unresolved tool request '%s%s' was not handled by the 'resume' argument. You must supply replies or restarts for all interrupted tool requests.", tr.Name, RefSuffix(tr.Ref))
	}
	return plan, nil
}

// checkRespondOutputs validates every respond output against the output
// schema of the tool it answers, as the inbox does for an operator's
// decision: the agent's next step trusts that shape.
func checkRespondOutputs(plan *resumePlan, a *Agent) error {
	for _, step := range plan.steps {
		if step.kind != stepRespond {
			continue
		}
		r := step.respond.ToolResponse
		tool := a.Tool(r.Name)
		if tool == nil {
			continue
		}
		if violations := schema.Validate(tool.OutputSchema, rawjson.Or(r.Output, "null")); len(violations) > 0 {
			e := Errorf(CodeInvalidArgument, "resume.respond output for '%s%s' does not match its output schema: %s", r.Name, RefSuffix(r.Ref), strings.Join(violations, "; "))
			e.Details = map[string]any{"violations": violations}
			return e
		}
	}
	return nil
}

// applyResume rewrites the interrupted model message and appends the tool
// message carrying every response; restarted tools run here. A restarted
// tool that interrupts again pauses the turn again (repaused): the model
// message is kept with that request interrupted anew (recorded as a new
// interrupt linked to the one the restart resolved) and every other
// request's output waiting as pendingOutput, so the next resume answers
// only what is still open and runs nothing twice.
func (inv *invocation) applyResume(ctx context.Context, t *Turn, plan *resumePlan, res *Resume, tr *turnRecord) (Message, bool, error) {
	lastIdx := len(inv.sess.messages) - 1
	last := inv.sess.messages[lastIdx].Clone()
	var responses []Part
	var again []int // positions of restarted requests that interrupted again
	for i, step := range plan.steps {
		p := last.Content[i]
		switch step.kind {
		case stepPending:
			meta := CloneMetadata(p.Metadata)
			out := meta[metaPendingOutput]
			delete(meta, metaPendingOutput)
			respMeta := CloneMetadata(meta)
			respMeta[metaSource] = json.RawMessage(`"pending"`)
			responses = append(responses, Part{
				ToolResponse: &ToolResponse{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Output: out},
				Metadata:     respMeta,
			})
			p.Metadata = emptyToNil(meta)
		case stepRespond:
			responses = append(responses, step.respond.Clone())
			p.Metadata = resolvedMeta(p.Metadata)
		case stepRestart:
			np, resp, err := inv.restartStep(ctx, t, i, p, step.restart)
			if err != nil {
				return Message{}, false, err
			}
			p = np
			if resp == nil {
				again = append(again, i)
				responses = append(responses, Part{}) // keeps responses aligned with the requests
				break
			}
			responses = append(responses, *resp)
		default:
			continue
		}
		last.Content[i] = p
	}
	if len(again) > 0 {
		inv.repause(last, responses, again, tr)
		inv.sess.replaceMessage(lastIdx, last)
		return Message{}, true, nil
	}
	resumedMeta := res.Metadata
	if rawjson.IsNull(resumedMeta) {
		resumedMeta = jsonTrue
	}
	toolMsg := Message{Role: RoleTool, Content: responses, Metadata: Metadata{metaResumed: resumedMeta}}
	inv.sess.replaceMessage(lastIdx, last)
	inv.sess.add(toolMsg)
	return toolMsg, false, nil
}

// restartStep runs the restart of the request p (at position i of the
// paused message): it returns the request as the history keeps it and the
// tool's response, or no response when the tool interrupted again (p then
// is paused anew, with the tool's new interrupt metadata).
func (inv *invocation) restartStep(ctx context.Context, t *Turn, i int, p Part, restart *Part) (Part, *Part, error) {
	// As the reference: the tool sees `resumed` only when the restart's
	// metadata carries it.
	resumed := restart.Metadata[metaResumed]
	if rawjson.IsNull(resumed) {
		resumed = nil
	}
	if !JSONEqual(restart.ToolRequest.Input, p.ToolRequest.Input) {
		p = approval.Edited(p, restart.ToolRequest.Input)
	}
	out, irq, err := inv.runTool(ctx, t, toolRun{key: "restart:" + callKey(-1, i, restart.ToolRequest), part: restart.Clone(), restart: true, resumed: resumed})
	if err != nil {
		return p, nil, err
	}
	if irq != nil {
		// The server's own request, not the client's copy of it, pauses
		// again, with the tool's new interrupt metadata.
		meta := CloneMetadata(p.Metadata)
		if meta == nil {
			meta = Metadata{}
		}
		delete(meta, metaResumed)
		meta[metaInterrupt] = rawjson.Or(irq.Metadata[metaInterrupt], "true")
		p.Metadata = meta
		return p, nil, nil
	}
	p.Metadata = resolvedMeta(p.Metadata)
	return p, out, nil
}

// repause turns the resumed model message last back into a paused one:
// every answered request keeps its output as pendingOutput, the requests
// at positions again stay interrupted (new interrupts, linked to the ones
// just resolved), and the paused requests are streamed as a tool chunk,
// as when a tool first interrupts. responses holds one part per tool
// request of last, in order (a zero part for those interrupted again).
func (inv *invocation) repause(last Message, responses []Part, again []int, tr *turnRecord) {
	k := 0
	var paused []Part
	for i, p := range last.Content {
		if p.ToolRequest == nil {
			continue
		}
		resp := responses[k]
		k++
		if resp.ToolResponse != nil {
			meta := CloneMetadata(p.Metadata)
			if meta == nil {
				meta = Metadata{}
			}
			meta[metaPendingOutput] = rawjson.Or(resp.ToolResponse.Output, "null")
			p.Metadata = meta
			last.Content[i] = p
		}
		paused = append(paused, p)
	}
	for _, i := range again {
		ni := inv.newInterrupt(last.Content[i].ToolRequest, last.Content[i].Metadata[metaInterrupt])
		ni.Repause = true
		tr.interrupts = append(tr.interrupts, ni)
	}
	inv.emit(StreamChunk{ModelChunk: &ModelChunk{Role: RoleTool, Content: paused}})
}

func emptyToNil(m Metadata) Metadata {
	if len(m) == 0 {
		return nil
	}
	return m
}

func hasToolRequest(m Message) bool {
	for _, p := range m.Content {
		if p.ToolRequest != nil {
			return true
		}
	}
	return false
}

func findResponse(parts []Part, name, ref string) *Part {
	for i := range parts {
		if r := parts[i].ToolResponse; r != nil && r.Name == name && r.Ref == ref {
			return &parts[i]
		}
	}
	return nil
}

func findRequest(parts []Part, name, ref string) *Part {
	for i := range parts {
		if r := parts[i].ToolRequest; r != nil && r.Name == name && r.Ref == ref {
			return &parts[i]
		}
	}
	return nil
}

func intPtr(i int) *int { return &i }
