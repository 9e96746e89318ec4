package service

import (
	"fmt"
	"testing"
)

func textMessages(prefix string, n int) []Message {
	out := make([]Message, n)
	for i := range out {
		out[i] = Message{Role: RoleUser, Content: []Part{TextPart(fmt.Sprintf("%s%d", prefix, i))}}
	}
	return out
}

func texts(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

func sameTexts(t *testing.T, what string, got []Message, want ...string) {
	t.Helper()
	g := texts(got)
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("%s = %q, want %q", what, g, want)
	}
}

// TestHistoryViewsDoNotChange checks the session's copy-on-write: a
// snapshot's messages (as the cache holds them), a view taken for the last
// good state and a model request keep what they showed while the session
// appends, rewrites a message and asks the model again.
func TestHistoryViewsDoNotChange(t *testing.T) {
	cached := textMessages("m", 2)
	s := &sessionState{messages: cached[:2:2], shared: true}
	good := s.state()
	system := &Message{Role: RoleSystem, Content: []Part{TextPart("sys")}}

	s.add(Message{Role: RoleUser, Content: []Part{TextPart("m2")}})
	first := s.modelView(system)
	sameTexts(t, "the first request", first, "sys", "m0", "m1", "m2")

	s.add(Message{Role: RoleModel, Content: []Part{TextPart("a")}})
	s.replaceMessage(3, Message{Role: RoleModel, Content: []Part{TextPart("a, resolved")}})
	s.add(Message{Role: RoleTool, Content: []Part{TextPart("t")}})
	second := s.modelView(system)
	sameTexts(t, "the second request", second, "sys", "m0", "m1", "m2", "a, resolved", "t")

	sameTexts(t, "the cached snapshot's messages", cached, "m0", "m1")
	sameTexts(t, "the last good view", good.Messages, "m0", "m1")
	sameTexts(t, "the first request afterwards", first, "sys", "m0", "m1", "m2")
	sameTexts(t, "the session", s.messages, "m0", "m1", "m2", "a, resolved", "t")

	// A rewrite after a model request copies: the request is unchanged.
	s.replaceMessage(0, Message{Role: RoleUser, Content: []Part{TextPart("m0 again")}})
	sameTexts(t, "the second request afterwards", second, "sys", "m0", "m1", "m2", "a, resolved", "t")
	sameTexts(t, "the session", s.messages, "m0 again", "m1", "m2", "a, resolved", "t")

	// Without a system prompt the request is the history itself.
	sameTexts(t, "a request without a system prompt", s.modelView(nil), "m0 again", "m1", "m2", "a, resolved", "t")
}

// TestHistoryIsCopiedOncePerInvocation checks that a long session's history
// is copied when an invocation first changes it, and not again by the
// messages appended after it nor by the model requests that include it:
// neither allocates.
func TestHistoryIsCopiedOncePerInvocation(t *testing.T) {
	cached := textMessages("m", 1000)
	s := &sessionState{messages: cached[:1000:1000], shared: true}
	system := &Message{Role: RoleSystem, Content: []Part{TextPart("sys")}}
	msg := Message{Role: RoleModel, Content: []Part{TextPart("a")}}

	s.add(msg)
	if !s.inFront() {
		t.Fatal("the first append did not copy the history into the invocation's array")
	}
	array := &s.messages[0]
	if allocs := testing.AllocsPerRun(100, func() {
		s.add(msg)
		_ = s.modelView(system)
	}); allocs != 0 {
		t.Errorf("an append and a model request allocated %.0f times, want 0", allocs)
	}
	if &s.messages[0] != array {
		t.Error("the history moved to another array")
	}
	if got := len(s.messages); got != 1102 { // AllocsPerRun runs it once more to warm up
		t.Errorf("%d messages, want 1102", got)
	}
}

// TestHistoryHandoff checks the handoff of a completed snapshot's arrays:
// the first turn continuing the snapshot appends into them, in place; a
// second turn continuing it copies; and neither they nor the writer (which
// appends again) change what the snapshot, the writer's model request or
// each other show. A request with another system message does not rewrite
// the slot the writer's request showed.
func TestHistoryHandoff(t *testing.T) {
	system := &Message{Role: RoleSystem, Content: []Part{TextPart("sys")}}
	w := &invocation{sess: &sessionState{}}
	w.sess.add(textMessages("m", 3)...)
	req := w.sess.modelView(system)
	bodies, _ := w.bodiesFor(3)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `"b%d"`, i)
	}
	snapMsgs, snapBodies := w.sess.state().Messages, bodies[:3:3]
	h := w.handOff(bodies, false)
	if h == nil {
		t.Fatal("the writer handed nothing off")
	}
	w.sess.add(textMessages("w", 1)...)

	take := func() *invocation {
		inv := &invocation{sess: &sessionState{messages: snapMsgs, shared: true}, baseBodies: snapBodies}
		if v, ok := h.Take().(*historyArrays); ok {
			inv.takeArrays(v)
		}
		return inv
	}
	a := take()
	if !a.sess.inFront() || &a.sess.messages[0] != &snapMsgs[0] {
		t.Fatal("the first turn did not continue in the writer's array")
	}
	a.sess.add(textMessages("a", 1)...)
	b := take()
	if b.sess.inFront() {
		t.Fatal("a second turn was handed the arrays too")
	}
	b.sess.add(textMessages("b", 1)...)
	other := &Message{Role: RoleSystem, Content: []Part{TextPart("other")}}
	sameTexts(t, "the first turn's request", a.sess.modelView(other), "other", "m0", "m1", "m2", "a0")
	sameTexts(t, "the writer's request", req, "sys", "m0", "m1", "m2")
	sameTexts(t, "the snapshot", snapMsgs, "m0", "m1", "m2")
	sameTexts(t, "the second turn", b.sess.messages, "m0", "m1", "m2", "b0")
	sameTexts(t, "the writer", w.sess.messages, "m0", "m1", "m2", "w0")

	ab, same := a.bodiesFor(4)
	if same != 3 || &ab[0] != &snapBodies[0] {
		t.Errorf("the first turn's bodies: %d kept, in the snapshot's array: %v; want 3, true", same, &ab[0] == &snapBodies[0])
	}
	if bb, _ := b.bodiesFor(4); &bb[0] == &snapBodies[0] {
		t.Error("the second turn writes into the snapshot's array of bodies")
	}
}

// TestHistorySplitHandoff checks the handoff of a paused snapshot, whose
// last message is kept apart: it is held until the writer's invocation
// ends, and the turn that takes it rewrites that message in place (a
// resume does) and appends, without copying the history and without
// changing what the snapshot, its last message or the writer's request
// show. After a view that shows the message, a rewrite copies again.
func TestHistorySplitHandoff(t *testing.T) {
	system := &Message{Role: RoleSystem, Content: []Part{TextPart("sys")}}
	w := &invocation{sess: &sessionState{}}
	w.sess.add(textMessages("m", 2)...)
	req := w.sess.modelView(system)
	w.sess.add(Message{Role: RoleModel, Content: []Part{TextPart("ask")}})
	bodies, _ := w.bodiesFor(3)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `"b%d"`, i)
	}
	all := w.sess.state().Messages
	prefix, prefixBodies, last := all[:2:2], bodies[:2:2], all[2]
	h := w.handOff(bodies, true)
	if h == nil || h.Take() != nil {
		t.Fatal("a split handoff was missing or given out before its writer ended")
	}
	w.releaseHandoffs()
	v, ok := h.Take().(*historyArrays)
	if !ok {
		t.Fatal("the released handoff gave nothing")
	}
	a := &invocation{sess: &sessionState{messages: prefix, shared: true}, baseBodies: prefixBodies}
	if !a.takeSplit(v) {
		t.Fatal("the split arrays were not taken")
	}
	a.sess.replaceMessage(2, Message{Role: RoleModel, Content: []Part{TextPart("ask, resolved")}})
	a.sess.add(Message{Role: RoleTool, Content: []Part{TextPart("t")}})
	if &a.sess.messages[0] != &prefix[0] {
		t.Error("the resume copied the history")
	}
	ab, same := a.bodiesFor(4)
	if same != 3 || &ab[0] != &prefixBodies[0] {
		t.Errorf("the resume's bodies: %d kept, in the base's array: %v; want 3, true", same, &ab[0] == &prefixBodies[0])
	}
	sameTexts(t, "the resume", a.sess.messages, "m0", "m1", "ask, resolved", "t")
	sameTexts(t, "the snapshot", prefix, "m0", "m1")
	sameTexts(t, "its last message", []Message{last}, "ask")
	sameTexts(t, "the writer's request", req, "sys", "m0", "m1")

	seen := a.sess.state()
	a.sess.replaceMessage(2, Message{Role: RoleModel, Content: []Part{TextPart("again")}})
	sameTexts(t, "a view taken before a second rewrite", seen.Messages, "m0", "m1", "ask, resolved", "t")
}
