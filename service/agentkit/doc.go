// Package agentkit defines agents in Go with types instead of JSON: an
// interrupt is an [Interrupt] of the Go types the model sends and the human
// answers, a tool is a [Tool] whose Run takes and returns Go values, and an
// [Agent] (a prompt agent driven by a model) or a [CustomAgent] (a Go
// function per turn) puts them together. JSON Schemas are inferred from the
// types (field tags `json` and `jsonschema`, e.g.
// `jsonschema:"description=Amount in dollars,minimum=0.01"`); the runtime
// validates every input the model sends before a tool runs or an interrupt
// reaches a human, and every output a tool returns or a human gives.
//
// A tool whose calls a human must approve declares it: its [Approval]
// (which calls, from their typed input; whose scope approves; how many
// approvers; whether they may edit the input) makes the platform pause a
// call before Run runs, so the model cannot skip the approval:
//
//	transferMoney := agentkit.Tool[Transfer, Receipt]{
//		Name: "transferMoney",
//		Run:  transfer,
//		Approval: &agentkit.Approval[Transfer]{
//			When:  func(_ context.Context, in Transfer) bool { return in.Amount > 1000 },
//			Scope: "approve:payments", Approvals: 2,
//		},
//	}
//
// A tool pauses its turn for a confirmation by returning [Pause] and learns,
// when the client restarts it, how it was resumed ([Resumed]): the Genkit
// guide's "let the tool actually run". [SessionOf] gives a tool the
// session's custom state and artifacts.
//
// Serve the agents with the whole platform (serve, migrate, tenants, keys,
// tokens, bench) through github.com/holdpoint/holdpoint/cmd/platform/app:
//
//	func main() {
//		app.Main(app.Platform{Agents: []agentkit.Definition{bankingAgent}})
//	}
package agentkit
