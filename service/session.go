package service

// Session loading: which session and history a turn starts from (a
// snapshot, a session id, client-managed state, or nothing), the
// copy-on-write state the turn works on, and the check that a cached
// session head has not moved.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/holdpoint/holdpoint/service/limits"
	"github.com/holdpoint/holdpoint/service/store"
)

// sessionState is the session an invocation works on.
type sessionState struct {
	id    string
	owner string // the end user who created the session ("" when none)
	// unclaimed marks a client-chosen id no session has yet: the first
	// turn takes it for the caller before any agent code runs.
	unclaimed bool
	// untrusted counts the leading messages that came from a client's
	// state without a valid signature: not the server's history.
	untrusted int
	messages  []Message
	custom    json.RawMessage
	artifacts []Artifact
	// touched are positions below the base's message count that were
	// rewritten in place (a resume's interrupted message); replaced says
	// the history was set wholesale, so every position must be compared.
	touched  map[int]bool
	replaced bool
	// shared says a view (state), the snapshot cache or a model request
	// may be looking at the messages' backing array: it must be copied
	// before a rewrite.
	shared bool
	// front is the array the messages live in once this invocation copied
	// them (grow), from front[1] on: front[0] is a slot before the first
	// message where callModel puts the agent's system message, so that a
	// model request is a view of the history rather than a copy of it.
	// Appends that go past its capacity (a plain append) leave it, and
	// the next grow copies again (inFront tells).
	front []Message
	// frontSystem says front[0] holds the system message, whose text is
	// frontText (a model request may have seen it: it is never rewritten).
	frontSystem bool
	frontText   string
	// ownAt, when not 0, says the message at position ownAt-1 is this
	// invocation's to rewrite in place although the history is shared: a
	// handoff gave it the base's last message apart from every view
	// (takeSplit). A view that shows it (state, modelView) ends that.
	ownAt int
}

// inFront reports whether the messages start at front[1].
func (s *sessionState) inFront() bool {
	if cap(s.front) < 2 || cap(s.messages) == 0 {
		return false
	}
	return &s.front[:2][1] == &s.messages[:1][0]
}

// grow copies the messages into a new array of this invocation's, after a
// free slot and with room for extra more (and an eighth as many again, so
// that appending copies a long history once per invocation, not once per
// message).
func (s *sessionState) grow(extra int) {
	n := len(s.messages)
	buf := make([]Message, 1+n, 1+n+extra+n/8+16)
	copy(buf[1:], s.messages)
	s.front, s.frontSystem = buf, false
	s.messages = buf[1 : 1+n]
	s.shared = false
	s.ownAt = 0
}

// add appends messages to the history. The array they go into is this
// invocation's (views of the history have their capacity cut to their
// length, so none sees the appended positions).
func (s *sessionState) add(msgs ...Message) {
	if !s.inFront() || cap(s.messages)-len(s.messages) < len(msgs) {
		s.grow(len(msgs))
	}
	s.messages = append(s.messages, msgs...)
}

// modelView is the history for a model request, with system (when not
// nil) as a leading message: a view of the session's array, which the
// model must not change. It may keep it: the session treats the array as
// shared from then on, so a later rewrite copies it first.
func (s *sessionState) modelView(system *Message) []Message {
	n := len(s.messages)
	s.shared, s.ownAt = true, 0
	if system == nil {
		return s.messages[:n:n]
	}
	text := system.Text()
	if !s.inFront() || (s.frontSystem && s.frontText != text) {
		s.grow(1)
		s.shared = true
	}
	if !s.frontSystem {
		s.front[0], s.frontSystem, s.frontText = *system, true, text
	}
	return s.front[: 1+n : 1+n]
}

// touch marks a position rewritten in place.
func (s *sessionState) touch(i int) {
	if s.touched == nil {
		s.touched = map[int]bool{}
	}
	s.touched[i] = true
}

// state is a view of the session that later turns cannot change. It
// shares the session's slices rather than copying them (a turn's cost must
// not grow with the conversation): appends past the view's length are not
// part of it, artifacts are replaced rather than changed, and the one
// in-place change, rewriting a message, copies the slice first while a view
// may be looking at it (replaceMessage).
func (s *sessionState) state() SessionState {
	s.shared, s.ownAt = true, 0
	return SessionState{
		SessionID: s.id,
		Messages:  s.messages[:len(s.messages):len(s.messages)],
		Custom:    s.custom,
		Artifacts: s.artifacts[:len(s.artifacts):len(s.artifacts)],
	}
}

// replaceMessage rewrites the message at position i, copy-on-write.
func (s *sessionState) replaceMessage(i int, m Message) {
	if s.shared && (s.ownAt == 0 || i < s.ownAt-1 || !s.inFront()) {
		s.grow(2) // a resume appends the tool message next
	}
	s.messages[i] = m
	s.touch(i)
}

// resolveSession loads or creates the session init names.
func (inv *invocation) resolveSession(ctx context.Context, init AgentInit) error {
	if err := inv.checkInitKind(init); err != nil {
		return err
	}
	if err := limits.CheckInit(init); err != nil {
		return err
	}
	var err error
	switch {
	case init.SnapshotID != "":
		err = inv.fromSnapshot(ctx, init)
	case init.SessionID != "":
		err = inv.fromSession(ctx, init.SessionID)
	case init.State != nil:
		err = inv.fromState(ctx, init.State)
	default:
		inv.sess = &sessionState{id: NewRowID().String(), owner: inv.caller.EndUser}
	}
	if err != nil {
		return err
	}
	own := inv.sess.ownAt
	inv.last.good = inv.sess.state()
	if own > 0 {
		// The base's last message is this invocation's to rewrite: the
		// view ends before it (output takes it from splitLast).
		inv.sess.ownAt = own
		inv.last.good.Messages = inv.last.good.Messages[: own-1 : own-1]
	}
	inv.last.goodID = inv.baseID
	return nil
}

// checkInitKind refuses ids for a client-managed agent and a state for a
// server-managed one.
func (inv *invocation) checkInitKind(init AgentInit) error {
	a := inv.agent
	if (init.SnapshotID != "" || init.SessionID != "") && !a.ServerManaged {
		which := "snapshotId"
		if init.SnapshotID == "" {
			which = "sessionId"
		}
		return Errorf(CodeFailedPrecondition, "Cannot use '%s' with agent '%s': this agent has no store configured (client-managed state). Send 'state' instead.", which, a.Name)
	}
	if init.State != nil && a.ServerManaged {
		return Errorf(CodeFailedPrecondition, "Cannot send 'state' to agent '%s': this agent uses a server-managed store. Send 'snapshotId' or 'sessionId' instead.", a.Name)
	}
	return nil
}

// fromSnapshot continues from the snapshot init names (of the session it
// names too, if any). A snapshot that is not completed is kept for
// inspection: resuming it is a graceful failure.
func (inv *invocation) fromSnapshot(ctx context.Context, init AgentInit) error {
	snap, err := inv.rt.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: inv.caller.Scope(), Agent: inv.agent.Name, ID: init.SnapshotID, WithState: true, Split: true})
	if errors.Is(err, ErrNotFound) {
		return Errorf(CodeNotFound, "Snapshot %s not found", init.SnapshotID)
	}
	if err != nil {
		return err
	}
	if init.SessionID != "" && snap.SessionID != init.SessionID {
		return Errorf(CodeInvalidArgument, "Snapshot %s does not belong to session %s.", init.SnapshotID, init.SessionID)
	}
	if snap.Status != StatusCompleted {
		inv.sess = &sessionState{id: snap.SessionID}
		inv.resolveFailure = Errorf(CodeInvalidArgument, "Snapshot %s is not resumable (status: %s). Only 'completed' snapshots can be resumed.", init.SnapshotID, inv.rt.EffectiveStatus(&snap.Snapshot))
		return nil
	}
	inv.useSnapshot(snap)
	return nil
}

// fromSession continues a session from its newest completed snapshot, or
// starts a new one under the client's id.
func (inv *invocation) fromSession(ctx context.Context, id string) error {
	if inv.headCached {
		// This instance's last write of the session, if it is the
		// caller's to see and of this agent (else the read says why not).
		if h := inv.rt.store.CachedSessionHead(inv.caller.TenantID, id); h != nil && h.LatestSnapshotID != "" &&
			h.Agent == inv.agent.Name && inv.caller.Scope().Sees(h.EndUser) {
			snap, err := inv.latestCompleted(ctx, h)
			if err == nil && snap != nil {
				inv.expectedHead = h.LatestSnapshotID
				inv.useSnapshot(snap)
				return nil
			}
		}
	}
	sess, err := inv.rt.store.LoadSession(ctx, inv.caller.Scope(), id)
	if errors.Is(err, ErrNotFound) {
		// A new session under the client's id, or another user's (which
		// looks the same): the first turn takes the id, or finds it is not
		// free.
		inv.sess = &sessionState{id: id, owner: inv.caller.EndUser, unclaimed: true}
		return nil
	}
	if err != nil {
		return err
	}
	if sess.Agent != inv.agent.Name {
		return Errorf(CodeFailedPrecondition, "Session %s belongs to another agent.", id)
	}
	snap, err := inv.latestCompleted(ctx, sess)
	if err != nil {
		return err
	}
	if snap == nil {
		inv.sess = &sessionState{id: id, owner: sess.EndUser}
		return nil
	}
	inv.useSnapshot(snap)
	return nil
}

// latestCompleted walks back from a session's latest snapshot to the
// newest completed one (nil when there is none).
func (inv *invocation) latestCompleted(ctx context.Context, sess *StoredSession) (*StoredSnapshot, error) {
	visited := map[string]bool{}
	for id := sess.LatestSnapshotID; id != ""; {
		if visited[id] {
			return nil, Errorf(CodeFailedPrecondition, "Session '%s' has a cyclic snapshot parent chain. Resume by snapshotId instead.", sess.ID)
		}
		visited[id] = true
		s, err := inv.rt.store.LoadSnapshot(ctx, LoadSnapshotParams{Scope: inv.caller.Scope(), Agent: inv.agent.Name, ID: id, WithState: true, Split: true})
		if err != nil {
			return nil, err
		}
		if s.Status == StatusCompleted {
			return s, nil
		}
		id = s.ParentID
	}
	return nil, nil
}

// fromState starts from a client-managed agent's state. A state this
// server signed for this caller and agent is history the server wrote; any
// other may seed the conversation, but its tool requests cannot be
// answered or restarted.
func (inv *invocation) fromState(ctx context.Context, st *SessionState) error {
	id := st.SessionID
	if id == "" {
		id = NewRowID().String()
	}
	inv.sess = &sessionState{id: id, messages: cloneMessages(st.Messages), custom: st.Custom, artifacts: st.Artifacts}
	verified, err := inv.rt.verifyState(ctx, inv.caller, inv.agent.Name, *st)
	if err != nil {
		return err
	}
	if !verified {
		inv.sess.untrusted = len(st.Messages)
	}
	return nil
}

// useSnapshot continues from snap, which may be a shared cache entry: the
// session never writes into the snapshot's slices.
func (inv *invocation) useSnapshot(snap *StoredSnapshot) {
	st := snap.State
	// Capacity is cut to length, so an append reallocates instead of
	// writing into the snapshot's array (another branch may append too).
	inv.sess = &sessionState{
		id:        snap.SessionID,
		owner:     snap.EndUser,
		messages:  st.Messages[:len(st.Messages):len(st.Messages)],
		custom:    st.Custom,
		artifacts: st.Artifacts[:len(st.Artifacts):len(st.Artifacts)],
		shared:    true,
	}
	inv.baseID = snap.SnapshotID
	inv.baseBodies = snap.Bodies
	inv.bodiesOwned = false
	inv.baseVersion = snap.AgentVersion
	inv.basePaused = snap.FinishReason == FinishInterrupted
	inv.baseAnswered = snap.Answered
	inv.splitLast, inv.bodiesOwnLast = nil, false
	h, _ := snap.Handoff.Take().(*historyArrays)
	if snap.Last != nil {
		inv.splitLast, inv.splitOf = snap.Last, snap.SnapshotID
		if h == nil || !inv.takeSplit(h) {
			// Another turn continues in the arrays (or none were
			// handed off): the history is put together in a copy.
			j := snap.Joined()
			inv.sess.messages, inv.baseBodies = j.State.Messages, j.Bodies
		}
		return
	}
	if h != nil {
		inv.takeArrays(h)
	}
}

// historyArrays is what a turn that wrote a completed snapshot hands to
// the first turn continuing it (store.Handoff): the array the history
// lives in (from front[1]; front[0] the system slot) and the array of the
// messages' stored JSON, each with room past the snapshot's length that
// the writer no longer uses and no view of the snapshot sees. The taker
// appends into that room instead of copying the history, so a turn that
// adds messages costs the same however long the conversation is. Positions
// below the snapshot's length stay the snapshot's: a rewrite (a resume's)
// copies first, as with any shared history.
type historyArrays struct {
	front     []Message
	hasSystem bool   // front[0] holds a system message
	system    string // its text
	bodies    [][]byte
	// split says the snapshot keeps its last message apart (its views end
	// before it): the taker may rewrite that position in place too.
	split bool
}

// takeArrays continues in the arrays a handoff gave this invocation, when
// they are the ones the base snapshot's views look at.
func (inv *invocation) takeArrays(h *historyArrays) {
	s := inv.sess
	n := len(s.messages)
	if n == 0 || len(h.front) != 1+n || len(h.bodies) != n || len(inv.baseBodies) != n ||
		&h.front[1] != &s.messages[0] || &h.bodies[0] != &inv.baseBodies[0] {
		return
	}
	// front[0] may be in the writer's model requests: a request with
	// another system message copies the history first (modelView).
	s.front, s.frontSystem, s.frontText = h.front, h.hasSystem, h.system
	s.messages = h.front[1 : 1+n] // the room past n is this invocation's
	inv.baseBodies, inv.bodiesOwned = h.bodies, true
}

// takeSplit continues in the arrays of a snapshot whose last message is
// kept apart, with that message's position this invocation's to rewrite.
func (inv *invocation) takeSplit(h *historyArrays) bool {
	s := inv.sess
	p := len(s.messages) // the messages before the last
	n := p + 1
	if !h.split || p == 0 || len(h.front) != 1+n || len(h.bodies) != n || len(inv.baseBodies) != p ||
		&h.front[1] != &s.messages[0] || &h.bodies[0] != &inv.baseBodies[0] {
		return false
	}
	s.front, s.frontSystem, s.frontText = h.front, h.hasSystem, h.system
	s.messages = h.front[1 : 1+n]
	s.ownAt = n
	inv.baseBodies, inv.bodiesOwned, inv.bodiesOwnLast = h.bodies, true, true
	return true
}

// handOff gives the arrays of the history just written (n messages, their
// JSON in bodies) to the next turn, when this invocation owns them; it
// stops appending into them itself (its next append copies).
//
// With split, the snapshot keeps its last message apart and the taker may
// rewrite it in place: this invocation still looks at it, so the handoff
// is held until the invocation ends (releaseHandoffs).
func (inv *invocation) handOff(bodies [][]byte, split bool) *store.Handoff {
	s := inv.sess
	n := len(s.messages)
	if n == 0 || !s.inFront() || !inv.bodiesOwned || len(bodies) != n {
		return nil
	}
	inv.bodiesOwned, inv.bodiesOwnLast = false, false
	h := &historyArrays{front: s.front[:1+n], hasSystem: s.frontSystem, system: s.frontText, bodies: bodies, split: split}
	s.front, s.frontSystem, s.frontText = nil, false, ""
	s.messages = s.messages[:n:n]
	s.shared, s.ownAt = true, 0
	if !split {
		return store.NewHandoff(h)
	}
	ho := store.NewHeldHandoff(h)
	inv.heldHandoffs = append(inv.heldHandoffs, ho)
	return ho
}

// releaseHandoffs lets the turns continuing this invocation's snapshots
// take the arrays it held back; it no longer looks at them.
func (inv *invocation) releaseHandoffs() {
	for _, h := range inv.heldHandoffs {
		h.Release()
	}
	inv.heldHandoffs = nil
}

// orHeadMoved is err, or errHeadMoved when the invocation started from a
// cached session head it never checked and the session's head is another:
// the error may come of the stale history, and nothing was written (a
// write names the head it expects).
func (inv *invocation) orHeadMoved(ctx context.Context, err error) error {
	if errors.Is(err, ErrSessionMoved) {
		return errHeadMoved
	}
	if inv.expectedHead == "" || inv.sess == nil || ctx.Err() != nil {
		return err
	}
	if moved, cerr := inv.headMoved(ctx); cerr == nil && moved {
		return errHeadMoved
	}
	return err
}

// headMoved reads the session's head and compares it with the cached one
// the invocation started from.
func (inv *invocation) headMoved(ctx context.Context) (bool, error) {
	sess, err := inv.rt.store.LoadSession(ctx, inv.caller.Scope(), inv.sess.id)
	if errors.Is(err, ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return sess.LatestSnapshotID != inv.expectedHead || sess.Agent != inv.agent.Name, nil
}

// checkHead is called before anything with an effect: an invocation that
// started from a cached session head reads the head, and goes on only
// when it is the same (it is then one that read its head: its writes name
// no expected head). Otherwise the invocation is answered errHeadMoved,
// and runs again.
func (inv *invocation) checkHead(ctx context.Context) error {
	if inv.expectedHead == "" {
		return nil
	}
	moved, err := inv.headMoved(ctx)
	if errors.Is(err, ErrUnavailable) {
		// Before anything with an effect: refused as a whole, like a
		// new session that could not be claimed.
		err = AsError(err)
		inv.reject(err)
	}
	if err != nil {
		return err
	}
	if moved {
		inv.reject(errHeadMoved)
		return errHeadMoved
	}
	inv.expectedHead = ""
	return nil
}

// errHeadMoved answers an invocation that started from a cached session
// head found to have moved before anything was written or any tool ran
// (see InvokeOne): it is run again from the head in the table.
var errHeadMoved = fmt.Errorf("%w (checked)", ErrSessionMoved)
