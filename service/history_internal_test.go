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
