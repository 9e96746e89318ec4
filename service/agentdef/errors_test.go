package agentdef_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service/agentdef"
)

// banking is testdata/banking.prompt; its lines are numbered in the
// comments of TestPromptErrors.
func banking(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("testdata/banking.prompt")
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// replace replaces the first old in src by new, or fails.
func replace(t *testing.T, src, old, new string) string {
	t.Helper()
	if !strings.Contains(src, old) {
		t.Fatalf("%q is not in the source", old)
	}
	return strings.Replace(src, old, new, 1)
}

// wantError fails unless err is an *Error with line, field and a message
// containing msg.
func wantError(t *testing.T, err error, line int, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want line %d %s: %s", line, field, msg)
	}
	var e *agentdef.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is a %T, not an *Error", err, err)
	}
	if e.Line != line || e.Field != field || !strings.Contains(e.Message, msg) {
		t.Errorf("error = %q (line %d, field %q), want line %d, field %q, message with %q", err, e.Line, e.Field, line, field, msg)
	}
}

func TestPromptErrors(t *testing.T) {
	t.Parallel()
	// testdata/banking.prompt:
	//  1 ---
	//  2 name: bankingAgent
	//  3 description: Banking assistant that asks before moving money.
	//  4 model: demo
	//  5 config:
	//  6   temperature: 0
	//  7 tools: [userApproval, transferMoney]
	//  8 holdpoint:
	//  9   interrupts:
	// 10     - name: userApproval
	// 11       description: Ask the user for approval before a sensitive action.
	// 12       input:
	// 13         schema:
	// 14           action: string
	// 15           details: string
	// 16       output:
	// 17         schema:
	// 18           approved: boolean
	// 19           feedback?: string
	// 20       expiresAfter: 24h
	// 21       onExpire: {approved: false, feedback: "no answer within a day"}
	// 22   httpTools:
	// 23     - name: transferMoney
	// 24       description: Transfer money to a specified account.
	// 25       url: https://bank.example.com/tools/transfer
	// 26       timeout: 10s
	// 27       input:
	// 28         schema:
	// 29           amount: number
	// 30           toAccount: string
	// 31       output:
	// 32         schema:
	// 33           success: boolean
	// 34           transactionId: string
	// 35 ---
	// 36 You are a banking assistant. ...
	const (
		interruptOutput = "      output:\n        schema:\n          approved: boolean\n          feedback?: string\n"
		toolInput       = "      input:\n        schema:\n          amount: number\n          toAccount: string\n"
		toolOutput      = "      output:\n        schema:\n          success: boolean\n          transactionId: string\n"
	)
	type change struct{ old, new string }
	for _, tc := range []struct {
		name  string
		edits []change
		src   string // instead of edits
		line  int
		field string
		msg   string
	}{
		// The front matter.
		{name: "no front matter", src: "model: demo\nHello.\n", line: 1, msg: "missing front matter"},
		{name: "no closing ---", src: "---\nmodel: demo\nHello.\n", line: 1, msg: "missing front matter"},
		{name: "YAML parser error", edits: []change{{"model: demo", "model: [demo"}}, line: 4, msg: "not YAML: did not find expected ',' or ']'"},
		{name: "YAML scanner error", edits: []change{{"description: Banking", "description: a: Banking"}}, line: 3, msg: "not YAML: mapping values are not allowed"},
		{name: "YAML error on the first line", edits: []change{{"name: bankingAgent", "name: a: b"}}, line: 2, msg: "not YAML"},
		{name: "YAML tab", edits: []change{{"  temperature: 0", "\ttemperature: 0"}}, line: 6, msg: "not YAML"},
		// yaml.v3 names the line where the enclosing list starts.
		{name: "YAML bad indentation", edits: []change{{"      url:", "     url:"}}, line: 23, msg: "not YAML"},
		{name: "YAML control character", edits: []change{{"temperature: 0", "temperature: \x01"}}, line: 6, msg: "U+0001"},
		{name: "not a mapping", src: "---\n- model\n---\nHi.\n", line: 2, msg: "must be a YAML mapping"},
		{name: "repeated key", edits: []change{{"model: demo", "model: demo\nmodel: other"}}, line: 5, field: "model", msg: "repeats the key of line 4"},
		{name: "alias", edits: []change{{"model: demo", "model: &m demo\nmodel2: *m"}}, line: 5, field: "model2", msg: "aliases"},
		{name: "unknown key", edits: []change{{"tools: [", "tool: ["}}, line: 7, field: "tool", msg: "unknown front matter key"},
		{name: "dotprompt output", edits: []change{{"holdpoint:", "output:\n  format: json\nholdpoint:"}}, line: 8, field: "output", msg: "not supported"},
		{name: "dotted holdpoint key", edits: []change{{"holdpoint:", "holdpoint.resume: latest\nholdpoint:"}}, line: 8, field: "holdpoint.resume", msg: "under the holdpoint: mapping"},
		{name: "not UTF-8", edits: []change{{"transferMoney.", "transferMoney\xff."}}, line: 36, msg: "not UTF-8"},

		// The standard keys.
		{name: "missing model", edits: []change{{"model: demo\n", ""}}, line: 1, field: "model", msg: "is required"},
		{name: "empty model", edits: []change{{"model: demo", "model: ''"}}, line: 4, field: "model", msg: "must not be empty"},
		{name: "model not a string", edits: []change{{"model: demo", "model: [demo]"}}, line: 4, field: "model", msg: "must be a string"},
		{name: "bad name", edits: []change{{"name: bankingAgent", "name: 9lives"}}, line: 2, field: "name", msg: "not a valid name"},
		{name: "name too long", edits: []change{{"name: bankingAgent", "name: a" + strings.Repeat("b", 64)}}, line: 2, field: "name", msg: "not a valid name"},
		{name: "config not a mapping", edits: []change{{"config:\n  temperature: 0", "config: [0]"}}, line: 5, field: "config", msg: "must be a mapping"},
		{name: "tools entry naming nothing", edits: []change{{"transferMoney]", "transfer]"}}, line: 7, field: "tools[1]", msg: `"transfer" is neither`},
		{name: "tools entry twice", edits: []change{{"transferMoney]", "userApproval]"}}, line: 7, field: "tools[1]", msg: "listed twice"},
		{name: "tools not a list", edits: []change{{"tools: [userApproval, transferMoney]", "tools: userApproval"}}, line: 7, field: "tools", msg: "must be a list"},
		{name: "dotprompt input", edits: []change{{"holdpoint:", "input:\n  default:\n    who: Ada\nholdpoint:"}}, line: 8, field: "input", msg: "no input"},

		// The holdpoint key.
		{name: "unknown holdpoint key", edits: []change{{"  interrupts:", "  interupts:"}}, line: 9, field: "holdpoint.interupts", msg: "unknown key"},
		{name: "unknown interrupt key", edits: []change{{"expiresAfter: 24h", "expireAfter: 24h"}}, line: 20, field: "holdpoint.interrupts[0].expireAfter", msg: "unknown key"},
		{name: "unknown HTTP tool key", edits: []change{{"timeout: 10s", "timeout: 10s\n      method: PUT"}}, line: 27, field: "holdpoint.httpTools[0].method", msg: "unknown key"},
		{name: "unknown schema wrapper key", edits: []change{{"      output:\n        schema:\n          approved", "      output:\n        shema:\n          approved"}}, line: 17, field: "holdpoint.interrupts[0].output.shema", msg: "unknown key"},
		{name: "holdpoint not a mapping", src: "---\nmodel: demo\nholdpoint: [1]\n---\n", line: 3, field: "holdpoint", msg: "must be a mapping"},
		{name: "two tools with one name", edits: []change{{"- name: transferMoney", "- name: userApproval"}}, line: 23, field: "holdpoint.httpTools[0].name", msg: `already the name of holdpoint.interrupts[0]`},
		{name: "two interrupts with one name", edits: []change{{"  httpTools:", "    - name: userApproval\n" + interruptOutput + "  httpTools:"}}, line: 22, field: "holdpoint.interrupts[1].name", msg: "already the name"},
		{name: "tool without name", edits: []change{{"- name: transferMoney\n      description", "- description"}}, line: 23, field: "holdpoint.httpTools[0].name", msg: "is required"},
		{name: "bad tool name", edits: []change{{"- name: transferMoney", "- name: transfer money"}}, line: 23, field: "holdpoint.httpTools[0].name", msg: "not a valid tool name"},
		{name: "interrupt without output", edits: []change{{interruptOutput, ""}}, line: 10, field: "holdpoint.interrupts[0].output", msg: "is required"},
		{name: "interrupt output without schema", edits: []change{{interruptOutput, "      output: {}\n"}}, line: 16, field: "holdpoint.interrupts[0].output.schema", msg: "is required"},
		{name: "HTTP tool without url", edits: []change{{"      url: https://bank.example.com/tools/transfer\n", ""}}, line: 23, field: "holdpoint.httpTools[0].url", msg: "is required"},
		{name: "HTTP tool without input", edits: []change{{toolInput, ""}}, line: 23, field: "holdpoint.httpTools[0].input", msg: "is required"},
		{name: "HTTP tool without output", edits: []change{{toolOutput, ""}}, line: 23, field: "holdpoint.httpTools[0].output", msg: "is required"},
		{name: "relative url", edits: []change{{"url: https://bank.example.com/tools/transfer", "url: /tools/transfer"}}, line: 25, field: "holdpoint.httpTools[0].url", msg: "absolute http(s) URL"},
		{name: "ftp url", edits: []change{{"url: https://", "url: ftp://"}}, line: 25, field: "holdpoint.httpTools[0].url", msg: "absolute http(s) URL"},
		{name: "url without host", edits: []change{{"url: https://bank.example.com/tools/transfer", "url: 'https:///tools'"}}, line: 25, field: "holdpoint.httpTools[0].url", msg: "absolute http(s) URL"},
		{name: "timeout not a duration", edits: []change{{"timeout: 10s", "timeout: 10"}}, line: 26, field: "holdpoint.httpTools[0].timeout", msg: "must be a duration"},
		{name: "timeout over 60s", edits: []change{{"timeout: 10s", "timeout: 61s"}}, line: 26, field: "holdpoint.httpTools[0].timeout", msg: "at most 1m"},
		{name: "timeout zero", edits: []change{{"timeout: 10s", "timeout: 0s"}}, line: 26, field: "holdpoint.httpTools[0].timeout", msg: "more than 0"},
		{name: "approval not a boolean", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: 'yes'"}}, line: 27, field: "holdpoint.httpTools[0].approval", msg: "must be true, false or a mapping"},
		{name: "approval unknown key", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval:\n        quorum: 2"}}, line: 28, field: "holdpoint.httpTools[0].approval.quorum", msg: "unknown key (allowed: when, scope"},
		{name: "approval when does not parse", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval:\n        scope: approve:payments\n        when: 'input.amount >'"}}, line: 29, field: "holdpoint.httpTools[0].approval.when",
			msg: `tool transferMoney: the condition "input.amount >" does not compile: at column 15: Syntax error`},
		{name: "approval when unknown variable", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {when: 'amount > 1000'}"}}, line: 27, field: "holdpoint.httpTools[0].approval.when",
			msg: `tool transferMoney: the condition "amount > 1000" does not compile: at column 1: undeclared reference to 'amount'`},
		{name: "approval when not a boolean", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {when: 'input.amount * 2.0'}"}}, line: 27, field: "holdpoint.httpTools[0].approval.when",
			msg: `tool transferMoney: the condition "input.amount * 2.0" is of type double: a condition must be a boolean`},
		{name: "approval when a string", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {when: 5}"}}, line: 27, field: "holdpoint.httpTools[0].approval.when", msg: "must be a string"},
		{name: "approval when too long", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {when: '" + strings.Repeat("true && ", 130) + "true'}"}}, line: 27, field: "holdpoint.httpTools[0].approval.when", msg: "more than the 1000 allowed"},
		{name: "approvals 0", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {approvals: 0}"}}, line: 27, field: "holdpoint.httpTools[0].approval.approvals", msg: "from 1 to 10"},
		{name: "approvals 11", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {approvals: 11}"}}, line: 27, field: "holdpoint.httpTools[0].approval.approvals", msg: "from 1 to 10"},
		{name: "attempts 21", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {attempts: 21}"}}, line: 27, field: "holdpoint.httpTools[0].approval.attempts", msg: "from 1 to 20"},
		{name: "approval bad scope", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {scope: 'approve payments'}"}}, line: 27, field: "holdpoint.httpTools[0].approval.scope", msg: "must be 1-64 letters"},
		{name: "allowEdit not a boolean", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval: {allowEdit: 'yes'}"}}, line: 27, field: "holdpoint.httpTools[0].approval.allowEdit", msg: "true or false"},
		{name: "escalate without scope", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval:\n        escalate: {after: 30m}"}}, line: 28, field: "holdpoint.httpTools[0].approval.escalate.scope", msg: "is required"},
		{name: "escalate without after", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval:\n        escalate: {scope: lead}"}}, line: 28, field: "holdpoint.httpTools[0].approval.escalate.after", msg: "is required"},
		{name: "escalate after negative", edits: []change{{"timeout: 10s", "timeout: 10s\n      approval:\n        escalate: {after: -5m, scope: lead}"}}, line: 28, field: "holdpoint.httpTools[0].approval.escalate.after", msg: "positive duration"},
		{name: "approval on an interrupt", edits: []change{{"expiresAfter: 24h", "expiresAfter: 24h\n      approval: true"}}, line: 21, field: "holdpoint.interrupts[0].approval", msg: "is for HTTP tools"},
		{name: "expiresAfter not a duration", edits: []change{{"expiresAfter: 24h", "expiresAfter: 1 day"}}, line: 20, field: "holdpoint.interrupts[0].expiresAfter", msg: "positive duration"},
		{name: "expiresAfter negative", edits: []change{{"expiresAfter: 24h", "expiresAfter: -1h"}}, line: 20, field: "holdpoint.interrupts[0].expiresAfter", msg: "positive duration"},
		{name: "onExpire without expiresAfter", edits: []change{{"      expiresAfter: 24h\n", ""}}, line: 20, field: "holdpoint.interrupts[0].onExpire", msg: "needs expiresAfter"},
		{name: "onExpire not matching output", edits: []change{{"{approved: false,", "{approved: 'no',"}}, line: 21, field: "holdpoint.interrupts[0].onExpire", msg: "does not match the output schema: at '/approved': got string, want boolean"},
		{name: "onExpire missing a required key", edits: []change{{"{approved: false, ", "{"}}, line: 21, field: "holdpoint.interrupts[0].onExpire", msg: "approved"},
		{name: "invalid JSON Schema", edits: []change{{"          amount: number\n          toAccount: string\n", "          type: objekt\n"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "not a valid JSON Schema: at '/type': value must be one of"},
		{name: "JSON Schema with a $ref to a file", edits: []change{{"          amount: number\n          toAccount: string\n", "          $ref: file:///etc/passwd\n          type: object\n"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "may only refer to themselves"},
		{name: "Picoschema property named type", edits: []change{{"          amount: number\n", "          type: string\n          amount: number\n"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: `"amount" is not a JSON Schema keyword`},
		{name: "bad Picoschema type", edits: []change{{"amount: number", "amount: money"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "not valid Picoschema: unsupported scalar type 'money'"},
		{name: "bad Picoschema value", edits: []change{{"amount: number", "amount: 5"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "not valid Picoschema"},
		{name: "bad Picoschema enum", edits: []change{{"amount: number", "amount(enum): red"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "not valid Picoschema"},
		{name: "bad Picoschema parenthetical", edits: []change{{"amount: number", "amount(map): string"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "parenthetical types"},
		{name: "Picoschema any at the top", edits: []change{{"          amount: number\n          toAccount: string\n", "          any\n"}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "must describe a type"},
		{name: "resume unknown", edits: []change{{"  httpTools:", "  resume: newest\n  httpTools:"}}, line: 22, field: "holdpoint.resume", msg: `must be "session" or "latest"`},
		{name: "maxToolRounds 0", edits: []change{{"  httpTools:", "  maxToolRounds: 0\n  httpTools:"}}, line: 22, field: "holdpoint.maxToolRounds", msg: "from 1 to 50"},
		{name: "maxToolRounds 51", edits: []change{{"  httpTools:", "  maxToolRounds: 51\n  httpTools:"}}, line: 22, field: "holdpoint.maxToolRounds", msg: "from 1 to 50"},
		{name: "maxToolRounds fraction", edits: []change{{"  httpTools:", "  maxToolRounds: 2.5\n  httpTools:"}}, line: 22, field: "holdpoint.maxToolRounds", msg: "from 1 to 50"},
		{name: "maxToolRounds string", edits: []change{{"  httpTools:", "  maxToolRounds: five\n  httpTools:"}}, line: 22, field: "holdpoint.maxToolRounds", msg: "from 1 to 50"},

		// The template.
		{name: "template does not parse", edits: []change{{"You are", "Line one.\n\nYou are {{#if x}}"}}, line: 38, field: "template", msg: "does not parse"},
		{name: "template unclosed expression", edits: []change{{"You are", "{{role \"system\"}}\nYou {{are"}}, line: 37, field: "template", msg: "does not parse"},
		{name: "template partial", edits: []change{{"You are", "First.\n{{> header}}"}}, line: 37, field: "template", msg: "Partial not found: header"},
		{name: "template user role", edits: []change{{"You are", "{{role \"user\"}}You are"}}, field: "template", msg: `{{role "user"}} is not supported`},
		{name: "template several roles", edits: []change{{"You are", "Before.\n{{role \"system\"}}You are"}}, field: "template", msg: "several roles (user, system)"},
		{name: "template history", edits: []change{{"You are", "{{history}}You are"}}, field: "template", msg: "{{history}} is not supported"},
		{name: "template marker", edits: []change{{"You are", "Hi.\n<<<dotprompt:role:user>>>You are"}}, line: 37, field: "template", msg: "markers are reserved"},
		{name: "template media", edits: []change{{"You are", "{{media url=\"https://x.example/a.png\"}}You are"}}, field: "template", msg: "only text"},

		// Size.
		{name: "over 256 KiB", edits: []change{{"You are", strings.Repeat("x", 256<<10) + "You are"}}, msg: "more than the 262144 (256 KiB) allowed"},
		// Quotes take twice the room in JSON.
		{name: "JSON form over 256 KiB", src: "---\nmodel: demo\n---\n" + strings.Repeat(`"`, 140000), msg: "JSON form is"},
		{name: "too many entries", edits: []change{{"          amount: number\n", manyOptional(1001)}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "more than 1000 entries"},
		{name: "schema too large", edits: []change{{"          amount: number\n", manyOptional(600)}}, line: 28, field: "holdpoint.httpTools[0].input.schema", msg: "is too large"},
		{name: "nested too deep", edits: []change{{"  temperature: 0", "  temperature: " + strings.Repeat("[", 70) + strings.Repeat("]", 70)}}, line: 6, field: "config.temperature" + strings.Repeat("[0]", 62), msg: "nested more than 64 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := tc.src
			if src == "" {
				src = banking(t)
				for _, e := range tc.edits {
					src = replace(t, src, e.old, e.new)
				}
			}
			d, err := agentdef.ParsePrompt([]byte(src))
			if err == nil {
				t.Fatalf("no error; parsed %+v", d)
			}
			wantError(t, err, tc.line, tc.field, tc.msg)
			if _, err2 := agentdef.Parse([]byte(src)); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Parse: %v, ParsePrompt: %v", err2, err)
			}
		})
	}
}

// manyOptional is n optional Picoschema properties, indented as in
// banking.prompt's transferMoney input.
func manyOptional(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "          p%d?: string\n", i)
	}
	return b.String()
}

func TestJSONErrors(t *testing.T) {
	t.Parallel()
	const tool = `{"name": "t", "url": "https://x.example/t", "input": {"schema": {"a": "string"}}, "output": {"schema": {"b": "string"}}}`
	for _, tc := range []struct {
		name, src, field, msg string
	}{
		{"not JSON", `{"model": "demo",}`, "", "not JSON: invalid character '}'"},
		{"trailing data", `{"model": "demo"} {}`, "", "more after the object"},
		{"not an object", `["model"]`, "", "must be a JSON object"},
		{"unknown key", `{"model": "demo", "input": {}}`, "input", "unknown key"},
		{"missing model", `{"system": "hi"}`, "model", "is required"},
		{"system not a string", `{"model": "demo", "system": 1}`, "system", "must be a string"},
		{"bad name", `{"model": "demo", "name": "a b"}`, "name", "not a valid name"},
		{"unknown holdpoint key", `{"model": "demo", "holdpoint": {"maxRounds": 3}}`, "holdpoint.maxRounds", "unknown key"},
		{"maxToolRounds fraction", `{"model": "demo", "holdpoint": {"maxToolRounds": 1.5}}`, "holdpoint.maxToolRounds", "from 1 to 50"},
		{"tools naming nothing", `{"model": "demo", "tools": ["t"]}`, "tools[0]", "neither"},
		{"tool without output", `{"model": "demo", "holdpoint": {"httpTools": [{"name": "t", "url": "https://x.example/t", "input": {"schema": {"a": "string"}}}]}}`, "holdpoint.httpTools[0].output", "is required"},
		{"timeout a number", `{"model": "demo", "holdpoint": {"httpTools": [` + strings.Replace(tool, `"name": "t"`, `"name": "t", "timeout": 10`, 1) + `]}}`, "holdpoint.httpTools[0].timeout", "must be a duration"},
		{"approval when not a boolean", `{"model": "demo", "holdpoint": {"httpTools": [` + strings.Replace(tool, `"name": "t"`, `"name": "t", "approval": {"when": "size(input.a)"}`, 1) + `]}}`, "holdpoint.httpTools[0].approval.when", `tool t: the condition "size(input.a)" is of type int`},
		{"approval a number", `{"model": "demo", "holdpoint": {"httpTools": [` + strings.Replace(tool, `"name": "t"`, `"name": "t", "approval": 1`, 1) + `]}}`, "holdpoint.httpTools[0].approval", "must be true, false or a mapping"},
		{"url with spaces", `{"model": "demo", "holdpoint": {"httpTools": [` + strings.Replace(tool, "https://x.example/t", "https://x y.example/", 1) + `]}}`, "holdpoint.httpTools[0].url", "absolute http(s) URL"},
		{"interrupt not an object", `{"model": "demo", "holdpoint": {"interrupts": ["ask"]}}`, "holdpoint.interrupts[0]", "must be a mapping"},
		{"onExpire not matching", `{"model": "demo", "holdpoint": {"interrupts": [{"name": "ask", "output": {"schema": {"type": "boolean"}}, "expiresAfter": "1h", "onExpire": "no"}]}}`, "holdpoint.interrupts[0].onExpire", "does not match"},
		{"boolean schema", `{"model": "demo", "holdpoint": {"interrupts": [{"name": "ask", "output": {"schema": true}}]}}`, "holdpoint.interrupts[0].output.schema", "not valid Picoschema"},
		{"too deep", `{"model": "demo", "config": {"a": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`, "config.a" + strings.Repeat("[0]", 62), "nested more than 64 deep"},
		{"not UTF-8", "{\"model\": \"demo\xff\"}", "", "not UTF-8"},
		{"over 256 KiB", `{"model": "demo", "system": "` + strings.Repeat("x", 256<<10) + `"}`, "", "more than the 262144"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := agentdef.ParseJSON([]byte(tc.src))
			wantError(t, err, 0, tc.field, tc.msg)
		})
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  agentdef.Error
		want string
	}{
		{agentdef.Error{Line: 12, Field: "holdpoint.httpTools[0].url", Message: "must be an absolute http(s) URL"}, "line 12: holdpoint.httpTools[0].url: must be an absolute http(s) URL"},
		{agentdef.Error{Field: "model", Message: "is required"}, "model: is required"},
		{agentdef.Error{Line: 3, Message: "the front matter is not YAML"}, "line 3: the front matter is not YAML"},
		{agentdef.Error{Message: "too large"}, "too large"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
