package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

// ModelName is the name the demo model reports.
const ModelName = "demo"

// Model is the deterministic, offline demo model. It reads the conversation
// the way a provider following the banking system prompt would and answers
// with text (streamed in word groups) and tool requests. Its decisions
// depend only on the request, so the same conversation always gets the same
// answer.
type Model struct {
	// chunkDelay is the pause before each streamed chunk of a normal answer.
	chunkDelay time.Duration
	// slowDelay is the pause before each chunk of the slow statement answer.
	slowDelay time.Duration
	// toolDelay is the pause before answering a tool message
	// (HOLDPOINT_DEMO_TOOL_DELAY); toolDelayErr is set when that variable
	// is invalid.
	toolDelay    time.Duration
	toolDelayErr error
}

// NewModel returns the demo model.
func NewModel() service.Model {
	m := &Model{chunkDelay: 30 * time.Millisecond, slowDelay: 100 * time.Millisecond}
	m.toolDelay, m.toolDelayErr = toolDelayFromEnv()
	return m
}

// Name returns "demo".
func (m *Model) Name() string { return ModelName }

// Generate answers req: it streams the answer's text in chunks, then its
// tool request if any, and returns the whole message. It stops early with
// ctx's error when ctx ends.
func (m *Model) Generate(ctx context.Context, req *service.ModelRequest, onChunk func(service.ModelChunk)) (*service.ModelResponse, error) {
	if last := lastConversationMessage(req.Messages); last != nil && last.Role == service.RoleTool {
		if m.toolDelayErr != nil {
			return nil, m.toolDelayErr
		}
		// The window after a tool ran and before the turn moves on: the
		// one in which a crash tests whether a takeover runs it again.
		if err := sleep(ctx, m.toolDelay); err != nil {
			return nil, err
		}
	}
	r := decide(req)
	delay := m.chunkDelay
	if r.slow {
		delay = m.slowDelay
	}
	for _, piece := range r.chunks() {
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
		onChunk(service.ModelChunk{Role: service.RoleModel, Content: []service.Part{service.TextPart(piece)}})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	msg := r.message()
	if r.toolRequest != nil {
		onChunk(service.ModelChunk{Role: service.RoleModel, Content: []service.Part{{ToolRequest: r.toolRequest}}})
	}
	return &service.ModelResponse{Message: msg, FinishReason: service.FinishStop}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reply is what the demo model decided to say.
type reply struct {
	text        string
	pieces      []string // explicit stream pieces (the slow answer); else word groups of text
	slow        bool
	toolRequest *service.ToolRequest
}

// chunks splits the text into the pieces streamed to the client; their
// concatenation is exactly the text.
func (r reply) chunks() []string {
	if r.pieces != nil {
		return r.pieces
	}
	const wordsPerChunk = 3
	words := strings.SplitAfter(r.text, " ")
	var out []string
	for i := 0; i < len(words); i += wordsPerChunk {
		end := min(i+wordsPerChunk, len(words))
		if piece := strings.Join(words[i:end], ""); piece != "" {
			out = append(out, piece)
		}
	}
	return out
}

func (r reply) message() service.Message {
	msg := service.Message{Role: service.RoleModel}
	if r.text != "" {
		msg.Content = append(msg.Content, service.TextPart(r.text))
	}
	if r.toolRequest != nil {
		tr := *r.toolRequest
		msg.Content = append(msg.Content, service.Part{ToolRequest: &tr})
	}
	return msg
}

// helpText is the answer to anything the demo model does not understand.
const helpText = "I'm the Holdpoint demo banking assistant. I can transfer money once you approve it: " +
	`try "Transfer $50 to account 12345". Ask me to "Prepare my yearly statement" for a long, streamed answer.`

var statementRE = regexp.MustCompile(`(?i)\b(yearly|annual)\s+statement\b`)

// decide is the demo model's whole policy: a pure function of the request.
func decide(req *service.ModelRequest) reply {
	last := lastConversationMessage(req.Messages)
	if last == nil {
		return reply{text: helpText}
	}
	switch last.Role {
	case service.RoleTool:
		return answerToolResults(req, *last)
	case service.RoleUser:
		return answerUser(req, last.Text())
	default:
		return reply{text: helpText}
	}
}

func lastConversationMessage(msgs []service.Message) *service.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != service.RoleSystem {
			return &msgs[i]
		}
	}
	return nil
}

func answerUser(req *service.ModelRequest, text string) reply {
	if statementRE.MatchString(text) {
		return statementReply()
	}
	t, ok := parseTransfer(text)
	if !ok {
		return reply{text: helpText}
	}
	if !offers(req, ToolUserApproval) || !offers(req, ToolTransferMoney) {
		return reply{text: "I can't move money here: I have no way to ask for your approval and execute a transfer."}
	}
	input, _ := json.Marshal(approvalInput{Action: ToolTransferMoney, Details: t.details()})
	return reply{
		text: fmt.Sprintf("I need your approval before I transfer %s to account %s.", formatMoney(t.amount), t.account),
		toolRequest: &service.ToolRequest{
			Name:  ToolUserApproval,
			Ref:   newRef(req, ToolUserApproval),
			Input: input,
		},
	}
}

// answerToolResults reacts to the newest tool message: an approval decision
// or a transfer result.
func answerToolResults(req *service.ModelRequest, msg service.Message) reply {
	for _, p := range msg.Content {
		tr := p.ToolResponse
		if tr == nil {
			continue
		}
		switch tr.Name {
		case ToolUserApproval:
			return answerApproval(req, tr)
		case ToolTransferMoney:
			return answerTransferResult(req, tr)
		}
	}
	return reply{text: helpText}
}

func answerApproval(req *service.ModelRequest, resp *service.ToolResponse) reply {
	t, ok := approvedTransfer(req, resp.Ref)
	if !ok {
		return reply{text: "I could not find the transfer you answered, so nothing was transferred. " + helpText}
	}
	var out struct {
		Approved bool   `json:"approved"`
		Feedback string `json:"feedback"`
	}
	_ = json.Unmarshal(resp.Output, &out)
	if !out.Approved {
		text := fmt.Sprintf("Cancelled: the transfer of %s to account %s was not executed.", formatMoney(t.amount), t.account)
		if fb := strings.TrimSpace(out.Feedback); fb != "" {
			text += fmt.Sprintf(" Your feedback: %q.", fb)
		}
		return reply{text: text}
	}
	input, _ := json.Marshal(transferInput{Amount: &t.amount, ToAccount: t.account})
	return reply{
		text: fmt.Sprintf("Approved. Transferring %s to account %s.", formatMoney(t.amount), t.account),
		toolRequest: &service.ToolRequest{
			Name:  ToolTransferMoney,
			Ref:   newRef(req, ToolTransferMoney),
			Input: input,
		},
	}
}

func answerTransferResult(req *service.ModelRequest, resp *service.ToolResponse) reply {
	var out transferOutput
	_ = json.Unmarshal(resp.Output, &out)
	what := "the transfer"
	var in transferInput
	if raw, ok := findToolRequest(req.Messages, ToolTransferMoney, resp.Ref); ok && json.Unmarshal(raw, &in) == nil && in.Amount != nil {
		what = fmt.Sprintf("%s to account %s", formatMoney(*in.Amount), in.ToAccount)
	}
	if !out.Success {
		return reply{text: fmt.Sprintf("Sorry, %s failed; no money was moved.", what)}
	}
	return reply{text: fmt.Sprintf("Done: transferred %s (transaction %s).", what, out.TransactionID)}
}

// approvedTransfer finds the transfer an approval answered: the details of
// the userApproval request with that ref, else the newest transfer the user
// asked for.
func approvedTransfer(req *service.ModelRequest, ref string) (transfer, bool) {
	if raw, ok := findToolRequest(req.Messages, ToolUserApproval, ref); ok {
		var in approvalInput
		if json.Unmarshal(raw, &in) == nil {
			if t, ok := parseTransfer(in.Details); ok {
				return t, true
			}
		}
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == service.RoleUser {
			if t, ok := parseTransfer(m.Text()); ok {
				return t, true
			}
		}
	}
	return transfer{}, false
}

// findToolRequest returns the input of the newest model request for the tool
// with that ref (any ref when ref is empty).
func findToolRequest(msgs []service.Message, name, ref string) (json.RawMessage, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != service.RoleModel {
			continue
		}
		for _, p := range msgs[i].Content {
			if tr := p.ToolRequest; tr != nil && tr.Name == name && (ref == "" || tr.Ref == ref) {
				return tr.Input, true
			}
		}
	}
	return nil, false
}

func offers(req *service.ModelRequest, tool string) bool {
	for _, t := range req.Tools {
		if t.Name == tool {
			return true
		}
	}
	return false
}

// newRef names a tool request after its position in the conversation:
// deterministic, and distinct from every earlier request of the session.
func newRef(req *service.ModelRequest, tool string) string {
	return fmt.Sprintf("%s-%d", tool, len(req.Messages))
}

// approvalInput is userApproval's input.
type approvalInput struct {
	Action  string `json:"action"`
	Details string `json:"details"`
}

// transfer is a transfer the user asked for.
type transfer struct {
	amount  float64
	account string
}

func (t transfer) details() string {
	return fmt.Sprintf("Transfer %s to account %s", formatMoney(t.amount), t.account)
}

// transferRE matches requests like "Transfer $50 to account 12345", "send 20
// dollars to 555-1" and the approval details "Transfer $50.00 to account
// 12345".
var transferRE = regexp.MustCompile(`(?i)\b(?:transfer|send|pay|wire|move)\s+(?:of\s+)?(?:\$\s*)?([0-9][0-9,]*(?:\.[0-9]+)?)\s*(?:\$|usd|dollars?)?\s+(?:to|into)\s+(?:my\s+|the\s+)?(?:account\s*(?:number\s*|no\.?\s*)?)?#?\s*([A-Za-z0-9][A-Za-z0-9-]*)`)

func parseTransfer(text string) (transfer, bool) {
	m := transferRE.FindStringSubmatch(text)
	if m == nil {
		return transfer{}, false
	}
	amount, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil || amount <= 0 || math.IsInf(amount, 0) {
		return transfer{}, false
	}
	account := strings.TrimRight(m[2], "-")
	if !strings.ContainsAny(account, "0123456789") {
		return transfer{}, false
	}
	return transfer{amount: math.Round(amount*100) / 100, account: account}, true
}

// formatMoney formats dollars as $1,234.50.
func formatMoney(amount float64) string {
	cents := int64(math.Round(amount * 100))
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	whole := strconv.FormatInt(cents/100, 10)
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return fmt.Sprintf("%s$%s.%02d", sign, b.String(), cents%100)
}

var months = []string{"January", "February", "March", "April", "May", "June", "July",
	"August", "September", "October", "November", "December"}

// statementChunkCount is how many chunks the slow statement answer streams.
const statementChunkCount = 40

// statementReply is the deliberately slow answer (40 chunks) used to try
// detached turns and abort.
func statementReply() reply {
	pieces := []string{"Preparing your yearly statement. "}
	for _, m := range months {
		pieces = append(pieces, m+": collecting transactions. ", m+": reconciling. ", m+": done. ")
	}
	pieces = append(pieces, "All 12 months reconciled. ", "Your yearly statement is ready: ", "12 monthly summaries, no discrepancies found.")
	return reply{text: strings.Join(pieces, ""), pieces: pieces, slow: true}
}
