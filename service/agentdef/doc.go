// Package agentdef reads the agents tenants define as data: a Genkit
// dotprompt .prompt file (YAML front matter and a Handlebars template) or
// the JSON form of the same definition. [Parse] checks a definition and
// returns it as a [Definition], the agent as the runtime needs it;
// [Marshal] writes the JSON form, which [ParseJSON] reads back unchanged.
// Whatever is wrong comes back as an *[Error] naming the line of the
// .prompt file and the field at fault.
//
// The package only reads and checks: the caller resolves the model, applies
// its policy to the URLs of HTTP tools and builds the runtime's agent. It
// is a feature beside the engine: it imports the foundation only (an HTTP
// tool's approval becomes an approval.Policy of service/approval), nothing
// of the engine (package service), and neither pgx, nor db, nor httpapi,
// nor Echo.
//
// # The .prompt form
//
// This is the demo banking agent:
//
//	---
//	name: bankingAgent
//	description: Banking assistant that asks before moving money.
//	model: demo
//	config:
//	  temperature: 0
//	tools: [userApproval, transferMoney]
//	holdpoint:
//	  interrupts:
//	    - name: userApproval
//	      description: Ask the user for approval before a sensitive action.
//	      input:
//	        schema:
//	          action: string
//	          details: string
//	      output:
//	        schema:
//	          approved: boolean
//	          feedback?: string
//	      expiresAfter: 24h
//	      onExpire: {approved: false, feedback: "no answer within a day"}
//	  httpTools:
//	    - name: transferMoney
//	      description: Transfer money to a specified account.
//	      url: https://bank.example.com/tools/transfer
//	      timeout: 10s
//	      input:
//	        schema:
//	          amount: number
//	          toAccount: string
//	      output:
//	        schema:
//	          success: boolean
//	          transactionId: string
//	---
//	You are a banking assistant. ALWAYS use the userApproval interrupt to confirm before executing transferMoney.
//
// The front matter, between the two --- lines, is standard dotprompt, read
// with the dotprompt library (github.com/google/dotprompt/go):
//
//   - name: the agent's route name: a letter, then letters, digits, _ or -,
//     64 at most. It may be left out when the caller names the agent.
//   - description: shown to clients and operators.
//   - model (required): the model that answers, e.g.
//     googleai/gemini-2.5-flash, or demo: at most 4 parts separated by /,
//     each of letters, digits and . _ : @ + - beginning with a letter or
//     digit, and no "..". The caller checks it is served.
//   - config: the model's configuration, a mapping passed to it as JSON.
//     It may not have a model key (in any case): the model is the model
//     key above, which metrics and the audit trail record.
//   - tools: the names the model may call, each a declared interrupt or
//     HTTP tool (below). When the key is absent, the model may call all of
//     them; an empty list lets it call none.
//   - version, variant and keys with a dot (another tool's dotprompt
//     extension, e.g. acme.owner) are accepted and ignored.
//
// Any other key is refused, among them dotprompt's input (the template gets
// no input), output, toolDefs and maxTurns, which an agent does not use
// (holdpoint.maxToolRounds bounds its tool calls).
//
// # The holdpoint key
//
// One extension key, holdpoint, a mapping, declares what the platform adds
// to the prompt. Its keys, and those of its entries, are checked: a key
// that is not listed here is refused, so a misspelt one does not go
// unnoticed.
//
//   - interrupts: a list of the questions the model may ask a human. The
//     model requests one like a tool; the turn pauses until a human (or
//     the deadline) answers, and the answer is the tool's output. Each has
//     a name (required, a letter then letters, digits, _ or -, 64 at most),
//     a description, input (the schema of what the model sends; optional),
//     output (required: the schema of the answer), expiresAfter (a Go
//     duration such as 24h or 90m: the deadline; none when absent) and
//     onExpire (the answer given for the human when the deadline passes;
//     without it the interrupt just expires). onExpire needs expiresAfter
//     and must match output.
//   - httpTools: a list of tools the platform runs by calling a URL. Each
//     has a name, a description, url (required: an absolute http or https
//     URL; where it may point is the caller's policy), timeout (a duration
//     from more than 0 to 60s; 10s when absent), approval (below; none
//     when absent or false), input and output (both required).
//   - maxToolRounds: how many model/tool rounds one turn may take, a whole
//     number from 1 to 50 (the runtime's default when absent).
//   - resume: which version of the agent a resumed session runs: session
//     (the default: the version the session started with) or latest. A
//     turn paused on interrupts resumes on the version that paused it
//     either way.
//
// An HTTP tool's approval makes the platform, not the model, ask a human
// before a call runs: the turn pauses on an approval interrupt whose input
// is the call the model asked for, and only an approved call is made.
// approval: true asks for every call, one approval from whoever may decide
// the session's interrupts. The mapping form sets the policy:
//
//	approval:
//	  when: "input.amount > 1000"   # only these calls; every call when absent
//	  scope: approve:payments       # approvers' keys must hold this scope
//	  approvals: 2                  # distinct approvers, 1 to 10 (1)
//	  allowEdit: true               # an approver may change the input (false)
//	  attempts: 3                   # runs of an approved call, 1 to 20 (3)
//	  escalate: {after: 30m, scope: approve:payments-lead}
//
// when is a CEL expression (https://cel.dev) over one variable, input, the
// call's input as decoded JSON (numbers are doubles; comparing them with
// whole numbers works), of type bool: at most 1000 bytes, compiled when the
// definition is parsed (an expression that does not compile, or is not a
// boolean, is refused there) and bounded in cost when it runs. A call whose
// condition fails (a missing key: guard it with has(input.key), the cost
// bound, a result that is not a boolean) is not run: its turn fails. A
// scope is 1-64 letters, digits or :._-; escalate hands a call still
// pending after "after" (a positive duration) to its scope. Interrupts take
// no approval: they already ask a human.
//
// Interrupts and HTTP tools share one namespace: two of them may not have
// the same name. A null value (a key with nothing after the colon) is the
// same as leaving the key out.
//
// # Schemas
//
// An input or output is a mapping with one key, schema, which is either
// Picoschema (dotprompt's compact schema language, as in the example:
// "feedback?: string" is an optional string, which may be left out but is
// not null when given, "tags(array): string" a list of strings, "color(enum): [red, green]" an enum, "address(object):" a
// nested object) or JSON Schema. The rule: a schema that is a mapping with
// a top-level type, properties or $schema key is JSON Schema; anything
// else is Picoschema, converted to JSON Schema by dotprompt. So a Picoschema
// object may not have a property named type or properties: write that
// schema as JSON Schema. (A JSON Schema whose top level has a key that is
// not a JSON Schema keyword, or an x- extension, is refused, which catches
// most such mix-ups; {type: string} alone is a string either way.) A
// schema that accepts any value is written as JSON Schema with a $schema
// key ({$schema: "https://json-schema.org/draft/2020-12/schema"}), not as
// Picoschema any. Every schema must compile as JSON Schema (draft 2020-12
// unless $schema names another); $ref may only point inside the schema:
// nothing is loaded from files or the network.
//
// # The template
//
// The text after the closing --- is a dotprompt (Handlebars) template,
// rendered once with dotprompt, when the definition is parsed, with no
// input: the result, trimmed of white space at both ends, is the agent's
// system prompt ([Definition.System]). Plain text, {{role "system"}} and
// comments ({{! ...}}) are what it is for; variables render as nothing.
// Other roles ({{role "user"}}), {{history}}, {{media}} and {{section}}
// are refused, since the template is only the system prompt, and so are
// the markers these helpers write (<<<dotprompt:...>>>) and a template that
// does not parse or render (a {{> partial}}: there are none). {{log}}
// writes nothing.
//
// # The JSON form
//
// The JSON form is the front matter as a JSON object, with "system" (the
// system prompt itself, not a template) in place of the template:
//
//	{"name": "bankingAgent", "model": "demo", "system": "You are ...",
//	 "tools": ["userApproval"],
//	 "holdpoint": {"interrupts": [{"name": "userApproval",
//	   "output": {"schema": {"approved": "boolean"}},
//	   "expiresAfter": "24h", "onExpire": {"approved": false}}]}}
//
// Its keys are checked as the front matter's are (a repeated key keeps its
// last value, as in encoding/json), and schemas follow the same rule (JSON
// Schema or Picoschema). [Marshal] writes every schema as JSON Schema (keys
// sorted), durations as strings such as "24h", and "tools" always, so that
// the JSON form says exactly what the definition is.
//
// # Errors
//
// Parsing stops at the first error, an *[Error]: its Field is the path of
// the key at fault (model, tools[1], holdpoint.interrupts[0].onExpire,
// template), and for a .prompt file its Line is the line of that key or
// list item, or of the mapping that lacks a required key (the opening ---
// for the top level). A YAML syntax error is on the line yaml.v3 names,
// which for some errors is where the enclosing block starts; a template
// error is on the line Handlebars names, when it names one.
//
// # Limits
//
// A definition, in either form, is at most 256 KiB of UTF-8 text, and so is
// its JSON form (Picoschema grows when written as JSON Schema). Mappings and
// lists nest at most 64 deep and have at most 1000 entries each; a schema
// has at most 4000 values (as written and as JSON Schema). The front matter
// is one YAML document without aliases or repeated keys.
package agentdef
