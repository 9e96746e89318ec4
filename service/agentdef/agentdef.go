package agentdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// maxSize bounds a definition: its source, in either form, and its JSON
// form (what [Marshal] returns), so that whatever parses also marshals and
// parses again.
const maxSize = 256 << 10

// Definition is a tenant's agent as the runtime needs it.
type Definition struct {
	// Name is the agent's route name: a letter, then letters, digits, _ or
	// -, 64 at most. It may be empty, when the caller names the agent.
	Name string
	// Description is shown to clients and operators.
	Description string
	// Model names the model that answers, e.g. "googleai/gemini-2.5-flash"
	// or "demo". It is never empty; the caller checks that it is served.
	Model string
	// Config is the model's configuration, a JSON object (nil when absent).
	Config json.RawMessage
	// System is the system prompt: the rendered template of a .prompt file,
	// the "system" member of the JSON form.
	System string
	// Tools are the names the model may call, each a declared interrupt or
	// HTTP tool: the `tools` key, or every declared one (interrupts first,
	// in their order) when it is absent.
	Tools []string
	// Interrupts are the questions the model may ask a human.
	Interrupts []Interrupt
	// HTTPTools are the tools the platform runs by calling a URL.
	HTTPTools []HTTPTool
	// MaxToolRounds bounds the model/tool loop of one turn (1 to 50; 0 is
	// the runtime's default).
	MaxToolRounds int
	// Resume says which version of the agent a resumed session runs:
	// "session" (the version the session started with) or "latest".
	Resume string
}

// Interrupt is a declared interrupt: a tool the model requests to ask a
// human, whose answer is the tool's output.
type Interrupt struct {
	// Name is the tool name the model requests.
	Name string
	// Description tells the model when to ask.
	Description string
	// Input is the JSON Schema of what the model sends (nil: anything).
	Input json.RawMessage
	// Output is the JSON Schema of the human's answer; never nil.
	Output json.RawMessage
	// ExpiresAfter is the interrupt's deadline (0: none).
	ExpiresAfter time.Duration
	// OnExpire is the output given for the human when the deadline passes
	// (nil: the interrupt expires unanswered). It matches Output.
	OnExpire json.RawMessage
}

// HTTPTool is a tool the platform runs by POSTing its input to a URL.
type HTTPTool struct {
	// Name is the tool name the model requests.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Input is the JSON Schema of what the model sends; never nil.
	Input json.RawMessage
	// Output is the JSON Schema of what the URL answers; never nil.
	Output json.RawMessage
	// URL is the absolute http(s) URL called. Only its syntax is checked
	// here; the caller applies its policy on where requests may go.
	URL string
	// Timeout bounds one call (10s unless given, 60s at most).
	Timeout time.Duration
	// Approval makes the platform ask a human before a call runs (nil:
	// calls run when the model asks).
	Approval *Approval
}

// Error is a definition error: what is wrong, and where.
type Error struct {
	// Line is the 1-based line of the .prompt file, or 0 when unknown (and
	// always for the JSON form).
	Line int
	// Field is the path of the key at fault, e.g.
	// "holdpoint.httpTools[0].url" ("template" for the template; empty when
	// the fault is the whole source).
	Field string
	// Message says what is wrong.
	Message string
}

// Error formats e as "line 12: holdpoint.httpTools[0].url: must be an
// absolute http(s) URL", leaving out the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Parse parses a definition in either form: the JSON form when the first
// byte other than white space is '{', else a .prompt file.
func Parse(src []byte) (*Definition, error) {
	if bytes.HasPrefix(bytes.TrimLeft(trimBOM(src), " \t\r\n"), []byte("{")) {
		return ParseJSON(src)
	}
	return ParsePrompt(src)
}

// ParsePrompt parses a .prompt file: YAML front matter and a Handlebars
// template, the system prompt. See the package documentation for the
// format. Its errors are *[Error].
func ParsePrompt(src []byte) (*Definition, error) {
	if err := checkSource(src, true); err != nil {
		return nil, err
	}
	d, err := parsePrompt(string(trimBOM(src)))
	if err != nil {
		return nil, err
	}
	if err := checkEncodedSize(d); err != nil {
		return nil, err
	}
	return d, nil
}

// ParseJSON parses the JSON form of a definition:
//
//	{"name", "description", "model", "config", "system", "tools",
//	 "holdpoint": {"interrupts", "httpTools", "maxToolRounds", "resume"}}
//
// whose members are those of the .prompt front matter, with "system" (the
// system prompt, used as is: it is not a template) in place of the
// template. Its errors are *[Error], without lines.
func ParseJSON(src []byte) (*Definition, error) {
	if err := checkSource(src, false); err != nil {
		return nil, err
	}
	root, err := decodeJSON(trimBOM(src))
	if err != nil {
		return nil, err
	}
	b := &builder{}
	d, err := b.definition(root, jsonForm)
	if err != nil {
		return nil, err
	}
	if err := checkEncodedSize(d); err != nil {
		return nil, err
	}
	return d, nil
}

// Marshal returns the JSON form of d, which [ParseJSON] parses back to a
// Definition equal to d when d came from [Parse], [ParsePrompt] or
// [ParseJSON]. It returns an error (an *[Error]) when d is not a valid
// definition.
func Marshal(d *Definition) ([]byte, error) {
	if d == nil {
		return nil, &Error{Message: "no definition"}
	}
	out, err := encode(d)
	if err != nil {
		return nil, err
	}
	if _, err := ParseJSON(out); err != nil {
		return nil, err
	}
	return out, nil
}

// jsonDefinition is the JSON form of a Definition. Tools is always written:
// an absent "tools" would mean every declared tool.
type jsonDefinition struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Model       string          `json:"model"`
	Config      json.RawMessage `json:"config,omitempty"`
	System      string          `json:"system,omitempty"`
	Tools       []string        `json:"tools"`
	Holdpoint   *jsonHoldpoint  `json:"holdpoint,omitempty"`
}

type jsonHoldpoint struct {
	Interrupts    []jsonInterrupt `json:"interrupts,omitempty"`
	HTTPTools     []jsonHTTPTool  `json:"httpTools,omitempty"`
	MaxToolRounds int             `json:"maxToolRounds,omitempty"`
	Resume        string          `json:"resume,omitempty"`
}

type jsonInterrupt struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Input        *jsonSchema     `json:"input,omitempty"`
	Output       *jsonSchema     `json:"output,omitempty"`
	ExpiresAfter string          `json:"expiresAfter,omitempty"`
	OnExpire     json.RawMessage `json:"onExpire,omitempty"`
}

type jsonHTTPTool struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	URL         string      `json:"url"`
	Timeout     string      `json:"timeout,omitempty"`
	Approval    any         `json:"approval,omitempty"` // true or a jsonApproval
	Input       *jsonSchema `json:"input,omitempty"`
	Output      *jsonSchema `json:"output,omitempty"`
}

type jsonApproval struct {
	When      string          `json:"when,omitempty"`
	Scope     string          `json:"scope,omitempty"`
	Approvals int             `json:"approvals,omitempty"`
	AllowEdit bool            `json:"allowEdit,omitempty"`
	Attempts  int             `json:"attempts,omitempty"`
	Escalate  *jsonEscalation `json:"escalate,omitempty"`
}

type jsonEscalation struct {
	After string `json:"after"`
	Scope string `json:"scope"`
}

// encodeApproval writes an approval: nothing when none, true when it is
// the empty policy, else its mapping.
func encodeApproval(a *Approval) any {
	switch {
	case a == nil:
		return nil
	case *a == Approval{}:
		return true
	}
	ja := &jsonApproval{When: a.When, Scope: a.Scope, Approvals: a.Approvals, AllowEdit: a.AllowEdit, Attempts: a.Attempts}
	if a.Escalate != nil {
		ja.Escalate = &jsonEscalation{After: formatDuration(a.Escalate.After), Scope: a.Escalate.Scope}
	}
	return ja
}

type jsonSchema struct {
	Schema json.RawMessage `json:"schema"`
}

func schemaOrNil(s json.RawMessage) *jsonSchema {
	if s == nil {
		return nil
	}
	return &jsonSchema{Schema: s}
}

// encode writes d's JSON form without checking d.
func encode(d *Definition) ([]byte, error) {
	out := jsonDefinition{
		Name:        d.Name,
		Description: d.Description,
		Model:       d.Model,
		Config:      d.Config,
		System:      d.System,
		Tools:       d.Tools,
	}
	if out.Tools == nil {
		out.Tools = []string{}
	}
	hp := jsonHoldpoint{MaxToolRounds: d.MaxToolRounds}
	if d.Resume != resumeSession {
		hp.Resume = d.Resume
	}
	for _, it := range d.Interrupts {
		ji := jsonInterrupt{
			Name:        it.Name,
			Description: it.Description,
			Input:       schemaOrNil(it.Input),
			Output:      schemaOrNil(it.Output),
			OnExpire:    it.OnExpire,
		}
		if it.ExpiresAfter != 0 {
			ji.ExpiresAfter = formatDuration(it.ExpiresAfter)
		}
		hp.Interrupts = append(hp.Interrupts, ji)
	}
	for _, t := range d.HTTPTools {
		jt := jsonHTTPTool{
			Name:        t.Name,
			Description: t.Description,
			URL:         t.URL,
			Approval:    encodeApproval(t.Approval),
			Input:       schemaOrNil(t.Input),
			Output:      schemaOrNil(t.Output),
		}
		if t.Timeout != 0 {
			jt.Timeout = formatDuration(t.Timeout)
		}
		hp.HTTPTools = append(hp.HTTPTools, jt)
	}
	if hp.Interrupts != nil || hp.HTTPTools != nil || hp.MaxToolRounds != 0 || hp.Resume != "" {
		out.Holdpoint = &hp
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, &Error{Message: "cannot be written as JSON: " + oneLine(err.Error())}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// formatDuration writes d as time.Duration does, without the zero minutes
// and seconds: "24h", "1m", "1h30m", "10s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// checkEncodedSize refuses a definition whose JSON form is too large for
// ParseJSON.
func checkEncodedSize(d *Definition) error {
	out, err := encode(d)
	if err != nil {
		return err
	}
	if len(out) > maxSize {
		return &Error{Message: fmt.Sprintf("the definition's JSON form is %d bytes, more than the %d (256 KiB) allowed", len(out), maxSize)}
	}
	return nil
}

// checkSource refuses a source that is too large or not UTF-8.
func checkSource(src []byte, lines bool) error {
	if len(src) > maxSize {
		return &Error{Message: fmt.Sprintf("the definition is %d bytes, more than the %d (256 KiB) allowed", len(src), maxSize)}
	}
	if !utf8.Valid(src) {
		e := &Error{Message: "the definition is not UTF-8 text"}
		if lines {
			for i := 0; i < len(src); {
				r, n := utf8.DecodeRune(src[i:])
				if r == utf8.RuneError && n <= 1 {
					e.Line = 1 + bytes.Count(src[:i], []byte("\n"))
					break
				}
				i += n
			}
		}
		return e
	}
	return nil
}

func trimBOM(src []byte) []byte {
	return bytes.TrimPrefix(src, []byte("\ufeff"))
}

// oneLine joins a multi-line message into one line.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	return strings.Join(lines, "; ")
}
