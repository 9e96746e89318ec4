package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/internal/wait"
	"github.com/holdpoint/holdpoint/service/protocol"
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
	// answer decides the reply (nil: decide, the banking assistant's).
	answer func(*protocol.ModelRequest) reply
}

// NewModel returns the demo model.
func NewModel() protocol.Model {
	m := &Model{chunkDelay: 30 * time.Millisecond, slowDelay: 100 * time.Millisecond}
	m.toolDelay, m.toolDelayErr = toolDelayFromEnv()
	return m
}

// Name returns "demo".
func (m *Model) Name() string { return ModelName }

// Generate answers req: it streams the answer's text in chunks, then its
// tool request if any, and returns the whole message. It stops early with
// ctx's error when ctx ends.
func (m *Model) Generate(ctx context.Context, req *protocol.ModelRequest, onChunk func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	if last := lastConversationMessage(req.Messages); last != nil && last.Role == protocol.RoleTool {
		if m.toolDelayErr != nil {
			return nil, m.toolDelayErr
		}
		// The window after a tool ran and before the turn moves on: the
		// one in which a crash tests whether a takeover runs it again.
		if err := wait.Sleep(ctx, m.toolDelay); err != nil {
			return nil, err
		}
	}
	answer := m.answer
	if answer == nil {
		answer = decide
	}
	r := answer(req)
	delay := m.chunkDelay
	if r.slow {
		delay = m.slowDelay
	}
	pieces := r.chunks()
	for i, piece := range pieces {
		if i == len(pieces)/2 && r.gate != "" {
			if err := waitGate(ctx, r.gate); err != nil {
				return nil, err
			}
		}
		if err := wait.Sleep(ctx, delay); err != nil {
			return nil, err
		}
		onChunk(protocol.ModelChunk{Role: protocol.RoleModel, Content: []protocol.Part{protocol.TextPart(piece)}})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	msg := r.message()
	for _, tr := range r.toolRequests {
		onChunk(protocol.ModelChunk{Role: protocol.RoleModel, Content: []protocol.Part{{ToolRequest: tr}}})
	}
	return &protocol.ModelResponse{Message: msg, FinishReason: protocol.FinishStop}, nil
}

// reply is what the demo model decided to say.
type reply struct {
	text   string
	pieces []string // explicit stream pieces (the slow answer); else word groups of text
	slow   bool
	// gate, when HOLDPOINT_DEMO_STREAM_GATES is set, holds the stream
	// half way until the gate's file exists (see waitGate).
	gate         string
	toolRequests []*protocol.ToolRequest
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

func (r reply) message() protocol.Message {
	msg := protocol.Message{Role: protocol.RoleModel}
	if r.text != "" {
		msg.Content = append(msg.Content, protocol.TextPart(r.text))
	}
	for _, req := range r.toolRequests {
		tr := *req
		msg.Content = append(msg.Content, protocol.Part{ToolRequest: &tr})
	}
	return msg
}

// helpText is the answer to anything the demo model does not understand.
const helpText = "I'm the Holdpoint demo banking assistant. I can transfer money once you approve it: " +
	`try "Transfer $50 to account 12345", "Could you send €20 to my savings account and $15.50 to Bob?" ` +
	`(one approval per transfer), or "Transfer $25,000 to account 777" (over the daily limit, confirmed twice). ` +
	`Ask me to "Prepare my yearly statement" for a long, streamed answer.`

// maxTransfersPerMessage bounds the transfers (and approvals) one message
// may ask for.
const maxTransfersPerMessage = 10

var statementRE = regexp.MustCompile(`(?i)\b(yearly|annual)\s+statement\b`)

// decide is the demo model's whole policy: a pure function of the request.
func decide(req *protocol.ModelRequest) reply {
	last := lastConversationMessage(req.Messages)
	if last == nil {
		return reply{text: helpText}
	}
	switch last.Role {
	case protocol.RoleTool:
		return answerToolResults(req, *last)
	case protocol.RoleUser:
		return answerUser(req, last.Text())
	default:
		return reply{text: helpText}
	}
}

func lastConversationMessage(msgs []protocol.Message) *protocol.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != protocol.RoleSystem {
			return &msgs[i]
		}
	}
	return nil
}

// answerUser asks for one approval per transfer the message asks for, all
// in one answer.
func answerUser(req *protocol.ModelRequest, text string) reply {
	if statementRE.MatchString(text) {
		r := statementReply()
		if m := gateRE.FindStringSubmatch(text); m != nil {
			r.gate = m[1]
		}
		return r
	}
	ts := parseTransfers(text)
	if len(ts) == 0 {
		return reply{text: helpText}
	}
	if len(ts) > maxTransfersPerMessage {
		return reply{text: fmt.Sprintf("That is %d transfers in one message; I take at most %d at a time.", len(ts), maxTransfersPerMessage)}
	}
	if !offers(req, ToolUserApproval) || !offers(req, ToolTransferMoney) {
		return reply{text: "I can't move money here: I have no way to ask for your approval and execute a transfer."}
	}
	for _, t := range ts {
		if t.currency != currencyUSD && !toolTakes(req, ToolTransferMoney, "currency") {
			return reply{text: fmt.Sprintf("I can only transfer dollars here: this transferMoney takes no currency, so I did not ask to transfer %s.", t.summary())}
		}
	}
	r := reply{}
	var what []string
	for i, t := range ts {
		input, _ := json.Marshal(approvalInput{Action: ToolTransferMoney, Details: t.details()})
		r.toolRequests = append(r.toolRequests, &protocol.ToolRequest{Name: ToolUserApproval, Ref: newRef(req, ToolUserApproval, i), Input: input})
		what = append(what, t.summary())
	}
	if len(ts) == 1 {
		r.text = fmt.Sprintf("I need your approval before I transfer %s.", what[0])
	} else {
		r.text = fmt.Sprintf("I need your approval for each of these %d transfers: %s.", len(ts), strings.Join(what, "; "))
	}
	return r
}

// answerToolResults reacts to the newest tool message: approval decisions
// (an approved transfer is executed, a denied one cancelled) and transfer
// results, in the order of the message.
func answerToolResults(req *protocol.ModelRequest, msg protocol.Message) reply {
	var r reply
	var approved, sentences []string
	for _, p := range msg.Content {
		tr := p.ToolResponse
		if tr == nil {
			continue
		}
		switch tr.Name {
		case ToolUserApproval:
			t, ok, out := decision(req, tr)
			switch {
			case !ok:
				sentences = append(sentences, "I could not find the transfer you answered, so nothing was transferred.")
			case !out.Approved:
				s := fmt.Sprintf("Cancelled: the transfer of %s was not executed.", t.summary())
				if fb := strings.TrimSpace(out.Feedback); fb != "" {
					s += fmt.Sprintf(" Your feedback: %q.", fb)
				}
				sentences = append(sentences, s)
			default:
				in := transferInput{Amount: &t.amount, ToAccount: t.account}
				if t.currency != currencyUSD {
					in.Currency = t.currency // dollars unless it says otherwise
				}
				input, _ := json.Marshal(in)
				r.toolRequests = append(r.toolRequests, &protocol.ToolRequest{
					Name: ToolTransferMoney, Ref: newRef(req, ToolTransferMoney, len(r.toolRequests)), Input: input,
				})
				approved = append(approved, t.summary())
			}
		case ToolTransferMoney:
			sentences = append(sentences, transferResult(req, tr))
		}
	}
	if len(approved) > 0 {
		lead := fmt.Sprintf("Approved. Transferring %s.", approved[0])
		if len(approved) > 1 {
			lead = fmt.Sprintf("Approved. Transferring %s.", strings.Join(approved, "; "))
		}
		sentences = append([]string{lead}, sentences...)
	}
	if len(sentences) == 0 {
		return reply{text: helpText}
	}
	r.text = strings.Join(sentences, " ")
	return r
}

// approvalOutput is userApproval's output.
type approvalOutput struct {
	Approved bool   `json:"approved"`
	Feedback string `json:"feedback"`
}

// decision is the transfer an approval answered, and the answer.
func decision(req *protocol.ModelRequest, resp *protocol.ToolResponse) (transfer, bool, approvalOutput) {
	var out approvalOutput
	_ = json.Unmarshal(resp.Output, &out)
	t, ok := approvedTransfer(req, resp.Ref)
	return t, ok, out
}

// transferResult reports one transferMoney result.
func transferResult(req *protocol.ModelRequest, resp *protocol.ToolResponse) string {
	var out transferOutput
	_ = json.Unmarshal(resp.Output, &out)
	what := "the transfer"
	var in transferInput
	if raw, ok := findToolRequest(req.Messages, ToolTransferMoney, resp.Ref); ok && json.Unmarshal(raw, &in) == nil && in.Amount != nil {
		what = transfer{amount: *in.Amount, currency: currencyOf(in.Currency), account: in.ToAccount}.summary()
	}
	if !out.Success {
		return fmt.Sprintf("Sorry, %s failed; no money was moved.", what)
	}
	return fmt.Sprintf("Done: transferred %s (transaction %s).", what, out.TransactionID)
}

// approvedTransfer finds the transfer an approval answered: the details of
// the userApproval request with that ref, else (a single transfer) the
// newest one the user asked for.
func approvedTransfer(req *protocol.ModelRequest, ref string) (transfer, bool) {
	if raw, ok := findToolRequest(req.Messages, ToolUserApproval, ref); ok {
		var in approvalInput
		if json.Unmarshal(raw, &in) == nil {
			if ts := parseTransfers(in.Details); len(ts) == 1 {
				return ts[0], true
			}
		}
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == protocol.RoleUser {
			if ts := parseTransfers(m.Text()); len(ts) == 1 {
				return ts[0], true
			}
		}
	}
	return transfer{}, false
}

// findToolRequest returns the input of the newest model request for the tool
// with that ref (any ref when ref is empty).
func findToolRequest(msgs []protocol.Message, name, ref string) (json.RawMessage, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != protocol.RoleModel {
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

// toolTakes reports whether the offered tool's input schema has the
// property (an agent may offer a transferMoney without a currency).
func toolTakes(req *protocol.ModelRequest, tool, property string) bool {
	for _, t := range req.Tools {
		if t.Name == tool {
			var s struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			_ = json.Unmarshal(t.InputSchema, &s)
			_, ok := s.Properties[property]
			return ok
		}
	}
	return false
}

func offers(req *protocol.ModelRequest, tool string) bool {
	for _, t := range req.Tools {
		if t.Name == tool {
			return true
		}
	}
	return false
}

// newRef names the i-th tool request of an answer after its position in
// the conversation: deterministic, and distinct from every earlier request
// of the session.
func newRef(req *protocol.ModelRequest, tool string, i int) string {
	ref := fmt.Sprintf("%s-%d", tool, len(req.Messages))
	if i > 0 {
		ref = fmt.Sprintf("%s-%d", ref, i+1)
	}
	if os.Getenv(EnvFreshRefs) != "" {
		ref += "-" + strconv.FormatUint(rand.Uint64(), 36)
	}
	return ref
}

// approvalInput is userApproval's input.
type approvalInput struct {
	Action  string `json:"action"`
	Details string `json:"details"`
}

// Currencies the demo understands.
const (
	currencyUSD = "USD"
	currencyEUR = "EUR"
)

// transfer is a transfer the user asked for.
type transfer struct {
	amount   float64
	currency string // USD or EUR
	// account is an account number, "savings" or "checking" (the user's
	// own accounts), or a payee's name.
	account string
}

// destination names where the money goes, as parseTransfers reads it back.
func (t transfer) destination() string {
	switch {
	case t.account == "savings" || t.account == "checking":
		return "your " + t.account + " account"
	case isPayee(t.account):
		return t.account
	default:
		return "account " + t.account
	}
}

// summary is "$50.00 to account 12345".
func (t transfer) summary() string {
	return formatMoney(t.amount, t.currency) + " to " + t.destination()
}

// details is the approval's description, which parseTransfers reads back.
func (t transfer) details() string { return "Transfer " + t.summary() }

func currencyOf(code string) string {
	if strings.EqualFold(code, currencyEUR) {
		return currencyEUR
	}
	return currencyUSD
}

// The grammar of a transfer request. A message asks for transfers when it
// has a verb of moving money; each transfer is then an amount (with or
// without $, €, "dollars", "euros", thousands separators, decimals) sent
// to an account number, one of the user's own accounts, or a payee
// (a capitalized name), e.g. "Could you please send €1,200.50 to acct
// 12345 and $20 to Bob?" or "pay Alice 15 dollars".
var (
	verbRE   = regexp.MustCompile(`(?i)\b(?:transfer|send|pay|wire|move|give)\b`)
	amountRE = `(?i:(\$|€|usd\s*|eur\s*)?([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?)(?:\s*(\$|€|usd|eur|dollars?|euros?|bucks)\b|\s*(\$|€))?)`
	destRE   = `(?:(?i:(?:my|your|the|our)\s+)?(?i:(?:account|acct)\.?\s*(?:number\s*|no\.?\s*)?)#?\s*([A-Za-z0-9][A-Za-z0-9-]*)` +
		`|(?i:(?:my|your|the|our)\s+)?(?i:(savings|checking))(?i:\s+account)?\b` +
		`|#?([0-9][A-Za-z0-9-]*)` +
		`|([A-Z][a-z]+)\b)`
	// "$50 to account 12345"
	toRE = regexp.MustCompile(amountRE + `\s+(?i:to|into)\s+` + destRE)
	// "pay Bob $20"
	payRE = regexp.MustCompile(`(?i:\b(?:pay|send|give)\s+)([A-Z][a-z]+)\s+` + amountRE)
)

// notPayees are capitalized words that are not names.
var notPayees = map[string]bool{"Account": true, "Acct": true, "My": true, "The": true, "Your": true, "Our": true,
	"Savings": true, "Checking": true, "Me": true, "It": true, "Him": true, "Her": true, "Them": true, "Please": true}

func isPayee(s string) bool {
	if s == "" || notPayees[s] || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, r := range s[1:] {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// parseTransfers reads every transfer a message asks for, in order.
func parseTransfers(text string) []transfer {
	verb := verbRE.FindStringIndex(text)
	if verb == nil {
		return nil
	}
	type found struct {
		at int
		t  transfer
	}
	var all []found
	for _, m := range toRE.FindAllStringSubmatchIndex(text, -1) {
		if m[0] < verb[0] {
			continue
		}
		g := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return text[m[2*i]:m[2*i+1]]
		}
		account := ""
		switch {
		case g(5) != "":
			account = strings.TrimRight(g(5), "-")
			if !strings.ContainsAny(account, "0123456789") {
				continue
			}
		case g(6) != "":
			account = strings.ToLower(g(6))
		case g(7) != "":
			account = strings.TrimRight(g(7), "-")
		case isPayee(g(8)):
			account = g(8)
		default:
			continue
		}
		if t, ok := newTransfer(g(1), g(2), g(3)+g(4), account); ok {
			all = append(all, found{m[0], t})
		}
	}
	for _, m := range payRE.FindAllStringSubmatchIndex(text, -1) {
		g := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return text[m[2*i]:m[2*i+1]]
		}
		if !isPayee(g(1)) {
			continue
		}
		if t, ok := newTransfer(g(2), g(3), g(4)+g(5), g(1)); ok {
			all = append(all, found{m[0], t})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at < all[j].at })
	out := make([]transfer, 0, len(all))
	for _, f := range all {
		out = append(out, f.t)
	}
	return out
}

// newTransfer builds a transfer from the parts of a match: the currency
// sign or word before and after the number, and the destination.
func newTransfer(before, number, after, account string) (transfer, bool) {
	amount, err := strconv.ParseFloat(strings.ReplaceAll(number, ",", ""), 64)
	if err != nil || amount <= 0 || amount > 1e12 || math.IsInf(amount, 0) {
		return transfer{}, false
	}
	amount = math.Round(amount*100) / 100
	if amount <= 0 {
		return transfer{}, false
	}
	currency := currencyUSD
	if c := strings.ToLower(strings.TrimSpace(before + after)); strings.Contains(c, "€") || strings.HasPrefix(c, "eur") {
		currency = currencyEUR
	}
	return transfer{amount: amount, currency: currency, account: account}, true
}

// formatMoney formats an amount as $1,234.50 or €1,234.50.
func formatMoney(amount float64, currency string) string {
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
	symbol := "$"
	if currency == currencyEUR {
		symbol = "€"
	}
	return fmt.Sprintf("%s%s%s.%02d", sign, symbol, b.String(), cents%100)
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
