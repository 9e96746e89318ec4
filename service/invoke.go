package service

// Invocations and their turns: Invoke and InvokeOne run one turn per
// input, in the foreground (start, runTurns, await) or detached
// (detach.go); the invocation holds what its turns share. runTurn wraps a
// turn in its span and metrics; turn resolves the session (session.go),
// runs the agent (generate.go for a prompt agent, customTurn for a custom
// one) and returns a turnResult; persist (commit.go) writes it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdpoint/holdpoint/service/requestid"
	"github.com/holdpoint/holdpoint/service/store"
)

// Invoke runs an invocation of the named agent: it resolves the session
// from init, then runs one turn per input read from inputs until the channel
// is closed. Stream chunks go to sink (which may be nil) as they happen; sink
// is never called concurrently nor after Invoke returns.
//
// A turn that fails resolves with finishReason "failed" and the last good
// state; only misuse of the API (bad init, unknown agent or snapshot, an
// interrupt already resolved) returns an error. An input with detach set
// makes Invoke return at once with finishReason "detached" and a pending
// snapshot, the remaining work going on in the background.
func (r *Runtime) Invoke(ctx context.Context, c Caller, agent string, init AgentInit, inputs <-chan AgentInput, sink func(StreamChunk)) (*AgentOutput, error) {
	return r.invoke(ctx, c, agent, init, inputs, sink, nil, false)
}

// invoke is Invoke with interrupts already claimed for the resume, and
// headCached to start from a cached session head (see InvokeOne).
func (r *Runtime) invoke(ctx context.Context, c Caller, agent string, init AgentInit, inputs <-chan AgentInput, sink func(StreamChunk), preclaimed []uuid.UUID, headCached bool) (*AgentOutput, error) {
	a, err := r.LookupFor(ctx, c, agent)
	if err != nil {
		return nil, err
	}
	if a.Disabled {
		return nil, Errorf(CodeNotFound, "agent %q not found", agent)
	}
	inv := &invocation{rt: r, agent: a, caller: c, sink: sink, preclaimed: preclaimed, requestID: requestid.From(ctx),
		headCached: headCached && a.Turn == nil, detStream: detachedStreamFrom(ctx), retry: retryFrom(ctx)}
	if err := inv.resolveSession(ctx, init); err != nil {
		return nil, inv.orHeadMoved(ctx, err)
	}
	if inv.baseID != "" {
		// A session goes on with the definition it ran with: the same
		// kind, and the version of a tenant's agent (see agentOfSnapshot).
		at, err := r.agentOfSnapshot(ctx, c, a, inv.baseID, inv.baseVersion, inv.basePaused)
		if err != nil {
			return nil, inv.orHeadMoved(ctx, err)
		}
		inv.agent = at
	}
	if inv.resolveFailure != nil {
		return inv.failedOutput(inv.resolveFailure), nil
	}

	done := inv.start(ctx, inputs)
	out, err := inv.await(done)
	if rc := retryInsteadOf(err); rc != nil {
		// The same resume, sent again after its approved call failed:
		// the call is retried (see retryApproved).
		return r.retryApproved(ctx, c, rc)
	}
	if err != nil {
		return nil, inv.orHeadMoved(ctx, err)
	}
	return out, nil
}

// start runs the invocation's turns on the runtime's background context,
// so that they can outlive the request once detached (until then the
// request's end cancels them), and returns a channel closed when they end.
func (inv *invocation) start(ctx context.Context, inputs <-chan AgentInput) <-chan struct{} {
	r := inv.rt
	workCtx, cancelWork := context.WithCancel(r.bg)
	// The turns' spans are children of the request's (when traced).
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		workCtx = trace.ContextWithSpanContext(workCtx, sc)
	}
	inv.cancelWork = cancelWork
	stopAfter := context.AfterFunc(ctx, func() {
		if !inv.isDetached() {
			cancelWork()
		}
	})
	queue := make(chan AgentInput, 16)
	inv.det.ch = make(chan struct{})
	inv.rejectCh = make(chan error, 1)
	go inv.pump(workCtx, inputs, queue)

	done := make(chan struct{})
	r.bgWG.Add(1)
	go func() {
		defer r.bgWG.Done()
		defer close(done)
		defer inv.releaseHandoffs()
		defer cancelWork()
		defer stopAfter()
		inv.result = inv.runTurns(workCtx, queue)
		inv.finishDetached(inv.result)
	}()
	return done
}

// await answers the invocation: its output once its turns end, the
// pending snapshot as soon as it detaches, or the error it was rejected
// with.
func (inv *invocation) await(done <-chan struct{}) (*AgentOutput, error) {
	detachedOutput := func() *AgentOutput {
		return &AgentOutput{SessionID: inv.sess.id, SnapshotID: inv.det.id, FinishReason: FinishDetached}
	}
	select {
	case <-done:
		if inv.isDetached() {
			return detachedOutput(), nil
		}
		select {
		case err := <-inv.rejectCh:
			return replayedOr(err)
		default:
		}
		return inv.result, nil
	case <-inv.det.ch:
		return detachedOutput(), nil
	case err := <-inv.rejectCh:
		inv.cancelWork()
		<-done
		return replayedOr(err)
	}
}

// InvokeOne is Invoke with a single input, the shape of an HTTP request.
//
// An unstreamed new message to a session named by its id (no snapshot id,
// not a resume, not detached) starts from the session's head as this
// instance last wrote it, when it has it, instead of reading it: one
// round trip less per turn. The head may be stale (another instance, a
// detached turn or retention moved the session since), so nothing the
// turn does relies on it unchecked: its write moves the session only from
// that head, and a tool runs only after the head is read and found the
// same. When the head turns out to have moved (the write was refused, the
// check failed, or the turn ended in an error before writing and the head
// read then differs), nothing was written and no tool ran, and the turn
// runs again from the head read from the table: the model may then be
// called twice, once for the stale history.
func (r *Runtime) InvokeOne(ctx context.Context, c Caller, agent string, init AgentInit, input AgentInput, sink func(StreamChunk)) (*AgentOutput, error) {
	one := func() <-chan AgentInput {
		ch := make(chan AgentInput, 1)
		ch <- input
		close(ch)
		return ch
	}
	cached := sink == nil && !input.Detach && input.Resume == nil && init.SessionID != "" && init.SnapshotID == ""
	if !cached {
		return r.invoke(ctx, c, agent, init, one(), sink, nil, false)
	}
	out, err := r.invoke(ctx, c, agent, init, one(), sink, nil, true)
	if errors.Is(err, errHeadMoved) {
		r.obs.SessionHeadMoved()
		return r.invoke(ctx, c, agent, init, one(), sink, nil, false)
	}
	return out, err
}

// invocation is the in-memory state of one Invoke.
type invocation struct {
	rt     *Runtime
	agent  *Agent
	caller Caller
	sess   *sessionState
	// detStream carries the durable stream on after a detach (see
	// DetachedStream); detStreamOn once it does.
	detStream   DetachedStream
	detStreamOn bool
	// requestID is the id of the request that started the invocation,
	// quoted in the messages of errors whose causes are only logged.
	requestID string

	// preclaimed are interrupts already claimed for this invocation's
	// resume (operator decisions, deadlines).
	preclaimed []uuid.UUID

	// resolveFailure is a graceful failure found while resolving the
	// session (e.g. resuming a failed snapshot): the output says failed.
	resolveFailure error

	// persistMu orders turn-end writes against the detach write, which both
	// read and move the base below.
	persistMu sync.Mutex
	// baseID is the last snapshot persisted for this invocation's branch
	// (the parent of the next one); baseBodies its stored messages.
	baseID     string
	baseBodies [][]byte
	// bodiesOwned says the room past len(baseBodies) in its array is this
	// invocation's to append into (it made the array, or a handoff gave it).
	bodiesOwned bool
	// bodiesOwnLast says the last of baseBodies is this invocation's to
	// rewrite in place too (takeSplit).
	bodiesOwnLast bool
	// splitLast is the last message of snapshot splitOf, kept apart from
	// the views of its history (a failed turn's output names it).
	splitLast *Message
	splitOf   string
	// heldHandoffs are released when the invocation ends (handOff).
	heldHandoffs []*store.Handoff
	// baseVersion is the tenant agent version the base snapshot's turn ran
	// with (0: compiled in, or none).
	baseVersion int
	// basePaused is the base snapshot paused on interrupts: it goes on
	// with the version that paused it whatever the definition says.
	basePaused bool
	// baseAnswered: the store saw the base snapshot's interrupts claimed,
	// so a resume of it claims up front (see claim).
	baseAnswered bool
	// headCached lets a turn that continues a session by its id start
	// from the head this instance cached when it last wrote the session,
	// instead of reading it (see InvokeOne). expectedHead is that head
	// while it is unchecked: the first write names it (ExpectedHead), and
	// before anything with an effect (a tool) the head is read and
	// compared (checkHead), after which the invocation is one that read
	// its head.
	headCached   bool
	expectedHead string
	// unpersisted are the inputs whose turns are not persisted yet: the
	// work a detach hands to its job.
	unpersisted []AgentInput

	last    turnOutcome
	patches customPatches
	det     detachState

	cancelWork context.CancelFunc
	rejectCh   chan error
	// retry is the failed approved call this invocation runs again.
	retry *retryOf
	// rejected is set when the invocation answers with an error rather
	// than a failed output (see reject).
	rejected atomic.Bool
	// result is the invocation's output, set before its turns' goroutine
	// ends.
	result *AgentOutput

	mu       sync.Mutex // serializes sink calls and guards detached
	sink     func(StreamChunk)
	detached bool
}

// turnOutcome is how the invocation's last turn ended, and the state to
// answer with when it failed.
type turnOutcome struct {
	good         SessionState
	goodID       string
	finishReason string
	err          *ErrorDetails
}

// customPatches tracks the custom state streamed in the current turn.
type customPatches struct {
	firstInTurn bool
	lastSent    json.RawMessage
}

// detachState is what only a detached invocation uses.
type detachState struct {
	// ch is closed once the invocation detached.
	ch chan struct{}
	// id is the pending snapshot the detached turns end in.
	id string
	// interrupts and claims collect what the detached turns did, written
	// when the pending snapshot is finalized; resolvedEvents says the
	// turns claimed interrupts themselves.
	interrupts     []NewInterrupt
	claims         []uuid.UUID
	resolvedEvents bool
	// journal makes tool calls record their outcomes at once, so a
	// takeover does not run them again.
	journal bool
	// guarded says a synchronous turn's claim is guarded by a job of its
	// own (see guard): id is its pending snapshot, journal is on. (Atomic:
	// a detach arriving midway reads it.)
	guarded atomic.Bool
	// slot says the turn holds one of the instance's job slots; queued
	// says its job waits in the database for a worker with a free slot,
	// and nothing runs here.
	slot, queued bool
	// lostJob is set when another instance took this detached turn over.
	lostJob atomic.Bool
	// aborted is set when the turn was cancelled because its pending
	// snapshot was aborted (a user's abort, heard or polled): unlike its
	// caller going away or its instance shutting down, that ends it for
	// good.
	aborted atomic.Bool
	// attempts is the job's claims so far (a turn taken over: 1 or more).
	attempts int
	// answers are the model's answers since the job's first turn (or the
	// current turn, while there is no job), recorded the first ones of
	// them; replay is what a taken-over turn's previous instances recorded
	// (see modelAnswer).
	answers       []*ModelResponse
	recorded      int
	replay        []TurnStep
	stopHeartbeat context.CancelFunc
	heartbeatDone chan struct{}
}

// emit sends a chunk to the client unless the invocation detached; a
// detached one sends it to its durable stream, if it carries one on.
func (inv *invocation) emit(c StreamChunk) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.detached {
		if inv.detStreamOn {
			inv.detStream.Chunk(c)
		}
		return
	}
	if inv.sink == nil {
		return
	}
	inv.sink(c)
}

func (inv *invocation) isDetached() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.detached
}

// runTurns runs a turn per queued input and returns the invocation's output.
func (inv *invocation) runTurns(ctx context.Context, queue <-chan AgentInput) *AgentOutput {
	for in := range queue {
		if ctx.Err() != nil {
			inv.last.finishReason, inv.last.err = inv.cancelledEnd()
			break
		}
		if err := inv.runTurn(ctx, in); err != nil {
			if ctx.Err() != nil {
				inv.last.finishReason, inv.last.err = inv.cancelledEnd()
			} else {
				inv.last.finishReason = FinishFailed
				inv.last.err = Details(err)
				if e := AsError(err); e.Cause != nil {
					inv.rt.log.ErrorContext(ctx, "turn failed", "agent", inv.agent.Name, "session", inv.sess.id, "status", e.Status, "err", e.Cause, "request_id", inv.requestID)
				}
			}
			break
		}
	}
	// Drain what is left so the pump can finish.
	for range queue {
	}
	return inv.output(ctx)
}

// cancelledEnd is how a turn whose work was cancelled ends for its
// client: aborted, when a user aborted it or its instance shuts down; but
// when this instance lost the turn's job to another (its heartbeat went
// stale, as in a database outage, and the other took the turn over), the
// turn is not aborted: it goes on there. The client is told UNAVAILABLE, so
// it asks again (a resume sent again is then refused as taken, or carried
// out if the other instance gave the decision back), never that its
// approval was aborted.
func (inv *invocation) cancelledEnd() (string, *ErrorDetails) {
	if inv.det.lostJob.Load() {
		return FinishFailed, Details(UnavailableError(errLostToAnotherInstance))
	}
	if inv.preclaimed != nil && !inv.det.aborted.Load() && !inv.isDetached() {
		// A decision's turn stopped by a shutdown or a request gone: the
		// decision stays and its turn is carried out later (see
		// settleFailedClaims). (A detached one's job says so itself.)
		return FinishFailed, Details(UnavailableError(errDecisionStays))
	}
	return FinishAborted, nil
}

// errDecisionStays is the cause of a decision's turn that stopped before
// it ended, without an abort.
var errDecisionStays = errors.New("the turn carrying out a decision stopped before it ended; it is carried out later")

// errLostToAnotherInstance is the cause of a turn that another instance
// took over from this one.
var errLostToAnotherInstance = errors.New("another instance took the turn over from this one")

// output builds the invocation's result from the last turn. A
// client-managed agent's state is signed, so that its history can be
// trusted when the client sends it back.
func (inv *invocation) output(ctx context.Context) *AgentOutput {
	out := &AgentOutput{SessionID: inv.sess.id, FinishReason: inv.last.finishReason}
	st := inv.sess.state()
	var last *Message
	if inv.last.finishReason == FinishFailed || inv.last.finishReason == FinishAborted {
		st = inv.last.good
		out.Error = inv.last.err
		if inv.splitLast != nil && inv.last.goodID == inv.splitOf {
			last = inv.splitLast
		}
	}
	if n := len(st.Messages); last == nil && n > 0 {
		last = &st.Messages[n-1]
	}
	if last != nil {
		m := *last
		out.Message = &m
	}
	if len(st.Artifacts) > 0 {
		out.Artifacts = st.Artifacts
	}
	if inv.agent.ServerManaged {
		out.SnapshotID = inv.last.goodID
	} else {
		if len(st.Messages) > inv.sess.untrusted || inv.sess.untrusted == 0 {
			sig, err := inv.rt.signState(context.WithoutCancel(ctx), inv.caller, inv.agent.Name, st)
			if err != nil {
				inv.rt.log.Warn("signing a client-managed state failed; it is returned unsigned", "agent", inv.agent.Name, "err", err)
			}
			st.Signature = sig
		}
		out.State = &st
	}
	return out
}

// failedOutput is the graceful failure of an invocation that could not
// start a turn.
func (inv *invocation) failedOutput(err error) *AgentOutput {
	out := &AgentOutput{SessionID: inv.sess.id, FinishReason: FinishFailed, Error: Details(err)}
	return out
}

// hideError is what a client learns of an error from agent code (a
// custom turn, a tool, a model): a domain error (*Error, which agent code
// returns to mean its message for the client) as it is; any other error's
// text may carry hosts, keys or data, so it stays in the log and the client
// gets a fixed message naming what failed and the request.
func (inv *invocation) hideError(err error, status, what string) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, ErrUnavailable) {
		// The agent's code failed because the database did: the client
		// may retry, which an INTERNAL would not tell it.
		return UnavailableError(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := what + " failed"
	if inv.requestID != "" {
		msg += "; the server log has the details under request id " + inv.requestID
	}
	return &Error{Status: status, Message: msg, Cause: err}
}

// protect runs agent code (a custom turn, a tool, a model), turning a panic
// into an INTERNAL error logged with its stack, so agent code cannot crash
// the server.
func (inv *invocation) protect(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			inv.rt.log.Error("agent code panicked", "agent", inv.agent.Name, "in", what, "panic", p, "stack", string(debug.Stack()))
			err = &Error{Status: CodeInternal, Message: "internal error", Cause: fmt.Errorf("panic in %s: %v", what, p)}
		}
	}()
	return fn()
}

// runTurn runs one turn and persists its end, in a span of its own, and
// reports how it ended to the observer.
func (inv *invocation) runTurn(ctx context.Context, in AgentInput) (err error) {
	start := time.Now()
	ctx, span := inv.rt.tracer.Start(ctx, "holdpoint.turn", trace.WithAttributes(
		AttrAgent.String(inv.agent.Name), AttrSessionID.String(inv.sess.id)))
	finish := ""
	var tr turnRecord
	var t *Turn
	defer func() {
		if err != nil {
			finish = FinishFailed
			if ctx.Err() != nil {
				finish = FinishAborted
			}
		}
		inv.rt.obs.TurnFinished(inv.metricAgent(), finish, time.Since(start))
		if t != nil {
			inv.rt.memory.after(t.budget.held)
		}
		if span.IsRecording() {
			span.SetAttributes(AttrFinishReason.String(finish))
			if t != nil && t.snapshotID != "" {
				span.SetAttributes(AttrSnapshotID.String(t.snapshotID))
			}
			if len(tr.claimed) > 0 {
				ids := make([]string, len(tr.claimed))
				for i, id := range tr.claimed {
					ids[i] = id.String()
				}
				span.SetAttributes(AttrInterruptIDs.StringSlice(ids))
			}
		}
		endSpan(span, err)
	}()
	res, err := inv.turn(ctx, in)
	t, finish, tr = res.turn, res.finish, res.record
	return err
}

// turnResult is what runTurn's bookkeeping needs of a turn, as far as it
// got: the turn (nil when refused before it began), its finish reason and
// its record of calls, interrupts and claims.
type turnResult struct {
	turn   *Turn
	finish string
	record turnRecord
}

// turn is runTurn's work.
func (inv *invocation) turn(ctx context.Context, in AgentInput) (turnResult, error) {
	if res := in.Resume; res != nil && len(res.Respond)+len(res.Restart) > 0 && inv.sess.untrusted > 0 && len(inv.sess.messages) <= inv.sess.untrusted {
		// The request to answer would be one the client wrote itself.
		err := Errorf(CodeInvalidArgument, "init.state carries no valid signature of this server (it is missing, or the state was changed): its tool requests cannot be answered or restarted. Send the state exactly as the last answer returned it.")
		inv.reject(err)
		return turnResult{}, err
	}
	if in.Message != nil {
		inv.sess.add(in.Message.Clone())
	}
	inv.patches.firstInTurn = true
	t := &Turn{inv: inv, input: in}
	if inv.agent.ServerManaged {
		t.snapshotID = NewRowID().String()
		if inv.isDetached() {
			t.snapshotID = inv.det.id
		}
	}
	var (
		finish string
		err    error
		tr     turnRecord
	)
	if inv.agent.Turn != nil {
		finish, err = inv.customTurn(ctx, t, &tr)
	} else {
		finish, tr, err = inv.generate(ctx, t)
	}
	if finish == "" {
		finish = FinishStop
	}
	if err == nil {
		err = inv.checkInterrupts(&tr)
	}
	res := turnResult{turn: t, finish: finish, record: tr}
	if err == nil && inv.agent.ServerManaged {
		err = inv.persist(ctx, t, StatusCompleted, finish, nil, tr)
	}
	if err != nil {
		err = inv.advise(err, in, t, tr)
		inv.endFailedTurn(ctx, t, err, tr)
		return res, err
	}
	inv.flushToolCalls(ctx, t)
	inv.last.finishReason = finish
	inv.last.err = nil
	inv.last.good = inv.sess.state()
	end := &TurnEnd{FinishReason: finish}
	if inv.agent.ServerManaged {
		end.SnapshotID = inv.last.goodID
	}
	inv.emit(StreamChunk{TurnEnd: end})
	return res, nil
}

// endFailedTurn settles a turn that failed. The interrupts its resume
// claimed go back to pending, unless a tool already ran: its effect cannot
// be undone, so they stay resolved. A synchronous turn of a server-managed
// agent is kept as a failed snapshot (not resumable; a sessionId resume
// walks back over it) with the tool calls it made, and streams a turnEnd
// naming it; one refused on a new session writes nothing, and one
// answered as an HTTP error (see reject) changes nothing. A detached
// turn's failure is written when its pending snapshot is finalized, and an
// aborted turn writes no snapshot.
func (inv *invocation) endFailedTurn(ctx context.Context, t *Turn, err error, tr turnRecord) {
	// Stopped, not aborted: the instance shuts down or the request went.
	stopped := ctx.Err() != nil && !inv.det.aborted.Load()
	ctx = context.WithoutCancel(ctx)
	// A deferred claim was never made: there is nothing to release, and
	// the failed snapshot claims nothing.
	t.deferred = nil
	if inv.det.guarded.Load() && inv.det.lostJob.Load() {
		// Another instance runs the guarded resume now, with its claims.
		inv.endGuard()
		inv.flushToolCalls(ctx, t)
		return
	}
	if !t.ranTool && inv.det.attempts > 0 && inv.journalHolds(ctx) {
		// Run from the queue: the instance that had the turn before may
		// have run a tool this one had not reached yet (its call is in
		// the journal). Its claims must not be given back, to be decided
		// and run again.
		t.ranTool = true
	}
	kept, released, stays := inv.settleFailedClaims(ctx, t, err, tr, stopped)
	// A turn refused before agent code ran (a forged restart, an unanswered
	// request) is kept too when the session already has a snapshot to hang
	// it on; on a new session it writes nothing.
	keep := (t.started || inv.baseID != "") && !inv.rejected.Load() && inv.agent.ServerManaged && !inv.isDetached() &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable)
	if keep {
		if perr := inv.persist(ctx, t, StatusFailed, FinishFailed, Details(err), kept); perr != nil {
			inv.rt.log.Error("keeping a failed turn's snapshot failed", "snapshot", t.snapshotID, "err", perr)
		} else {
			inv.emit(StreamChunk{TurnEnd: &TurnEnd{SnapshotID: t.snapshotID, FinishReason: FinishFailed}})
		}
	} else if !t.ranTool && !stays && (released || !errors.Is(err, ErrUnavailable)) {
		// Nothing ran: nobody must finish this resume. (When the database
		// is out of reach with the claims still made, a decision stays, or
		// a tool ran, the guard stays for a takeover.)
		inv.dropGuard()
	}
	inv.flushToolCalls(ctx, t)
	inv.endGuard()
}

// journalHolds reports whether the journal of the turn's job holds a
// call, or cannot be read (then a tool may have run, as far as anyone
// knows).
func (inv *invocation) journalHolds(ctx context.Context) bool {
	calls, err := inv.rt.store.ListTurnToolCalls(ctx, inv.caller.TenantID, []string{inv.det.id})
	if err != nil {
		inv.rt.log.Error("reading a failed turn's journal failed; its claims stay", "snapshot", inv.det.id, "err", err)
		return true
	}
	return len(calls) > 0
}

// customTurn runs a custom agent's turn. When the session is paused on
// interrupts the turn raised and the input resumes them, the runtime checks
// and claims the answers (exactly once) and appends them as a tool message
// before the turn function runs, as it does for a prompt agent; a turn that
// ends interrupted records the interrupts its last message asks.
func (inv *invocation) customTurn(ctx context.Context, t *Turn, tr *turnRecord) (string, error) {
	if err := t.begin(ctx); err != nil {
		return "", err
	}
	if res := t.input.Resume; res != nil && pausedOnInterrupt(inv.sess.messages) {
		toolMsg, repaused, err := inv.resume(ctx, t, res, tr)
		if err != nil {
			return "", err
		}
		if repaused {
			return FinishInterrupted, nil
		}
		t.resumed = toolMsg
		inv.emit(StreamChunk{ModelChunk: &ModelChunk{Role: RoleTool, Content: toolMsg.Content, Index: intPtr(0)}})
	}
	var finish string
	err := inv.protect("turn", func() error {
		var err error
		finish, err = inv.agent.Turn(ctx, t)
		return err
	})
	if errors.Is(err, ErrCallPaused) {
		// Turn.CallTool paused on a gated call: its request is the last
		// message, unless the function added one after it.
		finish, err = FinishInterrupted, nil
		if !pausedOnInterrupt(inv.sess.messages) {
			err = errors.New("the turn function added a message after a call paused on its approval: return ErrCallPaused at once")
		}
	}
	if err != nil {
		return "", inv.hideError(err, CodeInternal, "the agent's turn")
	}
	if finish == FinishInterrupted {
		if n := len(inv.sess.messages); n > 0 && inv.sess.messages[n-1].Role == RoleModel {
			for _, p := range inv.sess.messages[n-1].Content {
				if raw, ok := p.Metadata[metaInterrupt]; ok && p.ToolRequest != nil {
					tr.interrupts = append(tr.interrupts, inv.newInterrupt(p.ToolRequest, raw))
				}
			}
		}
	}
	return finish, nil
}

// pausedOnInterrupt reports whether the history ends with a model message
// asking interrupted tool requests.
func pausedOnInterrupt(msgs []Message) bool {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleModel {
		return false
	}
	for _, p := range msgs[len(msgs)-1].Content {
		if _, ok := p.Metadata[metaInterrupt]; ok && p.ToolRequest != nil {
			return true
		}
	}
	return false
}

// checkpoint keeps what a failed resume turn did before it failed, when
// its tools ran and so its interrupts stay resolved: without it the
// session's last good snapshot would still ask those interrupts, which can
// no longer be answered, and the conversation could not go on. The turn's
// snapshot is written completed (finish reason "other"), ending with the
// last tool message the turn completed; the failure is then kept as its
// child. The client continues from it: an input with no message (or a new
// message) runs the model on the tool results, and no tool runs twice.
// When a tool ran whose result is in no message (a later tool of its round
// failed), nothing is kept: going on would run it again.
func (inv *invocation) checkpoint(ctx context.Context, t *Turn, tr turnRecord) bool {
	n := len(inv.sess.messages)
	if !inv.agent.ServerManaged || inv.isDetached() || inv.rejected.Load() || t.unrecorded || n == 0 || inv.sess.messages[n-1].Role != RoleTool {
		return false
	}
	if err := inv.persist(ctx, t, StatusCompleted, FinishOther, nil, tr); err != nil {
		inv.rt.log.Error("keeping a failed resume's progress failed", "snapshot", t.snapshotID, "err", err)
		return false
	}
	inv.last.good = inv.sess.state()
	t.snapshotID = NewRowID().String()
	return true
}

// turnRecord is what a turn did beyond changing the session.
type turnRecord struct {
	interrupts     []NewInterrupt
	claimed        []uuid.UUID
	resolvedEvents bool // the claims were made by this turn's resume
}
