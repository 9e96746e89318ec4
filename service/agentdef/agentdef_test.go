package agentdef_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/holdpoint/holdpoint/service/agentdef"
	"github.com/holdpoint/holdpoint/service/demo"
)

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func mustParse(t *testing.T, src []byte) *agentdef.Definition {
	t.Helper()
	d, err := agentdef.Parse(src)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

// jsonEqual fails unless got and want are the same JSON value.
func jsonEqual(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// accepts reports whether doc matches schema.
func accepts(t *testing.T, schema json.RawMessage, doc string) bool {
	t.Helper()
	s, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("urn:test", s); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("urn:test")
	if err != nil {
		t.Fatalf("schema %s does not compile: %v", schema, err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v) == nil
}

// objectSchema is the part of a JSON Schema the tests look at.
type objectSchema struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

func object(t *testing.T, raw json.RawMessage) objectSchema {
	t.Helper()
	var s objectSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%v in %s", err, raw)
	}
	return s
}

func TestParsePromptBanking(t *testing.T) {
	t.Parallel()
	d, err := agentdef.ParsePrompt(readFile(t, "testdata/banking.prompt"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != demo.BankingAgentName || d.Model != "demo" || d.Description != "Banking assistant that asks before moving money." {
		t.Errorf("name, model, description = %q, %q, %q", d.Name, d.Model, d.Description)
	}
	if d.System != demo.BankingSystemPrompt {
		t.Errorf("System = %q, want the seed's %q", d.System, demo.BankingSystemPrompt)
	}
	jsonEqual(t, "Config", d.Config, `{"temperature": 0}`)
	if want := []string{demo.ToolUserApproval, demo.ToolTransferMoney}; !slices.Equal(d.Tools, want) {
		t.Errorf("Tools = %q, want %q", d.Tools, want)
	}
	if d.MaxToolRounds != 0 || d.Resume != "session" {
		t.Errorf("MaxToolRounds, Resume = %d, %q, want 0, session", d.MaxToolRounds, d.Resume)
	}

	if len(d.Interrupts) != 1 {
		t.Fatalf("Interrupts = %+v, want one", d.Interrupts)
	}
	it := d.Interrupts[0]
	if it.Name != "userApproval" || it.Description != "Ask the user for approval before a sensitive action." || it.ExpiresAfter != 24*time.Hour {
		t.Errorf("interrupt = %+v", it)
	}
	jsonEqual(t, "OnExpire", it.OnExpire, `{"approved": false, "feedback": "no answer within a day"}`)
	in := object(t, it.Input)
	if in.Type != "object" || !slices.Equal(in.Required, []string{"action", "details"}) || len(in.Properties) != 2 {
		t.Errorf("interrupt input schema = %s", it.Input)
	}
	jsonEqual(t, "input.properties.action", in.Properties["action"], `{"type": "string"}`)
	out := object(t, it.Output)
	if out.Type != "object" || !slices.Equal(out.Required, []string{"approved"}) {
		t.Errorf("interrupt output schema = %s: want approved required, feedback optional", it.Output)
	}
	if _, ok := out.Properties["feedback"]; !ok {
		t.Errorf("interrupt output schema = %s: no feedback property", it.Output)
	}
	for doc, want := range map[string]bool{
		`{"approved": true}`:                    true,
		`{"approved": false, "feedback": "no"}`: true,
		`{"feedback": "no"}`:                    false,
		`{"approved": "yes"}`:                   false,
		`{"approved": true, "feedback": 3}`:     false,
	} {
		if got := accepts(t, it.Output, doc); got != want {
			t.Errorf("output schema accepts %s = %v, want %v", doc, got, want)
		}
	}

	if len(d.HTTPTools) != 1 {
		t.Fatalf("HTTPTools = %+v, want one", d.HTTPTools)
	}
	tool := d.HTTPTools[0]
	if tool.Name != "transferMoney" || tool.Description != "Transfer money to a specified account." ||
		tool.URL != "https://bank.example.com/tools/transfer" || tool.Timeout != 10*time.Second || tool.Approval != nil {
		t.Errorf("http tool = %+v", tool)
	}
	jsonEqual(t, "transferMoney input", tool.Input, `{"type": "object",
		"properties": {"amount": {"type": "number"}, "toAccount": {"type": "string"}},
		"required": ["amount", "toAccount"]}`)
	jsonEqual(t, "transferMoney output", tool.Output, `{"type": "object",
		"properties": {"success": {"type": "boolean"}, "transactionId": {"type": "string"}},
		"required": ["success", "transactionId"]}`)
}

func TestParsePromptFull(t *testing.T) {
	t.Parallel()
	d := mustParse(t, readFile(t, "testdata/full.prompt"))
	if d.Name != "support-agent_2" || d.Description != "Support assistant.\nAsks a manager before refunds.\n" || d.Model != "googleai/gemini-2.5-flash" {
		t.Errorf("name, description, model = %q, %q, %q", d.Name, d.Description, d.Model)
	}
	if want := "You are the support assistant of Acme.\nBe kind."; d.System != want {
		t.Errorf("System = %q, want %q", d.System, want)
	}
	jsonEqual(t, "Config", d.Config, `{"temperature": 0.2, "maxOutputTokens": 1024, "stopSequences": ["END"]}`)
	if want := []string{"askManager", "refund"}; !slices.Equal(d.Tools, want) {
		t.Errorf("Tools = %q, want %q (pickOption declared, not offered)", d.Tools, want)
	}
	if d.MaxToolRounds != 8 || d.Resume != "latest" {
		t.Errorf("MaxToolRounds, Resume = %d, %q", d.MaxToolRounds, d.Resume)
	}
	if len(d.Interrupts) != 2 || len(d.HTTPTools) != 1 {
		t.Fatalf("got %d interrupts and %d HTTP tools", len(d.Interrupts), len(d.HTTPTools))
	}
	ask := d.Interrupts[0]
	if ask.Input != nil || ask.ExpiresAfter != 0 || ask.OnExpire != nil {
		t.Errorf("askManager = %+v: want no input, no deadline", ask)
	}
	jsonEqual(t, "askManager output (JSON Schema, as written)", ask.Output, `{"type": "object",
		"properties": {"decision": {"type": "string", "enum": ["approve", "deny"]}, "note": {"type": "string", "maxLength": 500}},
		"required": ["decision"], "additionalProperties": false}`)
	// A Picoschema property may be named like a JSON Schema keyword.
	pick := object(t, d.Interrupts[1].Input)
	if !slices.Equal(pick.Required, []string{"options", "required"}) {
		t.Errorf("pickOption input = %s", d.Interrupts[1].Input)
	}
	jsonEqual(t, "pickOption input.required", pick.Properties["required"], `{"type": "boolean", "description": "whether the user must answer"}`)
	jsonEqual(t, "pickOption input.options", pick.Properties["options"], `{"type": "array", "items": {"type": "string"}}`)

	refund := d.HTTPTools[0]
	if refund.URL != "http://refunds.internal.example:8080/v1/refund?source=agent" || refund.Timeout != time.Minute || refund.Approval == nil || *refund.Approval != (agentdef.Approval{}) {
		t.Errorf("refund = %+v", refund)
	}
	for doc, want := range map[string]bool{
		`{"orderId": "o1", "amount": 5, "reason": "late", "lines": [{"sku": "a", "qty": 1}]}`:   true,
		`{"orderId": "o1", "amount": 5, "reason": "never", "lines": []}`:                        false,
		`{"orderId": "o1", "amount": 5, "reason": "late", "lines": [{"sku": "a", "qty": 1.5}]}`: false,
	} {
		if got := accepts(t, refund.Input, doc); got != want {
			t.Errorf("refund input %s accepts %s = %v, want %v", refund.Input, doc, got, want)
		}
	}
	jsonEqual(t, "refund output", refund.Output, `{"$schema": "https://json-schema.org/draft/2020-12/schema"}`)
}

func TestParseJSONMinimal(t *testing.T) {
	t.Parallel()
	d, err := agentdef.ParseJSON(readFile(t, "testdata/minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.System != "Say hi, then ask {{nobody}} to confirm." {
		t.Errorf("System = %q: the JSON form's system is not a template", d.System)
	}
	if !slices.Equal(d.Tools, []string{"confirm"}) || d.Resume != "session" || d.Name != "" || d.Config != nil {
		t.Errorf("definition = %+v", d)
	}
	jsonEqual(t, "confirm output", d.Interrupts[0].Output, `{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}`)
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"testdata/banking.prompt", "testdata/full.prompt", "testdata/minimal.json", "testdata/payments.prompt"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := mustParse(t, readFile(t, name))
			out, err := agentdef.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			back, err := agentdef.ParseJSON(out)
			if err != nil {
				t.Fatalf("ParseJSON(Marshal(d)): %v\n%s", err, out)
			}
			if !reflect.DeepEqual(back, d) {
				t.Errorf("ParseJSON(Marshal(d)) = %+v\nwant %+v\nJSON %s", back, d, out)
			}
			again, err := agentdef.Marshal(back)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("Marshal is not stable: %v\n%s\n%s", err, out, again)
			}
		})
	}
}

func TestMarshalForm(t *testing.T) {
	t.Parallel()
	d := mustParse(t, readFile(t, "testdata/banking.prompt"))
	out, err := agentdef.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var form struct {
		Name      string   `json:"name"`
		System    string   `json:"system"`
		Tools     []string `json:"tools"`
		Holdpoint struct {
			Interrupts []struct {
				ExpiresAfter string `json:"expiresAfter"`
				Output       struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"output"`
			} `json:"interrupts"`
			HTTPTools []struct {
				Timeout string `json:"timeout"`
			} `json:"httpTools"`
		} `json:"holdpoint"`
	}
	if err := json.Unmarshal(out, &form); err != nil {
		t.Fatal(err)
	}
	if form.Name != "bankingAgent" || form.System != demo.BankingSystemPrompt || len(form.Tools) != 2 ||
		form.Holdpoint.Interrupts[0].ExpiresAfter != "24h" || form.Holdpoint.HTTPTools[0].Timeout != "10s" {
		t.Errorf("JSON form = %s", out)
	}
	jsonEqual(t, "output schema", form.Holdpoint.Interrupts[0].Output.Schema, string(d.Interrupts[0].Output))

	// No tools offered: "tools" stays, empty, so that it does not read back
	// as every declared tool.
	d.Tools = nil
	out, err = agentdef.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"tools":[]`)) {
		t.Errorf("JSON form without tools = %s", out)
	}
	back, err := agentdef.ParseJSON(out)
	if err != nil || back.Tools != nil {
		t.Errorf("ParseJSON: %v, Tools = %q, want none", err, back.Tools)
	}

	if _, err := agentdef.Marshal(&agentdef.Definition{Name: "x"}); err == nil {
		t.Error("Marshal of a definition without a model: no error")
	}
	if _, err := agentdef.Marshal(nil); err == nil {
		t.Error("Marshal(nil): no error")
	}
}

func TestParsePicksForm(t *testing.T) {
	t.Parallel()
	prompt := readFile(t, "testdata/banking.prompt")
	fromPrompt, err := agentdef.ParsePrompt(prompt)
	if err != nil {
		t.Fatal(err)
	}
	js, err := agentdef.Marshal(fromPrompt)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string][]byte{
		"prompt":                  prompt,
		"prompt after blank line": append([]byte("\n"), prompt...),
		"json":                    js,
		"json after white space":  append([]byte(" \r\n\t"), js...),
		"json after a BOM":        append([]byte("\ufeff\n"), js...),
	} {
		d, err := agentdef.Parse(src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(d, fromPrompt) {
			t.Errorf("%s: Parse = %+v, want %+v", name, d, fromPrompt)
		}
	}
	// Each form's errors show which parser ran.
	if _, err := agentdef.Parse([]byte(`{"model": `)); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf(`Parse("{...") = %v, want a JSON error`, err)
	}
	if _, err := agentdef.Parse([]byte("model: demo\n")); err == nil || !strings.Contains(err.Error(), "missing front matter") {
		t.Errorf(`Parse("model: demo") = %v, want a .prompt error`, err)
	}
}

func TestSchemaForms(t *testing.T) {
	t.Parallel()
	const want = `{"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"type": "string"}}, "required": ["ok"]}`
	prompt := func(schema string) string {
		return "---\nmodel: demo\nholdpoint:\n  interrupts:\n    - name: ask\n      output:\n        schema:\n" + schema + "---\nHi.\n"
	}
	for name, src := range map[string]string{
		"Picoschema in .prompt": prompt("          ok: boolean\n          note?: string\n"),
		"JSON Schema in .prompt": prompt("          type: object\n          properties:\n            ok: {type: boolean}\n" +
			"            note: {type: string}\n          required: [ok]\n"),
		"JSON Schema flow style in .prompt": prompt(`          {"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"type": "string"}}, "required": ["ok"]}` + "\n"),
		"Picoschema in JSON":                `{"model": "demo", "holdpoint": {"interrupts": [{"name": "ask", "output": {"schema": {"ok": "boolean", "note?": "string"}}}]}}`,
		"JSON Schema in JSON":               `{"model": "demo", "holdpoint": {"interrupts": [{"name": "ask", "output": {"schema": ` + want + `}}]}}`,
		"JSON Schema with only properties": prompt("          properties:\n            ok: {type: boolean}\n" +
			"            note: {type: string}\n          required: [ok]\n"),
	} {
		d, err := agentdef.Parse([]byte(src))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		out := d.Interrupts[0].Output
		for doc, want := range map[string]bool{`{"ok": true}`: true, `{"ok": true, "note": "n"}`: true, `{"note": "n"}`: false, `{"ok": 1}`: false} {
			if got := accepts(t, out, doc); got != want {
				t.Errorf("%s: schema %s accepts %s = %v, want %v", name, out, doc, got, want)
			}
		}
		if strings.HasPrefix(name, "JSON Schema in") {
			jsonEqual(t, name, out, want)
		}
	}

	// Scalars, enums, nested objects and wildcards of Picoschema.
	d := mustParse(t, []byte(prompt("          n: integer, a count\n          color(enum): [red, green]\n"+
		"          address(object):\n            city: string\n          (*): string\n")))
	jsonEqual(t, "Picoschema", d.Interrupts[0].Output, `{"type": "object",
		"properties": {"n": {"type": "integer", "description": "a count"}, "color": {"enum": ["red", "green"]},
			"address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
		"required": ["address", "color", "n"], "additionalProperties": {"type": "string"}}`)
	d = mustParse(t, []byte(prompt("          string\n")))
	jsonEqual(t, "scalar Picoschema", d.Interrupts[0].Output, `{"type": "string"}`)
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	const head = "---\nmodel: demo\n---\n"
	for tpl, want := range map[string]string{
		"Plain text.":                              "Plain text.",
		"\n\n  Indented, after blank lines.\n\n":   "Indented, after blank lines.",
		"{{role \"system\"}}\nSystem text.":        "System text.",
		"Unknown {{who}}variables are empty.":      "Unknown variables are empty.",
		"{{! a comment }}Kept {{json \"q\"}}":      `Kept "q"`,
		"{{#each this}}nothing to repeat{{/each}}": "",
		"{{role \"system\"}}a{{role \"system\"}}b": "ab",
		"Handlebars: \\{{literal}}":                "Handlebars: {{literal}}",
		"{{log \"to nowhere\"}}Logged nothing.":    "Logged nothing.",
		"":                                         "",
	} {
		d, err := agentdef.ParsePrompt([]byte(head + tpl))
		if err != nil {
			t.Errorf("%q: %v", tpl, err)
			continue
		}
		if d.System != want {
			t.Errorf("%q: System = %q, want %q", tpl, d.System, want)
		}
	}
	// No line break after the closing ---.
	d, err := agentdef.ParsePrompt([]byte("---\nmodel: demo\n---"))
	if err != nil || d.System != "" || d.Model != "demo" {
		t.Errorf("front matter only: %+v, %v", d, err)
	}
}

// TestDocExample keeps the example of the package documentation the same
// as testdata/banking.prompt.
func TestDocExample(t *testing.T) {
	t.Parallel()
	doc := string(readFile(t, "doc.go"))
	_, after, ok := strings.Cut(doc, "// This is the demo banking agent:\n//\n")
	if !ok {
		t.Fatal("doc.go has no banking example")
	}
	var b strings.Builder
	for line := range strings.Lines(after) {
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			break
		}
		b.WriteString(code)
	}
	if want := string(readFile(t, "testdata/banking.prompt")); b.String() != want {
		t.Errorf("the example of doc.go:\n%s\ndiffers from testdata/banking.prompt:\n%s", b.String(), want)
	}
}
