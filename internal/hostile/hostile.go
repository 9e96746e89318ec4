// Package hostile is an attacker for tests: an OpenAI-compatible chat
// completions server whose model does whatever the user's message tells
// it, the way a prompt-injected model does. A platform served with
// OPENAI_BASE_URL pointing at it runs tenant agents (model openai/...)
// whose every tool call is the attacker's choice.
//
// The user's last message steers it with lines of the form
//
//	CALL <tool> x<count> [rounds <n>] [<json input>]
//
// Each model answer after that message requests count calls of each
// listed tool with the input (default {"toAccount":"ATTACKER","amount":5000}),
// for n answers in a row (default 1), whatever the tools answered; then
// it answers "done". A message without CALL lines is answered "ok". A
// message with a line HOLD has each answer wait until POST /release (or
// two minutes), so a test can keep turns running as long as it needs.
package hostile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Model is the attacker's chat completions handler (POST
// /v1/chat/completions, and POST /release for held answers). Its zero
// value is ready.
type Model struct {
	// Requests counts the completions asked for.
	Requests atomic.Int64

	holdOnce sync.Once
	hold     chan struct{}
	release  sync.Once
}

// held is closed by Release.
func (m *Model) held() chan struct{} {
	m.holdOnce.Do(func() { m.hold = make(chan struct{}) })
	return m.hold
}

// Release lets every held answer go, now and from now on.
func (m *Model) Release() { m.release.Do(func() { close(m.held()) }) }

var holdLine = regexp.MustCompile(`(?m)^HOLD\s*$`)

// call is one tool call the model asks for.
type call struct{ name, input string }

var callLine = regexp.MustCompile(`(?m)^CALL (\S+) x(\d+)(?: rounds (\d+))?(?: (\{.*\}))?\s*$`)

// defaultInput is what a steered model sends a money-moving tool.
const defaultInput = `{"toAccount":"ATTACKER","amount":5000}`

// plan reads the steering lines of the user's message: the calls of one
// answer and how many answers ask them.
func plan(user string) ([]call, int) {
	var calls []call
	rounds := 1
	for _, m := range callLine.FindAllStringSubmatch(user, -1) {
		n, _ := strconv.Atoi(m[2])
		if m[3] != "" {
			rounds, _ = strconv.Atoi(m[3])
		}
		input := m[4]
		if input == "" {
			input = defaultInput
		}
		for range n {
			calls = append(calls, call{name: m[1], input: input})
		}
	}
	return calls, rounds
}

// chatMessage is the part of an OpenAI message the model reads.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a message's content as text (a string, or parts with text).
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// ServeHTTP answers one chat completion.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/release" {
		m.Release()
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	m.Requests.Add(1)
	var req struct {
		Model    string        `json:"model"`
		Stream   bool          `json:"stream"`
		Messages []chatMessage `json:"messages"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	calls, answered := m.next(req.Messages)
	if user := lastUser(req.Messages); user != "" && holdLine.MatchString(user) {
		select {
		case <-m.held():
		case <-r.Context().Done():
			return
		case <-time.After(2 * time.Minute):
		}
	}
	if req.Stream {
		streamAnswer(w, req.Model, calls, answered)
		return
	}
	message := map[string]any{"role": "assistant", "content": answered}
	finish := "stop"
	if len(calls) > 0 {
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": toolCalls(calls, false)}
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	})
}

// lastUser is the text of the last user message ("" if none).
func lastUser(msgs []chatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].text()
		}
	}
	return ""
}

// next is the answer to a conversation: the calls to ask for, or a text.
func (m *Model) next(msgs []chatMessage) ([]call, string) {
	last := -1
	for i, msg := range msgs {
		if msg.Role == "user" {
			last = i
		}
	}
	if last < 0 {
		return nil, "ok"
	}
	calls, rounds := plan(msgs[last].text())
	if len(calls) == 0 {
		return nil, "ok"
	}
	asked := 0
	for _, msg := range msgs[last+1:] {
		if msg.Role == "assistant" {
			asked++
		}
	}
	if asked >= rounds {
		return nil, "done"
	}
	return calls, ""
}

// toolCalls is the tool_calls member of an answer (with indexes when
// streamed).
func toolCalls(calls []call, indexed bool) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		tc := map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": c.input}}
		if indexed {
			tc["index"] = i
		}
		out[i] = tc
	}
	return out
}

// streamAnswer sends the answer as server-sent chunks.
func streamAnswer(w http.ResponseWriter, model string, calls []call, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		fmt.Fprintf(bw, "data: %s\n\n", b)
	}
	if len(calls) > 0 {
		send(map[string]any{"role": "assistant", "tool_calls": toolCalls(calls, true)}, nil)
		send(map[string]any{}, "tool_calls")
	} else {
		send(map[string]any{"role": "assistant", "content": text}, nil)
		send(map[string]any{}, "stop")
	}
	fmt.Fprint(bw, "data: [DONE]\n\n")
	_ = bw.Flush()
}
